"""DeadLetterThresholdSensor and its trigger: argument checks at parse time, the trigger's persisted
contract and every terminal event (its real async `run()`), and the sensor failing, warning and
passing inside real `dag.test()` runs (deferred through the inline triggerer, and in poke mode).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from placsp_provider.errors import ConfigError
from placsp_provider.notifications import LogNotifier
from placsp_provider.sensors.dead_letters import DeadLetterThresholdSensor
from placsp_provider.triggers.dead_letters import CLASSPATH, DeadLetterThresholdTrigger
from tests.airflow.conftest import airflow_db  # noqa: F401  (the session's SQLite metadata DB)
from tests.sensors import dag_outcome, dag_test, dead_letter_rows, write_dead_letters, write_summary

OLD_RUN = "scheduled__2025-08-01T00:00:00+00:00"
RUN = "scheduled__2025-08-19T00:00:00+00:00"


# -- parse time -----------------------------------------------------------------------------------
@pytest.mark.unit
@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"max_count": -3}, r"max_count must be >= 0"),
        ({"max_ratio": 2}, r"max_ratio is dead letters / entries read, between 0 and 1"),
        ({}, r"give max_count, max_ratio or both"),
        ({"scope": "backlog", "max_ratio": 0.1}, r"max_ratio needs scope 'run'"),
        ({"max_count": "{{ var.value.max }}"}, r"max_count must be a whole number"),  # not a templated field
        ({"max_count": 1, "severity": "critical"}, r"severity must be 'error'"),
    ],
)
def test_arguments_that_cannot_work_fail_at_construction(kwargs: dict[str, Any], error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        DeadLetterThresholdSensor(task_id="check", dataset="agregadas", **kwargs)


@pytest.mark.unit
def test_templated_fields_are_not_validated_before_rendering() -> None:
    sensor = DeadLetterThresholdSensor(
        task_id="check",
        dataset="{{ params.dataset }}",
        stages="{{ params.stages }}",
        lake="{{ var.value.lake }}",
        max_count=0,
    )
    assert set(sensor.template_fields) == {"dataset", "lake", "stages", "error_types"}
    assert sensor.deferrable is True and sensor.scope == "run" and sensor.severity == "error"


@pytest.mark.unit
def test_a_dag_file_with_a_bad_threshold_is_an_import_error_naming_it(tmp_path: Path) -> None:
    from airflow.dag_processing.dagbag import DagBag

    (tmp_path / "bad_dag.py").write_text(
        "from datetime import datetime\n"
        "from airflow.sdk import DAG\n"
        "from placsp_provider.sensors.dead_letters import DeadLetterThresholdSensor\n"
        "with DAG(dag_id='bad', schedule=None, start_date=datetime(2025, 1, 1)):\n"
        "    DeadLetterThresholdSensor(task_id='backlog', dataset='menores', scope='backlog', max_ratio=0.05)\n"
    )
    bag = DagBag(dag_folder=str(tmp_path))
    (error,) = bag.import_errors.values()
    assert "ConfigError: max_ratio needs scope 'run'" in error


# -- the trigger ----------------------------------------------------------------------------------
def _trigger(lake: Path, **kwargs: Any) -> DeadLetterThresholdTrigger:
    args: dict[str, Any] = {
        "lake": str(lake),
        "dataset": "agregadas",
        "scope": "run",
        "run_id": RUN,
        "deadline": time.time() + 10,
        "poke_interval": 0.05,
        **kwargs,
    }
    return DeadLetterThresholdTrigger(**args)


def _first_event(trigger: DeadLetterThresholdTrigger, *also: Any) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        events = trigger.run()
        event, *_ = await asyncio.gather(anext(events), *also)
        with pytest.raises(StopAsyncIteration):  # single-event trigger
            await anext(events)
        return event.payload

    return asyncio.run(main())


async def _later(seconds: float, action: Any) -> None:
    await asyncio.sleep(seconds)
    await asyncio.to_thread(action)


@pytest.mark.unit
def test_trigger_serialization_round_trips_exactly(lake: Path) -> None:
    from airflow.sdk._shared.module_loading import import_string
    from airflow.sdk.serde import deserialize, serialize

    trigger = _trigger(lake, stages=("parse", "validation"), error_types=["xml_syntax"], max_count=7)
    classpath, kwargs = trigger.serialize()
    assert classpath == CLASSPATH == "placsp_provider.triggers.dead_letters.DeadLetterThresholdTrigger"
    stored = deserialize(json.loads(json.dumps(serialize(kwargs))))  # what the triggerer gets back
    assert stored == kwargs
    assert import_string(classpath)(**stored).serialize() == (classpath, kwargs)
    assert kwargs["stages"] == ["parse", "validation"] and isinstance(kwargs["deadline"], float)


@pytest.mark.unit
def test_run_scope_fires_once_the_silver_summary_is_visible(lake: Path) -> None:
    write_dead_letters(lake, dead_letter_rows(3, run_id=RUN) + dead_letter_rows(4, run_id=OLD_RUN, first_offset=10))
    write_summary(lake, "agregadas", RUN, entries=60)
    event = _first_event(_trigger(lake))
    assert (event["status"], event["entries_read"], event["polls"], event["counts"]["total"]) == (
        "summary_visible",
        60,
        1,
        3,
    )
    # not there yet: it keeps polling until the ingest writes it
    late = _first_event(
        _trigger(lake, run_id="manual__late"), _later(0.3, lambda: write_summary(lake, "agregadas", "manual__late", 5))
    )
    assert late["status"] == "summary_visible" and late["polls"] > 1 and late["counts"]["total"] == 0


@pytest.mark.unit
def test_the_trigger_settles_before_its_first_look(lake: Path) -> None:
    # The answer is ready at once, yet the first poll waits first_poll_after (Airflow's deferral race,
    # the sensor's settle_seconds).
    write_dead_letters(lake, dead_letter_rows(2, run_id=RUN))
    write_summary(lake, "agregadas", RUN, entries=60)
    start = time.monotonic()
    event = _first_event(_trigger(lake, first_poll_after=0.5))
    assert time.monotonic() - start >= 0.5
    assert (event["status"], event["polls"], event["counts"]["total"]) == ("summary_visible", 1, 2)
    sensor = DeadLetterThresholdSensor(task_id="gate", dataset="agregadas", max_count=0, settle_seconds=3)
    assert sensor.settle_seconds == 3


@pytest.mark.unit
def test_backlog_scope_fires_when_the_backlog_crosses_the_threshold(lake: Path) -> None:
    write_dead_letters(
        lake,
        dead_letter_rows(2, dataset="menores")
        + dead_letter_rows(5, dataset="menores", status="replayed", first_offset=10),
    )
    trigger = _trigger(lake, dataset="menores", scope="backlog", run_id=None, max_count=2)
    more = _later(0.3, lambda: write_dead_letters(lake, dead_letter_rows(1, dataset="menores", run_id=OLD_RUN)))
    event = _first_event(trigger, more)
    assert event["status"] == "threshold_crossed" and event["polls"] > 1
    assert event["counts"]["total"] == 3 and event["counts"]["by_status"] == {"quarantined": 3}


@pytest.mark.unit
def test_the_deadline_ends_the_wait_with_the_last_counts(lake: Path) -> None:
    write_dead_letters(lake, dead_letter_rows(2, dataset="menores"))
    started = time.monotonic()
    backlog = _first_event(
        _trigger(lake, dataset="menores", scope="backlog", run_id=None, max_count=2, deadline=time.time() + 0.4)
    )
    assert backlog["status"] == "timeout" and backlog["counts"]["total"] == 2 and backlog["polls"] > 1
    assert 0.3 < time.monotonic() - started < 3
    run = _first_event(_trigger(lake, deadline=time.time() - 1))  # no summary; a past deadline still polls once
    assert (run["status"], run["counts"], run["polls"]) == ("timeout", None, 1)


@pytest.mark.unit
def test_an_unreadable_table_ends_the_trigger_with_the_reason(lake: Path) -> None:
    write_dead_letters(lake, dead_letter_rows(1, dataset="menores"))
    (lake / "dead_letters" / "_delta_log" / "00000000000000000000.json").write_text("not json")
    event = _first_event(_trigger(lake, dataset="menores", scope="backlog", run_id=None, max_count=0))
    assert event["status"] == "error"
    assert event["error"].startswith(f"dead-letter table {lake / 'dead_letters'} cannot be read: DeltaError")


# -- the sensor's own methods (Airflow's TaskInstance is the only stand-in) -------------------------
class _TaskInstance:
    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


@pytest.mark.unit
def test_poke_waits_for_the_summary_then_judges(lake: Path) -> None:
    sensor = DeadLetterThresholdSensor(task_id="check", dataset="1044", lake=str(lake), max_count=1, deferrable=False)
    ti = _TaskInstance()
    context: Any = {"run_id": RUN, "ti": ti}
    assert sensor.poke(context) is False and ti.pushed == {}
    write_dead_letters(lake, dead_letter_rows(1, run_id=RUN))
    write_summary(lake, "agregadas", RUN, entries=10)
    done = sensor.poke(context)
    assert done and done.xcom_value == ti.pushed["dead_letter_check"] and done.xcom_value["passed"] is True


@pytest.mark.unit
def test_execute_complete_turns_trigger_errors_and_timeouts_into_task_failures(lake: Path) -> None:
    from airflow.sdk.exceptions import AirflowSensorTimeout

    from placsp_provider.errors import PlacspError

    sensor = DeadLetterThresholdSensor(task_id="check", dataset="agregadas", lake=str(lake), max_count=0, timeout=60)
    context: Any = {"run_id": RUN, "ti": _TaskInstance()}
    with pytest.raises(PlacspError, match=r"dataset agregadas: dead-letter check failed: dead-letter table .* cannot"):
        sensor.execute_complete(context, {"status": "error", "error": f"dead-letter table {lake} cannot be read: x"})
    with pytest.raises(AirflowSensorTimeout, match=r"no Silver run summary at .*/runs/agregadas/.* after 60 s"):
        sensor.execute_complete(context, {"status": "timeout", "counts": None, "entries_read": None})


# -- notifications --------------------------------------------------------------------------------
@pytest.mark.unit
def test_log_notifier_logs_dag_task_run_and_the_error(caplog: pytest.LogCaptureFixture) -> None:
    ti = SimpleNamespace(dag_id="placsp_daily", task_id="dead_letters_agregadas", run_id=RUN, try_number=2)
    context = {"ti": ti, "run_id": RUN, "exception": ValueError("x" * 5000)}
    with caplog.at_level(logging.ERROR, logger="placsp_provider.alerts"):
        LogNotifier(max_chars=100)(context)
    (record,) = caplog.records
    assert record.levelno == logging.ERROR
    assert record.getMessage() == (
        f"failed: dag placsp_daily, task dead_letters_agregadas, run {RUN}, try 2: ValueError: " + "x" * 87 + "…"
    )


@pytest.mark.unit
def test_the_smtp_notifier_is_installed_and_is_a_task_sdk_notifier() -> None:
    from airflow.providers.smtp.notifications.smtp import SmtpNotifier
    from airflow.sdk import BaseNotifier

    notifier = SmtpNotifier(to="dq@example.org", from_email="airflow@example.org", subject="{{ ti.task_id }} failed")
    assert isinstance(notifier, BaseNotifier) and isinstance(LogNotifier(), BaseNotifier)
    assert "subject" in notifier.template_fields


# -- real dag.test() runs -------------------------------------------------------------------------
@pytest.mark.airflow
def test_run_scope_fails_warns_and_passes_inside_dag_test(
    airflow_db: None,  # noqa: F811
    lake: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from airflow.sdk import DAG, task

    monkeypatch.setenv("PLACSP_LAKE", str(lake))  # the sensors use the default lake
    with DAG(
        dag_id="test_dead_letters_run_scope",
        schedule=None,
        start_date=datetime(2025, 1, 1, tzinfo=UTC),
        default_args={"retries": 0},
        params={"dataset": "1044", "stage": "parse"},
    ) as dag:

        @task
        def silver(run_id: str | None = None) -> None:
            """Stands in for silver_agregadas: dead letters of this run (and an older one), then the summary."""
            from tests.sensors import dead_letter_rows, write_dead_letters, write_summary

            assert run_id is not None
            rows = dead_letter_rows(3, run_id=run_id) + dead_letter_rows(
                2, run_id=run_id, stage="validation", error_type="invalid_amount", first_offset=10
            )
            write_dead_letters(lake, rows + dead_letter_rows(40, run_id=OLD_RUN, first_offset=100))
            write_summary(lake, "agregadas", run_id, entries=95, tombstones=5)

        common = {"dataset": "agregadas", "poke_interval": 0.2, "timeout": 30}
        sensors = [
            DeadLetterThresholdSensor(task_id="count_error", max_count=4, on_failure_callback=LogNotifier(), **common),
            DeadLetterThresholdSensor(task_id="ratio_warn", max_ratio=0.01, severity="warn", **common),
            DeadLetterThresholdSensor(task_id="parse_within", stages=["parse"], max_count=3, max_ratio=0.03, **common),
            DeadLetterThresholdSensor(
                task_id="poke_error", deferrable=False, error_types=["invalid_amount"], max_count=0, **common
            ),
            DeadLetterThresholdSensor(
                task_id="poke_templated_within",
                deferrable=False,
                mode="reschedule",
                max_count=3,
                **{**common, "dataset": "{{ params.dataset }}", "stages": ["{{ params.stage }}"]},
            ),
        ]
        silver() >> sensors

    with caplog.at_level(logging.ERROR, logger="placsp_provider.alerts"):
        run = dag_test(dag)
    states, checks = dag_outcome(run)
    assert states == {
        "silver": "success",
        "count_error": "failed",
        "ratio_warn": "success",
        "parse_within": "success",
        "poke_error": "failed",
        "poke_templated_within": "success",
    }
    failed = checks["count_error"]
    assert not failed["passed"] and failed["checks"][0]["observed_value"] == 5
    assert failed["counts"]["by_error_type"] == {"xml_syntax": 3, "invalid_amount": 2}  # not the older run's 40
    assert failed["message"].startswith(
        f"dead letters over threshold: dataset agregadas, scope run (run {run.run_id}): 5 dead letter(s); "
        "count 5 > max_count 4 [severity error]"
    )
    assert f"--run-id {run.run_id}" in failed["message"] or f"--run-id '{run.run_id}'" in failed["message"]
    warned = checks["ratio_warn"]
    assert not warned["passed"] and warned["checks"][0]["observed_value"] == 0.05
    assert "ratio 0.05 (5 / 100 entries read) > max_ratio 0.01 [severity warn]" in warned["message"]
    within = checks["parse_within"]
    assert within["passed"] and [c["observed_value"] for c in within["checks"]] == [3, 0.03]
    assert checks["poke_error"]["counts"]["total"] == 2
    assert checks["poke_templated_within"]["counts"]["query"]["stages"] == ["parse"]
    alerts = [r.getMessage() for r in caplog.records if r.name == "placsp_provider.alerts"]
    assert any("task count_error" in a and "DeadLetterThresholdError" in a for a in alerts), alerts


@pytest.mark.airflow
def test_backlog_scope_and_a_missing_summary_inside_dag_test(
    airflow_db: None,  # noqa: F811
    lake: Path,
) -> None:
    from airflow.sdk import DAG, task

    with DAG(
        dag_id="test_dead_letters_backlog_scope",
        schedule=None,
        start_date=datetime(2025, 1, 1, tzinfo=UTC),
        default_args={"retries": 0},
    ) as dag:

        @task
        def backlog() -> None:
            from tests.sensors import dead_letter_rows, write_dead_letters

            quarantined = dead_letter_rows(3, dataset="menores", run_id=OLD_RUN)
            write_dead_letters(
                lake, quarantined + dead_letter_rows(9, dataset="menores", status="replayed", first_offset=10)
            )

        common = {"dataset": "menores", "scope": "backlog", "lake": str(lake), "poke_interval": 0.1, "timeout": 0.5}
        sensors = [
            DeadLetterThresholdSensor(task_id="crossed", max_count=2, **common),
            DeadLetterThresholdSensor(task_id="crossed_warn", max_count=0, severity="warn", **common),
            DeadLetterThresholdSensor(task_id="watched_until_timeout", max_count=3, **common),
            # scope run, but the Silver ingest never wrote this run's summary: a sensor timeout
            DeadLetterThresholdSensor(
                task_id="no_summary", dataset="menores", lake=str(lake), max_count=0, poke_interval=0.1, timeout=0.5
            ),
        ]
        backlog() >> sensors

    run = dag_test(dag)
    states, checks = dag_outcome(run)
    assert states == {
        "backlog": "success",
        "crossed": "failed",
        "crossed_warn": "success",
        "watched_until_timeout": "success",
        "no_summary": "failed",
    }
    assert checks["crossed"]["message"].startswith(
        "dead letters over threshold: dataset menores, scope backlog (status quarantined, any run): 3 dead letter(s)"
    )
    assert checks["crossed_warn"]["passed"] is False
    assert checks["watched_until_timeout"]["passed"] is True
    assert checks["watched_until_timeout"]["counts"]["by_status"] == {"quarantined": 3}  # replayed rows left out
    assert "no_summary" not in checks  # nothing was judged
