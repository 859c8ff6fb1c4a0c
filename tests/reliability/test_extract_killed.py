"""`placsp extract` killed (SIGKILL, its whole process group) in the middle of a page download.

A real extraction over real HTTP on loopback: the site sends the second page's first 150 KB and then
stalls; the process is killed once the partial download is on disk. Bronze must then hold only whole
pages (a later stage reads the pages folder through the manifests, and nothing half-written may be
in either), and the rerun must land the rest of the interval, write its manifest and leave no temp
file behind, including the dead run's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from placsp_provider.demo.loopback_site import LoopbackSite
from placsp_provider.lake import incoming_dir, manifest_path, pages_dir
from tests.reliability import feed_site, harness
from tests.reliability.feed_site import AGR, LANDED

pytestmark = [pytest.mark.http, pytest.mark.reliability]


def partial_download(lake: Path, at_least: int) -> harness.Trigger:
    """Fires once a temp file of at least `at_least` bytes (a download under way) is on disk."""
    incoming = incoming_dir(lake, AGR.key)

    def check() -> str | None:
        for path in incoming.rglob("*") if incoming.is_dir() else []:
            try:
                size = path.stat().st_size
            except FileNotFoundError:  # landed or removed between the listing and the stat
                continue
            if path.is_file() and size >= at_least:
                return f"mid-download: {path.name} has {size} bytes"
        return None

    return check


def test_a_download_killed_half_way_leaves_no_partial_page_and_the_rerun_completes(tmp_path: Path) -> None:
    reference, lake = tmp_path / "reference", tmp_path / "lake"
    with LoopbackSite() as site:
        feed_site.serve(site)
        clean = harness.run(feed_site.extract_args(reference, site), workdir=tmp_path, name="clean").ok()

        feed_site.serve(site, stall_big_at=150_000)
        killed = harness.run(
            feed_site.extract_args(lake, site), trigger=partial_download(lake, 1 << 16), workdir=tmp_path, name="kill"
        )
        assert killed.killed, f"the extraction ended before the download was caught: {killed.stderr[-2000:]}"

        # What the dead run left: whole pages only (the head page, landed before the kill).
        assert feed_site.assert_only_whole_pages(lake) == {AGR.head_file}
        assert any(p.is_file() for p in incoming_dir(lake, AGR.key).rglob("*")), "the partial download was not seen"
        unlisted = {f"{p.relative_to(lake)}" for p in pages_dir(lake, AGR.key).iterdir()} - feed_site.listed_files(lake)
        assert not unlisted, f"pages in Bronze that no manifest lists after the kill: {unlisted}"

        feed_site.serve(site)
        rerun = harness.run(feed_site.extract_args(lake, site), workdir=tmp_path, name="rerun").ok()

    assert feed_site.assert_only_whole_pages(lake) == set(LANDED)
    assert feed_site.stray_files(lake) == [], "temp files left in Bronze after the rerun"
    path = Path(rerun.json()["manifest"])
    assert path == manifest_path(lake.resolve(), AGR.key, *feed_site.interval())
    got, want = json.loads(path.read_text()), json.loads(Path(clean.json()["manifest"]).read_text())
    assert got["complete"] is True and got["stop_reason"] == want["stop_reason"]
    fields = ("file", "sha256", "entries", "tombstones", "bytes", "well_formed")
    assert sorted(tuple(p[f] for f in fields) for p in got["pages"]) == sorted(
        tuple(p[f] for f in fields) for p in want["pages"]
    )
    assert sum(p["entries"] for p in got["pages"]) == 42 and sum(p["tombstones"] for p in got["pages"]) == 1
