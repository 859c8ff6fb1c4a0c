"""Extraction into Bronze over real HTTP on loopback: real and generated pages, and bad input.

Nothing here mocks `requests`: a real server on 127.0.0.1 answers every request.
"""

from __future__ import annotations

import hashlib
import io
import json
import time
import zipfile
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from placsp_provider.bronze.extract import ExtractRequest, extract_interval
from placsp_provider.bronze.manifest import Manifest
from placsp_provider.datasets import DATASETS
from placsp_provider.demo.loopback_site import LoopbackSite, Reply
from placsp_provider.demo.samples import demo_routes
from placsp_provider.errors import FeedError, PageTooLargeError
from placsp_provider.feed.client import ClientConfig, FeedClient
from placsp_provider.lake import manifest_path
from tests.pages import day, page

pytestmark = pytest.mark.http

AGR = DATASETS["agregadas"]
HEAD_1044 = f"/sindicacion/{AGR.folder}/{AGR.head_file}"
PAGE_PATH = f"/sindicacion/{AGR.folder}/"


def _client(site: LoopbackSite, dataset: str = "agregadas", **overrides) -> FeedClient:
    config = {"base_url": site.base_url, "backoff_base": 0.0, "max_retries": 2, "read_timeout": 5.0}
    config.update(overrides)
    return FeedClient(ClientConfig(**config), dataset)


def _extract(site, lake, *, start=datetime(2022, 1, 5, tzinfo=UTC), days=1, dataset="agregadas", client=None, **kw):
    req = ExtractRequest(
        dataset=DATASETS[dataset],
        start=start,
        end=start + timedelta(days=days),
        lake=lake,
        run_id="test",
        overlap=timedelta(0),
        today=date(2026, 11, 29),
        **kw,
    )
    with client or _client(site, dataset) as c:
        return extract_interval(c, req)


def _covered(site: LoopbackSite) -> None:
    """An empty 2022 archive: for tests whose chain ends before the window start (so the
    extraction, correctly, asks the archives for the rest)."""
    buf = io.BytesIO()
    zipfile.ZipFile(buf, "w").close()
    site.routes[PAGE_PATH + "PlataformasAgregadasSinMenores_2022.zip"] = buf.getvalue()


def _files(lake: Path) -> dict[str, bytes]:
    return {str(p.relative_to(lake)): p.read_bytes() for p in sorted(lake.rglob("*.atom"))}


def _chain(site: LoopbackSite) -> None:
    """head (Jan 6-7) -> p2 (Jan 5) -> p3 (Jan 4) -> p4 (Jan 3) -> p5 (Jan 2)."""
    names = ["PlataformasAgregadasSinMenores.atom"] + [
        f"PlataformasAgregadasSinMenores_2022010{d}_030000.atom" for d in (5, 4, 3, 2)
    ]
    days = [(7, 6), (5, 5), (4, 4), (3, 3), (2, 2)]
    for i, (name, (hi, lo)) in enumerate(zip(names, days, strict=True)):
        nxt = names[i + 1] if i + 1 < len(names) else None
        site.routes[PAGE_PATH + name] = page(
            [(100 * i + 1, day(hi, 20)), (100 * i + 2, day(lo, 1))],
            tombstones=[(100 * i + 3, day(lo, 2))],
            next_href=nxt,
            self_href=name,
        )


# -- the real bundled pages ---------------------------------------------------------------------
def test_real_pages_land_with_a_correct_manifest(lake: Path) -> None:
    with LoopbackSite(demo_routes()) as site:
        manifest = _extract(site, lake, start=datetime(2025, 8, 18, tzinfo=UTC), dataset="licitaciones")
    # head (version7: 1 entry) + the 2025 archive: version11 (1 entry) + the real fragment (3 entries)
    assert [p.source for p in manifest.pages] == ["feed", "archive", "archive"]
    assert [(p.entries, p.tombstones) for p in manifest.pages] == [(1, 0), (1, 0), (3, 0)]
    for p in manifest.pages:
        body = (lake / p.file).read_bytes()
        assert hashlib.sha256(body).hexdigest() == p.sha256 and len(body) == p.bytes
    fragment = manifest.pages[2]
    assert not fragment.well_formed
    assert "Namespace prefix cac-place-ext on ContractFolderStatus is not defined" in fragment.error
    assert "line 7, column 44" in fragment.error
    on_disk = Manifest.load(
        manifest_path(lake, "licitaciones", datetime(2025, 8, 18, tzinfo=UTC), datetime(2025, 8, 19, tzinfo=UTC))
    )
    assert on_disk.entries == 5 and on_disk.pages[0].sha256 == manifest.pages[0].sha256


def test_real_1044_archive_pages_are_counted_exactly(lake: Path) -> None:
    with LoopbackSite(demo_routes()) as site:
        manifest = _extract(site, lake, start=datetime(2022, 1, 4, tzinfo=UTC), days=2, source="archives")
    # The real monthly archive (cut to 2 pages): 475 + 25 and 476 + 24 items (SOURCES.md).
    assert sorted((p.entries, p.tombstones) for p in manifest.pages) == [(475, 25), (476, 24)]
    assert manifest.pages[0].min_updated.startswith("2022-01-0")
    assert manifest.stop_reason == "archives requested"


def test_rerunning_an_interval_changes_nothing(lake: Path, site: LoopbackSite) -> None:
    _chain(site)
    first = _extract(site, lake)
    before = {p: (lake / p).stat().st_mtime_ns for p in _files(lake)}
    second = _extract(site, lake)
    assert [p.file for p in second.pages] == [p.file for p in first.pages]
    assert all(p.newly_landed for p in first.pages) and not any(p.newly_landed for p in second.pages)
    assert {p: (lake / p).stat().st_mtime_ns for p in _files(lake)} == before


# -- walking the chain --------------------------------------------------------------------------
def test_walk_lands_the_window_and_stops_after_two_older_pages(lake: Path, site: LoopbackSite) -> None:
    _chain(site)
    manifest = _extract(site, lake)  # [Jan 5, Jan 6)
    landed = [p.url.rsplit("/", 1)[-1] for p in manifest.pages]
    # head is entirely newer than the window: walked through, not landed. p3 (Jan 4) and p4 (Jan 3)
    # hold only older items: the walk stops after the second, and never asks for p5.
    assert landed == ["PlataformasAgregadasSinMenores_20220105_030000.atom"]
    assert site.hits[PAGE_PATH + "PlataformasAgregadasSinMenores_20220103_030000.atom"] == 1
    assert site.hits.get(PAGE_PATH + "PlataformasAgregadasSinMenores_20220102_030000.atom") is None
    assert manifest.stop_reason == ("2 consecutive pages entirely older than the window start 2022-01-05T00:00:00Z")
    assert (manifest.entries, manifest.tombstones) == (2, 1)
    assert len(list((lake / "bronze" / "agregadas" / "pages").iterdir())) == 1  # held-back pages not landed


def test_relative_next_hrefs_resolve_against_the_page_url(lake: Path, site: LoopbackSite) -> None:
    _chain(site)
    _extract(site, lake, start=datetime(2022, 1, 3, tzinfo=UTC))
    assert site.hits[PAGE_PATH + "PlataformasAgregadasSinMenores_20220103_030000.atom"] == 1


def test_a_next_loop_is_detected(lake: Path, site: LoopbackSite) -> None:
    site.routes[HEAD_1044] = page([(1, day(7))], next_href="p2.atom")
    site.routes[PAGE_PATH + "p2.atom"] = page([(2, day(6))], next_href="PlataformasAgregadasSinMenores.atom")
    with pytest.raises(
        FeedError, match=r"dataset agregadas: .*PlataformasAgregadasSinMenores.atom: rel=\"next\" loops back"
    ):
        _extract(site, lake, start=datetime(2022, 1, 1, tzinfo=UTC))


def test_page_cap_hands_the_rest_to_the_archives(lake: Path, site: LoopbackSite) -> None:
    _chain(site)
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("PlataformasAgregadasSinMenores_20220102_030000.atom", page([(900, day(1, 5))]))
    site.routes[PAGE_PATH + "PlataformasAgregadasSinMenores_2022.zip"] = archive.getvalue()
    manifest = _extract(site, lake, start=datetime(2022, 1, 1, tzinfo=UTC), days=5, max_pages=2)
    assert manifest.stop_reason.startswith("page cap of 2 reached")
    assert site.hits[PAGE_PATH + "PlataformasAgregadasSinMenores_2022.zip"] == 1
    assert [p.source for p in manifest.pages][-1] == "archive"


def test_archive_only_dataset_reads_the_yearly_archive(lake: Path, site: LoopbackSite) -> None:
    emp = DATASETS["encargos"]
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("EMP_SectorPublico_20240301_030000.atom", page([(1, "2024-02-29T10:00:00Z")]))
        z.writestr("EMP_SectorPublico_20240601_030000.atom", page([(2, "2024-05-30T10:00:00Z")]))
    site.routes[f"/sindicacion/{emp.folder}/EMP_SectorPublico_2024.zip"] = archive.getvalue()
    manifest = _extract(site, lake, start=datetime(2024, 2, 1, tzinfo=UTC), days=29, dataset="encargos")
    assert [p.url.rsplit("#", 1)[-1] for p in manifest.pages] == ["EMP_SectorPublico_20240301_030000.atom"]
    assert manifest.stop_reason == "archive-only dataset"


# -- bad input: each one a clear message naming dataset and URL, nothing lost ----------------------
def test_head_404_names_dataset_and_url(lake: Path, site: LoopbackSite) -> None:
    with pytest.raises(FeedError) as err:
        _extract(site, lake)
    assert str(err.value) == (
        f"dataset agregadas: {site.url(HEAD_1044)}: answered HTTP 404 Not Found "
        "(check base_url in the placsp connection, or whether the site still publishes this file)"
    )
    assert site.hits[HEAD_1044] == 1  # a 404 is not retried


def test_head_500_is_retried_then_fails(lake: Path, site: LoopbackSite) -> None:
    site.routes[HEAD_1044] = Reply(b"boom", status=500, content_type="text/plain")
    with pytest.raises(
        FeedError, match=r"dataset agregadas: http://127.0.0.1:\d+/.*: HTTP 500 .*gave up after 3 attempts"
    ):
        _extract(site, lake)
    assert site.hits[HEAD_1044] == 3


def test_timeout_is_retried_then_fails(lake: Path, site: LoopbackSite) -> None:
    site.routes[HEAD_1044] = Reply(page([(1, day(5))]), delay=1.0)
    with pytest.raises(FeedError, match=r"dataset agregadas: .*timed out.*gave up after 2 attempts"):
        _extract(site, lake, client=_client(site, read_timeout=0.2, max_retries=1))


def test_429_honours_retry_after(lake: Path, site: LoopbackSite) -> None:
    _covered(site)
    calls = {"n": 0}

    def throttled(_handler):
        calls["n"] += 1
        if calls["n"] == 1:
            return Reply(b"slow down", status=429, content_type="text/plain", headers={"Retry-After": "1"})
        return Reply(page([(1, day(5))]))

    site.routes[HEAD_1044] = throttled
    started = time.monotonic()
    manifest = _extract(site, lake)
    assert time.monotonic() - started >= 1.0  # backoff_base is 0: only Retry-After explains the wait
    assert calls["n"] == 2 and manifest.entries == 1


def test_html_error_page_is_refused(lake: Path, site: LoopbackSite) -> None:
    html = b"<!DOCTYPE html><html><head><title>Servicio en mantenimiento</title></head><body/></html>"
    site.routes[HEAD_1044] = Reply(html, content_type="text/html")
    with pytest.raises(
        FeedError, match=r"dataset agregadas: .*HTML page instead of an Atom feed \(title: 'Servicio en mantenimiento'"
    ):
        _extract(site, lake)
    assert _files(lake) == {}


def test_download_cut_short_is_retried_then_fails(lake: Path, site: LoopbackSite) -> None:
    body = page([(1, day(5)), (2, day(5, 1))])
    site.routes[HEAD_1044] = Reply(body, cut_at=len(body) // 2)
    with pytest.raises(FeedError, match=r"dataset agregadas: .*download cut short.*gave up after 3 attempts"):
        _extract(site, lake)
    assert _files(lake) == {}  # no half page ever lands


def test_not_well_formed_page_is_landed_and_flagged(lake: Path, site: LoopbackSite) -> None:
    _covered(site)
    body = page([(1, day(5)), (2, day(5, 1)), (3, day(5, 2))])
    broken = body.replace(b"</cbc:ContractFolderID>", b"</cbc:ContractFolderId>", 1)
    site.routes[HEAD_1044] = broken
    manifest = _extract(site, lake)
    (landed,) = manifest.pages
    assert not landed.well_formed
    assert "Opening and ending tag mismatch: ContractFolderID" in landed.error and "line" in landed.error
    assert (landed.entries, landed.tombstones) == (3, 0)  # from the byte scan
    assert (lake / landed.file).read_bytes() == broken


def test_redirect_to_another_host_is_refused(lake: Path, site: LoopbackSite) -> None:
    elsewhere = site.url("/x").replace("127.0.0.1", "localhost")
    site.routes[HEAD_1044] = Reply(b"", status=302, headers={"Location": elsewhere})
    with pytest.raises(
        FeedError,
        match=r"dataset agregadas: .*redirected \(302\) to http://localhost:\d+/x, refused before any request: "
        r"host localhost:\d+ is neither the configured site",
    ):
        _extract(site, lake)


def test_redirect_on_the_same_host_is_followed(lake: Path, site: LoopbackSite) -> None:
    _covered(site)
    site.routes[HEAD_1044] = Reply(b"", status=301, headers={"Location": PAGE_PATH + "moved.atom"})
    site.routes[PAGE_PATH + "moved.atom"] = page([(1, day(5))])
    assert _extract(site, lake).entries == 1


def test_empty_body_is_an_error(lake: Path, site: LoopbackSite) -> None:
    site.routes[HEAD_1044] = b""
    with pytest.raises(FeedError, match=r"dataset agregadas: .*empty response body \(0 bytes\)"):
        _extract(site, lake)


def test_empty_feed_lands_nothing_and_asks_the_archives(lake: Path, site: LoopbackSite) -> None:
    site.routes[HEAD_1044] = page([])
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("PlataformasAgregadasSinMenores_20220106_030000.atom", page([(7, day(5))]))
    site.routes[PAGE_PATH + "PlataformasAgregadasSinMenores_2022.zip"] = archive.getvalue()
    manifest = _extract(site, lake)
    assert [(p.source, p.entries) for p in manifest.pages] == [("archive", 1)]


def test_page_over_the_size_limit_is_refused(lake: Path, site: LoopbackSite) -> None:
    site.routes[HEAD_1044] = page([(1, day(5))])
    with pytest.raises(PageTooLargeError, match=r"dataset agregadas: .*over the limit of 1,000 bytes"):
        _extract(site, lake, client=_client(site, max_page_bytes=1000))
    assert _files(lake) == {}


BOMB = b"""<?xml version="1.0"?>
<!DOCTYPE feed [
 <!ENTITY a "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa">
 <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
 <!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">
 <!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">
 <!ENTITY e "&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;">
 <!ENTITY f "&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;">
]>
<feed xmlns="http://www.w3.org/2005/Atom"><entry><id>&f;</id><updated>2022-01-05T10:00:00Z</updated></entry></feed>"""


def test_xml_bomb_is_refused_without_expanding(lake: Path, site: LoopbackSite) -> None:
    _covered(site)
    site.routes[HEAD_1044] = BOMB
    started = time.monotonic()
    manifest = _extract(site, lake)
    assert time.monotonic() - started < 5
    (landed,) = manifest.pages  # kept for quarantine, flagged, its entry counted
    assert not landed.well_formed and "entities" in landed.error and "refused" in landed.error
    assert landed.entries == 1
    assert "aaaaaaaaaa" * 10 not in manifest.to_json()


def test_external_entity_is_never_fetched_or_read(lake: Path, site: LoopbackSite, tmp_path: Path) -> None:
    _covered(site)
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-CONTENT")
    site.routes["/evil.dtd"] = b'<!ENTITY x "EVIL">'
    xxe = (
        f'<?xml version="1.0"?><!DOCTYPE feed [<!ENTITY s SYSTEM "file://{secret}">'
        f'<!ENTITY % r SYSTEM "{site.url("/evil.dtd")}"> %r;]>'
        '<feed xmlns="http://www.w3.org/2005/Atom"><entry><id>&s;</id>'
        "<updated>2022-01-05T10:00:00Z</updated></entry></feed>"
    ).encode()
    site.routes[HEAD_1044] = xxe
    manifest = _extract(site, lake)
    assert "/evil.dtd" not in site.hits  # no network fetch
    assert "TOP-SECRET-CONTENT" not in json.dumps(manifest.to_json())
    assert not manifest.pages[0].well_formed and "refused" in manifest.pages[0].error
