"""One way to get a SparkSession with Delta: for the CLI, the tests and the spark-submit entry.

Under spark-submit the operator already set master, jars and extensions; `getOrCreate` keeps them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from placsp_provider.extras import require_spark
from placsp_provider.spark.class_archive import archive_options
from placsp_provider.spark.jars import ensure_jars, spark_env

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DELTA_CONF: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # Delta's small-table defaults (50 partitions for a snapshot) cost seconds on a laptop.
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.session.timeZone": "UTC",
    # Arrow record batches to Python workers: one row per batch. The ingest sends page paths, but any
    # frame of pages' bytes must not travel 4 to a batch (the JVM's Arrow buffers: decision 0006).
    "spark.sql.execution.arrow.maxRecordsPerBatch": "1",
}


# C1 only: a PLACSP driver lives minutes, and C2's compile threads cost more CPU than its faster
# code gives back on 2 cores (decision 0006). C1 alone reserves a 48 MB code cache, which a long
# session fills (the rest then runs interpreted), so it gets C2's usual 240 MB (reserved, not
# resident). Serial GC: a batch job needs no pause-time goals, and G1's concurrent threads and
# remembered sets cost ~10% more CPU and ~70 MB (decision 0008).
DEFAULT_DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC"
# A driver that lives long enough to repay C2's compiling (an hour of MERGEs, e.g. a test session):
# measured: small ingests take 0.63x the time from the fourth on, the first one longer (decision 0050).
LONG_LIVED_DRIVER_JAVA_OPTIONS = "-XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC"
# The work that needs memory (parsing) happens in Python workers, and Spark spills what does not fit:
# 768 MB runs a 20-page ingest as fast as 1 GB with less peak RSS (decision 0008). A backfill of
# thousands of pages in one run may want more (`PLACSP_SPARK_DRIVER_MEMORY`).
DEFAULT_DRIVER_MEMORY = "768m"


def driver_java_options(options: str | None = None) -> str:
    """JVM options of the driver (`options`, else `PLACSP_SPARK_JAVA_OPTIONS`; empty for none), plus the
    class archive's when one was built for this JVM and Spark (`spark/class_archive.py`).

    A driver that runs for hours, e.g. a backfill of years in one run, may do better with C2
    (`PLACSP_SPARK_JAVA_OPTIONS`, or `options`, set to `LONG_LIVED_DRIVER_JAVA_OPTIONS`; decision 0050).
    """
    if options is None:
        options = os.environ.get("PLACSP_SPARK_JAVA_OPTIONS", DEFAULT_DRIVER_JAVA_OPTIONS)
    return " ".join(filter(None, (options, archive_options(options))))


def driver_conf() -> dict[str, str]:
    """What the driver JVM is started with, by `get_session` or by spark-submit (the operators, where
    their own `conf` or `driver_memory` wins)."""
    conf = {"spark.driver.memory": os.environ.get("PLACSP_SPARK_DRIVER_MEMORY", DEFAULT_DRIVER_MEMORY)}
    if options := driver_java_options():
        conf["spark.driver.extraJavaOptions"] = options
    return conf


def object_store_conf() -> dict[str, str]:
    """Hadoop's S3 filesystem (s3a) for the lake's `s3://` paths, pointed at the store the `AWS_*`
    environment names (an S3-compatible endpoint: path-style requests, http allowed when it says so).

    No credential is ever a Spark setting (settings are shown in Spark's UI, logs and event logs):
    s3a's default chain reads the `AWS_*` environment, or the instance's role, of each process. On a
    cluster the workers therefore hold the lake's credentials themselves (docs/architecture.md).
    """
    conf = {
        "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.AbstractFileSystem.s3.impl": "org.apache.hadoop.fs.s3a.S3A",
    }
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        conf["spark.hadoop.fs.s3a.endpoint"] = endpoint
        conf["spark.hadoop.fs.s3a.path.style.access"] = "true"
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(not endpoint.startswith("http://")).lower()
    if region := os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"):
        conf["spark.hadoop.fs.s3a.endpoint.region"] = region
    return conf


def local_conf(cores: str = "*") -> dict[str, str]:
    return {
        "spark.master": f"local[{cores}]",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.default.parallelism": "4",
        "spark.jars": ",".join(str(p) for p in ensure_jars()),
        **driver_conf(),
    }


def get_session(app_name: str = "placsp", extra: dict[str, str] | None = None) -> SparkSession:
    """The active session if there is one (spark-submit, tests), else a local one with Delta."""
    require_spark(f"Spark session {app_name!r}")  # the `spark` extra (decision 0042)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    for key, value in spark_env().items():  # executors must run this same interpreter
        if key.startswith(("PYSPARK_", "SPARK_HOME")):
            os.environ.setdefault(key, value)
    conf = {**DELTA_CONF, **object_store_conf()}
    # Under spark-submit the JVM is already up with master, jars and the operator's conf, and
    # Python is told where to find it: then only our Delta settings are (re)applied.
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        conf.update(local_conf())
    session = SparkSession.builder.appName(app_name).config(map={**conf, **(extra or {})}).getOrCreate()
    session.sparkContext.setLogLevel(os.environ.get("PLACSP_SPARK_LOG_LEVEL", "WARN"))
    return session


def run_job(main: Callable[[], int]) -> int:
    """A spark-submit job's `main`, then its session stopped while the JVM is whole: the listeners'
    queued events (OpenLineage's last MERGE and application COMPLETE) are delivered by the stop.
    Left to the JVM's shutdown hooks, a daily run on a loaded machine lost them (CI rehearsal)."""
    try:
        return main()
    finally:
        from pyspark.sql import SparkSession

        if (active := SparkSession.getActiveSession()) is not None:
            active.stop()


@contextmanager
def session_conf(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    """A SQL conf set to `value` for what runs inside, then put back (the session may be the caller's,
    e.g. a test's)."""
    previous = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, previous)
