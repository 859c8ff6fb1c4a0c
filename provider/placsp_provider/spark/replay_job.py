"""Replay dead letters into Silver once their cause is fixed: the same parse, the same MERGE, once.

Runs under spark-submit (this file, from DeadLetterReplayOperator), from
the CLI (`placsp dead-letters replay`) and in tests, always through `run_replay`. Never imports Airflow.

What is selected: dead letters of one dataset with status `quarantined` or `fixed` (a person
corrected `raw_record` by hand) that match the filters, oldest first, at most `max_records`. An
`unattended` request (the scheduled reprocessing) selects only `fixed` ones and those an older parser
version rejected (`dead_letters.selection`). A request that selects nothing starts no Spark
application (`selects_nothing`, asked by the operator first).

What happens to each, and nothing else can:
- record-level (an entry or a tombstone): re-parsed and re-validated by `parse_dead_letter`, the
  ingest's own code, in one Spark job whose tasks stage the rows, from the exact bytes the ingest
  rejected (`raw_bytes`) or the record a person corrected: the same bytes, the same verdict, so an
  unfixed dead letter can never become a Silver row. Valid now: its rows are written into Silver by
  delta-rs from the driver, under the ingest's newest-wins rule, and the dead letter becomes
  `replayed` (`replayed_at`, `replay_run_id`). Still failing: `attempts` + 1, `last_attempt_at`,
  the new error; `abandoned` once `attempts` reaches `max_attempts`.
- file-level (stage `reconciliation`, or a page-level parse failure): the Bronze file is reprocessed
  through the ingest's own steps (`ingest.run.staged`, then the delta-rs writer). The dead letter is
  recovered when that reprocess no longer produces it (its id is deterministic), else it is still
  failing as above.

Exactly once: replayed dead letters are never selected again, every write is an idempotent MERGE,
and a dead letter's status changes only if it still has the status, attempts and record it was
selected with. A run that dies between the Silver MERGE and the status update is simply run again.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from collections import Counter, defaultdict
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from placsp_provider.bronze.landing import write_text_atomically
from placsp_provider.datasets import Dataset, get_dataset
from placsp_provider.dead_letters import lifecycle
from placsp_provider.dead_letters.lifecycle import QUARANTINED, REPLAYED
from placsp_provider.errors import ConfigError
from placsp_provider.ingest.engines import SPARK_DELTA_RS, engine_parts
from placsp_provider.ingest.request import IngestRequest, manifest_pages
from placsp_provider.ingest.run import prepare_tables, staged
from placsp_provider.ingest.staging import run_staging
from placsp_provider.lake import SILVER_TABLES, replay_summary_path
from placsp_provider.lake_storage import LakePath, is_local, lake_path, read_parquet
from placsp_provider.settings import REPLAY_MAX_ATTEMPTS, REPLAY_MAX_RECORDS
from placsp_provider.spark.routing import RECORD_KINDS, REPLAY_INPUT_COLUMNS
from placsp_provider.spark.session import get_session, session_conf
from placsp_provider.spark.silver_job import SparkParser

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

log = logging.getLogger(__name__)

RECOVERED, STILL_FAILING, ABANDONED = "recovered", "still_failing", "abandoned"


@dataclass(frozen=True)
class ReplayRequest:
    """Which dead letters to replay and how. Dates are UTC days of `processing_timestamp`, both inclusive."""

    dataset: str
    lake: LakePath
    run_id: str
    stages: tuple[str, ...] = ()
    error_types: tuple[str, ...] = ()
    since: date | None = None
    until: date | None = None
    dead_letter_ids: tuple[str, ...] = ()
    max_records: int = REPLAY_MAX_RECORDS
    max_attempts: int = REPLAY_MAX_ATTEMPTS
    dry_run: bool = False
    unattended: bool = False  # only what needs no person: `fixed`, or rejected by an older parser version

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
        return json.dumps(asdict(self) | {"lake": str(self.lake)}, indent=2, default=date.isoformat)

    @classmethod
    def from_json(cls, text: str) -> ReplayRequest:
        data = json.loads(text)
        days = {key: date.fromisoformat(data[key]) if data[key] else None for key in ("since", "until")}
        lists = {key: tuple(data[key]) for key in ("stages", "error_types", "dead_letter_ids")}
        return cls(**data | days | lists | {"lake": lake_path(data["lake"])})

    def filters(self) -> dict[str, Any]:
        return {
            "stages": list(self.stages),
            "error_types": list(self.error_types),
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "dead_letter_ids": len(self.dead_letter_ids),
            "max_records": self.max_records,
            "unattended": self.unattended,
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


@dataclass(frozen=True)
class Selection:
    """What a replay selected, as it was when selected."""

    letters: DataFrame  # REPLAY_INPUT_COLUMNS, handed to the re-parse job
    records: dict[str, str]  # dead_letter_id -> raw_record: a person's fix since then voids the outcome
    needs_fix: list[str]  # left out: written before raw_bytes, exact bytes unknown


def select(spark: SparkSession, request: ReplayRequest) -> Selection:
    """The dead letters this replay owns, and the ids of those left out because their exact bytes
    cannot be known (`record_bytes.fill_legacy_bytes`). Read once, by delta-rs in the driver, and
    handed to the one Spark job that re-parses them: frozen, whatever the table becomes as the
    replay writes."""
    from placsp_provider.dead_letters.record_bytes import fill_legacy_bytes

    rows = _selected_rows(request, REPLAY_INPUT_COLUMNS, request.max_records)
    rows, unknown = fill_legacy_bytes(rows, _resolved(request.lake))
    if unknown:
        log.warning(
            "dataset %s: replay %s leaves out %d dead letter(s) written before raw_bytes whose exact bytes are "
            "unknown (neither their Bronze page nor their text can tell them); fix each by hand: "
            "`placsp dead-letters show --lake LAKE --text --id ID`, then `placsp dead-letters fix --lake LAKE "
            "--id ID --file FIXED.xml` "
            "(e.g. %s)",
            request.dataset,
            request.run_id,
            len(unknown),
            ", ".join(unknown[:3]),
        )
    records = dict(zip(rows.column("dead_letter_id").to_pylist(), rows.column("raw_record").to_pylist(), strict=True))
    return Selection(spark.createDataFrame(rows), records, unknown)


def _selected_rows(request: ReplayRequest, columns: tuple[str, ...], max_records: int) -> Any:
    from placsp_provider.dead_letters.selection import select_dead_letters

    return select_dead_letters(
        request.lake,
        request.dataset,
        columns,
        stages=request.stages,
        error_types=request.error_types,
        since=request.since,
        until=request.until,
        dead_letter_ids=request.dead_letter_ids,
        unattended=request.unattended,
        max_records=max_records,
    )


def selects_nothing(request: ReplayRequest) -> bool:
    """No dead letter matches the request (or the lake has no dead-letter table yet): read by
    delta-rs in a second, so a replay with nothing to do starts no JVM."""
    from placsp_provider.ingest.tables import has_commit
    from placsp_provider.lake import table_path

    if not has_commit(table_path(_resolved(request.lake), "dead_letters")):
        return True
    return _selected_rows(request, ("dead_letter_id",), 1).num_rows == 0


def nothing_selected_summary(request: ReplayRequest) -> dict[str, Any]:
    """The summary of a replay that selected nothing (`selects_nothing`): the shape of every summary."""
    return _summary(request, get_dataset(request.dataset), {}, [], {}, [])


def run_replay(spark: SparkSession, request: ReplayRequest) -> dict[str, Any]:
    """Select, re-parse, MERGE and mark; return the summary (dry run: the same summary, nothing written)."""
    ds = get_dataset(request.dataset)
    lake = _resolved(request.lake)
    started = datetime.now(UTC).replace(microsecond=0)
    prepare_tables(SparkParser(spark), lake, ds.key)
    silver: dict[str, Any] = {}
    with contextlib.ExitStack() as staging:  # the re-parsed rows wait here until their MERGE
        folder = None if request.dry_run else staging.enter_context(run_staging(lake, ds.key, shared=True))
        reparsed, selection = _reparse(spark, ds, request, folder)
        selected = [Selected(**{c: r[c] for c in Selected.__dataclass_fields__}) for r in reparsed]
        log.info(
            "dataset %s: replay %s selected %d dead letter(s) (%s)%s",
            ds.key,
            request.run_id,
            len(selected),
            ", ".join(f"{k}={v}" for k, v in Counter(s.error_type for s in selected).most_common()) or "none",
            " [dry run: nothing will be written]" if request.dry_run else "",
        )
        outcomes = {s.dead_letter_id: Outcome(s) for s in selected}
        _record_outcomes(ds, request, reparsed, outcomes)
        if folder is not None and any(r["rows"] for r in reparsed):
            silver["records"] = _merge_records(ds, lake, request, folder, reparsed, started)
    whole_files = [s for s in selected if s.record_kind not in RECORD_KINDS]
    reprocessed: list[str] = []
    if whole_files:
        reprocessed, silver["files"] = _replay_files(spark, ds, lake, request, whole_files, outcomes, started)
    for outcome in outcomes.values():
        if outcome.result == STILL_FAILING and outcome.selected.attempts + 1 >= request.max_attempts:
            outcome.result = ABANDONED
    if not request.dry_run and outcomes:
        _mark(lake, ds.key, request.run_id, list(outcomes.values()), selection.records, started)
    summary = _summary(request, ds, outcomes, reprocessed, silver, selection.needs_fix)
    if not request.dry_run:  # an audit copy in the lake, next to the ingest summaries
        _write_json(replay_summary_path(lake, ds.key, request.run_id), summary)
    return summary


# Dead letters per Arrow batch to the replay's Python workers (the session sends the ingest one page
# per batch). Each batch's rows go into the staged files as one Parquet row group.
REPLAY_RECORDS_PER_BATCH = 200
_ARROW_BATCH = "spark.sql.execution.arrow.maxRecordsPerBatch"


def _arrow_records_per_batch(spark: SparkSession, records: int) -> AbstractContextManager[None]:
    """The session's Arrow batch size set to `records` for what runs inside, then put back."""
    return session_conf(spark, _ARROW_BATCH, str(records))


def _reparse(
    spark: SparkSession, ds: Dataset, request: ReplayRequest, folder: LakePath | None
) -> tuple[list[Row], Selection]:
    """One Spark job: the selection (read by delta-rs), its record-level dead letters re-parsed on the workers, their
    rows staged under `folder` (None: a dry run, nothing staged); one outcome per selected dead letter
    (routing.REPLAY_OUTCOME), and the selection (`select`)."""
    from placsp_provider.spark.routing import REPLAY_OUTCOME, make_replay_stager, spark_schema

    selection = select(spark, request)  # a local relation, sliced over the cores by Spark: no shuffle
    stager = make_replay_stager(ds, None if folder is None else str(folder))
    with _arrow_records_per_batch(spark, REPLAY_RECORDS_PER_BATCH):  # the job runs inside
        return selection.letters.mapInArrow(stager, spark_schema(REPLAY_OUTCOME)).collect(), selection


def _record_outcomes(ds: Dataset, request: ReplayRequest, reparsed: list[Row], outcomes: dict[str, Outcome]) -> None:
    """What became of each re-parsed dead letter, on its outcome; the parser's one-record-one-outcome
    rule checked (a broken rule is a bug, never silent)."""
    wrong = [r["dead_letter_id"] for r in reparsed if r["record_kind"] in RECORD_KINDS and r["became"] not in _BECAME]
    if wrong or len(outcomes) != len(reparsed):
        raise RuntimeError(
            f"dataset {ds.key}: replay {request.run_id}: re-parsing must give each dead letter exactly one "
            f"outcome; {len(wrong)} gave none or several (e.g. {wrong[:3]}), "
            f"{len(reparsed) - len(outcomes)} were selected twice"
        )
    for r in reparsed:
        outcome = outcomes[r["dead_letter_id"]]
        if r["became"] == "dead_letters":  # still failing (an outcome's default), with its new error
            outcome.error_type, outcome.error_message = r["new_error_type"], r["new_error_message"]
        elif r["became"] in _BECAME:
            outcome.result = RECOVERED


_BECAME = ("entries", "tombstones", "dead_letters")


def _merge_records(
    ds: Dataset, lake: LakePath, request: ReplayRequest, folder: LakePath, reparsed: list[Row], started: datetime
) -> dict[str, Any]:
    """The recovered records' staged rows written into Silver under the ingest's rules, by the
    writer of rows (`ingest.engines.row_writer`: delta-rs, from the driver). A replay holds at most
    `max_records` records: their rows fit the driver's memory."""
    from placsp_provider.ingest.engines import row_writer
    from placsp_provider.parser.silver_schema import SCHEMAS

    sizes = sum((Counter(r["rows"] or {}) for r in reparsed), Counter[str]())
    keys = {r["staged_key"] for r in reparsed if r["staged_key"]}

    def read_staged(table: str) -> Any:
        if not sizes[table]:  # no task staged rows of it: there is no folder to read
            return SCHEMAS[table].empty_table()
        for orphan in (f for f in (folder / table).glob("*.parquet") if f.stem not in keys):
            orphan.unlink()  # a failed task attempt's: Spark returned no outcome naming it
        return read_parquet(folder / table, SCHEMAS[table])

    rows = {t: read_staged(t) for t in SILVER_TABLES}
    # Two recovered records of one entry version (one page held it twice) bring its children twice:
    # only then does the write keep the first of each key (see `silver_write`).
    versions = Counter(r["entry_version"] for r in reparsed if r["entry_version"])
    repeated = sum(n - 1 for n in versions.values())
    return row_writer().write_rows(lake, ds.key, rows, repeated, request.run_id, started)


def _replay_files(
    spark: SparkSession,
    ds: Dataset,
    lake: LakePath,
    request: ReplayRequest,
    letters: list[Selected],
    outcomes: dict[str, Outcome],
    started: datetime,
) -> tuple[list[str], dict[str, Any]]:
    """Reprocess the Bronze files of whole-file dead letters through the normal ingest."""
    files = sorted({s.source_file for s in letters})
    ingest = IngestRequest(ds, lake, request.run_id, reprocess=True, only_files=tuple(files))
    pages = [p for p in manifest_pages(ingest).values() if (lake / p.file).is_file()]
    found = {p.file for p in pages}
    for s in letters:
        if s.source_file not in found:
            outcome = outcomes[s.dead_letter_id]
            outcome.error_type = s.error_type
            outcome.error_message = (
                f"Dataset {ds.key}, file {s.source_file}: replay {request.run_id} could not reprocess the file: "
                "it is not in Bronze or in any extraction manifest (re-extract its interval, then replay again)"
            )
    if not pages:
        return [], {}
    log.info(
        "dataset %s: replay %s reprocesses %d Bronze file(s) through the ingest", ds.key, request.run_id, len(pages)
    )
    # Parsed on Spark, written by delta-rs (as the ingest's `spark+delta-rs` engine): a replay's few files.
    with engine_parts(SPARK_DELTA_RS, spark) as (parser, writer), staged(parser, ingest, pages, started) as batch:
        letters_now = (
            batch.dead_letters()
            .select(["dead_letter_id", "record_kind", "source_file", "error_type", "error_message"])
            .to_pylist()
        )
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
        metrics = {} if request.dry_run else writer.write(batch)
    return sorted(p.file for p in pages), metrics


def _mark(
    lake: LakePath, dataset: str, run_id: str, outcomes: list[Outcome], records: dict[str, str], at: datetime
) -> None:
    """Record every outcome on its dead letter, only if nobody changed it since it was selected, its
    record included (a person's fix written meanwhile is replayed next time; by delta-rs:
    `dead_letters.status`)."""
    from placsp_provider.dead_letters.status import StatusChange, record_outcomes

    status = {RECOVERED: REPLAYED, STILL_FAILING: QUARANTINED, ABANDONED: lifecycle.ABANDONED}
    changes = [
        StatusChange(
            o.selected.dead_letter_id,
            o.selected.status,
            o.selected.attempts,
            records[o.selected.dead_letter_id],
            status[o.result],
            o.error_type,
            o.error_message,
        )
        for o in outcomes
    ]
    record_outcomes(lake, dataset, run_id, changes, at)


def _summary(
    request: ReplayRequest,
    ds: Dataset,
    outcomes: dict[str, Outcome],
    reprocessed: list[str],
    silver: dict[str, Any],
    needs_fix: list[str],
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
        # Left out, not selected: written before raw_bytes, exact bytes unknown (runbook); at most 20 ids.
        "needs_fix": {"count": len(needs_fix), "dead_letter_ids": needs_fix[:20]},
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
    left_out = summary.get("needs_fix", {}).get("count", 0)
    if left_out:
        lines.append(
            f"  left out: {left_out} dead letter(s) written before raw_bytes whose exact bytes are unknown; "
            "fix them by hand (docs/runbook.md, 'Dead letters written before raw_bytes')"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="PLACSP dead-letter replay (Spark job)")
    parser.add_argument("--request", required=True, type=Path, help="ReplayRequest as JSON")
    parser.add_argument("--summary-file", required=True, type=Path, help="where to write the summary JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s %(message)s")
    request = ReplayRequest.from_json(args.request.read_text())
    summary = run_replay(get_session("placsp-dead-letter-replay"), request)
    _write_json(args.summary_file, summary)
    print(describe(summary))
    return 0


def _write_json(path: LakePath, summary: dict[str, Any]) -> None:
    write_text_atomically(path, json.dumps(summary, indent=2, sort_keys=True, default=str))


def _resolved(lake: LakePath) -> LakePath:
    """A local lake as an absolute path (Spark's tasks run elsewhere); an S3 lake as it is."""
    return lake.resolve() if is_local(lake) else lake


if __name__ == "__main__":
    from placsp_provider.spark.session import run_job

    sys.exit(run_job(main))
