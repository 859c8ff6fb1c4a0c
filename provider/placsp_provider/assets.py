"""The lake's Delta tables as Airflow Assets, named exactly as OpenLineage names them.

An Asset's URI is the table's OpenLineage dataset (lineage/naming.py) written as a URI: `file://` +
the absolute path on local disk, `s3://<bucket>/<key>` on S3; so the Assets view and the lineage
catalogue show one node per table. Tasks that write a table declare it as an outlet; a DAG scheduled
on `silver_asset("entries")` runs after each Silver update (placsp_provider/dags/placsp_silver_entries_export.py).

Only `airflow.sdk` and the naming helper are imported: DAG files import this at parse time.
"""

from __future__ import annotations

from airflow.sdk import Asset

from placsp_provider.lake import LAKE_TABLES, SILVER_TABLES, resolve_lake
from placsp_provider.lake_storage import LakePath
from placsp_provider.lineage.naming import lake_table


def lake_asset(table: str, lake: str | LakePath | None = None) -> Asset:
    """The Asset of one lake table (`entries`, ..., `dead_letters`, `reconciliation`)."""
    name = lake_table(resolve_lake(lake), table)
    uri = f"file://{name.name}" if name.namespace == "file" else f"{name.namespace}/{name.name}"
    return Asset(uri=uri, group="placsp")


def silver_asset(table: str = "entries", lake: str | LakePath | None = None) -> Asset:
    if table not in SILVER_TABLES:
        raise ValueError(f"unknown Silver table {table!r}; the tables are {', '.join(SILVER_TABLES)}")
    return lake_asset(table, lake)


def ingest_outlets(lake: str | LakePath | None = None) -> list[Asset]:
    """What a Silver ingest (daily, backfill) or a replay writes: every Silver table, the dead letters
    and the reconciliation log."""
    return [lake_asset(t, lake) for t in LAKE_TABLES]


def static_lake(lake: str | None) -> str | None:
    """`lake` when it is a plain path known at parse time; None (the settings' lake) for a template."""
    return None if lake is None or "{{" in lake else lake
