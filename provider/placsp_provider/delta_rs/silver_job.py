"""The delta-rs writer (ingest.engines): a staged batch, whoever parsed it, written by delta-rs from
this process under `ingest.rules` (`silver_write`). Its rows are held in memory as Arrow tables, so
`ingest.engines.choose_engine` gives it batches up to `$PLACSP_DELTA_RS_WRITE_MAX_MB` of pages
(1.2-1.8 MB of memory per MB of pages, measured in docs/runbook.md). Imports no Spark.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from placsp_provider.delta_rs.silver_write import merge_silver, write_batch
from placsp_provider.ingest.batch import StagedBatch
from placsp_provider.ingest.retry import is_delta_rs_conflict, retry_on_conflict
from placsp_provider.lake import SILVER_TABLES
from placsp_provider.lake_storage import LakePath

log = logging.getLogger(__name__)


class DeltaRsWriter:
    def __init__(self, spark: Any = None) -> None:
        del spark  # writes from this process, whatever parsed

    def write(self, batch: StagedBatch) -> dict[str, Any]:
        dead_letters, reconciliation = batch.dead_letters(), batch.reconciliation()
        read: dict[str, Any] = {}

        def rows() -> dict[str, Any]:  # read once, and only for MERGEs (a first load streams them)
            if not read:
                read.update({t: batch.kept(t, batch.read_staged(t)) for t in SILVER_TABLES})
            return read

        log.info(
            "dataset %s: writing %s with delta-rs",
            batch.dataset,
            ", ".join(f"{n:,} {t}" for t, n in batch.plan.sizes.items() if n) or "nothing but the reconciliation",
        )
        return _retried(batch.dataset, batch.run_id, lambda: write_batch(batch, rows, dead_letters, reconciliation))

    def write_rows(
        self,
        lake: LakePath,
        dataset: str,
        rows: Mapping[str, Any],
        repeated_versions: int,
        run_id: str,
        started: datetime,
    ) -> dict[str, Any]:
        return _retried(dataset, run_id, lambda: merge_silver(lake, dataset, rows, repeated_versions, run_id, started))


def _retried(dataset: str, run_id: str, write: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    return retry_on_conflict(
        write, what=f"dataset {dataset}: Silver write of run {run_id}", conflict=is_delta_rs_conflict
    )
