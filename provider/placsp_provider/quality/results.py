"""`quality_results`: one row per rule per check, appended by every check (delta-rs, no JVM).

    <lake>/quality_results      partitioned by dataset

A check appends; nothing is updated or deleted, so the table is the history of every rule's outcome
(the report reads the latest row per rule). Appends are blind: checks of different datasets that
run at once commit one after the other (delta-rs retries a commit whose version was taken).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from placsp_provider.lake import QUALITY_RESULTS_TABLE, quality_results_path

if TYPE_CHECKING:
    import pyarrow as pa

    from placsp_provider.quality.engine import RuleResult

TABLE = QUALITY_RESULTS_TABLE
COLUMNS = (
    ("run_id", "string", False),
    ("dataset", "string", False),
    ("table_name", "string", False),
    ("rule_id", "string", False),
    ("kind", "string", False),  # library | sql | schema | volume
    ("metric", "string", True),
    ("column_name", "string", True),
    ("dimension", "string", True),
    ("severity", "string", False),
    ("scope", "string", False),
    ("expected", "string", False),
    ("actual", "double", True),
    ("success", "bool", False),
    ("rows_checked", "int64", False),
    ("message", "string", False),
    ("checked_at", "timestamp", False),
)


def table_path(lake: str | Path) -> Path:
    return quality_results_path(Path(lake))


def schema() -> pa.Schema:
    import pyarrow as pa

    types = {
        "string": pa.string(),
        "double": pa.float64(),
        "bool": pa.bool_(),
        "int64": pa.int64(),
        "timestamp": pa.timestamp("us", tz="UTC"),
    }
    return pa.schema([pa.field(name, types[kind], nullable) for name, kind, nullable in COLUMNS])


def append_results(lake: str | Path, run_id: str, results: Iterable[RuleResult], checked_at: datetime) -> int:
    """Append the results of one check; returns the rows written."""
    import pyarrow as pa
    from deltalake import write_deltalake

    rows = [_row(run_id, r, checked_at) for r in results]
    if not rows:
        return 0
    batch = pa.Table.from_pylist(rows, schema=schema())
    write_deltalake(str(table_path(lake)), batch, mode="append", partition_by=["dataset"])
    return len(rows)


def _row(run_id: str, r: RuleResult, checked_at: datetime) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "dataset": r.dataset,
        "table_name": r.table,
        "rule_id": r.rule_id,
        "kind": r.kind,
        "metric": r.metric,
        "column_name": r.column,
        "dimension": r.dimension,
        "severity": r.severity,
        "scope": r.scope,
        "expected": r.expected,
        "actual": r.actual,
        "success": r.success,
        "rows_checked": r.rows_checked,
        "message": r.message,
        "checked_at": checked_at,
    }


def latest_results(lake: str | Path, dataset: str) -> list[dict[str, Any]]:
    """The newest row of every rule of a dataset (empty when no check has run)."""
    import duckdb
    from deltalake import DeltaTable

    from placsp_provider.table_files import local_files

    path = table_path(lake)
    if not (path / "_delta_log").is_dir():
        return []
    source = local_files(DeltaTable(str(path)), [("dataset", "=", dataset)])
    con = duckdb.connect()
    try:
        con.register("results", source)
        cursor = con.execute(
            "SELECT * FROM results WHERE dataset = ? "
            "QUALIFY row_number() OVER (PARTITION BY table_name, rule_id ORDER BY checked_at DESC) = 1 "
            "ORDER BY table_name, rule_id",
            [dataset],
        )
        names = [d[0] for d in cursor.description or []]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    finally:
        con.close()
