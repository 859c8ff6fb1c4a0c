"""`ingest`: Bronze pages of one dataset -> Silver tables + dead letters, reconciled. The one entry
the Silver operator, the CLI, the Spark job and the benchmarks call; the engine (ingest.engines)
only parses and writes.

    pages_to_ingest ─► parser.stage ─► tally_files ─► plan_batch ─► writer.write ─► summary
    (manifests minus    (rows staged    (per file vs    (quarantine,     (dead letters,     (finish: written,
     the reconciled)     as Parquet)     its manifest)   sizes)           Silver, recon.)    conservation)
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from placsp_provider.bronze.manifest import LandedPage
from placsp_provider.errors import BronzePageError
from placsp_provider.ingest.batch import StagedBatch
from placsp_provider.ingest.engines import BatchParser, choose_engine, engine_parts
from placsp_provider.ingest.request import IngestRequest, pages_to_ingest
from placsp_provider.ingest.staging import run_staging
from placsp_provider.ingest.summary import RunSummary, empty_summary, fill_summary, finish
from placsp_provider.ingest.tables import add_missing_columns, tables_exist
from placsp_provider.ingest.tally import plan_batch, tally_files
from placsp_provider.lake_storage import LakePath, tables_kept_open

log = logging.getLogger(__name__)


def ingest(request: IngestRequest, engine: str | None = None, *, spark: Any = None) -> RunSummary:
    """Parse, route, reconcile and write one batch; the run summary (also written next to the tables).
    `engine`: see `engines.choose_engine`; `spark`: a SparkSession to use when the engine needs one
    (else a local one is started and stopped)."""
    name = choose_engine(request, engine)
    ds, lake = request.dataset, request.lake.resolve()
    request = dataclasses.replace(request, lake=lake)
    with engine_parts(name, spark) as (parser, writer), tables_kept_open():
        prepare_tables(parser, lake, ds.key)
        started = datetime.now(UTC).replace(microsecond=0)
        pages, skipped = pages_to_ingest(request)
        log.info(
            "dataset %s: %d Bronze file(s) to ingest, %d already ingested (engine %s)",
            ds.key,
            len(pages),
            skipped,
            name,
        )
        summary = empty_summary(ds.key, request.run_id, len(pages), skipped)
        summary["engine"] = name
        if not pages:
            return finish(summary, lake)
        with staged(parser, request, pages, started) as batch:
            metrics = writer.write(batch)
        fill_summary(summary, batch.tallies, batch.plan.quarantined, batch.plan.dead_letter_counts, metrics)
        return finish(summary, lake)


def prepare_tables(parser: BatchParser, lake: LakePath, dataset: str) -> None:
    """The lake's tables exist (created by the parser's engine if not) and have every column."""
    if not tables_exist(lake):
        parser.create_tables(lake, dataset)
    add_missing_columns(lake)


@contextmanager
def staged(
    parser: BatchParser, request: IngestRequest, pages: Sequence[LandedPage], started: datetime
) -> Iterator[StagedBatch]:
    """The pages parsed and staged in a run folder of their own, tallied and planned; the folder is
    removed when the block ends (or by the next run, if this one dies)."""
    ds, lake = request.dataset, request.lake
    missing = [p.file for p in pages if not (lake / p.file).is_file()]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        reason = "a manifest names this page but it is not in Bronze; run the extraction of its interval again"
        raise BronzePageError(ds.key, missing[0] + more, reason, stage="ingest")
    with run_staging(lake, ds.key, shared=parser.shared_staging) as folder:
        tallies = tally_files(parser.stage(ds, lake, list(pages), folder), list(pages), lake)
        yield StagedBatch(lake, ds.key, folder, tallies, plan_batch(tallies), request.run_id, started)
