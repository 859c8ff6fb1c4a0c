"""The spark-submit `--conf` that makes a Spark job's own OpenLineage events join the Airflow task's.

`with_spark_lineage(conf, context)` adds the OpenLineage Spark listener (its jar is one of the pinned
`--jars`, spark/jars.py), Airflow's namespace, the job's name, the parent and root runs (the Airflow
task run, its DAG run) and a transport mirroring Airflow's: every key and why in docs/lineage.md
("How Spark's events link to the Airflow task"). The apache-spark provider's own
`openlineage_inject_*` switches add no listener and mirror no file transport.

Keys the conf already has win. Nothing is added when OpenLineage is disabled or its emission policy
skips the task (Spark events would name a parent run that was never emitted), nor for a transport
Spark cannot mirror (the listener's default console transport would print events into the task log).
Every failure logs a warning and leaves the conf as it was: lineage never fails the job.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.sdk import Context

log = logging.getLogger("placsp_provider.lineage")

LISTENER = "io.openlineage.spark.agent.OpenLineageSparkListener"
_PREFIX = "spark.openlineage."
_TRANSPORT = "spark.openlineage.transport."
_SECRET_MARKERS = ("apikey", "headers.", "token", "password", "secret")


def with_spark_lineage(
    conf: Mapping[str, Any] | None, context: Context, *, app_name: str | None = None
) -> dict[str, Any]:
    """`conf` plus the OpenLineage listener settings for this task run (see the module docstring)."""
    base = dict(conf or {})
    try:
        extra = spark_listener_conf(
            context, app_name=app_name, has_transport=any(k.startswith(_TRANSPORT) for k in base)
        )
    except Exception as err:  # lineage never fails the job
        log.warning("OpenLineage: Spark lineage not configured (%s: %s)", type(err).__name__, err)
        return base
    if not extra:
        return base
    listeners = [x.strip() for x in str(base.get("spark.extraListeners", "")).split(",") if x.strip()]
    if LISTENER not in listeners:
        listeners.append(LISTENER)
    return {**extra, **base, "spark.extraListeners": ",".join(listeners)}


# What the listener removes from a dataset name (the named group `remove`, found anywhere in it).
STAGING_RUN_FOLDER = r"/_staging/[^/]+(?<remove>/[0-9a-f]{32})(?=/)"


def spark_listener_conf(
    context: Context, *, app_name: str | None = None, has_transport: bool = False
) -> dict[str, str]:
    """The listener's conf for the task run in `context`; empty when its events would go nowhere useful.

    `has_transport`: the job's conf already chose a `spark.openlineage.transport`, keep it.
    """
    from airflow.providers.openlineage import conf as ol_conf
    from airflow.providers.openlineage.plugins.macros import lineage_job_namespace
    from airflow.providers.openlineage.utils.spark import inject_parent_job_information_into_spark_properties

    if ol_conf.is_disabled() or not _task_emits(context):
        return {}
    transport = {} if has_transport else transport_conf(context)
    if transport is None:
        return {}
    props: dict[str, str] = {
        "spark.extraListeners": LISTENER,
        f"{_PREFIX}namespace": lineage_job_namespace(),
        # The listener's `dataSource` facet for a local path says `"uri": "file"`, which is not a URI:
        # the event then fails the spec's schema. The namespace already says `file`; drop the facet.
        f"{_PREFIX}facets.dataSource.disabled": "true",
        # The ingest's MERGEs read the rows its tasks staged, in a folder per run
        # (`_staging/<dataset>/<32 hex>/<table>`): without the run's folder each run would add new
        # datasets to the lineage graph; named `_staging/<dataset>/<table>`, they are one per table.
        f"{_PREFIX}dataset.removePath.pattern": STAGING_RUN_FOLDER,
    }
    if app_name:
        props[f"{_PREFIX}appName"] = app_name
    props = inject_parent_job_information_into_spark_properties(props, context)
    props.update(transport)
    return {k: str(v) for k, v in props.items()}


def transport_conf(context: Context) -> dict[str, str] | None:
    """Spark transport settings mirroring Airflow's, or None when Airflow's cannot be mirrored."""
    from airflow.providers.openlineage.plugins.listener import get_openlineage_listener

    return mirror_transport(get_openlineage_listener().adapter.get_or_create_openlineage_client().transport, context)


def mirror_transport(transport: Any, context: Context) -> dict[str, str] | None:
    """Spark settings for an openlineage-python transport object (`file`, `console`; http via the provider)."""
    kind = getattr(transport, "kind", None)
    if kind == "file":
        location = str(transport.config.log_file_path)
        if "://" in location and not location.startswith("file://"):
            log.info("OpenLineage: Spark's file transport writes local files only; no Spark events for %s", location)
            return None
        return {
            f"{_TRANSPORT}type": "file",
            f"{_TRANSPORT}location": spark_events_file(location.removeprefix("file://")),
        }
    if kind == "console":
        return {f"{_TRANSPORT}type": "console"}
    if kind in ("http", "composite"):
        from airflow.providers.openlineage.utils.spark import inject_transport_information_into_spark_properties

        props = _unbearer(inject_transport_information_into_spark_properties({}, context))
        _mask_secrets(props)
        return {k: str(v) for k, v in props.items()} or None
    log.info(
        "OpenLineage: transport %r is not mirrored to Spark; set spark.openlineage.transport.* in the "
        "operator's conf to get Spark's events",
        kind,
    )
    return None


def spark_events_file(airflow_events_file: str) -> str:
    """Where Spark's file transport writes: Airflow's file name with `.spark` before its suffix (two
    processes appending long lines to one file could interleave them)."""
    path = PurePath(airflow_events_file)
    return str(path.with_name(f"{path.stem}.spark{path.suffix}"))


def _task_emits(context: Context) -> bool:
    """False when the OpenLineage emission policy skips this task (no parent run would exist)."""
    from airflow.providers.openlineage.utils.emission_policy import resolve_task_emission_policy

    ti = context["ti"]
    return resolve_task_emission_policy(operator=context["task"], dag_id=ti.dag_id, task_id=ti.task_id).emit


def _unbearer(props: Mapping[str, Any]) -> dict[str, Any]:
    """The provider (2.20.3) passes `auth.apiKey` as `Bearer <key>`, and the Spark listener prefixes
    `Bearer ` itself (`Authorization: Bearer Bearer <key>`, docs/lineage.md): pass the bare key."""
    return {
        k: v.removeprefix("Bearer ") if k.endswith("auth.apiKey") and isinstance(v, str) else v
        for k, v in props.items()
    }


def _mask_secrets(props: Mapping[str, Any]) -> None:
    """spark-submit's hook logs every --conf and masks only keys that say `secret` or `password`:
    register the API key and headers with Airflow's secrets masker so the task log redacts them."""
    from airflow.sdk.log import mask_secret

    for key, value in props.items():
        if any(marker in key.lower() for marker in _SECRET_MARKERS) and value:
            mask_secret(str(value))
