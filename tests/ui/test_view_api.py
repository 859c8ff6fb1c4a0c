"""The PLACSP view's dead-letter pages and summary API, through Airflow's own API app.

A real `create_app()` serves the plugin at `/placsp`; users log in through SimpleAuthManager's real
`/auth/token`; the lake is written by the provider's delta-rs ingest of real pages (tests/ui/conftest.py).
Every expected number is counted here with DuckDB over the Delta table read by deltalake, never taken
from the view's own code.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from placsp_provider.datasets import DATASETS
from tests.ui.conftest import UI_RUN_ID

pytestmark = pytest.mark.airflow

STATUSES = ("quarantined", "fixed", "replayed", "abandoned")
ABANDONED_ID_INDEX = 0  # which licitaciones dead letter (ordered by id) the module marks abandoned
_MINE = (200, 401, 403)
_OTHERS = (401, 403, 404)  # the other pages of the view (branch issue35b): not on this branch, 404 here
ROUTES = [
    pytest.param("/placsp/", _MINE, id="overview"),
    pytest.param("/placsp/dead-letters?dataset=licitaciones", _MINE, id="browser"),
    pytest.param("/placsp/dead-letters/{id}/raw", _MINE, id="raw"),
    pytest.param("/placsp/api/summary?dataset=licitaciones", _MINE, id="summary"),
    pytest.param("/placsp/replay?dataset=licitaciones", _OTHERS, id="replay"),
    pytest.param("/placsp/quality?dataset=licitaciones", _OTHERS, id="quality"),
    pytest.param("/placsp/completeness", _OTHERS, id="completeness"),
]


# -- the expected numbers, from the table itself ------------------------------------------------
def table_sql(lake: Path, sql: str, params: list | None = None) -> list[tuple]:
    """`sql` over the lake's dead letters as `dl` (DuckDB over deltalake's own Arrow read)."""
    import duckdb
    from deltalake import DeltaTable

    dl = DeltaTable(str(lake / "dead_letters")).to_pyarrow_table()  # noqa: F841 - DuckDB reads it by name
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        return con.execute(sql, params or []).fetchall()


def count(lake: Path, where: str, params: list | None = None) -> int:
    return table_sql(lake, f"SELECT count(*) FROM dl WHERE {where}", params)[0][0]


@pytest.fixture(scope="module", autouse=True)
def one_abandoned(ui_lake: Path) -> str:
    """One licitaciones dead letter abandoned after 3 attempts (the replay's write, made here with
    delta-rs), so the backlog and the status filter have two statuses to tell apart."""
    from deltalake import DeltaTable

    ids = [r[0] for r in table_sql(ui_lake, "SELECT dead_letter_id FROM dl WHERE dataset = 'licitaciones' ORDER BY 1")]
    chosen = ids[ABANDONED_ID_INDEX]
    DeltaTable(str(ui_lake / "dead_letters")).update(
        predicate=f"dead_letter_id = '{chosen}'", updates={"status": "'abandoned'", "attempts": "3"}
    )
    return chosen


def get(client, url: str, token: str | None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return client.get(url, headers=headers)


def html(response):
    import lxml.html

    assert response.status_code == 200, response.text[:500]
    return lxml.html.fromstring(response.text)


def any_id(lake: Path) -> str:
    return table_sql(lake, "SELECT min(dead_letter_id) FROM dl")[0][0]


# -- access ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("route", "allowed"), ROUTES)
@pytest.mark.parametrize(("who", "expected"), [(None, 401), ("outsider", 403), ("bad-token", 403)])
def test_no_data_without_the_right_to_read_the_placsp_dags(ui_client, tokens, ui_lake, route, allowed, who, expected):
    token = {None: None, "bad-token": "not-a-jwt"}.get(who, tokens.get(who or ""))
    response = get(ui_client, route.format(id=any_id(ui_lake)), token)
    assert response.status_code in allowed and response.status_code != 200
    if allowed is _MINE:
        assert response.status_code == expected, response.text
        assert response.headers["cache-control"] == "no-store"
    # Nothing of the lake: no dataset's numbers, no error type, no file, no record.
    for leak in ("unbound_prefix", "invalid_amount", "bronze/", "<entry", "backlog", "sindicacion"):
        assert leak not in response.text


@pytest.mark.parametrize("route", [p.values[0] for p in ROUTES if p.values[1] is _MINE])
def test_viewer_and_admin_may_read(ui_client, tokens, ui_lake, route):
    for user in ("viewer", "admin"):
        response = get(ui_client, route.format(id=any_id(ui_lake)), tokens[user])
        assert response.status_code == 200, (user, response.text[:300])
        assert response.headers["cache-control"] == "no-store"


# -- the overview and the summary API ------------------------------------------------------------
def expected_daily(lake: Path, dataset: str, days: int) -> dict[tuple[str, str], int]:
    since = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=days - 1)
    rows = table_sql(
        lake,
        "SELECT strftime(CAST(processing_timestamp AS DATE), '%Y-%m-%d'), error_type, count(*) FROM dl "
        "WHERE dataset = ? AND processing_timestamp >= ? GROUP BY ALL",
        [dataset, since],
    )
    return {(d, t): n for d, t, n in rows}


def expected_backlog(lake: Path, dataset: str) -> dict[str, int]:
    return {s: count(lake, "dataset = ? AND status = ?", [dataset, s]) for s in STATUSES}


def test_overview_shows_the_tables_numbers(ui_client, tokens, ui_lake, monkeypatch):
    monkeypatch.setenv("PLACSP_DEAD_LETTER_MAX_RATIO", "0.07")  # what the gate reads (settings)
    doc = html(get(ui_client, "/placsp/", tokens["viewer"]))
    assert str(ui_lake) in doc.get_element_by_id("lake").text_content()
    assert sorted(s.get("data-dataset") for s in doc.xpath("//section[@class='dataset']")) == sorted(DATASETS)
    assert doc.xpath("//a[@href='quality']") and doc.xpath("//a[@href='completeness']")
    seen_letters = 0
    for key in DATASETS:
        (section,) = doc.xpath(f"//section[@data-dataset='{key}']")
        backlog = {td.get("data-status"): int(td.text) for td in section.xpath(".//table[@class='backlog']//td")}
        assert backlog == expected_backlog(ui_lake, key)
        assert section.xpath(".//span[@class='gate-threshold']")[0].text == "0.07"
        daily = expected_daily(ui_lake, key, 30)
        rects = {
            (r.get("data-day"), r.get("data-error-type")): int(r.get("data-count"))
            for r in section.xpath(".//*[local-name()='svg'][@class='daily']/*[local-name()='rect']")
        }
        rows = {
            (tr.get("data-day"), tr.get("data-error-type")): int(tr.xpath("td[@class='count']")[0].text)
            for tr in section.xpath(".//table[@class='daily-table']//tr[@data-day]")
        }
        assert rects == rows == daily
        assert section.xpath(f".//a[@class='browse'][@href='dead-letters?dataset={key}']")
        seen_letters += sum(backlog.values())
    assert seen_letters == count(ui_lake, "TRUE") == 6  # the module's lake: 3 + 3 dead letters


def test_backlog_tells_the_statuses_apart(ui_client, tokens, ui_lake):
    found = get(ui_client, "/placsp/api/summary?dataset=licitaciones", tokens["viewer"]).json()
    assert found["backlog"] == expected_backlog(ui_lake, "licitaciones")
    assert found["backlog"]["abandoned"] == 1 and found["backlog"]["quarantined"] == 2


@pytest.mark.parametrize("dataset", ["licitaciones", "agregadas", "menores"])
def test_summary_api(ui_client, tokens, ui_lake, dataset):
    found = get(ui_client, f"/placsp/api/summary?dataset={dataset}&days=7", tokens["admin"]).json()
    assert found["backlog"] == expected_backlog(ui_lake, dataset)
    assert {(r["day"], r["error_type"]): r["count"] for r in found["daily"]} == expected_daily(ui_lake, dataset, 7)
    assert found["gate_max_ratio"] == 0.05  # settings' default: no PLACSP_DEAD_LETTER_MAX_RATIO here
    assert get(ui_client, "/placsp/api/summary?dataset=nope", tokens["admin"]).status_code == 404


# -- the browser -----------------------------------------------------------------------------------
def matching(ui_client, tokens, query: str) -> tuple[int, list]:
    doc = html(get(ui_client, "/placsp/dead-letters?" + query, tokens["viewer"]))
    rows = doc.xpath("//table[@id='dead-letters']//tr[@data-dead-letter-id]")
    return int(doc.get_element_by_id("matching").text), rows


# `{day}` is the UTC day the query's dataset was ingested, read from the table (`run_day`): the
# clock's day at collection is wrong for a module that runs across midnight, as CI's once did.
FILTERS = [
    ("dataset=agregadas", "dataset = 'agregadas'"),
    ("dataset=agregadas&error_type=invalid_amount", "dataset = 'agregadas' AND error_type = 'invalid_amount'"),
    (
        "dataset=agregadas&error_type=invalid_amount&error_type=invalid_timestamp",
        "dataset = 'agregadas' AND error_type IN ('invalid_amount', 'invalid_timestamp')",
    ),
    ("dataset=licitaciones&status=abandoned", "dataset = 'licitaciones' AND status = 'abandoned'"),
    ("dataset=licitaciones&status=quarantined", "dataset = 'licitaciones' AND status = 'quarantined'"),
    ("dataset=agregadas&stage=validation", "dataset = 'agregadas' AND stage = 'validation'"),
    ("dataset=licitaciones&stage=validation", "dataset = 'licitaciones' AND stage = 'validation'"),
    (
        "dataset=licitaciones&day={day}",
        "dataset = 'licitaciones' AND CAST(processing_timestamp AS DATE) = '{day}'",
    ),
    (
        "dataset=licitaciones&day={day_before}",
        "dataset = 'licitaciones' AND CAST(processing_timestamp AS DATE) = '{day_before}'",
    ),
    ("dataset=agregadas&since={day}&until={day}", "dataset = 'agregadas'"),
]


@pytest.fixture(scope="module")
def run_day(ui_lake) -> dict[str, date]:
    """Each dataset's ingest day (UTC), from its dead letters' `processing_timestamp`: one run each."""
    days = table_sql(ui_lake, "SELECT dataset, CAST(processing_timestamp AS DATE) FROM dl GROUP BY ALL")
    assert len(days) == len({d for d, _ in days}) == 2
    return dict(days)


def on_run_day(query: str, where: str, run_day: dict[str, date]) -> tuple[str, str]:
    """A FILTERS pair with `{day}` and `{day_before}` set from the query's dataset's ingest day."""
    day = run_day[parse_qs(query)["dataset"][0]]
    days = {"day": day, "day_before": day - timedelta(days=1)}
    return query.format(**days), where.format(**days)


@pytest.mark.parametrize(("query", "where"), FILTERS)
def test_filters_narrow_the_count(ui_client, tokens, ui_lake, run_day, query, where):
    query, where = on_run_day(query, where, run_day)
    found, rows = matching(ui_client, tokens, query)
    expected = count(ui_lake, where)
    assert found == len(rows) == expected
    assert {r.get("data-dead-letter-id") for r in rows} == {
        r[0] for r in table_sql(ui_lake, f"SELECT dead_letter_id FROM dl WHERE {where}")
    }


def test_the_filters_do_narrow(ui_lake, run_day):
    """The filters above are not all the same count: each of them can fail on its own."""
    counts = [count(ui_lake, on_run_day(query, where, run_day)[1]) for query, where in FILTERS]
    assert counts == [3, 2, 3, 1, 2, 3, 0, 3, 0, 3]


def test_rows_show_what_the_table_holds(ui_client, tokens, ui_lake, one_abandoned):
    _, rows = matching(ui_client, tokens, "dataset=licitaciones")
    stored = {
        r[0]: r[1:]
        for r in table_sql(
            ui_lake,
            "SELECT dead_letter_id, error_type, stage, status, error_message, source_file, entry_id, attempts, run_id "
            "FROM dl WHERE dataset = 'licitaciones'",
        )
    }
    assert len(rows) == len(stored) == 3
    for row in rows:
        dl_id = row.get("data-dead-letter-id")
        cells = [row.xpath(f"td[@class='{c}']")[0].text_content() for c in ("error-type", "stage", "status")]
        cells += [row.xpath(f"td[@class='{c}']")[0].text_content() for c in ("error-message", "source-file")]
        cells += [row.xpath("td[@class='entry-id']")[0].text_content() or None]
        cells += [int(row.xpath("td[@class='attempts']")[0].text_content())]
        assert tuple(cells) == stored[dl_id][:7]
        run = f"../dags/placsp_daily/runs/{quote(UI_RUN_ID, safe='')}"
        assert row.xpath(f"td[@class='run']/a[@href='{run}']")
        assert row.xpath(f"td[@class='run']/a[@href='{run}/tasks/silver_licitaciones']")
        (raw,) = row.xpath("td/a[@class='raw']")
        assert raw.get("href").startswith(f"dead-letters/{dl_id}/raw")
    assert stored[one_abandoned][2] == "abandoned" and stored[one_abandoned][6] == 3  # status, attempts


def test_pages(ui_client, tokens, ui_lake):
    doc = html(get(ui_client, "/placsp/dead-letters?dataset=licitaciones&page_size=2", tokens["viewer"]))
    first = [r.get("data-dead-letter-id") for r in doc.xpath("//tr[@data-dead-letter-id]")]
    assert len(first) == 2 and not doc.xpath("//a[@id='prev']")
    (nxt,) = doc.xpath("//a[@id='next']")
    assert parse_qs(urlsplit(nxt.get("href")).query) == {"dataset": ["licitaciones"], "page_size": ["2"], "page": ["2"]}
    doc = html(get(ui_client, "/placsp/" + nxt.get("href"), tokens["viewer"]))
    second = [r.get("data-dead-letter-id") for r in doc.xpath("//tr[@data-dead-letter-id]")]
    assert len(second) == 1 and doc.xpath("//a[@id='prev']") and not doc.xpath("//a[@id='next']")
    assert int(doc.get_element_by_id("matching").text) == 3
    assert set(first) | set(second) == {
        r[0] for r in table_sql(ui_lake, "SELECT dead_letter_id FROM dl WHERE dataset = 'licitaciones'")
    }
    too_big = get(ui_client, "/placsp/dead-letters?dataset=licitaciones&page_size=501", tokens["viewer"])
    assert too_big.status_code == 422


def test_replay_these_carries_the_filter(ui_client, tokens, run_day):
    day = run_day["agregadas"]
    doc = html(
        get(
            ui_client,
            f"/placsp/dead-letters?dataset=agregadas&error_type=invalid_amount&since={day}&until={day}",
            tokens["viewer"],
        )
    )
    (link,) = doc.xpath("//a[@id='replay-these']")
    href = urlsplit(link.get("href"))
    assert href.path == "replay"
    assert parse_qs(href.query) == {
        "dataset": ["agregadas"],
        "error_types": ["invalid_amount"],
        "since": [str(day)],
        "until": [str(day)],
    }


# -- one raw record --------------------------------------------------------------------------------
def test_raw_record_is_text_never_markup(ui_client, tokens, ui_lake):
    dl_id, raw, message = table_sql(
        ui_lake, "SELECT dead_letter_id, raw_record, error_message FROM dl WHERE dataset = 'licitaciones' ORDER BY 1"
    )[0]
    assert "<entry" in raw  # the record is XML: its `<` must arrive as text
    response = get(ui_client, f"/placsp/dead-letters/{dl_id}/raw", tokens["viewer"])
    doc = html(response)
    pre = doc.get_element_by_id("raw-record")
    assert len(pre) == 0 and pre.text_content() == raw  # no element inside: every tag arrived escaped
    assert doc.get_element_by_id("error-message").text_content() == message
    assert "&lt;entry" in response.text and "<entry" not in response.text
    unknown = get(ui_client, f"/placsp/dead-letters/{'0' * 64}/raw", tokens["viewer"])
    assert unknown.status_code == 404 and "<entry" not in unknown.text


# -- bad states ------------------------------------------------------------------------------------
def message_of(response) -> str:
    (p,) = html(response).xpath("//p[@class='placsp-message']")
    return p.text_content()


@pytest.mark.parametrize(
    "route", ["/placsp/", "/placsp/dead-letters?dataset=licitaciones", "/placsp/dead-letters/{id}/raw"]
)
def test_a_missing_lake_or_table_is_a_sentence(ui_client, tokens, ui_lake, tmp_path, monkeypatch, route):
    url = route.format(id=any_id(ui_lake))
    monkeypatch.setenv("PLACSP_LAKE", str(tmp_path / "nowhere"))
    assert message_of(get(ui_client, url, tokens["viewer"])).startswith(f"There is no lake at {tmp_path / 'nowhere'}")
    summary = get(ui_client, "/placsp/api/summary?dataset=licitaciones", tokens["viewer"])
    assert summary.status_code == 200 and "There is no lake" in summary.json()["message"]
    empty = tmp_path / "empty-lake"
    empty.mkdir()
    monkeypatch.setenv("PLACSP_LAKE", str(empty))
    assert "has no dead_letters table yet" in message_of(get(ui_client, url, tokens["viewer"]))


def test_an_empty_dataset_is_a_sentence(ui_client, tokens, ui_lake):
    assert count(ui_lake, "dataset = 'menores'") == 0
    doc = html(get(ui_client, "/placsp/", tokens["viewer"]))
    (section,) = doc.xpath("//section[@data-dataset='menores']")
    assert "No dead letters in dataset menores" in section.xpath(".//p[@class='placsp-message']")[0].text_content()
    assert [td.text for td in section.xpath(".//table[@class='backlog']//td")] == ["0"] * 4
    (other,) = doc.xpath("//section[@data-dataset='licitaciones']")
    assert not other.xpath(".//p[@class='placsp-message']")
    response = get(ui_client, "/placsp/dead-letters?dataset=menores", tokens["viewer"])
    assert message_of(response) == "No dead letters in dataset menores."
    narrowed = get(ui_client, "/placsp/dead-letters?dataset=licitaciones&error_type=nope", tokens["viewer"])
    assert message_of(narrowed) == "No dead letter of dataset licitaciones matches this filter."
