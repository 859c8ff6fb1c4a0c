"""Optional parts of the provider, installed as pip extras: what is missing, said the same way everywhere.

A plain `pip install airflow-provider-placsp` runs the daily DAG; the Prophet volume check needs the
`volume` extra, the quality report's chart the `report` extra, and Spark (large ingests, the dead-letter
replay, table maintenance) the `spark` extra. Without `volume` or `report` those parts step aside with
this sentence (a skipped check, a report without its chart), never a failed task. Without `spark`, an
ingest that `auto` would give Spark runs on delta-rs with a warning (`ingest.engines`); what only Spark
can do (an engine asked for by name, the replay, maintenance, a Spark session, fetching the jars) stops
with a `ConfigError` carrying the sentence (decision 0042).
"""

from __future__ import annotations

import importlib

from placsp_provider.errors import ConfigError

PACKAGE = "airflow-provider-placsp"
SPARK = "spark"


def missing(module: str, extra: str) -> str | None:
    """None when `module` imports; else why not and how to install it."""
    try:
        importlib.import_module(module)
    except ImportError:
        return f"{module} is not installed: pip install '{PACKAGE}[{extra}]'"
    return None


def missing_spark() -> str | None:
    """None when Spark with Delta can run here; else why not and how to install it.

    The test is delta-spark's `delta` module, which imports the full pyspark: `import pyspark` proves
    nothing, since the Spark provider's own dependency, pyspark-client (Spark Connect: no JVM, no
    spark-submit), installs a `pyspark` module too. Imported only where Spark is about to start."""
    if missing("delta", SPARK) is None:
        return None
    return f"pyspark and delta-spark are not installed: pip install '{PACKAGE}[{SPARK}]'"


def require_spark(what: str) -> None:
    """Raise a one-line `ConfigError` when Spark is missing: `<what> needs Spark, but ...`."""
    if reason := missing_spark():
        raise ConfigError(f"{what} needs Spark, but {reason}")
