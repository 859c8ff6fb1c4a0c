"""Completeness against the month's archive, over real HTTP on loopback: a chain that hides a page
is caught, the page recovered into a manifest of its own, and a second check changes nothing.

The expected numbers come from the site's construction (tests/hidden_page_site.py), and are checked
once more against a plain lxml count of the archive, never against the check's own report alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from placsp_provider.bronze.completeness import CompletenessRequest, check_month, parse_month
from placsp_provider.bronze.manifest import Manifest
from placsp_provider.demo.loopback_site import LoopbackSite, Reply
from placsp_provider.errors import ConfigError, FeedError
from placsp_provider.feed.client import ClientConfig, FeedClient
from placsp_provider.lake import completeness_manifest_path, completeness_report_path
from tests.hidden_page_site import AGR, FOLDER, HIDDEN_DAY, archive_records, daily_runs, serve_hidden_page_site

pytestmark = pytest.mark.http

TODAY = date(2026, 11, 29)
JANUARY = date(2022, 1, 1)


def _client(site: LoopbackSite) -> FeedClient:
    return FeedClient(ClientConfig(base_url=site.base_url, backoff_base=0.0, max_retries=0), "agregadas")


def completeness(site: LoopbackSite, lake: Path, run_id: str = "check-1"):
    with _client(site) as client:
        return check_month(client, CompletenessRequest(AGR, JANUARY, lake, run_id, today=TODAY))


def test_a_page_the_walk_missed_is_recovered_from_the_archive(site, lake) -> None:
    members = serve_hidden_page_site(site)
    daily_runs(site, lake)
    assert FOLDER + f"PlataformasAgregadasSinMenores_202201{HIDDEN_DAY:02d}_030000.atom" not in site.hits

    report = completeness(site, lake)

    records = archive_records(members)
    published = records["entry"] | records["tombstone"]
    hidden = {r for r in published if r[1].startswith(f"2022-01-{HIDDEN_DAY:02d}")}
    assert (report.published, report.recovered) == (len(published), len(hidden)) == (18, 3)
    assert report.landed_before == 15 and report.only_in_bronze == 0
    assert report.summary()["gap_days"] == {f"2022-01-{HIDDEN_DAY:02d}": 3}
    assert report.days[f"2022-01-{HIDDEN_DAY:02d}"].published == 3
    # The recovered page is in Bronze, byte for byte, listed in the month's recovery manifest.
    manifest = Manifest.load(completeness_manifest_path(lake, "agregadas", JANUARY))
    hidden_member = f"PlataformasAgregadasSinMenores_2022010{HIDDEN_DAY}_030000.atom"
    assert [p.url.rsplit("#", 1)[-1] for p in manifest.pages] == [hidden_member]
    assert (lake / manifest.pages[0].file).read_bytes() == members[hidden_member]
    assert (manifest.pages[0].entries, manifest.pages[0].tombstones) == (2, 1)
    saved = json.loads(completeness_report_path(lake, "agregadas", JANUARY).read_text())
    assert saved["recovered"] == 3 and saved["days"]["2022-01-04"]["recovered"] == 3


def test_a_second_check_changes_nothing(site, lake) -> None:
    serve_hidden_page_site(site)
    daily_runs(site, lake)
    completeness(site, lake)
    bronze = {p: p.read_bytes() for p in sorted((lake / "bronze").rglob("*")) if p.is_file()}
    again = completeness(site, lake, run_id="check-2")
    assert again.confirmed and again.recovered == 0 and again.published == again.landed_before == 18
    assert {p: p.read_bytes() for p in sorted((lake / "bronze").rglob("*")) if p.is_file()} == bronze


def test_a_complete_month_is_confirmed_without_landing_anything(site, lake) -> None:
    members = serve_hidden_page_site(site)
    # A site that hides nothing: link the hidden page back in.
    site.routes[FOLDER + "PlataformasAgregadasSinMenores_20220105_030000.atom"] = members[
        "PlataformasAgregadasSinMenores_20220105_030000.atom"
    ]
    site.routes[FOLDER + "PlataformasAgregadasSinMenores_20220104_030000.atom"] = members[
        "PlataformasAgregadasSinMenores_20220104_030000.atom"
    ]
    daily_runs(site, lake)
    report = completeness(site, lake)
    assert report.confirmed and report.published == 18 and report.manifest is None
    assert not completeness_manifest_path(lake, "agregadas", JANUARY).exists()


def test_an_unreadable_archive_fails_by_name(site, lake) -> None:
    serve_hidden_page_site(site)
    site.routes[FOLDER + "PlataformasAgregadasSinMenores_2022.zip"] = Reply(b"no zip", content_type="application/zip")
    with pytest.raises(FeedError, match=r"dataset agregadas: .*_2022\.zip: is not a readable zip archive"):
        completeness(site, lake)
    assert not completeness_report_path(lake, "agregadas", JANUARY).exists()


def test_a_month_that_has_not_ended_is_refused_before_any_request(lake) -> None:
    with pytest.raises(ConfigError, match=r"month 2026-11 has not ended \(today is 2026-11-29\)"):
        CompletenessRequest(AGR, date(2026, 11, 1), lake, today=TODAY)
    with pytest.raises(ConfigError, match="month must be YYYY-MM, got '2022-13'"):
        parse_month("2022-13")


def test_the_cli_checks_a_month(site, lake) -> None:
    serve_hidden_page_site(site)
    daily_runs(site, lake)
    done = subprocess.run(
        [
            *(sys.executable, "-m", "placsp_provider.cli", "completeness", "--dataset", "1044"),
            *("--month", "2022-01", "--lake", str(lake), "--base-url", site.base_url, "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["status"] == "recovered" and summary["recovered"] == 3
    assert "placsp ingest --dataset agregadas" in done.stderr


def test_the_archive_is_the_yearly_one_for_a_closed_year(site, lake) -> None:
    serve_hidden_page_site(site)
    completeness(site, lake)
    assert site.hits[FOLDER + "PlataformasAgregadasSinMenores_2022.zip"] == 1
