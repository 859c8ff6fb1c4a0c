"""OpenLineage events of a real `placsp_daily` run: every task, Airflow's and Spark's events, validated.

One `dag.test()` (module fixture) of `placsp_daily`'s licitaciones tasks (extract, Silver, gate; the
DAG has no dataset switch, so `partial_subset` keeps them), on the bundled real pages served on
loopback, with the file transport (tests/lineage/capture.py). Its cost is the one Spark job (~1 min
on 2 cores). Nothing is mocked. The gate runs with severity `error`: the pages are 3 dead letters in
5 entries, so it fails for real and gives the FAIL event. A gate that passes, and datasets with
nothing to ingest, are covered from real objects in test_lineage_units.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from placsp_provider.demo.loopback_site import LoopbackSite
from placsp_provider.demo.samples import demo_routes
from placsp_provider.lineage.spark import STAGING_RUN_FOLDER
from tests.airflow.conftest import set_connection
from tests.lineage.capture import DagTestRun, LineageFiles, run_dag_test
from tests.lineage.ol_schema import validate_event

pytestmark = pytest.mark.airflow

TASKS = ("extract_licitaciones", "silver_licitaciones", "dead_letters_licitaciones")
LAKE_TABLES = ("entries", "lots", "documents", "results", "tombstones", "dead_letters", "reconciliation")


@dataclass
class DailyRun:
    run: DagTestRun
    lake: Path
    base_url: str

    def last(self, task_id: str) -> dict[str, Any]:
        return self.run.events_of(task_id)[-1]

    def table(self, table: str) -> str:
        folder = self.lake / table if table in ("dead_letters", "reconciliation") else self.lake / "silver" / table
        return str(folder.resolve())


@pytest.fixture(scope="module")
def daily(airflow_db: None, tmp_path_factory: pytest.TempPathFactory) -> DailyRun:
    work = tmp_path_factory.mktemp("lineage")
    lake = (work / "lake").resolve()
    files = LineageFiles.in_folder(work / "openlineage")
    with pytest.MonkeyPatch.context() as mp, LoopbackSite(demo_routes()) as site:
        mp.setenv("PLACSP_LAKE", str(lake))
        mp.setenv("PLACSP_DEAD_LETTER_SEVERITY", "error")
        # Spark's own write (its MERGEs), so Spark's events name every table it writes. The default
        # engine for a fresh lake lets delta-rs write what Spark parsed: then Spark's events hold the
        # parse, and the task's own events (asserted below either way) name the tables written.
        mp.setenv("PLACSP_INGEST_ENGINE", "spark")
        set_connection(mp, site.base_url)
        run = run_dag_test("placsp_daily", datetime(2025, 8, 19, tzinfo=UTC), files, tasks=TASKS)
    return DailyRun(run, lake, site.base_url)


def _names(datasets: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in datasets]


def test_every_task_emits_start_then_complete_or_fail(daily: DailyRun) -> None:
    states = daily.run.task_states
    assert sorted(states) == sorted(TASKS)
    assert {t for t, s in states.items() if not s.endswith("success")} == {"dead_letters_licitaciones"}
    for task_id, state in states.items():
        kinds = [e["eventType"] for e in daily.run.events_of(task_id)]
        # A deferrable sensor starts twice: before it defers and when it resumes.
        assert kinds[0] == "START" and set(kinds[:-1]) == {"START"}, (task_id, kinds)
        assert kinds[-1] == ("COMPLETE" if state.endswith("success") else "FAIL"), (task_id, kinds)
        for event in daily.run.events_of(task_id):
            assert event["job"]["namespace"] == daily.run.files.namespace


def test_every_event_airflow_and_spark_validates_against_the_openlineage_schema(daily: DailyRun) -> None:
    airflow_events, spark_events = daily.run.files.airflow_events(), daily.run.files.spark_events()
    assert len(airflow_events) >= 7 and len(spark_events) >= 10
    for event in airflow_events + spark_events:
        validate_event(event)


def test_extraction_reports_the_feed_in_and_the_bronze_pages_out(daily: DailyRun) -> None:
    complete = daily.last("extract_licitaciones")
    assert _names(complete["inputs"]) == [(daily.base_url.rsplit("/sindicacion", 1)[0], "/sindicacion/sindicacion_643")]
    manifest_file = next(daily.lake.glob("bronze/licitaciones/manifests/*.json"))
    manifest = json.loads(manifest_file.read_text())
    expected = {
        str(daily.lake / p["file"]): (p["entries"] + p["tombstones"], p["bytes"]) for p in manifest["pages"]
    } | {str(manifest_file): (len(manifest["pages"]), manifest_file.stat().st_size)}
    stats = {
        o["name"]: (o["outputFacets"]["outputStatistics"]["rowCount"], o["outputFacets"]["outputStatistics"]["size"])
        for o in complete["outputs"]
    }
    assert {o["namespace"] for o in complete["outputs"]} == {"file"}
    assert stats == expected
    assert sum(rows for rows, _ in list(stats.values())[:-1]) == 5  # the 5 entries of the bundled pages


def test_silver_reads_what_extraction_wrote_and_writes_the_tables_spark_names(daily: DailyRun) -> None:
    from deltalake import DeltaTable

    extract, silver = daily.last("extract_licitaciones"), daily.last("silver_licitaciones")
    assert silver["eventType"] == "COMPLETE"
    assert sorted(_names(silver["inputs"])) == sorted(_names(extract["outputs"]))  # pages + manifest: one graph
    assert _names(silver["outputs"]) == [("file", daily.table(t)) for t in LAKE_TABLES]
    # Spark's own events name the very same datasets
    spark_outputs = {(o["namespace"], o["name"]) for e in daily.run.files.spark_events() for o in e.get("outputs", [])}
    assert spark_outputs == set(_names(silver["outputs"]))
    # The MERGEs read the rows the tasks staged in a folder of the run: named without the run's folder,
    # so every run's lineage shares one dataset per staged table instead of adding new ones. Which
    # MERGEs' inputs the Spark listener reports varies (they run side by side, `run_together`: one
    # table in most runs, none in one run under load), so the name is also checked on the pattern the
    # job hands the listener (Java's `(?<remove>...)` group, removed from the path).
    spark_inputs = {i["name"] for e in daily.run.files.spark_events() for i in e.get("inputs", [])}
    staging = str(daily.lake / "_staging" / "licitaciones")
    tables = {f"{staging}/{t}" for t in ("entries", "lots", "documents", "results", "tombstones")}
    assert {name for name in spark_inputs if "/_staging/" in name} <= tables
    assert not [n for n in spark_inputs | {n for _, n in spark_outputs} if re.search(r"/[0-9a-f]{32}(/|$)", n)]
    pattern = re.compile(STAGING_RUN_FOLDER.replace("(?<remove>", "(?P<remove>"))
    for table in tables:
        run_path = table.replace(staging, f"{staging}/{'0a' * 16}")
        found = pattern.search(run_path)
        assert found and run_path[: found.start("remove")] + run_path[found.end("remove") :] == table
    for output in silver["outputs"]:
        table = Path(output["name"]).name
        fields = [f["name"] for f in output["facets"]["schema"]["fields"]]
        delta = DeltaTable(output["name"])
        assert fields == [f.name for f in delta.schema().fields], table
        # A fresh lake and one run: the rows the run wrote are the rows in the table.
        rows = delta.to_pyarrow_table(columns=["dataset"]).num_rows
        assert output["outputFacets"]["outputStatistics"]["rowCount"] == rows, table
    rows = {Path(o["name"]).name: o["outputFacets"]["outputStatistics"]["rowCount"] for o in silver["outputs"]}
    assert (rows["entries"], rows["dead_letters"], rows["reconciliation"]) == (2, 3, 3)
    facet = silver["run"]["facets"]["placsp_deadLetters"]
    assert {k: facet[k] for k in ("dataset", "scope", "total", "byStage", "byErrorType", "inserted")} == {
        "dataset": "licitaciones",
        "scope": "run",
        "total": 3,
        "byStage": {"parse": 3},
        "byErrorType": {"unbound_prefix": 3},
        "inserted": 3,
    }


def test_spark_events_point_to_the_airflow_task_run(daily: DailyRun) -> None:
    task_events = daily.run.events_of("silver_licitaciones")
    task_run = task_events[0]["run"]["runId"]
    dag_run = task_events[0]["run"]["facets"]["parent"]["run"]["runId"]
    namespace = daily.run.files.namespace
    spark_events = daily.run.files.spark_events()
    application = [e for e in spark_events if e["job"]["name"] == "placsp_silver_licitaciones"]
    assert [e["eventType"] for e in application] == ["START", "COMPLETE"]
    app_run = application[0]["run"]["runId"]
    for event in application:
        parent = event["run"]["facets"]["parent"]
        assert parent["run"]["runId"] == task_run
        assert parent["job"] == {"namespace": namespace, "name": "placsp_daily.silver_licitaciones"}
    # every query-level event hangs under the application run; the root of every event is the DAG run
    for event in spark_events:
        parent = event["run"]["facets"]["parent"]
        assert parent["run"]["runId"] in (task_run, app_run), event["job"]["name"]
        assert parent["root"]["run"]["runId"] == dag_run
        assert parent["root"]["job"] == {"namespace": namespace, "name": "placsp_daily"}
        assert event["job"]["namespace"] == namespace


def test_the_dead_letter_gate_reports_data_quality_and_its_failure(daily: DailyRun) -> None:
    failed = daily.last("dead_letters_licitaciones")
    assert failed["eventType"] == "FAIL"
    assert failed["run"]["facets"]["errorMessage"]["message"].startswith("dead letters over threshold")
    assert failed["run"]["facets"]["errorMessage"]["programmingLanguage"] == "python"
    (table,) = failed["inputs"]
    assert (table["namespace"], table["name"]) == ("file", daily.table("dead_letters"))
    (assertion,) = table["inputFacets"]["dataQualityAssertions"]["assertions"]
    assert {k: assertion[k] for k in ("assertion", "success", "severity", "expected", "actual")} == {
        "assertion": "dead_letter_ratio",
        "success": False,
        "severity": "error",
        "expected": "0.05",
        "actual": "0.6",
    }
    assert "column" not in assertion  # the whole selection, not one column
    metrics = table["inputFacets"]["dataQualityMetrics"]
    assert metrics["rowCount"] == 3 and metrics["columnMetrics"]["error_type"]["distinctCount"] == 1
    assert failed["run"]["facets"]["placsp_deadLetters"]["byErrorType"] == {"unbound_prefix": 3}


# -- the replay DAG on the same lake: its 3 dead letters, still broken, are abandoned -------------------
@pytest.fixture(scope="module")
def replay(daily: DailyRun, tmp_path_factory: pytest.TempPathFactory) -> DagTestRun:
    files = LineageFiles.in_folder(tmp_path_factory.mktemp("replay-lineage"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PLACSP_LAKE", str(daily.lake))
        return run_dag_test(
            "placsp_dead_letter_replay",
            datetime(2025, 8, 20, tzinfo=UTC),
            files,
            # skip_approval: dag.test() has no one to approve (tests/system approves in a browser).
            conf={"dataset": "licitaciones", "max_attempts": 1, "skip_approval": True},
        )


def test_the_replay_reports_dead_letters_in_and_what_it_wrote_out(daily: DailyRun, replay: DagTestRun) -> None:
    assert replay.task_states == {"replay": "success"} or replay.task_states["replay"].endswith("success")
    events = replay.events_of("replay")
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    for event in replay.files.airflow_events() + replay.files.spark_events():
        validate_event(event)
    complete = events[-1]
    (dead_in,) = complete["inputs"]
    assert (dead_in["namespace"], dead_in["name"]) == ("file", daily.table("dead_letters"))
    assert dead_in["inputFacets"]["inputStatistics"]["rowCount"] == 3
    # Nothing recovered: the only table written is the dead-letter table (3 status updates)
    outputs = {o["name"]: o["outputFacets"]["outputStatistics"]["rowCount"] for o in complete["outputs"]}
    assert outputs == {daily.table("dead_letters"): 3}
    facet = complete["run"]["facets"]["placsp_deadLetters"]
    assert (facet["scope"], facet["total"], facet["byErrorType"]) == ("replay", 3, {"unbound_prefix": 3})
    # Spark's own events of the replay job hang under this task run; the DAG's dry run (same job,
    # before the approval step) is a Spark application of its own, under the dry_run task run.
    task_run = events[0]["run"]["runId"]
    dry_run = replay.events_of("dry_run")[0]["run"]["runId"]
    application = [e for e in replay.files.spark_events() if e["job"]["name"] == "placsp_replay_licitaciones"]
    parents = [e["run"]["facets"]["parent"]["run"]["runId"] for e in application]
    assert task_run in parents and set(parents) == {task_run, dry_run}


# -- the weekly maintenance DAG on the same lake (after the replay): files change, rows do not ------------
def _table_rows(lake: Path) -> dict[str, list]:
    """Every row of every lake table, read with delta-rs (not Spark, which maintained them)."""
    from deltalake import DeltaTable

    from placsp_provider.lake import table_path

    out = {}
    for t in LAKE_TABLES:
        rows = DeltaTable(str(table_path(lake, t))).to_pyarrow_table().to_pylist()
        out[t] = sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)
    return out


def test_maintenance_compacts_the_tables_keeps_every_row_and_reports_each_table(
    daily: DailyRun, replay: DagTestRun, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from placsp_provider.lake import maintenance_summary_path, table_path
    from placsp_provider.spark.maintenance import data_files

    before = _table_rows(daily.lake)
    files = LineageFiles.in_folder(tmp_path_factory.mktemp("maintenance-lineage"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PLACSP_LAKE", str(daily.lake))
        run = run_dag_test("placsp_maintenance", datetime(2025, 8, 24, 12, tzinfo=UTC), files)
    assert run.task_states["optimize_and_vacuum"].endswith("success")
    assert _table_rows(daily.lake) == before
    (summary_file,) = maintenance_summary_path(daily.lake, "x").parent.glob("*.json")
    done = json.loads(summary_file.read_text())
    assert sorted(done) == sorted(LAKE_TABLES)
    for t in LAKE_TABLES:  # the job's counts are the files on disk now
        assert done[t]["files_left"] == data_files(table_path(daily.lake, t)), t
    # Lineage: each table read and rewritten; files written reported, no row count (rows unchanged).
    events = run.events_of("optimize_and_vacuum")
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    for event in run.files.airflow_events() + run.files.spark_events():
        validate_event(event)
    complete = events[-1]
    tables = sorted(daily.table(t) for t in LAKE_TABLES)
    assert sorted(d["name"] for d in complete["inputs"]) == tables
    written = {o["name"]: o["outputFacets"]["outputStatistics"] for o in complete["outputs"]}
    assert sorted(written) == tables
    assert all("rowCount" not in s for s in written.values())
    assert {n: s["fileCount"] for n, s in written.items()} == {
        daily.table(t): done[t]["files_written"] for t in LAKE_TABLES
    }
