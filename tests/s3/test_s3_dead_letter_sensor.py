"""The dead-letter threshold sensor on an S3 lake (SeaweedFS on loopback, conftest.py).

The deferred sensor's trigger reads the lake with the credentials of the lake connection, which it
reads itself in the triggerer (through the Task SDK): the task's `AWS_*` environment is not there.
Here the connection lives in Airflow's metadata DB and this process has no `AWS_*` variable while
`dag.test()` runs the tasks and their triggers (inline: `InProcessTestSupervisor.run_trigger_in_process`
gives the trigger supervisor comms, and the connection comes through them from the metadata DB, as in
a triggerer). The trigger's stored arguments name the connection and never hold the secret; a poke in
a worker loads the same connection into its own process (`LakeHook`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from placsp_provider import lake_storage
from placsp_provider.lake import resolve_lake
from placsp_provider.sensors.dead_letters import DeadLetterThresholdSensor
from tests.airflow.conftest import airflow_db  # noqa: F401  (the session's SQLite metadata DB)
from tests.s3.conftest import S3Lake
from tests.sensors import dag_outcome, dag_test, dead_letter_rows, write_dead_letters, write_summary

pytestmark = [pytest.mark.s3, pytest.mark.airflow, pytest.mark.timeout(600)]

WHEN = datetime(2025, 8, 19, tzinfo=UTC)
RUN = f"manual__{WHEN.isoformat()}"  # dag.test's run id for run_after WHEN
OLD_RUN = "scheduled__2025-08-01T00:00:00+00:00"
AWS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_ENDPOINT_URL", "AWS_ALLOW_HTTP")


@pytest.fixture
def lake_connection(airflow_db: None, s3_lake: S3Lake) -> Iterator[str]:  # noqa: F811
    """The connection `placsp_lake` (type aws) in the metadata DB, as a deployment stores it."""
    from airflow.models.connection import Connection
    from airflow.utils.session import create_session

    extra = {"endpoint_url": s3_lake.env["AWS_ENDPOINT_URL"], "region_name": s3_lake.env["AWS_REGION"]}
    conn = Connection(
        conn_id="placsp_lake",
        conn_type="aws",
        login=s3_lake.env["AWS_ACCESS_KEY_ID"],
        password=s3_lake.secret,
        extra=json.dumps(extra),
    )
    with create_session() as session:
        session.add(conn)
    yield "placsp_lake"
    with create_session() as session:
        session.query(Connection).filter_by(conn_id="placsp_lake").delete()


def without_aws_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as a triggerer is: no `AWS_*` of the lake (restored at the test's end), and no S3
    client made from them earlier."""
    for name in AWS:
        monkeypatch.delenv(name)
    lake_storage._s3_store.cache_clear()
    lake_storage._filesystem.cache_clear()


def test_the_deferred_sensor_reads_an_s3_lake_with_the_connection_read_in_the_triggerer(
    s3_lake: S3Lake,
    lake_connection: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    from airflow.sdk import DAG, task
    from airflow.sdk.exceptions import TaskDeferred

    lake = resolve_lake(s3_lake.uri)
    write_dead_letters(
        lake,
        dead_letter_rows(3, run_id=RUN)
        + dead_letter_rows(4, run_id=OLD_RUN, first_offset=10)
        + dead_letter_rows(2, dataset="menores", run_id=OLD_RUN),
    )
    write_summary(lake, "agregadas", RUN, entries=60)

    common: dict[str, Any] = {"lake": s3_lake.uri, "poke_interval": 0.2, "timeout": 60}
    with DAG(dag_id="test_s3_dead_letters", schedule=None, start_date=WHEN, default_args={"retries": 0}) as dag:
        deferred = [
            DeadLetterThresholdSensor(task_id="run_within", dataset="agregadas", max_count=3, max_ratio=0.05, **common),
            DeadLetterThresholdSensor(
                task_id="backlog_over", dataset="menores", scope="backlog", max_count=1, **common
            ),
        ]

        @task(trigger_rule="all_done")
        def environment_after_triggers() -> list[str]:
            return [name for name in AWS if name in os.environ]

        # A poke runs in the worker: it loads the connection into its own process (LakeHook).
        poke = DeadLetterThresholdSensor(
            task_id="poke_over", dataset="agregadas", max_count=0, deferrable=False, **common
        )
        deferred >> environment_after_triggers() >> poke

    # What the sensor stores for the triggerer, built while the secret is in this process's
    # environment and in the connection: the connection's id, not its secret.
    with pytest.raises(TaskDeferred) as deferral:
        dag.get_task("run_within").execute({"run_id": RUN})  # type: ignore[arg-type]
    _, kwargs = deferral.value.trigger.serialize()
    assert kwargs["lake"] == s3_lake.uri and kwargs["lake_conn_id"] == lake_connection
    assert s3_lake.secret not in json.dumps(kwargs, default=str)

    without_aws_environment(monkeypatch)
    with caplog.at_level("INFO"):
        run = dag_test(dag, run_after=WHEN)
    states, checks = dag_outcome(run)

    assert states == {
        "run_within": "success",
        "backlog_over": "failed",
        "environment_after_triggers": "success",
        "poke_over": "failed",
    }, caplog.text[-3000:]
    within = checks["run_within"]
    # The trigger read this run's 3 dead letters (not the older run's 4) and the summary's 60 entries.
    assert within["passed"] and [c["observed_value"] for c in within["checks"]] == [3, 0.05]
    assert within["counts"]["by_error_type"] == {"xml_syntax": 3} and within["checks"][1]["entries_read"] == 60
    over = checks["backlog_over"]
    assert not over["passed"] and over["counts"]["total"] == 2 and over["counts"]["by_status"] == {"quarantined": 2}
    assert _xcom(run, "environment_after_triggers") == [], "a trigger put the lake's credentials into the process"
    assert checks["poke_over"]["counts"]["total"] == 3 and not checks["poke_over"]["passed"]

    # The secret is in nothing the run wrote: the bucket's objects, XComs, stored triggers, logs, output.
    with lake_storage.credentials({name: s3_lake.env[name] for name in AWS}):
        written = [p.read_bytes() for p in resolve_lake(s3_lake.uri).rglob("*") if p.is_file()]
    assert len(written) >= 3, "the lake's objects were not listed: the grep below would prove nothing"
    leaks = [str(i) for i, data in enumerate(written) if s3_lake.secret.encode() in data]
    leaks += [f"XCom of {task}" for task, value in checks.items() if s3_lake.secret in json.dumps(value)]
    leaks += [f"trigger {t}" for t in _stored_triggers() if s3_lake.secret in t]
    out, err = capfd.readouterr()
    leaks += [
        what for what, text in (("logs", caplog.text), ("stdout", out), ("stderr", err)) if s3_lake.secret in text
    ]
    assert not leaks, f"the secret key is in {leaks}"
    assert _stored_triggers(), "no trigger was stored: the check of its arguments would prove nothing"


def _xcom(run: Any, task_id: str) -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.query(XComModel).filter_by(dag_id=run.dag_id, run_id=run.run_id, task_id=task_id).one()
        return row.value if not isinstance(row.value, str) else json.loads(row.value)


def _stored_triggers() -> list[str]:
    """Every trigger Airflow stored (its class path and arguments, as the triggerer reads them)."""
    from airflow.models.trigger import Trigger
    from airflow.utils.session import create_session

    with create_session() as session:
        return [f"{t.classpath} {json.dumps(t.kwargs, default=str)}" for t in session.query(Trigger)]
