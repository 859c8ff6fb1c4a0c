"""The scheduled reprocessing (`placsp_dead_letter_reprocess`) and the manual replay's approval step, in
real `dag.test()` runs on a small real lake (Delta tables written by delta-rs, dead letters the real
parser's pages could hold) with the real Spark replay job (spark-submit, local).

Not run here: the scheduler. `dag.test()` never resolves a parked approval; the test thread plays the
scheduler's part by calling its own timeout sweep (`SchedulerJobRunner.check_awaiting_input_timeouts`)
once the response timeout has passed, as the scheduler does every few seconds.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from placsp_provider.ingest.tally import dead_letter_id
from placsp_provider.lake import table_path
from placsp_provider.notifications import LOGGER
from placsp_provider.parser import page_split
from placsp_provider.parser.version import PARSER_VERSION
from tests.airflow.conftest import load_dag
from tests.pages import ID_PREFIX, day, entry, page

pytestmark = pytest.mark.airflow

DS = "agregadas"
SOURCE = "bronze/agregadas/pages/p.atom"


def _broken(number: int) -> bytes:
    return entry(number, day(5)).replace(b"</cbc:ContractFolderID>", b"", 1)  # unclosed: xml_syntax


def _letter(number: int, *, status: str, version: int | None, raw_bytes: bytes, raw_record: str) -> dict[str, Any]:
    offset = number * 1000
    return {
        "dataset": DS,
        "source_file": SOURCE,
        "stage": "parse",
        "error_type": "xml_syntax",
        "error_message": f"Dataset {DS}, file {SOURCE}: entry {ID_PREFIX}{number} [xml_syntax]",
        "raw_record": raw_record,
        "namespace_context": page_split.scan_page(page([])).namespace_context,
        "record_kind": "entry",
        "entry_id": f"{ID_PREFIX}{number}",
        "record_offset": offset,
        "dead_letter_id": dead_letter_id(DS, "parse", SOURCE, offset, _broken(number).decode()),
        "run_id": "ingest-1",
        "processing_timestamp": datetime(2025, 8, 1, tzinfo=UTC),
        "status": status,
        "attempts": 0,
        "raw_bytes": raw_bytes,
        "parser_version": version,
    }


# 31: rejected by an older parser version, today's reads it (its bytes are a valid entry).
# 32: a person's fix (`fixed`, raw_record corrected; raw_bytes keep what was rejected).
# 33: rejected by today's parser: only a person may ask for it again (the manual DAG).
OLDER, FIXED, CURRENT = 31, 32, 33


def _write_lake(lake: Path, letters: list[dict[str, Any]]) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    from placsp_provider.delta_rs.tables import ensure_tables
    from placsp_provider.ingest.tables import table_schema

    ensure_tables(lake)
    table = pa.Table.from_pylist(letters, schema=table_schema("dead_letters"))
    write_deltalake(str(table_path(lake, "dead_letters")), table, partition_by=["dataset"], mode="append")


def _letters(lake: Path) -> dict[int, dict[str, Any]]:
    from deltalake import DeltaTable

    rows = DeltaTable(str(table_path(lake, "dead_letters"))).to_pyarrow_table().to_pylist()
    return {int(r["entry_id"].rsplit("/", 1)[1]): r for r in rows}


def _version(lake: Path, table: str) -> int:
    from deltalake import DeltaTable

    return DeltaTable(str(table_path(lake, table))).version()


@pytest.fixture
def alerts() -> Any:
    """What the real LogNotifier wrote to its logger."""
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    handler, logger = Keep(), logging.getLogger(LOGGER)
    logger.addHandler(handler)
    yield records
    logger.removeHandler(handler)


def test_nothing_to_do_ends_green_in_seconds_and_writes_nothing(airflow_db: None, placsp_env: Path) -> None:
    lake = placsp_env
    current = _letter(CURRENT, status="quarantined", version=PARSER_VERSION, raw_bytes=_broken(CURRENT), raw_record="")
    _write_lake(lake, [current])
    before = {t: _version(lake, t) for t in ("dead_letters", "entries")}
    started = time.monotonic()
    run = load_dag("placsp_dead_letter_reprocess").test(logical_date=datetime(2025, 9, 1, tzinfo=UTC))
    took = time.monotonic() - started
    assert str(run.state).endswith("success")
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert states["backlog"].endswith("success")
    assert all(s.endswith("skipped") for t, s in states.items() if t != "backlog"), states
    assert took < 30, f"nothing to do took {took:.1f} s"
    assert {t: _version(lake, t) for t in before} == before

    # The manual replay with its form's defaults, on a dataset without dead letters: no Spark, no
    # question asked (the approval step does not park), green.
    manual = load_dag("placsp_dead_letter_replay").test(logical_date=datetime(2025, 9, 2, tzinfo=UTC))
    assert str(manual.state).endswith("success")
    states = {ti.task_id: str(ti.state) for ti in manual.get_task_instances()}
    assert states["dry_run"].endswith("success") and states["approve"].endswith("success")
    assert states["replay"].endswith("skipped") and states["quality"].endswith("skipped")
    assert {t: _version(lake, t) for t in before} == before


def test_reprocess_replays_fixed_and_older_then_the_approval_times_out_to_reject(
    airflow_db: None, placsp_env: Path, alerts: list[str]
) -> None:
    from deltalake import DeltaTable

    lake = placsp_env
    letters = [
        _letter(OLDER, status="quarantined", version=PARSER_VERSION - 1, raw_bytes=entry(OLDER, day(5)), raw_record=""),
        _letter(
            FIXED,
            status="fixed",
            version=PARSER_VERSION,
            raw_bytes=_broken(FIXED),
            raw_record=entry(FIXED, day(5)).decode(),
        ),
        _letter(CURRENT, status="quarantined", version=PARSER_VERSION, raw_bytes=_broken(CURRENT), raw_record=""),
    ]
    _write_lake(lake, letters)
    run = load_dag("placsp_dead_letter_reprocess").test(logical_date=datetime(2025, 9, 3, tzinfo=UTC))
    assert str(run.state).endswith("success")
    after = _letters(lake)
    assert (after[OLDER]["status"], after[FIXED]["status"]) == ("replayed", "replayed")
    assert after[OLDER]["replay_run_id"] == after[FIXED]["replay_run_id"] == run.run_id
    assert after[OLDER]["parser_version"] == PARSER_VERSION - 1  # the version that rejected it stays on record
    assert (after[CURRENT]["status"], after[CURRENT]["attempts"]) == ("quarantined", 0)  # untouched
    silver = DeltaTable(str(table_path(lake, "entries"))).to_pyarrow_table(columns=["entry_id"]).column(0)
    assert sorted(silver.to_pylist()) == [f"{ID_PREFIX}{OLDER}", f"{ID_PREFIX}{FIXED}"]
    (recovered,) = [a for a in alerts if a.startswith("recovered:")]
    assert f"{DS}: 2 of 2 dead letters recovered" in recovered and f"{ID_PREFIX}{OLDER}" in recovered

    # A person's replay of the one left: the approval parks, alerts, and nobody answers within its
    # timeout: Reject, nothing written.
    before = {t: _version(lake, t) for t in ("dead_letters", "entries")}
    sweeper = _TimeoutSweep()
    sweeper.start()
    try:
        manual = load_dag("placsp_dead_letter_replay").test(
            logical_date=datetime(2025, 9, 4, tzinfo=UTC),
            run_conf={"dataset": DS, "approval_timeout_hours": 2 / 3600, "approvers": ["data-steward"]},
        )
    finally:
        sweeper.stop()
    assert str(manual.state).endswith("success")
    states = {ti.task_id: str(ti.state) for ti in manual.get_task_instances()}
    assert states["replay"].endswith("skipped") and states["quality"].endswith("skipped"), states
    assert sweeper.resolved, "the approval never parked"
    assert {t: _version(lake, t) for t in before} == before
    assert (_letters(lake)[CURRENT]["status"], _letters(lake)[CURRENT]["attempts"]) == ("quarantined", 0)
    (awaited,) = [a for a in alerts if a.startswith("approval awaited:")]
    assert "task approve" in awaited and "1** dead letters selected" in awaited and "Reject" in awaited
    from airflow.models.hitl import HITLDetail
    from airflow.utils.session import create_session

    with create_session() as session:
        (detail,) = session.query(HITLDetail).all()
        assert detail.chosen_options == ["Reject"] and detail.responded_by is None
        assert [u["id"] for u in detail.assigned_users] == ["data-steward"]


class _TimeoutSweep(threading.Thread):
    """The scheduler's timeout sweep for parked approvals, every half second until stopped."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.halt = threading.Event()
        self.resolved = 0

    def run(self) -> None:
        from airflow.jobs.job import Job
        from airflow.jobs.scheduler_job_runner import SchedulerJobRunner
        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.session import create_session
        from airflow.utils.state import TaskInstanceState

        runner = SchedulerJobRunner(job=Job())
        while not self.halt.wait(0.5):
            with create_session() as session:
                parked = session.query(TaskInstance).filter_by(state=TaskInstanceState.AWAITING_INPUT).count()
                runner.check_awaiting_input_timeouts(session=session)
            self.resolved += parked

    def stop(self) -> None:
        self.halt.set()
        self.join(10)
