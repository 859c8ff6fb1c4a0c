"""The lake's Delta tables as Airflow Assets, named exactly as OpenLineage names them.

An Asset's URI is the table's OpenLineage dataset (lineage/naming.py) written as a URI: `file://` +
the absolute path on local disk, `s3://<bucket>/<key>` on S3; so the Assets view and the lineage
catalogue show one node per table. Tasks that write a table declare it as an outlet; a DAG scheduled
on `silver_asset("entries")` runs after each Silver update (placsp_provider/dags/placsp_silver_entries_export.py).
Each event says which Delta version it announces (`record_versions`), so the consumer reads that one.

Only `airflow.sdk` and the naming helper are imported: DAG files import this at parse time.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import Asset

from placsp_provider.lake import (
    LAKE_TABLES,
    QUALITY_RESULTS_TABLE,
    SILVER_TABLES,
    quality_results_path,
    resolve_lake,
    table_path,
)
from placsp_provider.lake_storage import LakePath
from placsp_provider.lineage.naming import storage_path


def lake_asset(table: str, lake: str | LakePath | None = None) -> Asset:
    """The Asset of one lake table (`entries`, ..., `dead_letters`, `reconciliation`, `quality_results`)."""
    name = storage_path(_location(resolve_lake(lake), table))
    uri = f"file://{name.name}" if name.namespace == "file" else f"{name.namespace}/{name.name}"
    return Asset(uri=uri, group="placsp")


def _location(lake: LakePath, table: str) -> LakePath:
    return quality_results_path(lake) if table == QUALITY_RESULTS_TABLE else table_path(lake, table)


def silver_asset(table: str = "entries", lake: str | LakePath | None = None) -> Asset:
    if table not in SILVER_TABLES:
        raise ValueError(f"unknown Silver table {table!r}; the tables are {', '.join(SILVER_TABLES)}")
    return lake_asset(table, lake)


def ingest_outlets(lake: str | LakePath | None = None) -> list[Asset]:
    """What a Silver ingest (daily, backfill) or a replay writes: every Silver table, the dead letters
    and the reconciliation log."""
    return [lake_asset(t, lake) for t in LAKE_TABLES]


def quality_outlets(lake: str | LakePath | None = None) -> list[Asset]:
    """What a data-contract check writes: its results."""
    return [lake_asset(QUALITY_RESULTS_TABLE, lake)]


def record_versions(context: Any, lake: LakePath) -> dict[str, dict[str, Any]]:
    """Each outlet event of the running task carries the Delta version of its table, read right after
    the task's writes, and the table's rows at that version (from the Delta log's file statistics):
    a consumer reads exactly what the event announced (`lake_storage.open_table(path, version)`), not whatever is
    newest when it runs; `delta_version` None when the table does not exist yet. Returns the extras
    by Asset URI."""
    from placsp_provider.table_files import table_state

    tables = {lake_asset(t, lake).uri: t for t in (*LAKE_TABLES, QUALITY_RESULTS_TABLE)}
    extras: dict[str, dict[str, Any]] = {}
    if "task" not in context or "outlet_events" not in context:  # called outside an Airflow task run
        return extras
    for asset in getattr(context["task"], "outlets", None) or []:
        table = tables.get(str(getattr(asset, "uri", "")))
        if table is None:  # an Asset of another lake (a parse-time default): not ours to describe
            continue
        # No table yet (a task with nothing to write on a fresh lake): version None, no rows.
        version, rows = table_state(_location(lake, table)) or (None, 0)
        extras[asset.uri] = {"table": table, "delta_version": version, "rows": rows}
        context["outlet_events"][asset].extra.update(extras[asset.uri])
    return extras


def static_lake(lake: str | None) -> str | None:
    """`lake` when it is a plain path known at parse time; None (the settings' lake) for a template."""
    return None if lake is None or "{{" in lake else lake
