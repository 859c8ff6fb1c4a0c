"""The PLACSP view's "Replay these" form, quality and completeness pages, served by the real Airflow
API app (`ui_client`, tests/ui/conftest.py: real SimpleAuthManager logins and JWTs) over a real
lake: the bundled licitaciones pages landed and ingested by the provider's own delta-rs ingest, a
real data-contract check on them, the volume check's own results, and a real completeness check
over HTTP on loopback (tests/hidden_page_site.py).

Expected numbers are read from what the pipeline wrote (DuckDB over the Delta files, the report's
JSON), never from the view; the trigger is Airflow's own endpoint, its run's conf read back from it.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.airflow.conftest import airflow_db  # noqa: F401 - the session's migrated SQLite DB
from tests.pages import licitaciones_samples

pytestmark = pytest.mark.airflow

REPLAY = "placsp_dead_letter_replay"
PAGES = ("replay", "quality?dataset=licitaciones", "completeness")
SINCE = "2022-01-01"


def _get(client: Any, tokens: dict[str, str], user: str | None, url: str) -> Any:
    headers = {"Authorization": f"Bearer {tokens[user]}"} if user else {}
    return client.get(f"/placsp/{url}", headers=headers)


def _html(text: str) -> Any:
    import lxml.html

    return lxml.html.fromstring(text)


@pytest.fixture(scope="module")
def replay_dag_in_db(airflow_db) -> Any:  # noqa: F811 - the fixture above
    """The replay DAG serialized into the metadata DB, as the DAG processor does (the API triggers
    only DAGs it knows)."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db

    import placsp_provider.dags

    DagBundlesManager().sync_bundles_to_db()
    bag = DagBag(dag_folder=str(Path(placsp_provider.dags.__file__).parent / f"{REPLAY}.py"))
    assert not bag.import_errors and REPLAY in bag.dags
    sync_bag_to_db(bag, "dags-folder", None)
    return bag.dags[REPLAY]


@pytest.fixture(scope="module")
def triggered_replay(ui_client, tokens, replay_dag_in_db) -> dict[str, Any]:
    """The admin sends exactly the request the "Replay these" page's script sends, unedited: built by
    the function that renders it, for the filter of the test below."""
    from placsp_provider.ui.replay_form import form_fields, trigger_body, trigger_url

    body = trigger_body(form_fields({"dataset": ["licitaciones"], "error_types": ["unbound_prefix"], "since": [SINCE]}))
    answer = ui_client.post(trigger_url(""), json=body, headers={"Authorization": f"Bearer {tokens['admin']}"})
    assert answer.status_code == 200, answer.text
    return {"body": body, "run_id": answer.json()["dag_run_id"]}


@pytest.fixture(scope="module")
def reports_lake(tmp_path_factory, triggered_replay) -> Path:
    """Licitaciones landed and ingested (delta-rs), checked against its contracts by the run the
    admin triggered; the volume check's results of three days; agregadas' January 2022 checked
    against its archive, with a page the daily walks missed."""
    from placsp_provider.bronze.completeness import CompletenessRequest, check_month
    from placsp_provider.datasets import get_dataset
    from placsp_provider.demo.loopback_site import LoopbackSite
    from placsp_provider.feed.client import ClientConfig, FeedClient
    from placsp_provider.ingest.request import IngestRequest
    from placsp_provider.ingest.run import ingest
    from placsp_provider.quality.results import append_results
    from placsp_provider.quality.run import check_dataset
    from placsp_provider.quality.volume import VolumeCheck
    from tests.hidden_page_site import AGR, daily_runs, serve_hidden_page_site
    from tests.spark.bronze import land

    lake = tmp_path_factory.mktemp("view-reports") / "lake"
    land(lake, "licitaciones", licitaciones_samples())
    run_id = triggered_replay["run_id"]
    ingest(IngestRequest(get_dataset("licitaciones"), lake, "ingest-run"), "delta-rs")
    check_dataset(lake, "licitaciones", run_id=run_id)
    common = {"dataset": "licitaciones", "severity": "warn", "interval_width": 0.99, "history_days": 40}
    volume = [
        VolumeCheck(day="2026-03-02", count=180, status="ok", lower=120.4, upper=260.6, **common),
        VolumeCheck(day="2026-03-04", count=0, status="skipped", reason="no complete ingest", covered=False, **common),
        # checked last: the volume rule's latest result is this anomaly (a failed warn rule)
        VolumeCheck(day="2026-03-03", count=12, status="anomaly", lower=130.2, upper=250.9, **common),
    ]
    for minute, check in enumerate(volume):
        at = datetime(2026, 3, 5, 6, minute, tzinfo=UTC)
        append_results(lake, f"cli-volume-{minute}", [check.to_rule_result()], at)
    with LoopbackSite() as site:
        serve_hidden_page_site(site)
        daily_runs(site, lake)
        config = ClientConfig(base_url=site.base_url, backoff_base=0.0, max_retries=0)
        with FeedClient(config, "agregadas") as client:
            check_month(
                client, CompletenessRequest(AGR, date(2022, 1, 1), lake, "completeness-1", today=date(2026, 11, 29))
            )
    return lake


@pytest.mark.parametrize("page", PAGES)
def test_anonymous_and_outsiders_get_no_data(ui_client, tokens, reports_lake, monkeypatch, page) -> None:
    monkeypatch.setenv("PLACSP_LAKE", str(reports_lake))
    anonymous = _get(ui_client, tokens, None, page)
    assert anonymous.status_code == 401 and anonymous.json() == {"detail": "Not authenticated"}
    outsider = _get(ui_client, tokens, "outsider", page)
    assert outsider.status_code == 403 and outsider.json() == {"detail": "Forbidden"}
    # and the same page is there for a reader: the refusals above are about the user, not the page
    assert _get(ui_client, tokens, "viewer", page).status_code == 200


def _form_values(form: Any) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for field in form.xpath(".//input|.//select|.//textarea"):
        name = field.get("name")
        if field.tag == "select":
            values[name] = [o.get("value") for o in field.xpath(".//option[@selected]")]
        elif field.tag == "textarea":
            values[name] = field.text_content().split()
        elif field.get("type") == "checkbox":
            values[name] = field.get("checked") is not None
        else:
            values[name] = field.get("value")
    return values


def test_replay_form_is_prefilled_with_the_filter_under_the_dags_own_param_names(
    ui_client, tokens, replay_dag_in_db
) -> None:
    url = f"replay?dataset=licitaciones&error_types=unbound_prefix&since={SINCE}"
    page = _get(ui_client, tokens, "admin", url)
    assert page.status_code == 200 and page.headers["cache-control"] == "no-store"
    form = _html(page.text).get_element_by_id("replay-form")
    values = _form_values(form)
    assert set(values) == set(replay_dag_in_db.params)  # one field per param, named as the param
    assert values["dataset"] == ["licitaciones"]
    assert values["error_types"] == ["unbound_prefix"]
    assert values["since"] == SINCE
    assert values["until"] == "" and values["dead_letter_ids"] == []
    defaults = replay_dag_in_db.params.dump()
    assert values["max_records"] == str(defaults["max_records"]) and values["dry_run"] is defaults["dry_run"]
    # The request the script starts from is the one the trigger test below sends.
    request = json.loads(form.get("data-request"))
    assert request["logical_date"] is None and request["conf"]["error_types"] == ["unbound_prefix"]
    assert form.get("data-api") == f"/api/v2/dags/{REPLAY}/dagRuns"
    assert form.xpath(".//button[@id='trigger-replay']")


def test_a_viewer_sees_why_there_is_no_trigger_button(ui_client, tokens) -> None:
    page = _get(ui_client, tokens, "viewer", "replay?dataset=licitaciones")
    assert page.status_code == 200
    tree = _html(page.text)
    assert not tree.xpath("//button[@id='trigger-replay']") and not tree.xpath("//script")
    assert "not trigger" in tree.get_element_by_id("no-trigger").text_content()


def test_the_forms_request_triggers_the_replay_with_exactly_its_conf(ui_client, tokens, triggered_replay) -> None:
    url = f"/api/v2/dags/{REPLAY}/dagRuns/{triggered_replay['run_id']}"
    run = ui_client.get(url, headers={"Authorization": f"Bearer {tokens['admin']}"})
    assert run.status_code == 200, run.text
    assert run.json()["conf"] == triggered_replay["body"]["conf"]
    assert run.json()["conf"]["error_types"] == ["unbound_prefix"] and run.json()["conf"]["since"] == SINCE
    assert run.json()["note"] == "from the PLACSP view"


def _expected_rules(lake: Path) -> dict[str, dict[str, Any]]:
    """The newest row per (table, rule) of licitaciones, by DuckDB over the table's files."""
    import duckdb
    from deltalake import DeltaTable

    source = DeltaTable(str(lake / "quality_results")).to_pyarrow_dataset()
    with duckdb.connect() as con:
        con.register("q", source)
        rows = con.execute(
            "SELECT rule_id, arg_max(success, checked_at), arg_max(severity, checked_at), "
            "arg_max(expected, checked_at), arg_max(actual, checked_at), arg_max(run_id, checked_at) "
            "FROM q WHERE dataset = 'licitaciones' GROUP BY table_name, rule_id"
        ).fetchall()
    out = {}
    for rule, success, severity, expected, actual, run_id in rows:
        status = "pass" if success else ("warn" if severity == "warn" else "fail")
        out[rule] = {"status": status, "expected": expected, "actual": actual, "run_id": run_id}
    return out


def test_quality_shows_every_rules_latest_result_and_the_volume_band(
    ui_client, tokens, reports_lake, triggered_replay, monkeypatch
) -> None:
    monkeypatch.setenv("PLACSP_LAKE", str(reports_lake))
    page = _get(ui_client, tokens, "viewer", "quality?dataset=licitaciones")
    assert page.status_code == 200 and page.headers["cache-control"] == "no-store"
    tree = _html(page.text)
    expected = _expected_rules(reports_lake)
    shown = {tr.get("data-rule"): tr for tr in tree.xpath("//table[@id='rules']//tr[@data-rule]")}
    assert set(shown) == set(expected) and len(shown) > 10
    assert {e["status"] for e in expected.values()} >= {"pass", "warn"}  # the page is tested on both
    for rule, want in expected.items():
        row = shown[rule]
        assert row.xpath("string(td[@class='status'])") == want["status"], rule
        assert row.xpath("string(td[@class='expected'])") == want["expected"], rule
        actual = row.xpath("string(td[@class='actual'])").replace(",", "")
        assert (float(actual) if actual else None) == want["actual"], rule
    # the contract rules link the run that checked them, and its quality task's log
    run = quote(triggered_replay["run_id"], safe="")
    checked = [r for r, want in expected.items() if want["run_id"] == triggered_replay["run_id"]]
    assert checked
    for rule in checked:
        links = shown[rule].xpath("td[@class='run']/a/@href")
        assert links == [f"../dags/{REPLAY}/runs/{run}", f"../dags/{REPLAY}/runs/{run}/tasks/quality"], rule
    # the volume rows' run (a CLI run id, no DAG run) has no link
    assert not shown["entries_volume"].xpath("td[@class='run']/a")
    volume = {tr.get("data-day"): tr for tr in tree.xpath("//table[@id='volume']//tr[@data-day]")}
    assert list(volume) == ["2026-03-04", "2026-03-03", "2026-03-02"]

    def cells(day: str) -> list[str]:
        return [volume[day].xpath(f"string(td[@class='{c}'])") for c in ("count", "lower", "upper", "anomaly")]

    assert cells("2026-03-02") == ["180", "120", "261", "no"]
    assert cells("2026-03-03") == ["12", "130", "251", "yes"]
    assert cells("2026-03-04") == ["", "", "", "no"]


def test_completeness_shows_each_month_and_its_gap_days(ui_client, tokens, reports_lake, monkeypatch) -> None:
    from placsp_provider.lake import completeness_report_path

    monkeypatch.setenv("PLACSP_LAKE", str(reports_lake))
    page = _get(ui_client, tokens, "viewer", "completeness")
    assert page.status_code == 200
    saved = json.loads(completeness_report_path(reports_lake, "agregadas", date(2022, 1, 1)).read_text())
    gaps = sorted(d for d, c in saved["days"].items() if c["recovered"])
    assert gaps == ["2022-01-04"]  # the hidden page's day (tests/hidden_page_site.py)
    (row,) = _html(page.text).xpath("//table[@id='completeness']//tr[@data-month]")
    assert (row.get("data-month"), row.get("data-dataset")) == ("2022-01", "agregadas")
    got = [row.xpath(f"string(td[@class='{c}'])") for c in ("published", "landed", "recovered", "gap-days")]
    assert got == [str(saved["published"]), str(saved["landed_before"]), str(saved["recovered"]), ", ".join(gaps)]


@pytest.mark.parametrize("page", ["quality?dataset=licitaciones", "completeness"])
def test_bad_states_are_a_sentence(ui_client, tokens, tmp_path, monkeypatch, page) -> None:
    def message(lake: Path) -> tuple[int, str]:
        monkeypatch.setenv("PLACSP_LAKE", str(lake))
        answer = _get(ui_client, tokens, "viewer", page)
        (p,) = _html(answer.text).xpath("//p[@class='placsp-message']")
        return answer.status_code, p.text_content()

    missing = tmp_path / "no-lake"
    status, text = message(missing)
    assert status == 200 and str(missing) in text and "There is no lake at" in text
    empty = tmp_path / "empty-lake"
    empty.mkdir()
    status, text = message(empty)
    assert status == 200 and ("has no quality_results table yet" in text or "No completeness report" in text)


def test_a_dataset_without_results_and_an_unknown_dataset_are_a_sentence(
    ui_client, tokens, reports_lake, monkeypatch
) -> None:
    monkeypatch.setenv("PLACSP_LAKE", str(reports_lake))
    answer = _get(ui_client, tokens, "viewer", "quality?dataset=menores")
    assert answer.status_code == 200
    assert "for menores yet" in _html(answer.text).xpath("string(//p[@class='placsp-message'])")
    unknown = _get(ui_client, tokens, "viewer", "quality?dataset=%3Cb%3Ex")
    assert unknown.status_code == 404 and "<b>x" not in unknown.text and "&lt;b&gt;x" in unknown.text


def test_a_table_being_rewritten_is_read_again_then_a_sentence(monkeypatch) -> None:
    from placsp_provider.ui import view_state

    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise FileNotFoundError("part-0001.parquet")  # a file a commit removed meanwhile
        return "read"

    assert view_state.read_twice(flaky, what="t") == "read" and len(calls) == 2

    def gone() -> str:
        raise FileNotFoundError("part-0001.parquet")

    with pytest.raises(view_state.ViewStateError, match="another run may be writing") as problem:
        view_state.read_twice(gone, what="quality_results")
    assert problem.value.status_code == 200

    def bug() -> str:
        raise TypeError("a bug in the view, not the lake")

    with pytest.raises(TypeError):  # never dressed up as a busy table
        view_state.read_twice(bug, what="quality_results")
