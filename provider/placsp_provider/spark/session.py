"""One way to get a SparkSession with Delta: for the CLI, the tests and the spark-submit entry.

Under spark-submit the operator already set master, jars and extensions; `getOrCreate` keeps them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from placsp_provider.spark.jars import jar_paths, spark_env

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DELTA_CONF: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # Delta's small-table defaults (50 partitions for a snapshot) cost seconds on a laptop.
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.session.timeZone": "UTC",
    # Arrow record batches to Python workers: one page per batch. A page is up to tens of MB and a
    # worker holds its batch, the page's rows and their Arrow copy at once: 4 pages per batch cost a
    # 20-page ingest ~290 MB more peak RSS (the JVM's Arrow buffers) and were slower (docs/benchmarks.md).
    "spark.sql.execution.arrow.maxRecordsPerBatch": "1",
}


def driver_java_options() -> str:
    """JVM options of the driver (`PLACSP_SPARK_JAVA_OPTIONS`; empty for none).

    By default only the C1 compiler: a PLACSP driver lives minutes, and C2's compile threads cost
    more CPU than its faster code gives back on 2 cores (a 20-page ingest in a fresh process: 28%
    less CPU, 16% less time, docs/benchmarks.md). A driver that runs for hours, e.g. a
    backfill of years in one run, may do better with `PLACSP_SPARK_JAVA_OPTIONS=""`.
    """
    return os.environ.get("PLACSP_SPARK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")


def driver_conf() -> dict[str, str]:
    """What the driver JVM is started with, by `get_session` or by spark-submit (the operators)."""
    options = driver_java_options()
    return {"spark.driver.extraJavaOptions": options} if options else {}


def local_conf(cores: str = "*") -> dict[str, str]:
    return {
        "spark.master": f"local[{cores}]",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.default.parallelism": "4",
        # Spark's own default, and what spark-submit gives the operators' drivers: the work that
        # needs memory (parsing) happens in Python workers, and Spark spills what does not fit.
        "spark.driver.memory": os.environ.get("PLACSP_SPARK_DRIVER_MEMORY", "1g"),
        "spark.jars": ",".join(str(p) for p in jar_paths()),
        **driver_conf(),
    }


def get_session(app_name: str = "placsp", extra: dict[str, str] | None = None) -> SparkSession:
    """The active session if there is one (spark-submit, tests), else a local one with Delta."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    for key, value in spark_env().items():  # executors must run this same interpreter
        if key.startswith(("PYSPARK_", "SPARK_HOME")):
            os.environ.setdefault(key, value)
    builder = SparkSession.builder.appName(app_name)
    conf = {**DELTA_CONF}
    # Under spark-submit the JVM is already up with master, jars and the operator's conf, and
    # Python is told where to find it: then only our Delta settings are (re)applied.
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    if not submitted:
        conf.update(local_conf())
    conf.update(extra or {})
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(os.environ.get("PLACSP_SPARK_LOG_LEVEL", "WARN"))
    return session
