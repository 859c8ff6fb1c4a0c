"""Completeness never confirms from an archive that cannot account for the month, over real HTTP on
loopback: a yearly archive with no page of January, one without a day's page, one whose copy of a
page lacks an entry Bronze holds, each against a Bronze that the daily runs filled from the live
chain. The check fails by name (library, CLI, operator), writes a report that does not say
confirmed, and loses nothing (what the archive held that Bronze lacked is still landed).

A monthly archive cannot hold the month's last hours (they are on the next month's first page): what
Bronze holds after such an archive's last page is reported, not unaccounted, unless the archive stops
days before the month's end.

Expected numbers come from the sites' construction (tests/hidden_page_site.py and the month-end site
below), never from the check's own report alone.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import zipfile
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from placsp_provider.bronze.completeness import ArchiveIncompleteError, CompletenessRequest, check_month
from placsp_provider.bronze.extract import ExtractRequest, extract_interval
from placsp_provider.bronze.manifest import Manifest
from placsp_provider.demo.loopback_site import LoopbackSite, Reply
from placsp_provider.errors import PlacspError
from placsp_provider.feed.client import ClientConfig, FeedClient
from placsp_provider.lake import completeness_manifest_path, completeness_report_path
from tests.hidden_page_site import AGR, FOLDER, HIDDEN_DAY, daily_runs, serve_hidden_page_site
from tests.pages import page

pytestmark = pytest.mark.http

TODAY = date(2026, 11, 29)
JANUARY = date(2022, 1, 1)
YEARLY = FOLDER + "PlataformasAgregadasSinMenores_2022.zip"
# Bronze after the daily runs of the hidden-page site, by day (tests/hidden_page_site.py: each day's
# page holds an entry at 20:00 and an entry and a tombstone at 01:00, the head's reach back to Jan 6).
BRONZE_BY_DAY = {"01": 3, "02": 3, "03": 3, "04": 3, "05": 3, "06": 2, "07": 1}


def _stamp(d: int, month: int = 1) -> str:
    return f"PlataformasAgregadasSinMenores_2022{month:02d}{d:02d}_030000.atom"


def _zip(members: dict[str, bytes]) -> Reply:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, body in members.items():
            archive.writestr(name, body)
    return Reply(buf.getvalue(), content_type="application/zip")


def _february() -> dict[str, bytes]:
    """Two pages of February: what a yearly archive holds after January."""
    return {
        _stamp(d, 2): page([(200 + d, f"2022-02-{d - 1:02d}T12:00:00.000+00:00")], self_href=_stamp(d, 2))
        for d in (11, 12)
    }


def _whole_january_in_bronze(site: LoopbackSite, lake: Path) -> dict[str, bytes]:
    """The hidden-page site with the hidden page linked back in: the daily runs land all 18 records."""
    members = serve_hidden_page_site(site)
    for d in (HIDDEN_DAY + 1, HIDDEN_DAY):
        site.routes[FOLDER + _stamp(d)] = members[_stamp(d)]
    daily_runs(site, lake, today=TODAY)
    return members


def _client(site: LoopbackSite) -> FeedClient:
    return FeedClient(ClientConfig(base_url=site.base_url, backoff_base=0.0, max_retries=0), "agregadas")


def _check(site: LoopbackSite, lake: Path, month: date = JANUARY, today: date = TODAY):
    with _client(site) as client:
        return check_month(client, CompletenessRequest(AGR, month, lake, "check-1", today=today))


def _bronze_files(lake: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted((lake / "bronze").rglob("*.atom"))}


def _saved_report(lake: Path, month: date = JANUARY) -> dict:
    return json.loads(completeness_report_path(lake, "agregadas", month).read_text())


def _by_day(counts: dict[str, int]) -> str:
    return ", ".join(f"2022-01-{d}: {n}" for d, n in counts.items())


# -- a yearly archive without the month ------------------------------------------------------------
@pytest.mark.parametrize(
    ("archive", "pages", "read"),
    [(_february, 2, 1), (dict, 0, 0)],
    ids=["only-later-pages", "no-page-at-all"],
)
def test_a_yearly_archive_without_the_month_fails_by_name(site, lake, archive, pages: int, read: int) -> None:
    _whole_january_in_bronze(site, lake)
    site.routes[YEARLY] = _zip(archive())
    before = _bronze_files(lake)

    with pytest.raises(ArchiveIncompleteError) as failure:
        _check(site, lake)

    saved = _saved_report(lake)
    assert str(failure.value) == (
        f"dataset agregadas 2022-01: the archive {site.url(YEARLY)} cannot account for the month, which is NOT "
        f"confirmed: read {read} of its {pages} pages (those that may hold 2022-01) and found 0 entries and "
        "0 tombstones of the month (no day of the month covered), while Bronze held 12 entries and 6 tombstones "
        f"of it ({saved['bronze_pages_read']} pages read), 18 of them not in the archive (by day: "
        f"{_by_day(BRONZE_BY_DAY)}). Nothing was removed from Bronze. Rerun the check in a few days (the site "
        "rebuilds its archives); if the archive stays short, report it to the site and keep "
        "completeness/agregadas/2022-01.json (status archive_incomplete)"
    )
    # The report is written for audit, and says what happened: not confirmed.
    assert (saved["status"], saved["confirmed"], saved["failure"]) == ("archive_incomplete", False, str(failure.value))
    assert (saved["published"], saved["only_in_bronze"], saved["unaccounted"], saved["after_archive"]) == (0, 18, 18, 0)
    assert _bronze_files(lake) == before  # nothing landed, nothing removed
    assert not completeness_manifest_path(lake, "agregadas", JANUARY).exists()


# -- a yearly archive with part of the month --------------------------------------------------------
def test_a_yearly_archive_without_a_day_fails_after_landing_what_it_held(site, lake) -> None:
    """The daily chain hid Jan 4 (Bronze lacks it), the archive lacks Jan 2 (Bronze holds it): the Jan 4
    page is still recovered (the site's own page: nothing is lost by landing it), then the check fails."""
    members = serve_hidden_page_site(site)
    daily_runs(site, lake, today=TODAY)
    site.routes[YEARLY] = _zip({n: b for n, b in members.items() if n != _stamp(2)} | _february())

    with pytest.raises(ArchiveIncompleteError) as failure:
        _check(site, lake)

    saved = _saved_report(lake)
    message = str(failure.value)
    assert message.startswith(
        f"dataset agregadas 2022-01: the archive {site.url(YEARLY)} cannot account for the month, which is NOT "
        "confirmed: read 6 of its 7 pages (those that may hold 2022-01) and found 10 entries and 5 tombstones of "
        "the month (days covered: 1, 3-7), while Bronze held 10 entries and 5 tombstones of it ("
    )
    assert (
        "3 of them not in the archive (by day: 2022-01-02: 3); what the archive held that Bronze lacked was "
        "landed first (3 records, 1 page, listed in bronze/agregadas/manifests/2022-01.completeness.json: "
        "`placsp ingest --dataset agregadas` brings them to Silver). Nothing was removed from Bronze." in message
    )
    assert (saved["status"], saved["confirmed"]) == ("archive_incomplete", False)
    assert (saved["recovered"], saved["unaccounted"], saved["days"]["2022-01-02"]["only_in_bronze"]) == (3, 3, 3)
    # What the archive held and Bronze lacked is in Bronze, byte for byte, and listed for the next ingest.
    manifest = Manifest.load(completeness_manifest_path(lake, "agregadas", JANUARY))
    assert [p.url.rsplit("#", 1)[-1] for p in manifest.pages] == [_stamp(HIDDEN_DAY)]
    assert (lake / manifest.pages[0].file).read_bytes() == members[_stamp(HIDDEN_DAY)]


def test_an_archive_page_short_of_one_entry_fails(site, lake) -> None:
    """Every page and every day is in the archive, but its copy of Jan 5's page lacks an entry Bronze
    holds: distinct keys are compared, not pages, days or counts."""
    members = _whole_january_in_bronze(site, lake)
    short = page([(501, "2022-01-05T20:00:00.000+00:00")], tombstones=[(503, "2022-01-05T01:00:00.000+00:00")])
    site.routes[YEARLY] = _zip(members | {_stamp(5): short})  # entry 502 of Jan 5 01:00 left out

    with pytest.raises(ArchiveIncompleteError, match=r"1 of them not in the archive \(by day: 2022-01-05: 1\)") as e:
        _check(site, lake)
    assert "(days covered: 1-7)" in str(e.value)
    assert _saved_report(lake)["unaccounted"] == 1


def test_an_archive_that_accounts_for_the_month_confirms_it(site, lake) -> None:
    _whole_january_in_bronze(site, lake)
    report = _check(site, lake)
    assert report.confirmed and report.summary()["status"] == "confirmed"
    assert (report.published, report.bronze_held, report.unaccounted, report.only_in_bronze) == (18, 18, 0, 0)
    saved = _saved_report(lake)
    assert (saved["status"], saved["confirmed"], saved["failure"]) == ("confirmed", True, None)


# -- the CLI and the operator say the same, in one line ---------------------------------------------
def test_the_cli_fails_in_one_line_with_exit_2(site, lake) -> None:
    _whole_january_in_bronze(site, lake)
    site.routes[YEARLY] = _zip(_february())
    done = subprocess.run(
        [
            *(sys.executable, "-m", "placsp_provider.cli", "completeness", "--dataset", "agregadas"),
            *("--month", "2022-01", "--lake", str(lake), "--base-url", site.base_url),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if not line.startswith(("INFO ", "WARNING "))]
    assert errors == [f"placsp completeness: error: {_saved_report(lake)['failure']}"]
    assert re.fullmatch(
        r"placsp completeness: error: dataset agregadas 2022-01: the archive \S+_2022\.zip .*", errors[0]
    )


def test_the_operator_fails_the_task_with_the_same_message(site, lake, monkeypatch) -> None:
    from placsp_provider.operators.completeness import PlacspCompletenessOperator
    from tests.airflow.conftest import set_connection

    _whole_january_in_bronze(site, lake)
    site.routes[YEARLY] = _zip(_february())
    set_connection(monkeypatch, site.base_url, max_retries=0)
    op = PlacspCompletenessOperator(
        task_id="completeness_agregadas", dataset="agregadas", month="2022-01", lake=str(lake)
    )
    with pytest.raises(PlacspError) as failure:
        op.execute({"run_id": "manual__check"})  # type: ignore[arg-type]
    assert str(failure.value) == _saved_report(lake)["failure"]
    assert "cannot account for the month, which is NOT confirmed" in str(failure.value)


# -- a monthly archive and the month's tail ---------------------------------------------------------
FEBRUARY_TODAY = date(2022, 2, 10)  # January 2022 is then in its monthly archive
MONTHLY = FOLDER + "PlataformasAgregadasSinMenores_202201.zip"


def _serve_month_end(site: LoopbackSite, lake: Path) -> dict[str, bytes]:
    """A live chain over Jan 29-31, landed by one daily run (the page of Jan 28 ends the walk, not
    landed); return the pages stamped in January, what the monthly archive holds. The head, holding
    Jan 31's last hours, will be stamped in February: the February archive holds it."""
    stamped = {
        _stamp(31): page(
            [(3001, "2022-01-30T20:00:00.000+00:00"), (3002, "2022-01-30T10:00:00.000+00:00")],
            next_href=_stamp(30),
            self_href=_stamp(31),
        ),
        _stamp(30): page(
            [(2901, "2022-01-29T20:00:00.000+00:00")],
            tombstones=[(2902, "2022-01-29T01:00:00.000+00:00")],
            next_href=_stamp(29),
            self_href=_stamp(30),
        ),
        _stamp(29): page([(2801, "2022-01-28T10:00:00.000+00:00")], self_href=_stamp(29)),
    }
    head = page(
        [(3101, "2022-01-31T22:00:00.000+00:00")],
        tombstones=[(3102, "2022-01-31T21:00:00.000+00:00")],
        next_href=_stamp(31),
    )
    site.routes[FOLDER + AGR.head_file] = head
    for name, body in stamped.items():
        site.routes[FOLDER + name] = body
    start = datetime(2022, 1, 29, tzinfo=UTC)
    with _client(site) as client:
        extract_interval(
            client, ExtractRequest(AGR, start, datetime(2022, 2, 1, tzinfo=UTC), lake, "daily", today=FEBRUARY_TODAY)
        )
    return stamped


def test_what_bronze_holds_after_a_monthly_archive_is_the_next_archives_and_is_reported(site, lake) -> None:
    stamped = _serve_month_end(site, lake)
    site.routes[MONTHLY] = _zip({n: stamped[n] for n in (_stamp(30), _stamp(31))})  # cut to its last pages
    report = _check(site, lake, today=FEBRUARY_TODAY)
    assert site.hits[MONTHLY] == 1
    assert (report.published, report.bronze_held) == (4, 6)
    assert report.confirmed and (report.after_archive, report.unaccounted, report.only_in_bronze) == (2, 0, 2)
    assert report.archive_reach == "2022-01-30T20:00:00Z"
    assert _saved_report(lake)["days"]["2022-01-31"]["after_archive"] == 2


def test_a_monthly_archive_whose_last_page_is_days_before_the_month_end_fails(site, lake) -> None:
    stamped = _serve_month_end(site, lake)
    site.routes[MONTHLY] = _zip({_stamp(29): stamped[_stamp(29)]})  # its newest item: Jan 28 10:00
    expected = r"6 of them not in the archive \(by day: 2022-01-29: 2, 2022-01-30: 2, 2022-01-31: 2\); what the"
    with pytest.raises(ArchiveIncompleteError, match=expected):
        _check(site, lake, today=FEBRUARY_TODAY)
    saved = _saved_report(lake)
    assert (saved["after_archive"], saved["unaccounted"], saved["recovered"]) == (0, 6, 1)


def test_an_archive_without_the_month_never_confirms_an_empty_bronze(site, lake) -> None:
    # No daily run landed anything (the DAG was off, or every run failed) and the archive holds nothing
    # of the month: 0 = 0 contradicts nothing, and proves nothing.
    site.routes[YEARLY] = _zip(_february())
    with pytest.raises(ArchiveIncompleteError) as failure:
        _check(site, lake)
    assert str(failure.value).startswith(
        f"dataset agregadas 2022-01: the archive {site.url(YEARLY)} cannot account for the month, which is NOT "
        "confirmed: read 1 of its 2 pages (those that may hold 2022-01) and found no entry and no tombstone of the "
        "month, and Bronze holds none either"
    )
    saved = _saved_report(lake)
    assert (saved["status"], saved["confirmed"], saved["published"]) == ("archive_incomplete", False, 0)
