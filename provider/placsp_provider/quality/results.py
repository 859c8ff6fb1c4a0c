"""`quality_results`: one row per rule per check, appended by every check (delta-rs, no JVM).

    <lake>/quality_results      partitioned by dataset

A check appends; nothing is updated or deleted, so the table is the history of every rule's outcome
(the report reads the latest row per rule). Appends are blind: checks of different datasets that
run at once commit one after the other (delta-rs retries a commit whose version was taken).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict
from datetime import datetime
from typing import TYPE_CHECKING, Any

from placsp_provider.lake import quality_results_path, resolve_lake
from placsp_provider.lake_storage import LakePath

if TYPE_CHECKING:
    import pyarrow as pa

    from placsp_provider.quality.engine import RuleResult


def schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("run_id", pa.string(), False),
            pa.field("dataset", pa.string(), False),
            pa.field("table_name", pa.string(), False),
            pa.field("rule_id", pa.string(), False),
            pa.field("kind", pa.string(), False),  # library | sql | schema | volume
            pa.field("metric", pa.string(), True),
            pa.field("column_name", pa.string(), True),
            pa.field("dimension", pa.string(), True),
            pa.field("severity", pa.string(), False),
            pa.field("scope", pa.string(), False),
            pa.field("expected", pa.string(), False),
            pa.field("actual", pa.float64(), True),
            pa.field("success", pa.bool_(), False),
            pa.field("rows_checked", pa.int64(), False),
            pa.field("message", pa.string(), False),
            pa.field("checked_at", pa.timestamp("us", tz="UTC"), False),
        ]
    )


def append_results(lake: str | LakePath, run_id: str, results: Iterable[RuleResult], checked_at: datetime) -> int:
    """Append the results of one check; returns the rows written."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from placsp_provider.lake_storage import delta_options, uri

    # A row is the result's fields under the table's column names (`content`, `description` not kept).
    rows = [
        {**asdict(r), "run_id": run_id, "table_name": r.table, "column_name": r.column, "checked_at": checked_at}
        for r in results
    ]
    if not rows:
        return 0
    batch = pa.Table.from_pylist(rows, schema=schema())
    path = quality_results_path(resolve_lake(lake))
    options = delta_options(path) or None
    write_deltalake(uri(path), batch, mode="append", partition_by=["dataset"], storage_options=options)
    return len(rows)


def latest_results(lake: str | LakePath, dataset: str) -> list[dict[str, Any]]:
    """The newest row of every rule of a dataset (empty when no check has run)."""
    import duckdb

    from placsp_provider.lake_storage import open_table
    from placsp_provider.table_files import table_files

    path = quality_results_path(resolve_lake(lake))
    if not (path / "_delta_log").is_dir():
        return []
    source = table_files(open_table(path), [("dataset", "=", dataset)])
    with duckdb.connect() as con:
        con.register("results", source)
        cursor = con.execute(
            "SELECT * FROM results WHERE dataset = ? "
            "QUALIFY row_number() OVER (PARTITION BY table_name, rule_id ORDER BY checked_at DESC) = 1 "
            "ORDER BY table_name, rule_id",
            [dataset],
        )
        names = [d[0] for d in cursor.description or []]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
