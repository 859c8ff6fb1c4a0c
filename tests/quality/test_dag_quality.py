"""`placsp_daily` through a real `dag.test()`: the check task turns red on a broken table, green on a
sound one, and its OpenLineage events (file transport) validate against the spec with the assertions.

The lake is the real Silver lake of tests/quality/conftest.py (copied), with one duplicate entry
appended to agregadas. Only the two check tasks run (`partial_subset` without upstream: extraction
and Silver are tested in tests/airflow and tests/lineage; here the lake they would leave is given),
in a child process so the OpenLineage listener is configured as on a worker (tests/lineage/capture.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.airflow.conftest import airflow_db  # noqa: F401 - the Airflow metadata DB fixture
from tests.lineage.capture import LineageFiles
from tests.lineage.ol_schema import validate_event

pytestmark = pytest.mark.airflow

TASKS = ["quality_agregadas", "quality_licitaciones"]
_CHILD = """
import json, sys
from datetime import datetime
from placsp_provider.dags.placsp_daily import dag
dag = dag.partial_subset(task_ids=json.loads(sys.argv[1]), include_upstream=False)
for task in dag.tasks:
    task.retries = 0
run = dag.test(logical_date=datetime.fromisoformat(sys.argv[2]))
from airflow.models.taskinstance import TaskInstance
from airflow.utils.session import create_session
with create_session() as session:
    states = {ti.task_id: str(ti.state) for ti in session.query(TaskInstance).filter_by(run_id=run.run_id)}
print("PLACSP_DAG_TEST " + json.dumps({"run_id": run.run_id, "state": str(run.state), "tasks": states}))
"""


@pytest.fixture(scope="module")
def red_run(airflow_db: None, real_lake: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:  # noqa: F811
    import shutil

    from deltalake import DeltaTable, write_deltalake

    from placsp_provider.lake import table_path

    work = tmp_path_factory.mktemp("quality-dag")
    lake = work / "lake"
    shutil.copytree(real_lake, lake)
    entries = str(table_path(lake, "entries"))
    duplicate = DeltaTable(entries).to_pyarrow_table(filters=[("dataset", "=", "agregadas")]).slice(0, 1)
    write_deltalake(entries, duplicate, mode="append")
    files = LineageFiles.in_folder(work / "openlineage")
    env = {**os.environ, **files.env(), "PLACSP_LAKE": str(lake)}
    logical = datetime(2022, 1, 7, tzinfo=UTC)
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(TASKS), logical.isoformat()],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    marker = [line for line in result.stdout.splitlines() if line.startswith("PLACSP_DAG_TEST ")]
    assert marker, (result.stdout + result.stderr)[-4000:]
    report = json.loads(marker[-1].removeprefix("PLACSP_DAG_TEST "))
    return {"report": report, "lake": lake, "events": files.airflow_events(), "log": result.stdout + result.stderr}


def test_the_check_task_is_red_on_the_broken_table_and_green_on_the_sound_one(red_run: dict) -> None:
    states = red_run["report"]["tasks"]
    assert states["quality_agregadas"].endswith("failed")
    assert states["quality_licitaciones"].endswith("success")
    assert red_run["report"]["state"].endswith("failed")
    assert (
        "entries_key_unique [error] entries: duplicateValues(dataset, entry_id): expected = 0, actual 1"
        in (red_run["log"])
    )
    assert "--rule entries_key_unique --rows" in red_run["log"]


def test_results_are_appended_to_quality_results(red_run: dict) -> None:
    from deltalake import DeltaTable

    rows = DeltaTable(str(red_run["lake"] / "quality_results")).to_pyarrow_table().to_pylist()
    run_id = red_run["report"]["run_id"]
    assert {r["run_id"] for r in rows} == {run_id}
    # 47 contract and schema rules per dataset plus the volume check of 2022-01-07
    assert sorted({(r["dataset"], len([x for x in rows if x["dataset"] == r["dataset"]])) for r in rows}) == [
        ("agregadas", 48),
        ("licitaciones", 48),
    ]
    failed = {(r["dataset"], r["rule_id"]) for r in rows if not r["success"]}
    assert failed == {("agregadas", "entries_key_unique"), ("agregadas", "tombstones_for_known_entries")}
    volume = next(r for r in rows if r["rule_id"] == "entries_volume" and r["dataset"] == "agregadas")
    assert volume["success"] and "volume check skipped:" in volume["message"]


def test_openlineage_events_validate_and_carry_the_assertions(red_run: dict) -> None:
    events = red_run["events"]
    assert events
    for event in events:
        validate_event(event)
    fail = next(e for e in events if e["eventType"] == "FAIL" and e["job"]["name"].endswith("quality_agregadas"))
    entries = next(i for i in fail["inputs"] if i["name"].endswith("/silver/entries"))
    assertions = {a["name"]: a for a in entries["inputFacets"]["dataQualityAssertions"]["assertions"]}
    unique = assertions["entries_key_unique"]
    assert (unique["assertion"], unique["success"], unique["severity"], unique["expected"], unique["actual"]) == (
        "unique",
        False,
        "error",
        "= 0",
        "1",
    )
    assert assertions["entries_entry_id_not_null"]["assertion"] == "not_null"
    assert assertions["entries_entry_id_not_null"]["column"] == "entry_id"
    fresh = assertions["entries_fresh"]  # every landed page reached Silver: 0 hours behind
    assert (fresh["assertion"], fresh["success"], fresh["expected"], fresh["actual"]) == (
        "freshness",
        True,
        "<= 26 hours",
        "0",
    )
    metrics = entries["inputFacets"]["dataQualityMetrics"]
    assert metrics["rowCount"] == 928 and metrics["columnMetrics"]["entry_id"]["nullCount"] == 0
    complete = next(
        e for e in events if e["eventType"] == "COMPLETE" and e["job"]["name"].endswith("quality_licitaciones")
    )
    assert [o["name"].rsplit("/", 1)[-1] for o in complete["outputs"]] == ["quality_results"]
    assert complete["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 48
