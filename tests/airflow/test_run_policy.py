"""Alerting, retries, Assets, pools and the replay's approval step, as the DAGs declare them.

The DAGs are loaded from their modules in placsp_provider.dags (no run); the failure paths that
need Airflow's scheduler and triggerer (the Deadline Alert firing, the approval waiting in the UI)
run in tests/system.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from tests.airflow.conftest import DAG_NAMES, load_dag

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("dag_id", DAG_NAMES)
def test_every_task_of_every_dag_alerts_on_failure_and_does_not_retry_config_errors(dag_id: str) -> None:
    from placsp_provider.notifications import LogNotifier

    dag = load_dag(dag_id, for_dag_test=False)
    for task in dag.tasks:
        callbacks = (
            task.on_failure_callback if isinstance(task.on_failure_callback, list) else [task.on_failure_callback]
        )
        assert any(isinstance(c, LogNotifier) for c in callbacks), f"{dag_id}.{task.task_id} alerts nobody"
        assert task.retry_policy is not None, f"{dag_id}.{task.task_id} has no retry policy"


def test_retry_policy_fails_config_errors_and_keeps_retries_for_the_rest() -> None:
    from airflow.sdk import RetryAction
    from airflow.sdk.exceptions import ParamValidationError

    from placsp_provider.errors import ConfigError, FeedError
    from placsp_provider.run_policy import retry_policy

    policy = retry_policy()
    assert policy.evaluate(ConfigError("replay of x: max_records must be at least 1"), 1, 4).action is RetryAction.FAIL
    assert policy.evaluate(ParamValidationError("bad form"), 1, 4).action is RetryAction.FAIL
    assert policy.evaluate(FeedError("agregadas", "https://x/a.atom", "HTTP 503"), 1, 4).action is RetryAction.DEFAULT
    assert policy.evaluate(RuntimeError("spark-submit exited 1"), 1, 4).action is RetryAction.DEFAULT
    # What Airflow stores in the serialized DAG, and reads back on the worker.
    assert type(policy).deserialize(policy.serialize()).evaluate(ConfigError("x"), 1, 4).action is RetryAction.FAIL


def test_extract_and_completeness_fail_a_bad_connection_as_a_config_error_that_is_not_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operators log the reason and re-raise the error itself: a ConfigError stays one, so the
    retry policy fails it at once instead of retrying a connection that cannot work."""
    import json
    from datetime import UTC, datetime

    from airflow.sdk import RetryAction

    from placsp_provider.errors import ConfigError
    from placsp_provider.operators.completeness import PlacspCompletenessOperator
    from placsp_provider.operators.extract import PlacspExtractOperator
    from placsp_provider.run_policy import retry_policy

    bad = {"conn_type": "placsp", "host": "http://127.0.0.1:9/sindicacion", "extra": {"max_retries": -1}}
    monkeypatch.setenv("AIRFLOW_CONN_PLACSP_BAD", json.dumps(bad))
    start = datetime(2022, 1, 3, tzinfo=UTC)
    context = {"run_id": "r1", "data_interval_start": start, "data_interval_end": start + timedelta(days=1)}
    common = {"dataset": "agregadas", "lake": str(tmp_path), "placsp_conn_id": "placsp_bad"}
    operators = [
        PlacspExtractOperator(task_id="extract", **common),
        PlacspCompletenessOperator(task_id="completeness", month="2022-01", **common),
    ]
    for operator in operators:
        with pytest.raises(ConfigError, match="max_retries must be >= 0, got -1") as raised:
            operator.execute(context)  # type: ignore[arg-type]
        assert retry_policy().evaluate(raised.value, 1, 4).action is RetryAction.FAIL, operator.task_id


def test_daily_dag_has_a_configurable_deadline_alert_through_the_notifier(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk import AsyncCallback, DeadlineReference

    from placsp_provider.run_policy import daily_deadline_alert

    monkeypatch.delenv("PLACSP_DAILY_DEADLINE_MINUTES")  # tests/conftest.py turns it off for dag.test()
    (alert,) = load_dag("placsp_daily", for_dag_test=False).deadline
    assert alert.reference == DeadlineReference.DAGRUN_QUEUED_AT
    assert alert.interval == timedelta(hours=6)
    assert isinstance(alert.callback, AsyncCallback)
    assert alert.callback.path == "placsp_provider.notifications.LogNotifier"
    monkeypatch.setenv("PLACSP_DAILY_DEADLINE_MINUTES", "90")
    assert load_dag("placsp_daily", for_dag_test=False).deadline[0].interval == timedelta(minutes=90)
    monkeypatch.setenv("PLACSP_DAILY_DEADLINE_MINUTES", "0")
    assert not load_dag("placsp_daily", for_dag_test=False).deadline
    assert daily_deadline_alert(timedelta(0)) is not None  # an explicit interval is used as given
    monkeypatch.setenv("PLACSP_DAILY_DEADLINE_MINUTES", "-5")
    with pytest.raises(ValueError, match="PLACSP_DAILY_DEADLINE_MINUTES must be 0"):
        daily_deadline_alert()


def test_notifier_awaited_as_a_deadline_callback_logs_the_missed_run(caplog: pytest.LogCaptureFixture) -> None:
    import asyncio

    from placsp_provider.notifications import LogNotifier

    # What Airflow's CallbackTrigger does with the AsyncCallback: build with the context, await.
    context = {
        "dag_run": {
            "dag_id": "placsp_daily",
            "dag_run_id": "scheduled__2026-11-30",
            "state": "running",
            "queued_at": "q",
        },
        "deadline": {"id": "d", "deadline_time": "2026-12-01T06:00:00+00:00"},
    }
    with caplog.at_level("ERROR", logger="placsp_provider.alerts"):
        asyncio.run(_await(LogNotifier(logger_name="placsp_provider.alerts", context=context)))
    assert caplog.messages == [
        "deadline missed: dag placsp_daily, run scheduled__2026-11-30 (state running, queued at q) "
        "was not finished by 2026-12-01T06:00:00+00:00"
    ]


async def _await(awaitable: object) -> None:
    await awaitable  # type: ignore[misc]


def test_tables_written_are_outlets_named_like_their_lineage_datasets(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from placsp_provider.assets import lake_asset
    from placsp_provider.lake import LAKE_TABLES, QUALITY_RESULTS_TABLE
    from placsp_provider.lineage.naming import lake_table

    monkeypatch.setenv("PLACSP_LAKE", str(tmp_path / "lake"))
    tables = {f"file://{lake_table(tmp_path / 'lake', t).name}" for t in LAKE_TABLES}
    results = {lake_asset(QUALITY_RESULTS_TABLE, tmp_path / "lake").uri}
    daily = load_dag("placsp_daily", for_dag_test=False)
    for task in daily.tasks:
        uris = {a.uri for a in task.outlets}
        expected = {"silver": tables, "quality": results}.get(task.task_id.split("_")[0], set())
        assert uris == expected, task.task_id
    replay = load_dag("placsp_dead_letter_replay", for_dag_test=False)
    assert {a.uri for a in replay.get_task("replay").outlets} == tables
    assert {a.uri for a in replay.get_task("quality").outlets} == results
    assert replay.get_task("dry_run").outlets == []  # writes nothing
    assert {a.uri for a in load_dag("placsp_backfill", for_dag_test=False).get_task("silver").outlets} == tables
    export = load_dag("placsp_silver_entries_export", for_dag_test=False)
    assert [a.uri for a in export.timetable.asset_condition.objects] == [
        f"file://{lake_table(tmp_path / 'lake', 'entries').name}"
    ]


def test_spark_pool_is_opt_in(monkeypatch: pytest.MonkeyPatch) -> None:
    spark_tasks = {"silver_licitaciones", "silver_agregadas", "silver_menores"}
    daily = load_dag("placsp_daily", for_dag_test=False)
    assert {t.pool for t in daily.tasks} == {"default_pool"}  # runs where no pool was created
    monkeypatch.setenv("PLACSP_SPARK_POOL", "placsp_spark")
    daily = load_dag("placsp_daily", for_dag_test=False)
    assert {t.task_id for t in daily.tasks if t.pool == "placsp_spark"} == spark_tasks
    replay = load_dag("placsp_dead_letter_replay", for_dag_test=False)
    assert {t.task_id: t.pool for t in replay.tasks} == {
        "dry_run": "placsp_spark",
        "approve": "default_pool",
        "replay": "placsp_spark",
        "quality": "default_pool",  # delta-rs and DuckDB in the worker, no spark-submit
    }


def test_replay_dag_is_dry_run_then_approval_then_replay_with_optional_list_fields() -> None:
    from airflow.providers.standard.operators.hitl import ApprovalOperator

    dag = load_dag("placsp_dead_letter_replay", for_dag_test=False)
    assert dag.get_task("approve").upstream_task_ids == {"dry_run"}
    assert dag.get_task("replay").upstream_task_ids == {"approve"}
    assert isinstance(dag.get_task("approve"), ApprovalOperator)
    assert dag.get_task("dry_run").dry_run_only is True
    schema = {name: dag.params.get_param(name).schema for name in dag.params}
    # The UI marks a field required (red asterisk) unless its type admits null: empty means all.
    for name in ("stages", "error_types", "dead_letter_ids"):
        assert "null" in schema[name]["type"], name
    assert schema["skip_approval"]["type"] == "boolean" and dag.params["skip_approval"] is False


def test_approval_body_is_the_dry_runs_summary() -> None:
    from placsp_provider.operators.approval import approval_body

    body = approval_body(
        {
            "dataset": "agregadas",
            "run_id": "manual__1",
            "selected": 12,
            "recovered": 9,
            "still_failing": 2,
            "abandoned": 1,
            "by_error_type": {
                "xml_syntax": {"selected": 2, "recovered": 0, "still_failing": 1, "abandoned": 1},
                "invalid_amount": {"selected": 10, "recovered": 9, "still_failing": 1, "abandoned": 0},
            },
            "files_reprocessed": [],
        }
    )
    lines = body.splitlines()
    assert lines[0] == (
        "Dataset **agregadas**, dry run `manual__1`: **12** dead letters selected, **9** would be recovered, "
        "**2** still failing, **1** would be abandoned."
    )
    assert lines[4:6] == ["| invalid_amount | 10 | 9 | 1 | 0 |", "| xml_syntax | 2 | 0 | 1 | 1 |"]
    assert "Reject ends the run" in lines[-1]
    assert "Left out" not in body
    assert "no summary" in approval_body(None)
    left_out = approval_body(
        {
            "dataset": "agregadas",
            "run_id": "r",
            "selected": 0,
            "recovered": 0,
            "still_failing": 0,
            "abandoned": 0,
            "needs_fix": {"count": 2, "dead_letter_ids": []},
        }
    )
    assert "Left out: **2** dead letters written before `raw_bytes`" in left_out


def test_extra_links_follow_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    daily = load_dag("placsp_daily", for_dag_test=False)
    silver, gate = daily.get_task("silver_agregadas"), daily.get_task("dead_letters_agregadas")
    key = SimpleNamespace(dag_id="placsp_daily", task_id="silver_agregadas")

    def links(task) -> dict[str, str]:
        return {link.name: link.get_link(task, ti_key=key) for link in task.operator_extra_links}

    for name in ("PLACSP_SPARK_UI_URL", "PLACSP_LINEAGE_UI_URL", "PLACSP_RUNBOOK_URL"):
        monkeypatch.delenv(name, raising=False)
    assert links(silver) == {"Spark UI": "", "Lineage (Marquez)": ""}  # unset: shown disabled
    assert links(gate) == {"Runbook": ""}
    monkeypatch.setenv("PLACSP_SPARK_UI_URL", "http://spark:8090")
    monkeypatch.setenv("PLACSP_LINEAGE_UI_URL", "http://marquez:3000/")
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__NAMESPACE", "placsp")
    monkeypatch.setenv("PLACSP_RUNBOOK_URL", "https://example.org/docs/runbook.md#replay")
    assert links(silver) == {
        "Spark UI": "http://spark:8090",
        "Lineage (Marquez)": "http://marquez:3000/lineage/job/placsp/placsp_daily.silver_agregadas",
    }
    assert links(gate) == {"Runbook": "https://example.org/docs/runbook.md#alerting"}
