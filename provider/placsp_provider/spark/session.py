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
    # Arrow record batches to Python workers: one page is a few MB, pages per batch stay small.
    "spark.sql.execution.arrow.maxRecordsPerBatch": "4",
}


def local_conf(cores: str = "*") -> dict[str, str]:
    return {
        "spark.master": f"local[{cores}]",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.default.parallelism": "4",
        "spark.driver.memory": os.environ.get("PLACSP_SPARK_DRIVER_MEMORY", "2g"),
        "spark.jars": ",".join(str(p) for p in jar_paths()),
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
