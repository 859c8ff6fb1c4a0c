"""Replay dead letters into Silver once their cause is fixed: the same parse, the same MERGE, once.

Runs under spark-submit (include/spark/dead_letter_replay.py, from DeadLetterReplayOperator), from
the CLI (`placsp dead-letters replay`) and in tests, always through `run_replay`. Never imports Airflow.

What is selected: dead letters of one dataset with status `quarantined` or `fixed` (a person
corrected `raw_record` by hand) that match the filters, oldest first, at most `max_records`.

What happens to each, and nothing else can:
- record-level (an entry or a tombstone): re-parsed and re-validated by `parse_dead_letter`, the
  ingest's own code. Valid now: its rows are MERGEd into Silver under the ingest's newest-wins rule
  and the dead letter becomes `replayed` (`replayed_at`, `replay_run_id`). Still failing: `attempts`
  + 1, `last_attempt_at`, the new error; `abandoned` once `attempts` reaches `max_attempts`.
- file-level (stage `reconciliation`, or a page-level parse failure): the Bronze file is reprocessed
  through the normal ingest (`route_files` / `write_routed`). The dead letter is recovered when that
  reprocess no longer produces it (its id is deterministic), else it is still failing as above.

Exactly once: replayed dead letters are never selected again, every write is an idempotent MERGE,
and a dead letter's status changes only if it still has the status and attempts it was selected
with. A run that dies between the Silver MERGE and the status update is simply run again.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections import Counter, defaultdict
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from placsp_provider.datasets import Dataset, get_dataset
from placsp_provider.dead_letters import lifecycle
from placsp_provider.dead_letters.lifecycle import QUARANTINED, REPLAYABLE, REPLAYED
from placsp_provider.errors import ConfigError
from placsp_provider.lake import SILVER_TABLES, replay_summary_path, table_path
from placsp_provider.settings import REPLAY_MAX_ATTEMPTS, REPLAY_MAX_RECORDS
from placsp_provider.spark.session import session_conf
from placsp_provider.spark.silver_job import IngestRequest, pages_to_ingest, route_files, write_routed
from placsp_provider.spark.tables import ensure_tables

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

RECORD_KINDS = ("entry", "tombstone")
RECOVERED, STILL_FAILING, ABANDONED = "recovered", "still_failing", "abandoned"


@dataclass(frozen=True)
class ReplayRequest:
    """Which dead letters to replay and how. Dates are UTC days of `processing_timestamp`, both inclusive."""

    dataset: str
    lake: Path
    run_id: str
    stages: tuple[str, ...] = ()
    error_types: tuple[str, ...] = ()
    since: date | None = None
    until: date | None = None
    dead_letter_ids: tuple[str, ...] = ()
    max_records: int = REPLAY_MAX_RECORDS
    max_attempts: int = REPLAY_MAX_ATTEMPTS
    dry_run: bool = False

    def __post_init__(self) -> None:
        # A syndication id (643) or a key (licitaciones) in; the key from here on. Unknown: a clear error.
        object.__setattr__(self, "dataset", get_dataset(self.dataset).key)
        if self.max_records < 1:
            raise ConfigError(f"replay of {self.dataset}: max_records must be at least 1, not {self.max_records}")
        if self.max_attempts < 1:
            raise ConfigError(f"replay of {self.dataset}: max_attempts must be at least 1, not {self.max_attempts}")
        if self.since and self.until and self.since > self.until:
            raise ConfigError(f"replay of {self.dataset}: since ({self.since}) is after until ({self.until})")

    def to_json(self) -> str:
        data = asdict(self)
        data["lake"] = str(self.lake)
        data["since"] = self.since.isoformat() if self.since else None
        data["until"] = self.until.isoformat() if self.until else None
        return json.dumps(data, indent=2)

    @classmethod
    def from_json(cls, text: str) -> ReplayRequest:
        data = json.loads(text)
        for key in ("stages", "error_types", "dead_letter_ids"):
            data[key] = tuple(data.get(key) or ())
        data["lake"] = Path(data["lake"])
        for key in ("since", "until"):
            data[key] = date.fromisoformat(data[key]) if data.get(key) else None
        return cls(**data)

    def filters(self) -> dict[str, Any]:
        return {
            "stages": list(self.stages),
            "error_types": list(self.error_types),
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "dead_letter_ids": len(self.dead_letter_ids),
            "max_records": self.max_records,
        }


@dataclass(frozen=True)
class Selected:
    """A selected dead letter, as it was when selected (what the status update checks against)."""

    dead_letter_id: str
    stage: str
    error_type: str
    record_kind: str
    source_file: str
    entry_id: str | None
    status: str
    attempts: int


@dataclass
class Outcome:
    selected: Selected
    result: str = STILL_FAILING  # recovered | still_failing | abandoned
    error_type: str | None = None  # the new error, when still failing
    error_message: str | None = None


@dataclass
class _Counts:
    selected: int = 0
    recovered: int = 0
    still_failing: int = 0
    abandoned: int = 0
    files: list[str] = field(default_factory=list)


def select(spark: SparkSession, request: ReplayRequest) -> DataFrame:
    """The dead letters this replay owns, frozen (the table changes under it as the replay writes)."""
    from pyspark.sql import functions as F

    dataset = get_dataset(request.dataset).key
    dl = spark.read.format("delta").load(str(table_path(request.lake, "dead_letters")))
    cond = (F.col("dataset") == dataset) & F.col("status").isin(list(REPLAYABLE))
    if request.stages:
        cond &= F.col("stage").isin(list(request.stages))
    if request.error_types:
        cond &= F.col("error_type").isin(list(request.error_types))
    if request.since:
        cond &= F.col("processing_timestamp") >= F.lit(datetime.combine(request.since, datetime.min.time(), UTC))
    if request.until:
        end = datetime.combine(request.until + timedelta(days=1), datetime.min.time(), UTC)
        cond &= F.col("processing_timestamp") < F.lit(end)
    if request.dead_letter_ids:
        cond &= F.col("dead_letter_id").isin(list(request.dead_letter_ids))
    chosen = dl.where(cond).orderBy("processing_timestamp", "dead_letter_id").limit(request.max_records)
    return chosen.localCheckpoint(eager=True)


def run_replay(spark: SparkSession, request: ReplayRequest) -> dict[str, Any]:
    """Select, re-parse, MERGE and mark; return the summary (dry run: the same summary, nothing written)."""
    ds = get_dataset(request.dataset)
    lake = request.lake.resolve()
    started = datetime.now(UTC).replace(microsecond=0)
    ensure_tables(spark, lake)
    chosen = select(spark, request)
    selected = [
        Selected(
            r["dead_letter_id"],
            r["stage"],
            r["error_type"],
            r["record_kind"],
            r["source_file"],
            r["entry_id"],
            r["status"],
            r["attempts"],
        )
        for r in chosen.select(*Selected.__dataclass_fields__).collect()
    ]
    log.info(
        "dataset %s: replay %s selected %d dead letter(s) (%s)%s",
        ds.key,
        request.run_id,
        len(selected),
        ", ".join(f"{k}={v}" for k, v in Counter(s.error_type for s in selected).most_common()) or "none",
        " [dry run: nothing will be written]" if request.dry_run else "",
    )
    outcomes = {s.dead_letter_id: Outcome(s) for s in selected}
    records = [s for s in selected if s.record_kind in RECORD_KINDS]
    whole_files = [s for s in selected if s.record_kind not in RECORD_KINDS]
    silver: dict[str, Any] = {}
    if records:
        silver["records"] = _replay_records(spark, ds, lake, request, chosen, outcomes, started)
    reprocessed: list[str] = []
    if whole_files:
        reprocessed, silver["files"] = _replay_files(spark, ds, lake, request, whole_files, outcomes, started)
    for outcome in outcomes.values():
        if outcome.result == STILL_FAILING and outcome.selected.attempts + 1 >= request.max_attempts:
            outcome.result = ABANDONED
    if not request.dry_run and outcomes:
        _mark(spark, lake, ds.key, request.run_id, list(outcomes.values()), started)
    summary = _summary(request, ds, outcomes, reprocessed, silver)
    write_summary(summary, request)
    return summary


def _replay_records(
    spark: SparkSession,
    ds: Dataset,
    lake: Path,
    request: ReplayRequest,
    chosen: DataFrame,
    outcomes: dict[str, Outcome],
    started: datetime,
) -> dict[str, Any]:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from placsp_provider.spark.routing import (
        REPLAY_INPUT_COLUMNS,
        REPLAYED_ID,
        make_replayer,
        replay_routed_spark_schema,
    )
    from placsp_provider.spark.silver_merge import merge_silver, retry_on_conflict

    # The frozen selection is one partition (it went through a LIMIT): spread it over the cores.
    source = (
        chosen.where(F.col("record_kind").isin(list(RECORD_KINDS)))
        .select(*REPLAY_INPUT_COLUMNS)
        .repartition(max(1, spark.sparkContext.defaultParallelism))
    )
    # Checkpointed, not just persisted: some MERGE plans (the tombstone apply) re-ran the whole re-parse
    # from a persisted frame (measured, docs/benchmarks.md). A lost executor fails the replay, which is
    # then simply run again.
    with _arrow_records_per_batch(spark, REPLAY_RECORDS_PER_BATCH):  # eager: runs inside the block
        routed = source.mapInArrow(make_replayer(ds), replay_routed_spark_schema()).localCheckpoint(
            eager=True, storageLevel=StorageLevel.MEMORY_AND_DISK
        )
    try:
        produced: Counter[str] = Counter()
        kinds: Counter[str] = Counter()
        for row in (
            routed.where(F.col("kind").isin("entries", "tombstones", "dead_letters"))
            .select(REPLAYED_ID, "kind", "dead_letters.error_type", "dead_letters.error_message")
            .collect()
        ):
            origin = row[REPLAYED_ID]
            produced[origin] += 1
            kinds[row["kind"]] += 1
            outcome = outcomes[origin]
            if row["kind"] == "dead_letters":
                outcome.result, outcome.error_type, outcome.error_message = (
                    STILL_FAILING,
                    row["error_type"],
                    row["error_message"],
                )
            else:
                outcome.result = RECOVERED
        wrong = [o for o, n in produced.items() if n != 1]
        missing = [o.selected.dead_letter_id for o in outcomes.values() if o.selected.record_kind in RECORD_KINDS]
        missing = [m for m in missing if m not in produced]
        if wrong or missing:  # the parser's one-record-one-outcome rule broke: a bug, never silent
            raise RuntimeError(
                f"dataset {ds.key}: replay {request.run_id}: re-parsing must give each dead letter exactly one "
                f"outcome; {len(wrong)} gave several, {len(missing)} gave none (e.g. {(wrong + missing)[:3]})"
            )
        if request.dry_run:
            return {}
        rows = {t: routed.where(F.col("kind") == t).select(f"{t}.*") for t in SILVER_TABLES}
        # Entries and tombstones were just counted: a MERGE with nothing to write is not run.
        sizes = {t: kinds[t] for t in ("entries", "tombstones")}
        return retry_on_conflict(
            lambda: merge_silver(spark, lake, ds.key, rows, request.run_id, started, sizes),
            what=f"dataset {ds.key}: replay {request.run_id}: Silver MERGE",
        )
    finally:
        routed.unpersist()


# Dead letters per Arrow batch to the replay's Python workers. The session sends ingest one page per
# batch (a page is tens of MB); a dead letter is one record, so the replay keeps the 4 per batch it
# was measured with (docs/benchmarks.md, replay vs ingest).
REPLAY_RECORDS_PER_BATCH = 4
_ARROW_BATCH = "spark.sql.execution.arrow.maxRecordsPerBatch"


def _arrow_records_per_batch(spark: SparkSession, records: int) -> AbstractContextManager[None]:
    """The session's Arrow batch size set to `records` for what runs inside, then put back."""
    return session_conf(spark, _ARROW_BATCH, str(records))


def _replay_files(
    spark: SparkSession,
    ds: Dataset,
    lake: Path,
    request: ReplayRequest,
    letters: list[Selected],
    outcomes: dict[str, Outcome],
    started: datetime,
) -> tuple[list[str], dict[str, Any]]:
    """Reprocess the Bronze files of whole-file dead letters through the normal ingest."""
    files = sorted({s.source_file for s in letters})
    pages, _ = pages_to_ingest(spark, IngestRequest(ds, lake, request.run_id, reprocess=True, only_files=tuple(files)))
    found = {p.file for p in pages if (lake / p.file).is_file()}
    for s in letters:
        if s.source_file not in found:
            outcome = outcomes[s.dead_letter_id]
            outcome.error_type = s.error_type
            outcome.error_message = (
                f"Dataset {ds.key}, file {s.source_file}: replay {request.run_id} could not reprocess the file: "
                "it is not in Bronze or in any extraction manifest (re-extract its interval, then replay again)"
            )
    pages = [p for p in pages if p.file in found]
    if not pages:
        return [], {}
    log.info(
        "dataset %s: replay %s reprocesses %d Bronze file(s) through the ingest", ds.key, request.run_id, len(pages)
    )
    routed = route_files(spark, ds, lake, pages, request.run_id, started)
    try:
        letters_now = routed.dead_letters.select(
            "dead_letter_id", "record_kind", "source_file", "error_type", "error_message"
        ).collect()
        produced = {r["dead_letter_id"] for r in letters_now}
        errors = {
            r["source_file"]: (r["error_type"], r["error_message"])
            for r in letters_now
            if r["record_kind"] not in RECORD_KINDS
        }
        for s in letters:
            if s.source_file not in found:
                continue
            outcome = outcomes[s.dead_letter_id]
            if s.dead_letter_id in produced:
                outcome.result = STILL_FAILING
                outcome.error_type, outcome.error_message = errors.get(s.source_file, (s.error_type, None))
            else:
                outcome.result = RECOVERED
        metrics = {} if request.dry_run else write_routed(spark, lake, ds.key, routed, request.run_id, started)
    finally:
        routed.release()
    return sorted(p.file for p in pages), metrics


def _mark(spark: SparkSession, lake: Path, dataset: str, run_id: str, outcomes: list[Outcome], at: datetime) -> None:
    """Record every outcome on its dead letter, only if nobody changed it since it was selected."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    from placsp_provider.spark.silver_merge import retry_on_conflict

    status = {RECOVERED: REPLAYED, STILL_FAILING: QUARANTINED, ABANDONED: lifecycle.ABANDONED}
    schema = StructType(
        [
            StructField("dead_letter_id", StringType(), False),
            StructField("was_status", StringType(), False),
            StructField("was_attempts", IntegerType(), False),
            StructField("new_status", StringType(), False),
            StructField("error_type", StringType(), True),
            StructField("error_message", StringType(), True),
        ]
    )
    source = spark.createDataFrame(
        [
            (
                o.selected.dead_letter_id,
                o.selected.status,
                o.selected.attempts,
                status[o.result],
                o.error_type,
                o.error_message,
            )
            for o in outcomes
        ],
        schema,
    )
    # The run id travels as a column of the source: no SQL literal to quote.
    source = source.withColumn("replay_run_id", F.lit(run_id))
    stamp = f"timestamp'{at.strftime('%Y-%m-%d %H:%M:%S')}+00:00'"
    replayed = "s.new_status = 'replayed'"
    table = DeltaTable.forPath(spark, str(table_path(lake, "dead_letters")))
    merge = (
        table.alias("t")
        .merge(source.alias("s"), f"t.dataset = '{dataset}' AND t.dead_letter_id = s.dead_letter_id")
        .whenMatchedUpdate(
            condition="t.status = s.was_status AND t.attempts = s.was_attempts",
            set={
                "status": "s.new_status",
                "attempts": "t.attempts + 1",
                "last_attempt_at": stamp,
                "replayed_at": f"CASE WHEN {replayed} THEN {stamp} ELSE t.replayed_at END",
                "replay_run_id": f"CASE WHEN {replayed} THEN s.replay_run_id ELSE t.replay_run_id END",
                "error_type": "coalesce(s.error_type, t.error_type)",
                "error_message": "coalesce(s.error_message, t.error_message)",
            },
        )
    )
    retry_on_conflict(merge.execute, what=f"dataset {dataset}: replay {run_id}: dead-letter status update")


def _summary(
    request: ReplayRequest,
    ds: Dataset,
    outcomes: dict[str, Outcome],
    reprocessed: list[str],
    silver: dict[str, Any],
) -> dict[str, Any]:
    by_type: dict[str, Counter[str]] = defaultdict(Counter)
    for o in outcomes.values():
        by_type[o.selected.error_type]["selected"] += 1
        by_type[o.selected.error_type][o.result] += 1
    totals = Counter(o.result for o in outcomes.values())
    accounted = totals[RECOVERED] + totals[STILL_FAILING] + totals[ABANDONED]
    return {
        "dataset": ds.key,
        "run_id": request.run_id,
        "dry_run": request.dry_run,
        "filters": request.filters(),
        "max_attempts": request.max_attempts,
        "selected": len(outcomes),
        "recovered": totals[RECOVERED],
        "still_failing": totals[STILL_FAILING],
        "abandoned": totals[ABANDONED],
        "by_stage": dict(Counter(o.selected.stage for o in outcomes.values()).most_common()),
        "by_error_type": {
            t: {k: c.get(k, 0) for k in ("selected", RECOVERED, STILL_FAILING, ABANDONED)}
            for t, c in sorted(by_type.items(), key=lambda kv: -kv[1]["selected"])
        },
        "recovered_entries": sorted(
            o.selected.entry_id for o in outcomes.values() if o.result == RECOVERED and o.selected.entry_id
        )[:20],
        "files_reprocessed": reprocessed,
        "silver": silver,
        "conservation": {"selected": len(outcomes), "accounted": accounted, "balanced": accounted == len(outcomes)},
    }


def describe(summary: dict[str, Any]) -> str:
    """The summary as a few log lines a person reads first."""
    verb = "would recover" if summary["dry_run"] else "recovered"
    dry = " (dry run, nothing written)" if summary["dry_run"] else ""
    lines = [
        f"dataset {summary['dataset']}: replay {summary['run_id']}{dry}: "
        f"{summary['selected']} selected, {verb} {summary['recovered']}, still failing {summary['still_failing']}, "
        f"abandoned {summary['abandoned']}"
    ]
    for error_type, c in summary["by_error_type"].items():
        lines.append(
            f"  {error_type}: {c['selected']} selected, {c[RECOVERED]} recovered, "
            f"{c[STILL_FAILING]} still failing, {c[ABANDONED]} abandoned"
        )
    if summary["files_reprocessed"]:
        lines.append(f"  Bronze files reprocessed: {', '.join(summary['files_reprocessed'])}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="PLACSP dead-letter replay (Spark job)")
    parser.add_argument("--request", required=True, type=Path, help="ReplayRequest as JSON")
    parser.add_argument("--summary-file", required=True, type=Path, help="where to write the summary JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s %(message)s")
    from placsp_provider.spark.session import get_session

    request = ReplayRequest.from_json(args.request.read_text())
    summary = run_replay(get_session("placsp-dead-letter-replay"), request)
    args.summary_file.parent.mkdir(parents=True, exist_ok=True)
    args.summary_file.write_text(json.dumps(summary, indent=2, sort_keys=True, default=str))
    print(describe(summary))
    return 0


def write_summary(summary: dict[str, Any], request: ReplayRequest) -> None:
    """An audit copy of the summary in the lake, next to the ingest summaries; a dry run writes nothing."""
    if request.dry_run:
        return
    target = replay_summary_path(request.lake.resolve(), summary["dataset"], request.run_id)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(summary, indent=2, sort_keys=True, default=str))


if __name__ == "__main__":
    sys.exit(main())
