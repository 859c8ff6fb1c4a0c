"""What every PLACSP Spark job needs from spark-submit: the package, the pinned jars, Delta, a master.

Shared by the Silver operator (through the Spark provider's `SparkSubmitHook`, when Spark runs) and
the replay and maintenance operators (`SparkSubmitOperator`s); the package zip and the jars are what
a cluster's executors import and load, the minimal environment keeps secrets out of the logged
spark-submit command.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SPARK_CONN_DEFAULT = "spark_default"
LOCAL_MASTER = "local[*]"
_PACKAGE = Path(__file__).resolve().parents[1]  # placsp_provider


def default_application(job_module: str) -> str:
    """The job module spark-submit runs (`spark/<job_module>`, whose `__main__` calls its `main`),
    found through the installed package: the same file from a wheel, an editable install or a checkout."""
    return str(_PACKAGE / "spark" / job_module)


def with_spark_task_defaults(kwargs: dict[str, Any], lake: str | None) -> None:
    """What both Spark operators declare unless told otherwise: the lake tables they write as outlets
    (Assets named like their OpenLineage datasets, assets.py) and the Spark pool when one is set
    (`PLACSP_SPARK_POOL`: one spark-submit at a time on a small cluster)."""
    from placsp_provider.assets import ingest_outlets, static_lake
    from placsp_provider.run_policy import spark_pool_args

    kwargs.setdefault("outlets", ingest_outlets(static_lake(lake)))
    for key, value in spark_pool_args().items():
        kwargs.setdefault(key, value)


def spark_submit_settings(
    workdir: Path, context: Any, *, app_name: str, conf: dict[str, Any] | None = None
) -> dict[str, Any]:
    """What every PLACSP spark-submit needs, as `SparkSubmitHook` arguments: conf (Delta's settings,
    and the OpenLineage Spark listener with this task run as the parent of its events, docs/lineage.md;
    `app_name` names the Spark job in lineage), the pinned jars, a minimal environment and the
    package zip for the executors. `conf` adds to (and overrides) the defaults."""
    from placsp_provider.lineage.spark import with_spark_lineage
    from placsp_provider.spark.jars import ensure_jars, spark_env
    from placsp_provider.spark.session import DELTA_CONF, driver_conf, object_store_conf

    # Only what spark-submit needs: the hook turns env vars into --conf flags that it logs,
    # so the task's whole environment (connection URIs, tokens) must never be passed.
    env = {k: v for k, v in spark_env().items() if k in ("SPARK_HOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {
        "conf": with_spark_lineage(
            {**DELTA_CONF, **object_store_conf(), **driver_conf(), **(conf or {})}, context, app_name=app_name
        ),
        "jars": ",".join(str(p) for p in ensure_jars()),
        "env_vars": env,
        "py_files": package_zip(workdir),
    }


def submit(operator: Any, workdir: Path, context: Any, *, app_name: str) -> None:
    """Run a SparkSubmitOperator's `execute` with `spark_submit_settings` (what the operator was given
    itself comes after the defaults), on its connection `spark_conn_id` or on `local[*]`."""
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    settings = spark_submit_settings(workdir, context, app_name=app_name, conf=operator.conf)
    operator.conf = settings["conf"]
    operator.jars = ",".join([settings["jars"], *([operator.jars] if operator.jars else [])])
    operator.env_vars = {**settings["env_vars"], **(operator.env_vars or {})}
    operator.py_files = settings["py_files"]
    with spark_connection_or_local(operator.spark_conn_id, operator.log):
        SparkSubmitOperator.execute(operator, context)


@contextmanager
def spark_connection_or_local(conn_id: str, log: Any) -> Iterator[None]:
    """Submit on the Spark connection `conn_id`; when it does not exist, on `local[*]` (the pip-installed Spark).

    Only an absent connection falls back: any other lookup error (an unreachable secrets backend, a
    denied read) fails the task with its own message rather than running the job on the worker. The
    fallback is an ordinary Airflow connection (`conn_type` spark, host `local[*]`) defined through its
    environment variable for the duration of the submit, so the Spark provider builds `--master local[*]`
    through its public connection handling.
    """
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        pass
    else:
        yield
        return
    log.info(
        "No Airflow connection %r: Spark runs with master local[*] on this worker; define the connection "
        "(e.g. spark://spark-master:7077) to submit to a cluster",
        conn_id,
    )
    variable = f"AIRFLOW_CONN_{conn_id.upper()}"
    before = os.environ.get(variable)
    os.environ[variable] = json.dumps({"conn_type": "spark", "host": LOCAL_MASTER})
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = before


def spark_cluster(conn_id: str) -> bool:
    """The Spark connection `conn_id` submits to a cluster (its master is not `local`); an absent one
    means `local[*]` here (`spark_connection_or_local`)."""
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        connection = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return False
    return not (connection.host or "").strip().lower().startswith("local")


def package_zip(folder: Path) -> str:
    """The provider package as a zip for --py-files: executors on a cluster import it from there."""
    base = folder / "placsp_provider"
    shutil.copytree(_PACKAGE, base / "placsp_provider", ignore=shutil.ignore_patterns("__pycache__"))
    return shutil.make_archive(str(base), "zip", root_dir=base)
