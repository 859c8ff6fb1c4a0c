"""The delta-rs writer (ingest.engines): a staged batch, whoever parsed it, written by delta-rs from
this process under `ingest.rules` (`silver_write`). Its rows are held in memory as Arrow tables, so
`ingest.engines.choose_engine` gives it batches up to `$PLACSP_DELTA_RS_WRITE_MAX_MB` of pages
(1.2-1.8 MB of memory per MB of pages, measured in docs/runbook.md). Imports no Spark.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from placsp_provider.delta_rs.silver_write import RoutedBatch, merge_silver, write_batch
from placsp_provider.ingest.batch import StagedBatch
from placsp_provider.ingest.retry import is_delta_rs_conflict, retry_on_conflict
from placsp_provider.lake import SILVER_TABLES

log = logging.getLogger(__name__)


class DeltaRsWriter:
    def __init__(self, spark: Any = None) -> None:
        del spark  # writes from this process, whatever parsed

    def write(self, batch: StagedBatch) -> dict[str, Any]:
        plan = batch.plan
        rows = {t: batch.kept(t, batch.read_staged(t)) for t in SILVER_TABLES}
        routed = RoutedBatch(rows, batch.dead_letters(), batch.reconciliation(), plan.repeated_versions)
        log.info(
            "dataset %s: writing %s with delta-rs",
            batch.dataset,
            ", ".join(f"{n:,} {t}" for t, n in plan.sizes.items() if n) or "nothing but the reconciliation",
        )
        return retry_on_conflict(
            lambda: write_batch(batch.lake, batch.dataset, routed, batch.run_id, batch.started),
            what=f"dataset {batch.dataset}: Silver write of run {batch.run_id}",
            conflict=is_delta_rs_conflict,
        )

    def write_rows(
        self,
        lake: Path,
        dataset: str,
        rows: Mapping[str, Any],
        repeated_versions: int,
        run_id: str,
        started: datetime,
    ) -> dict[str, Any]:
        return retry_on_conflict(
            lambda: merge_silver(lake, dataset, rows, repeated_versions, run_id, started),
            what=f"dataset {dataset}: Silver write of run {run_id}",
            conflict=is_delta_rs_conflict,
        )
