"""The product as deployed: PostgreSQL, Airflow's four services, Spark standalone, the lake in an S3
store (SeaweedFS, as compose runs it), lineage over HTTP.

Driven through the REST API v2 and a real browser, as an operator would, on the bundled real pages
of 2025-08-18 served on loopback (tests/system/stack.py starts and stops everything):

1. `placsp_daily` for that day, triggered through the API: extraction lands every live dataset,
   Silver runs on the Spark cluster (the master lists the applications), the gates wait in the
   triggerer; the 643 pages are 3 dead letters in 5 entries by design, so its gate fails with the
   bounded message, once (not retried), and the failure notifier's line is in the same log;
   the run's Deadline Alert (set to 15 s) fires in the triggerer.
2. What it wrote, counted from the Delta tables against the extraction manifests (counted while
   landing, without Spark); the Assets and their events; the downstream example DAG ran on them;
   every OpenLineage event received over HTTP is valid against the spec.
3. The PLACSP view in Chromium: its numbers against the dead-letter table, the 643 dead letters, a
   raw record, *Replay these* on the filled form; anonymous requests get 401.
4. The replay: a rejected one ends green, writing nothing; then the 3 dead letters fixed by hand as
   the runbook says, the replay triggered from the UI's form in Chromium, its dry run's summary
   approved in the UI, the dead letters `replayed`. Screenshots go to the output folder.

5. The lake is compose's `s3://` prefix: the tasks load its credentials from the connection, the
   Spark worker has its own in its environment and shares no folder with Airflow; the store's
   secret key (a value of this run) is in no log, no lineage event and no object of the lake.

Not mocked: nothing. Slow by nature (minutes): marker `system`.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from placsp_provider.lake_storage import LakePath

# A safety net, not a budget: on a loaded 2-core machine the replay test alone took 20 minutes.
pytestmark = [pytest.mark.system, pytest.mark.timeout(3600)]

DAILY = "placsp_daily"
REPLAY = "placsp_dead_letter_replay"
EXPORT = "placsp_silver_entries_export"
DAY = "2025-08-19T00:00:00Z"  # the logical date whose data interval is the bundled 2025-08-18
RUN_ID = "system_test_daily"
DATASETS = ("licitaciones", "agregadas", "menores")
OUR_DAGS = {DAILY, REPLAY, EXPORT, "placsp_backfill", "placsp_dead_letter_monitor"}
SPARK_POOL = "placsp_spark"


@pytest.fixture(scope="module")
def daily(stack, api, timings) -> dict[str, Any]:
    """The daily run, start to end; returns what was seen while it ran."""
    from tests.system.stack import wait_for

    start = time.monotonic()
    wait_for("the DAG processor parsed the DAGs", lambda: api.dag_ids() >= OUR_DAGS, 300, interval=2)
    assert api.import_errors() == []
    api.create_pool(SPARK_POOL, 1, "PLACSP Spark jobs: one spark-submit at a time on a small cluster")
    timings["dags parsed"] = time.monotonic() - start

    start = time.monotonic()
    # run_after = the logical date: this run goes before the scheduled run unpausing creates.
    api.trigger(DAILY, logical_date=DAY, run_after=DAY, dag_run_id=RUN_ID)
    for dag_id in (DAILY, EXPORT, REPLAY):
        api.unpause(dag_id)

    seen: dict[str, set[str]] = {}

    def watch() -> None:
        for run in api.runs(DAILY):
            if run["dag_run_id"] != RUN_ID and run["run_type"] == "scheduled":
                # Unpausing makes the scheduler create the latest interval's run; this test wants
                # the bundled day only. Queued behind ours (max_active_runs=1), it does not start; but
                # in the instant between our run's end and the pause below the scheduler may start it
                # (seen once): a running run cannot be deleted, so it is failed first.
                if run["state"] == "running":
                    api.fail_run(DAILY, run["dag_run_id"])
                api.delete_run(DAILY, run["dag_run_id"])
        for task_id, state in api.task_states(DAILY, RUN_ID).items():
            seen.setdefault(task_id, set()).add(str(state))

    state = api.wait_run(DAILY, RUN_ID, timeout=2400, on_poll=watch, interval=0.5)
    timings["daily run"] = time.monotonic() - start
    # While ours ran, max_active_runs=1 kept the scheduler from starting the next run; it would start
    # it now. Paused, the DAG gets no new run; one started meanwhile is failed and deleted by `watch`.
    api.request("PATCH", f"/dags/{DAILY}", json={"is_paused": True})
    for _ in range(10):
        watch()
        time.sleep(1)
    return {"state": state, "seen": seen, "tasks": api.task_states(DAILY, RUN_ID)}


def test_daily_run_lands_every_dataset_and_the_broken_pages_turn_the_gate_red(daily, api) -> None:
    assert daily["state"] == "failed"
    expected = {f"extract_{d}": "success" for d in DATASETS}
    expected |= {f"silver_{d}": "success" for d in DATASETS}
    # The data contracts pass on the bundled day (only warn rules fail there: docs/data-quality.md).
    expected |= {f"quality_{d}": "success" for d in DATASETS}
    expected |= {
        "dead_letters_licitaciones": "failed",
        "dead_letters_agregadas": "success",
        "dead_letters_menores": "success",
    }
    assert daily["tasks"] == expected
    # Each gate waited in the real triggerer: deferred, seen through the API while the run went on.
    assert any("deferred" in daily["seen"].get(f"dead_letters_{d}", set()) for d in DATASETS), daily["seen"]


def test_failing_gate_shows_the_bounded_message_once_and_alerts(daily, api) -> None:
    log = api.task_log(DAILY, RUN_ID, "dead_letters_licitaciones")
    assert "dataset licitaciones" in log and "dead letters" in log
    assert "placsp dead-letters stats" in log  # the command that lists every row
    assert "unbound_prefix" in log
    # The trigger ran in the triggerer, and the task failed there and then: no second try.
    assert "summary_visible" in log
    ti = api.get(f"/dags/{DAILY}/dagRuns/{RUN_ID}/taskInstances/dead_letters_licitaciones")
    assert ti["try_number"] == 1 and ti["state"] == "failed"
    # The failure notifier (default_args on every DAG) logged its alert line in the task's log.
    assert "failed: dag placsp_daily, task dead_letters_licitaciones" in log


def test_task_pages_link_to_the_spark_ui_and_the_lineage_ui(daily, api, stack) -> None:
    links = api.get(f"/dags/{DAILY}/dagRuns/{RUN_ID}/taskInstances/silver_licitaciones/links")["extra_links"]
    assert links["Spark UI"] == f"http://localhost:{stack.ports.spark_master_ui}"
    assert links["Lineage (Marquez)"] == "http://localhost:3000/lineage/job/placsp/placsp_daily.silver_licitaciones"
    gate = api.get(f"/dags/{DAILY}/dagRuns/{RUN_ID}/taskInstances/dead_letters_licitaciones/links")["extra_links"]
    assert gate == {"Runbook": None}  # shown disabled: PLACSP_RUNBOOK_URL is empty by default


def manifests(lake: LakePath, run_id: str = RUN_ID) -> dict[str, dict[str, Any]]:
    found = {}
    for path in lake.glob("bronze/*/manifests/*.json"):
        data = json.loads(path.read_text())
        if data["run_id"] == run_id:
            found[data["dataset"]] = data
    return found


def test_silver_ran_on_the_spark_cluster(daily, stack) -> None:
    # The bundled day has pages for 643 only; an empty manifest starts no JVM (nothing to ingest).
    with_pages = sorted(d for d, m in manifests(stack.lake).items() if m["pages"])
    assert with_pages == ["licitaciones"]
    apps = stack.spark_master_state()
    names = [a["name"] for a in apps.get("completedapps", [])]
    assert names.count("placsp-silver-ingest") == len(with_pages), names  # the job's SparkSession name


def test_what_silver_wrote_balances_what_extraction_counted(daily, stack) -> None:
    from placsp_provider.table_files import read_table

    lake = stack.lake
    landed = manifests(lake)
    assert sorted(landed) == sorted(DATASETS)
    for dataset in DATASETS:
        read = sum(p["entries"] for p in landed[dataset]["pages"])  # counted while landing, not by Spark
        entries = read_table(lake / "silver" / "entries", columns=["dataset"])
        in_silver = entries.column("dataset").to_pylist().count(dataset)
        dead = read_table(lake / "dead_letters", columns=["dataset", "run_id", "stage"])
        dead_letters = [
            r
            for r in dead.to_pylist()
            if r["dataset"] == dataset and r["run_id"] == RUN_ID and r["stage"] != "reconciliation"
        ]
        assert in_silver + len(dead_letters) == read, (dataset, in_silver, len(dead_letters), read)
    assert sum(p["entries"] for p in landed["licitaciones"]["pages"]) == 5
    licitaciones = read_table(lake / "dead_letters").to_pylist()
    assert sum(r["dataset"] == "licitaciones" for r in licitaciones) == 3


def test_deadline_alert_fired_in_the_triggerer(daily, api, stack) -> None:
    from tests.system.stack import wait_for

    wait_for(
        "the deadline alert's line in the triggerer log",
        lambda: "deadline missed: dag placsp_daily, run system_test_daily" in stack.log_text("airflow-triggerer"),
        120,
    )
    deadlines = api.session.get(f"{api.base}/ui/dags/{DAILY}/dagRuns/{RUN_ID}/deadlines", timeout=30).json()
    assert [d["missed"] for d in deadlines["deadlines"]] == [True], deadlines


def test_tables_are_assets_and_the_downstream_dag_ran_on_them(daily, api, stack) -> None:
    from placsp_provider.table_files import read_table
    from tests.system.stack import wait_for

    lake = stack.lake
    uris = {a["uri"] for a in api.get("/assets", limit=100)["assets"]}
    tables = ("entries", "lots", "documents", "results", "tombstones")
    expected = {f"{lake}/silver/{t}" for t in tables} | {f"{lake}/dead_letters", f"{lake}/reconciliation"}
    assert str(lake).startswith("s3://")  # the Assets of an S3 lake are named as OpenLineage names them
    assert expected <= uris
    events = api.get("/assets/events", source_dag_id=DAILY, limit=100)["asset_events"]
    entries_uri = f"{lake}/silver/entries"
    assert {e["source_task_id"] for e in events if e["uri"] == entries_uri} == {f"silver_{d}" for d in DATASETS}

    def export_done() -> bool:
        runs = api.runs(EXPORT)
        return bool(runs) and all(r["state"] in ("success", "failed") for r in runs)

    wait_for("the downstream DAG ran on the entries asset", export_done, 300, interval=2)
    runs = api.runs(EXPORT)
    assert {r["run_type"] for r in runs} == {"asset_triggered"} and {r["state"] for r in runs} == {"success"}
    export = json.loads((lake / "exports" / "silver_entries.json").read_text())
    datasets = read_table(lake / "silver" / "entries", columns=["dataset"]).column("dataset")
    assert sum(export["entries_by_dataset"].values()) == len(datasets)


# -- the PLACSP view in the Airflow UI ------------------------------------------------------------


def test_the_placsp_view_shows_what_the_tables_hold(daily, stack, out, timings) -> None:
    """Before the replay below changes anything: a person logs in, opens the view from the UI's nav,
    reads the backlog, filters to the 643 dead letters, opens a raw record, presses "Replay these"
    and lands on the filled form. Every number is counted here from the Delta table."""
    import requests

    from placsp_provider.dead_letters.lifecycle import ABANDONED, FIXED, QUARANTINED, REPLAYED
    from placsp_provider.table_files import read_table
    from tests.system.browser import airflow_page
    from tests.system.deployment import COMPOSE_VARIABLES

    start = time.monotonic()
    rows = read_table(
        stack.lake / "dead_letters", columns=["dataset", "dead_letter_id", "status", "raw_record"]
    ).to_pylist()
    backlog = {
        (d, s): sum(1 for r in rows if r["dataset"] == d and r["status"] == s)
        for d in DATASETS
        for s in (QUARANTINED, FIXED, REPLAYED, ABANDONED)
    }
    licitaciones = {r["dead_letter_id"]: r["raw_record"] for r in rows if r["dataset"] == "licitaciones"}
    assert len(licitaciones) == 3 and backlog[("licitaciones", QUARANTINED)] == 3  # the broken 643 page

    # Nothing for a request without Airflow's login, from the real API server.
    for path in ("/placsp/", "/placsp/api/summary?dataset=licitaciones", "/placsp/dead-letters?dataset=licitaciones"):
        anonymous = requests.get(f"{stack.api}{path}", timeout=30)
        assert anonymous.status_code == 401 and "dead_letter" not in anonymous.text, path

    shots = out / "screenshots"
    user, password = COMPOSE_VARIABLES["AIRFLOW_ADMIN_USER"], COMPOSE_VARIABLES["AIRFLOW_ADMIN_PASSWORD"]
    with airflow_page(stack.api, user, password, shots) as page:
        # The UI's nav entry: the view in the UI's own frame.
        page.goto(f"{stack.api}/plugin/placsp")
        frame = page.frame_locator("iframe").first
        frame.locator("section[data-dataset='licitaciones']").wait_for()
        page.screenshot(path=str(shots / "placsp_view_in_the_ui.png"), full_page=True)

        page.goto(f"{stack.api}/placsp/")
        shown = {
            (d, s): int(page.locator(f"section[data-dataset='{d}'] td[data-status='{s}']").inner_text())
            for d, s in backlog
        }
        assert shown == backlog
        page.screenshot(path=str(shots / "placsp_overview.png"), full_page=True)

        page.locator("section[data-dataset='licitaciones'] a.browse").click()
        page.locator("#dead-letters").wait_for()
        assert page.locator("#matching").inner_text() == str(len(licitaciones))
        ids = page.locator("tr[data-dead-letter-id]").evaluate_all("rows => rows.map(r => r.dataset.deadLetterId)")
        assert sorted(ids) == sorted(licitaciones)
        page.screenshot(path=str(shots / "placsp_dead_letters.png"), full_page=True)

        first = ids[0]
        page.locator(f"tr[data-dead-letter-id='{first}'] a.raw").click()
        page.locator("#raw-record").wait_for()
        assert page.locator("#raw-record").text_content() == licitaciones[first]
        page.screenshot(path=str(shots / "placsp_raw_record.png"), full_page=True)

        page.go_back()
        page.locator("#replay-these").click()
        page.locator("#replay-form").wait_for()
        assert page.locator("#param-dataset").input_value() == "licitaciones"
        assert page.locator("#trigger-replay").is_visible()  # the admin may trigger; not pressed here
        page.screenshot(path=str(shots / "placsp_replay_these.png"), full_page=True)
    timings["the PLACSP view"] = time.monotonic() - start


# -- the replay, from the UI ---------------------------------------------------------------------


def fix_dead_letters_by_hand(lake: LakePath, dataset: str) -> list[str]:
    """docs/runbook.md, "Fixing a record by hand", with the commands it gives: `placsp dead-letters
    show` prints each record; the namespace prefixes the broken 643 page never declared (taken from a
    well-formed page of the lake) are declared on its start tag; `placsp dead-letters fix` checks the
    file with the real parser, writes it and marks the dead letter `fixed`. Returns the fixed ids."""
    import io
    import re
    import subprocess
    import sys

    from lxml import etree

    from placsp_provider.lake_storage import open_table
    from placsp_provider.table_files import table_files

    namespaces: dict[str | None, str] = {}
    for page in lake.glob("bronze/*/pages/**/*"):
        if page.is_file():
            try:
                for _, element in etree.iterparse(io.BytesIO(page.read_bytes()), events=("start",)):
                    namespaces.update(element.nsmap)
                    break
            except etree.XMLSyntaxError:
                continue
    table = open_table(lake / "dead_letters")
    rows = [
        r for r in table_files(table).to_table().to_pylist() if r["dataset"] == dataset and r["status"] == "quarantined"
    ]
    placsp = [sys.executable, "-m", "placsp_provider.cli", "dead-letters"]
    fixed_ids = []
    for row in rows:
        dl_id = row["dead_letter_id"]
        shown = subprocess.run([*placsp, "show", "--lake", str(lake), "--id", dl_id], capture_output=True, timeout=120)
        assert shown.returncode == 0, shown.stderr
        raw = shown.stdout.decode("utf-8")
        raw = raw.split("?>", 1)[1] if raw.startswith("<?xml") else raw
        used = set(re.findall(r"<\/?([A-Za-z][\w.-]*):", raw)) - set(re.findall(r"xmlns:([\w.-]+)=", raw))
        declarations = "".join(f' xmlns:{p}="{namespaces[p]}"' for p in sorted(used) if p in namespaces)
        if not re.match(r"\s*<[\w.-]+[^>]*\sxmlns=", raw) and None in namespaces:  # the feed's Atom namespace
            declarations = f' xmlns="{namespaces[None]}"' + declarations
        start_tag = re.match(r"\s*<[\w:.-]+", raw)
        assert start_tag is not None, raw[:200]
        record = Path(tempfile.gettempdir()) / f"placsp-fixed-{dl_id[:12]}.xml"  # the person's own disk
        record.write_text(raw[: start_tag.end()] + declarations + raw[start_tag.end() :], encoding="utf-8")
        fix = [*placsp, "fix", "--lake", str(lake), "--id", dl_id, "--file", str(record)]
        done = subprocess.run(fix, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        fixed_ids.append(dl_id)
    return fixed_ids


def dead_letter_statuses(lake: LakePath, dataset: str) -> dict[str, str]:
    from placsp_provider.table_files import read_table

    rows = read_table(lake / "dead_letters", columns=["dataset", "dead_letter_id", "status"])
    return {r["dead_letter_id"]: r["status"] for r in rows.to_pylist() if r["dataset"] == dataset}


def silver_entry_ids(lake: LakePath, dataset: str) -> set[str]:
    from placsp_provider.table_files import read_table

    rows = read_table(lake / "silver" / "entries", columns=["dataset", "entry_id"]).to_pylist()
    return {r["entry_id"] for r in rows if r["dataset"] == dataset}


def dead_letter_entry_ids(lake: LakePath, dataset: str) -> set[str]:
    from placsp_provider.table_files import read_table

    rows = read_table(lake / "dead_letters", columns=["dataset", "entry_id"]).to_pylist()
    return {r["entry_id"] for r in rows if r["dataset"] == dataset and r["entry_id"]}


def wait_for_state(api, dag_id: str, run_id: str, task_id: str, states: set[str], timeout: float) -> str:
    from tests.system.stack import wait_for

    def current() -> str | None:
        state = api.task_states(dag_id, run_id).get(task_id)
        return state if state in states else None

    return wait_for(f"{dag_id} {run_id}: {task_id} in {sorted(states)}", current, timeout, interval=1)


# Airflow 3.3 marks a task "killed externally" (a "state mismatch" in the audit log, the task
# failed) when its parked state is answered before the scheduler processed the executor's report
# that the worker parking it exited (the race of apache/airflow#67287, read in the installed
# scheduler; the likely cause of a CI run whose Reject, answered within a second, failed the task).
# A person takes longer than this to answer; the tests wait as long before answering.
ANSWER_SETTLE_SECONDS = 15


def answer_settled(api, dag_id: str, run_id: str, task_id: str) -> None:
    """Wait out the parking race above, then check the task still waits for an answer."""
    time.sleep(ANSWER_SETTLE_SECONDS)
    assert api.task_states(dag_id, run_id).get(task_id) == "awaiting_input", api.task_states(dag_id, run_id)


def replay_apps(stack) -> int:
    """The replay jobs the Spark cluster has completed."""
    names = [a["name"] for a in stack.spark_master_state().get("completedapps", [])]
    return names.count("placsp-dead-letter-replay")


def run_diagnosis(api, dag_id: str, run_id: str) -> str:
    """Task states and the scheduler's state-mismatch events of a run: what a failed assertion shows."""
    try:
        events = api.get("/eventLogs", dag_id=dag_id, run_id=run_id, event="state mismatch").get("event_logs", [])
        mismatches: object = [e.get("extra") for e in events]
    except AssertionError as error:  # the diagnosis must not hide the failure it explains
        mismatches = f"(event log unreadable: {error})"
    return f"tasks {api.task_states(dag_id, run_id)}; state mismatches {mismatches}"


def test_a_rejected_replay_ends_green_and_writes_nothing(daily, api, stack, timings) -> None:
    """Before the approved replay below: a dry run that selects nothing asks nobody (it ends green at
    once), so the person's Reject needs the daily run's 3 quarantined dead letters still there."""
    start = time.monotonic()
    before = dead_letter_statuses(stack.lake, "licitaciones")
    run = api.trigger(REPLAY, conf={"dataset": "licitaciones"}, dag_run_id="system_test_rejected")
    run_id = run["dag_run_id"]
    assert wait_for_state(api, REPLAY, run_id, "approve", {"awaiting_input", "failed"}, 1800) == "awaiting_input"
    answer_settled(api, REPLAY, run_id, "approve")
    api.request(
        "PATCH",
        f"/dags/{REPLAY}/dagRuns/{run_id}/taskInstances/approve/-1/hitlDetails",
        json={"chosen_options": ["Reject"], "params_input": {}},
    )
    assert api.wait_run(REPLAY, run_id, timeout=300) == "success", run_diagnosis(api, REPLAY, run_id)
    assert api.task_states(REPLAY, run_id) == {
        "dry_run": "success",
        "approve": "success",
        "replay": "skipped",
        "quality": "skipped",
    }
    assert dead_letter_statuses(stack.lake, "licitaciones") == before
    timings["rejected replay"] = time.monotonic() - start


def test_replay_from_the_form_with_approval_in_the_browser(daily, api, stack, out, timings) -> None:
    from tests.system.browser import airflow_page
    from tests.system.deployment import COMPOSE_VARIABLES
    from tests.system.stack import wait_for

    start = time.monotonic()
    lake = stack.lake
    apps_before = replay_apps(stack)  # the rejected replay's dry run ran on the cluster too
    fixed = fix_dead_letters_by_hand(lake, "licitaciones")
    assert len(fixed) == 3
    entry_ids_before = silver_entry_ids(lake, "licitaciones")
    recovered_entries = dead_letter_entry_ids(lake, "licitaciones")
    assert len(entry_ids_before) == 2 and recovered_entries and not recovered_entries & entry_ids_before
    shots = out / "screenshots"
    user, password = COMPOSE_VARIABLES["AIRFLOW_ADMIN_USER"], COMPOSE_VARIABLES["AIRFLOW_ADMIN_PASSWORD"]
    with airflow_page(stack.api, user, password, shots) as page:
        # The daily run's grid, its failed gate in red.
        page.goto(f"{stack.api}/dags/{DAILY}/runs/{RUN_ID}/tasks/dead_letters_licitaciones")
        page.get_by_text("dead_letters_licitaciones").first.wait_for()
        page.wait_for_timeout(2000)
        page.screenshot(path=str(shots / "daily_grid_red_gate.png"), full_page=True)

        # The replay form: the list fields are optional (no required mark); narrow to the error type.
        page.goto(f"{stack.api}/dags/{REPLAY}")
        before = {r["dag_run_id"] for r in api.runs(REPLAY)}
        page.get_by_role("button", name="Trigger").first.click()
        dialog = page.get_by_role("dialog")
        dialog.get_by_text("error_types").first.wait_for()
        dialog.locator("textarea").nth(1).fill("unbound_prefix")
        page.screenshot(path=str(shots / "replay_form.png"), full_page=True)
        dialog.get_by_role("button", name="Trigger").last.click()

        def new_run() -> str | None:
            runs = {r["dag_run_id"] for r in api.runs(REPLAY)} - before
            return next(iter(runs), None)

        run_id = wait_for("the replay run the form created", new_run, 60)
        conf = api.run(REPLAY, run_id)["conf"]
        assert conf["dataset"] == "licitaciones" and conf["error_types"] == ["unbound_prefix"]

        # The dry run, then the approval step waiting for a person, its body the dry run's summary.
        state = wait_for_state(api, REPLAY, run_id, "approve", {"awaiting_input", "failed", "upstream_failed"}, 1800)
        assert state == "awaiting_input", api.task_states(REPLAY, run_id)
        assert dead_letter_statuses(lake, "licitaciones") == dict.fromkeys(fixed, "fixed")  # dry run wrote nothing
        answer_settled(api, REPLAY, run_id, "approve")
        page.goto(f"{stack.api}/dags/{REPLAY}/runs/{run_id}/tasks/approve/required_actions")
        page.get_by_text("would be recovered").first.wait_for()
        page.screenshot(path=str(shots / "replay_approval.png"), full_page=True)
        page.get_by_role("button", name="Approve").first.click()
        wait_for_state(api, REPLAY, run_id, "approve", {"success", "failed"}, 120)

    assert api.wait_run(REPLAY, run_id, timeout=1800) == "success", run_diagnosis(api, REPLAY, run_id)
    assert api.task_states(REPLAY, run_id) == {
        "dry_run": "success",
        "approve": "success",
        "replay": "success",
        "quality": "success",  # the data contracts on the replayed rows and the whole tables
    }
    assert api.xcom(REPLAY, run_id, "dry_run")["recovered"] == 3
    assert dead_letter_statuses(lake, "licitaciones") == dict.fromkeys(fixed, "replayed")

    # Every entry of the day is now in Silver: the two that parsed, and the one the fix recovered.
    assert silver_entry_ids(lake, "licitaciones") == entry_ids_before | recovered_entries
    assert replay_apps(stack) == apps_before + 2  # the dry run and the replay, on the cluster
    timings["replay with approval"] = time.monotonic() - start


# -- lineage of everything above -------------------------------------------------------------


def test_every_lineage_event_over_http_is_valid(daily, stack) -> None:
    receiver = stack.lineage
    assert receiver.invalid == []
    jobs = {e["job"]["name"] for e in receiver.events}
    assert {f"{DAILY}.silver_{d}" for d in DATASETS} <= jobs
    assert {f"{REPLAY}.dry_run", f"{REPLAY}.approve", f"{REPLAY}.replay"} <= jobs
    # The Spark jobs' own listener sent theirs to the same endpoint (named after the job's appName).
    assert any(name.startswith("placsp_silver") for name in jobs), sorted(jobs)
    assert any(name.startswith("placsp_replay") for name in jobs), sorted(jobs)


def test_the_lake_secret_is_in_no_log_event_or_object(daily, stack) -> None:
    secret = stack.secret.encode()
    assert len(secret) >= 16  # the run's own value (conftest.py), not a default a log could hold by chance
    folders = (stack.logs, stack.paths.home / "logs", stack.paths.spark_work)
    leaks = [str(p) for f in folders for p in f.rglob("*") if p.is_file() and secret in p.read_bytes()]
    leaks += [e["job"]["name"] for e in stack.lineage.events if stack.secret in json.dumps(e)]
    objects = [p for p in stack.lake.rglob("*") if p.is_file()]
    assert len(objects) > 20, "the lake holds too little for this check to mean anything"
    leaks += [str(p) for p in objects if secret in p.read_bytes()]
    assert not leaks, f"the lake's secret key is in {leaks}"
