"""A replay's outcomes recorded on their dead letters (`ingest.rules.STATUS_UPDATE`), by delta-rs
from the driver: a fraction of Spark's time for rewriting the files of the replayed dead letters
(decisions 0027, 0030). It runs after the Silver write: that order is what makes a replay killed in
between complete on its rerun.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from placsp_provider.ingest import rules
from placsp_provider.ingest.retry import is_delta_rs_conflict, retry_on_conflict
from placsp_provider.lake import DEAD_LETTER_TABLE, table_path
from placsp_provider.lake_storage import LakePath
from placsp_provider.parser.version import PARSER_VERSION


@dataclass(frozen=True)
class StatusChange:
    dead_letter_id: str
    was_status: str  # as selected: the change applies only if nobody changed it since
    was_attempts: int
    was_record: str  # raw_record as selected: a fix written since voids the outcome (it is replayed next)
    new_status: str
    error_type: str | None  # a new error, when it failed again
    error_message: str | None


def merge_by_id(lake: LakePath, dataset: str, source: Any) -> Any:
    """A delta-rs MERGE of `source` (alias `s`) into the dead letters (`t`) of the same `dead_letter_id`.
    `dataset` is a known dataset key: safe in the predicate, where it prunes the partition."""
    from placsp_provider.lake_storage import open_table

    predicate = f"t.dataset = '{dataset}' AND t.dead_letter_id = s.dead_letter_id"
    return open_table(table_path(lake, DEAD_LETTER_TABLE)).merge(source, predicate, source_alias="s", target_alias="t")


def record_outcomes(lake: LakePath, dataset: str, run_id: str, changes: Sequence[StatusChange], at: datetime) -> int:
    """Each change applied to its dead letter if it is still as selected; the dead letters updated."""
    import pyarrow as pa

    from placsp_provider.ingest.tables import UTC_TS

    n = len(changes)
    source = pa.table(
        {
            "dead_letter_id": pa.array([c.dead_letter_id for c in changes], pa.string()),
            "was_status": pa.array([c.was_status for c in changes], pa.string()),
            "was_attempts": pa.array([c.was_attempts for c in changes], pa.int32()),
            "was_record": pa.array([c.was_record for c in changes], pa.string()),
            "new_status": pa.array([c.new_status for c in changes], pa.string()),
            "error_type": pa.array([c.error_type for c in changes], pa.string()),
            "error_message": pa.array([c.error_message for c in changes], pa.string()),
            # The run id and the time travel as columns: no SQL literal to quote.
            "replay_run_id": pa.array([run_id] * n, pa.string()),
            "parser_version": pa.array([PARSER_VERSION] * n, pa.int32()),
            "at": pa.array([at] * n, UTC_TS),
        }
    )

    def update() -> int:
        merge = merge_by_id(lake, dataset, source)
        done = merge.when_matched_update(rules.STATUS_UPDATE, predicate=rules.STATUS_UNCHANGED).execute()
        return int(done.get("num_target_rows_updated", 0))

    return retry_on_conflict(
        update, what=f"dataset {dataset}: replay {run_id}: dead-letter status update", conflict=is_delta_rs_conflict
    )
