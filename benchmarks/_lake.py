"""Lakes and Delta for the benchmarks: pages landed as extraction lands them and laid into fresh lakes,
the project's SparkSession, a hash that makes Spark read every value, and where a run's time went from
Delta's own table history (`operationMetrics`), so no provider function needs wrapping."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def land_template(files: Sequence[Path], root: Path, dataset: str) -> Path:
    """Pages of `dataset` landed under `root` as extraction lands them (hard links, one manifest): a
    lake's Bronze, or a template that `link_lake` lays into fresh lakes."""
    from placsp_provider.demo.samples import land_pages

    land_pages(root, dataset, files, "bench", link=True)
    return root


def link_lake(template: Path, lake: Path, manifest_name: str | None = None) -> list[Path]:
    """Lay a landed template (`land_template`) into `lake`: pages hard-linked, manifests copied (renamed
    to `manifest_name` when given), so nothing a run writes reaches the template. Returns the manifests."""
    manifests = []
    for path in template.rglob("*"):
        target = lake / path.relative_to(template)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".json":
            manifests.append(target.with_name(manifest_name or path.name))
            shutil.copy2(path, manifests[-1])
        else:
            os.link(path, target)
    return manifests


def append_rows(lake: Path, table: str, rows: list[dict[str, Any]]) -> None:
    """Append `rows` to the lake's Delta table `table` by delta-rs: the ingest's schema, partitioned by `dataset`."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from placsp_provider.ingest.tables import table_schema
    from placsp_provider.lake import table_path

    batch = pa.Table.from_pylist(rows, schema=table_schema(table))
    write_deltalake(str(table_path(lake, table)), batch, mode="append", partition_by=["dataset"])


# -- Spark and Delta -----------------------------------------------------------------------------
def spark_session(app: str, cores: int) -> Any:
    """The project's `get_session` on `local[cores]`, Spark's own log quiet (a child's stderr is its error report)."""
    os.environ.setdefault("PLACSP_SPARK_LOG_LEVEL", "ERROR")
    from placsp_provider.spark.session import get_session

    return get_session(app, extra={"spark.master": f"local[{cores}]"})


def hash_all(df: Any) -> Any:
    """Materialise every column: the row with the count `n` and the XOR `h` of xxhash64 over all columns
    (nested fields included), so no reader can skip a value."""
    from pyspark.sql import functions as sf

    hashed = df.select(sf.xxhash64(*[sf.col(f"`{c}`") for c in df.columns]).alias("_h"))
    return hashed.agg(sf.count("*").alias("n"), sf.bit_xor("_h").alias("h")).first()


def lake_tables(lake: Path) -> dict[str, Path]:
    """The Delta tables a lake holds so far (Silver, dead letters, reconciliation), by name."""
    from placsp_provider.lake import SILVER_TABLES, table_path
    from placsp_provider.lake_storage import local_lake

    paths = {
        t: local_lake(table_path(lake, t), "the benchmarks") for t in (*SILVER_TABLES, "dead_letters", "reconciliation")
    }
    return {t: path for t, path in paths.items() if (path / "_delta_log").is_dir()}


def delta_versions(spark: Any, lake: Path) -> dict[str, int]:
    from delta.tables import DeltaTable

    return {
        t: DeltaTable.forPath(spark, str(p)).history(1).collect()[0]["version"] for t, p in lake_tables(lake).items()
    }


def delta_commits(spark: Any, lake: Path, since: dict[str, int]) -> list[dict[str, Any]]:
    """The commits made to the lake's tables after `since` (see `delta_versions`), each with Delta's own
    `operationMetrics` (MERGE: `executionTimeMs`, rows inserted/updated/deleted), ordered by table and
    version. This is how a benchmark learns where a run's time went without touching provider code."""
    from delta.tables import DeltaTable

    out = []
    for table, path in lake_tables(lake).items():
        history = DeltaTable.forPath(spark, str(path)).history()
        history = history.select("version", "timestamp", "operation", "operationMetrics")
        for r in sorted(history.collect(), key=lambda r: r["version"]):
            if r["version"] > since.get(table, -1):
                metrics = {k: int(v) for k, v in (r["operationMetrics"] or {}).items() if str(v).isdigit()}
                # A commit delta-rs made (the replay's status) names them its own way.
                metrics |= {o: metrics[t] for o, t in _DELTA_RS_METRICS.items() if t in metrics and o not in metrics}
                commit = {"table": table, "version": r["version"], "operation": r["operation"], "metrics": metrics}
                out.append(commit | {"committed_at": r["timestamp"].timestamp()})
    return out


# delta-spark's names of a MERGE's metrics, and delta-rs's for the same.
_DELTA_RS_METRICS = {
    "executionTimeMs": "execution_time_ms",
    "numTargetRowsInserted": "num_target_rows_inserted",
    "numTargetRowsUpdated": "num_target_rows_updated",
    "numTargetRowsDeleted": "num_target_rows_deleted",
}


def merge_seconds(commits: list[dict[str, Any]]) -> list[tuple[str, float]]:
    """(table, seconds) of every MERGE among `commits`, from Delta's `executionTimeMs`."""
    return [(c["table"], c["metrics"].get("executionTimeMs", 0) / 1e3) for c in commits if c["operation"] == "MERGE"]


def merge_wall_seconds(commits: list[dict[str, Any]]) -> float:
    """Wall time during which at least one MERGE of `commits` ran: the union of each MERGE's
    [commit time - `executionTimeMs`, commit time]. MERGEs of different tables run at once, so their
    summed execution times overstate the time they take."""
    spans = sorted(
        (c["committed_at"] - c["metrics"].get("executionTimeMs", 0) / 1e3, c["committed_at"])
        for c in commits
        if c["operation"] == "MERGE"
    )
    total, end = 0.0, float("-inf")
    for start, stop in spans:
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


# Columns that say when a row was written, not what it holds: left out of content checksums.
CLOCK_COLUMNS = frozenset({"_ingested_at", "processing_timestamp", "ingested_at", "last_attempt_at", "replayed_at"})


def lake_contents(spark: Any, lake: Path) -> dict[str, dict[str, Any]]:
    """Per table of the lake: rows and a checksum of every value but the clock columns (an XOR of
    per-row xxhash64, so row order does not matter). Equal contents give equal checksums, whatever
    code wrote them: how a speed change proves it changed no data."""
    out = {}
    for table, path in lake_tables(lake).items():
        df = spark.read.format("delta").load(str(path))
        row = hash_all(df.select(*[f"`{c}`" for c in df.columns if c not in CLOCK_COLUMNS]))
        out[table] = {"rows": row["n"], "checksum": f"{(row['h'] or 0) & (2**64 - 1):016x}"}
    return out
