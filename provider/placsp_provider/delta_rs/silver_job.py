"""The Silver ingest without Spark's Delta writes: a small batch parsed and staged in this process
by the same `routing.stage_page` the Spark tasks run, tallied and reconciled by the same rules
(`spark.silver_job`), and written by delta-rs (`silver_write`); a larger batch parsed by Spark's
tasks and written by delta-rs from what they staged (`write_staged`).

`choose_engine` says which engine an ingest runs on:
- `delta-rs`: a batch of up to `PLACSP_DELTA_RS_MAX_MB` (default 64) MB of pages into a lake whose
  tables exist (a daily run): no JVM at all;
- `spark+delta-rs`: up to `PLACSP_DELTA_RS_WRITE_MAX_MB` (default 512) MB of pages: Spark parses on
  every core (and creates a fresh lake's tables, so both engines write tables of one protocol and
  schema), delta-rs writes the rows, which the driver then holds in memory (1.2–1.8 MB per MB of pages,
  measured in docs/runbook.md);
- `spark`: larger batches (a backfill), parsed and MERGEd by Spark.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from placsp_provider.bronze.landing import run_folder
from placsp_provider.bronze.manifest import LandedPage
from placsp_provider.delta_rs.silver_write import RoutedBatch, is_commit_conflict, scan, write_batch
from placsp_provider.delta_rs.table_upgrade import add_missing_columns
from placsp_provider.errors import BronzePageError, ConfigError
from placsp_provider.lake import DEAD_LETTER_TABLE, LAKE_TABLES, SILVER_TABLES, staging_dir, table_path
from placsp_provider.parser.silver_schema import SCHEMAS
from placsp_provider.spark.routing import dead_letter_arrow_schema, read_page, stage_page
from placsp_provider.spark.silver_job import (
    SOURCE_COLUMN,
    WHOLE_FILE_PARSE_ERRORS,
    BatchPlan,
    FileTally,
    IngestRequest,
    empty_summary,
    fill_summary,
    finish,
    manifest_pages,
    plan_batch,
    reconciliation_dead_letter_rows,
    reconciliation_rows,
    tally_files,
)
from placsp_provider.spark.silver_merge import retry_on_conflict
from placsp_provider.spark.tables import RECONCILIATION, UTC_TS, has_commit

log = logging.getLogger(__name__)

ENGINE_ENV = "PLACSP_INGEST_ENGINE"  # auto | spark | spark+delta-rs | delta-rs
MAX_MB_ENV = "PLACSP_DELTA_RS_MAX_MB"
DEFAULT_MAX_MB = 64.0
WRITE_MAX_MB_ENV = "PLACSP_DELTA_RS_WRITE_MAX_MB"
DEFAULT_WRITE_MAX_MB = 512.0
SPARK, SPARK_DELTA_RS, DELTA_RS = "spark", "spark+delta-rs", "delta-rs"
ENGINES = ("auto", SPARK, SPARK_DELTA_RS, DELTA_RS)
_MB = 1024 * 1024


def choose_engine(request: IngestRequest, engine: str | None = None) -> str:
    """`spark`, `spark+delta-rs` or `delta-rs` for this ingest. `engine` (else `$PLACSP_INGEST_ENGINE`,
    else `auto`): `auto` takes delta-rs when the lake's tables exist and the pages still to ingest
    are at most `$PLACSP_DELTA_RS_MAX_MB` MB, spark+delta-rs when they are at most
    `$PLACSP_DELTA_RS_WRITE_MAX_MB` MB, Spark otherwise; any other value insists (`delta-rs` fails
    on a lake without tables)."""
    engine = engine or os.environ.get(ENGINE_ENV) or "auto"
    if engine not in ENGINES:
        raise ConfigError(
            f"dataset {request.dataset.key}: unknown ingest engine {engine!r} (argument or "
            f"${ENGINE_ENV}); one of {', '.join(ENGINES)}"
        )
    if engine != "auto":
        return engine
    exists = tables_exist(request.lake)
    pages = pages_to_ingest(request)[0] if exists else list(manifest_pages(request).values())
    size = sum(p.bytes for p in pages)
    if exists and size <= _limit_mb(MAX_MB_ENV, DEFAULT_MAX_MB) * _MB:
        return DELTA_RS
    return SPARK_DELTA_RS if size <= _limit_mb(WRITE_MAX_MB_ENV, DEFAULT_WRITE_MAX_MB) * _MB else SPARK


def spark_writer(request: IngestRequest, engine: str | None = None) -> str:
    """Who writes a batch Spark parses (`spark.silver_job.run_ingest`'s `writer`): Spark only when the
    engine is `spark`; a batch `auto` would ingest without a JVM is written by delta-rs here too."""
    return "spark" if choose_engine(request, engine) == SPARK else "delta-rs"


def _limit_mb(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        raise ConfigError(f"${name} must be a number of MB, not {os.environ[name]!r}") from None


def tables_exist(lake: Path) -> bool:
    return all(has_commit(table_path(lake.resolve(), t)) for t in LAKE_TABLES)


def pages_to_ingest(request: IngestRequest) -> tuple[list[LandedPage], int]:
    """As `spark.silver_job.pages_to_ingest`, the reconciliation table read by delta-rs."""
    from deltalake import DeltaTable

    pages = manifest_pages(request)
    if request.reprocess or not pages:
        return list(pages.values()), 0
    reconciliation = DeltaTable(str(table_path(request.lake.resolve(), "reconciliation")))
    rows = scan(reconciliation, request.dataset.key).to_table(columns=["source_file"])
    done = set(rows.column("source_file").to_pylist())
    todo = [p for f, p in pages.items() if f not in done]
    return todo, len(pages) - len(todo)


def run_ingest(request: IngestRequest) -> dict[str, Any]:
    """Parse, route, reconcile and write one batch; the run summary (as `spark.silver_job.run_ingest`'s)."""
    ds, lake = request.dataset, request.lake.resolve()
    if not tables_exist(lake):
        raise BronzePageError(
            ds.key,
            str(lake),
            "the lake's Delta tables do not exist yet: its first ingest runs on Spark",
            stage="ingest",
        )
    add_missing_columns(lake)  # a lake of an earlier release: its tables gain the newer columns
    started = datetime.now(UTC).replace(microsecond=0)
    pages, skipped = pages_to_ingest(dataclasses.replace(request, lake=lake))
    log.info(
        "dataset %s: %d Bronze file(s) to ingest, %d already ingested (delta-rs, no JVM)", ds.key, len(pages), skipped
    )
    summary = empty_summary(ds.key, request.run_id, len(pages), skipped)
    if not pages:
        return finish(summary, lake)
    with run_folder(staging_dir(lake, ds.key)) as folder:
        tallies = tally_files(_stage(ds, lake, pages, folder), pages, lake)
        plan, metrics = write_staged(lake, ds.key, folder, tallies, request.run_id, started)
    fill_summary(summary, tallies, plan.quarantined, plan.dead_letter_counts, metrics)
    return finish(summary, lake)


def write_staged(
    lake: Path, dataset: str, folder: Path, tallies: dict[str, FileTally], run_id: str, started: datetime
) -> tuple[BatchPlan, dict[str, Any]]:
    """The rows staged in `folder` (by this process or by Spark's tasks) written by delta-rs, with the
    dead letters and the reconciliation the tallies decide; the plan and the changes by table."""
    plan = plan_batch(tallies)
    batch = _routed_batch(dataset, folder, tallies, plan, run_id, started)
    log.info(
        "dataset %s: writing %s with delta-rs",
        dataset,
        ", ".join(f"{n:,} {t}" for t, n in plan.sizes.items() if n) or "nothing but the reconciliation",
    )
    metrics = retry_on_conflict(
        lambda: write_batch(lake, dataset, batch, run_id, started),
        what=f"dataset {dataset}: Silver write of run {run_id}",
        conflict=is_commit_conflict,
    )
    return plan, metrics


def _stage(ds: Any, lake: Path, pages: list[LandedPage], folder: Path) -> list[dict[str, Any]]:
    """Each page parsed and its rows staged, as a Spark task does; the pages' tally rows."""
    missing = [p.file for p in pages if not (lake / p.file).is_file()]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        reason = "a manifest names this page but it is not in Bronze; run the extraction of its interval again"
        raise BronzePageError(ds.key, missing[0] + more, reason, stage="ingest")
    total = sum(p.bytes for p in pages)
    done = 0
    tallies: list[dict[str, Any]] = []
    for number, page in enumerate(pages, start=1):
        data = read_page(str(lake / page.file), dataset=ds, lake=str(lake))
        tallies.extend(stage_page(data, dataset=ds, source_file=page.file, staging=str(folder)).to_pylist())
        done += page.bytes
        log.info(
            "dataset %s: page %d of %d parsed, %.1f of %.1f MB", ds.key, number, len(pages), done / _MB, total / _MB
        )
    return tallies


def _routed_batch(dataset: str, folder: Path, tallies: Any, plan: Any, run_id: str, started: datetime) -> RoutedBatch:
    """The staged rows as Arrow tables, without the quarantined files' (but their page-level dead
    letters), the dead letters with their lifecycle, and the reconciliation rows."""
    quarantined = set(plan.quarantined)

    def read(table: str) -> pa.Table:
        schema = dead_letter_arrow_schema() if table == DEAD_LETTER_TABLE else SCHEMAS[table]
        if not plan.staged[table]:  # no file was staged: there is no folder
            return schema.empty_table()
        return pq.read_table(folder / table, schema=schema)

    def kept(table: str, rows: pa.Table) -> pa.Table:
        if not quarantined:
            return rows
        sources = rows.column(SOURCE_COLUMN.get(table, "_source_file")).to_pylist()
        return rows.filter(pa.array([s not in quarantined for s in sources], pa.bool_()))

    rows = {t: kept(t, read(t)) for t in SILVER_TABLES}
    staged_dead = read(DEAD_LETTER_TABLE)
    dead = kept(DEAD_LETTER_TABLE, staged_dead)
    if quarantined:  # a page-level parse failure's dead letter is the record of its quarantined file
        mask = [
            source in quarantined and error in WHOLE_FILE_PARSE_ERRORS
            for source, error in zip(
                staged_dead["source_file"].to_pylist(), staged_dead["error_type"].to_pylist(), strict=True
            )
        ]
        reconciliation_letters = pa.Table.from_pylist(
            reconciliation_dead_letter_rows(dataset, tallies, plan.quarantined), schema=dead_letter_arrow_schema()
        )
        dead = pa.concat_tables([dead, staged_dead.filter(pa.array(mask, pa.bool_())), reconciliation_letters])
    n = dead.num_rows
    lifecycle = {
        "run_id": pa.array([run_id] * n, pa.string()),
        "processing_timestamp": pa.array([started] * n, UTC_TS),
        "status": pa.array(["quarantined"] * n, pa.string()),
        "attempts": pa.array([0] * n, pa.int32()),
        "last_attempt_at": pa.nulls(n, UTC_TS),
        "replayed_at": pa.nulls(n, UTC_TS),
        "replay_run_id": pa.nulls(n, pa.string()),
    }
    for name, column in lifecycle.items():
        dead = dead.append_column(name, column)
    if dead.num_rows != plan.sizes["dead_letters"]:  # counted from the tallies: a bug, never silent
        raise RuntimeError(
            f"dataset {dataset}: {dead.num_rows} dead letters read back, {plan.sizes['dead_letters']} tallied"
        )
    reconciliation = pa.Table.from_pylist(
        reconciliation_rows(dataset, run_id, tallies, plan.quarantined, started), schema=RECONCILIATION
    )
    return RoutedBatch(rows, dead, reconciliation, plan.repeated_versions)
