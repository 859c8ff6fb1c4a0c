"""What one extraction may cost and show, whatever the site serves, over real HTTP on loopback.

- The manifest is checkpointed a bounded number of times (issue 31, F6), not once per landed page,
  and Bronze still never holds a page that no manifest lists: after a failure, after a SIGKILL.
- A chain whose links differ only in their query string (or fragment, or spelling of the host) is a
  loop, refused by name at once (F7), and no query string reaches a Bronze file name.
- Server text (a link, an archive member's name) reaches no log record, progress message or
  exception raw (F5).

Manifest writes are counted from outside the code under test: a Python audit hook sees every
`os.rename`/`os.replace` onto the manifest and every open of it for writing, whoever does it.

Run as a script, it measures one archive extraction (time, manifest writes and bytes):

    .venv/bin/python -m tests.bronze.test_walk_bounds --members 20000 [--lake-parent /dev/shm]
"""

from __future__ import annotations

import io
import json
import logging
import os
import sys
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from placsp_provider.bronze import extract
from placsp_provider.bronze.extract import ExtractRequest, extract_interval
from placsp_provider.bronze.manifest import Manifest
from placsp_provider.datasets import DATASETS
from placsp_provider.demo.loopback_site import LoopbackSite, Reply
from placsp_provider.errors import FeedError
from placsp_provider.feed.client import ClientConfig, FeedClient
from placsp_provider.lake import incoming_dir, manifest_path, pages_dir
from tests.pages import ID_PREFIX, day, page

pytestmark = pytest.mark.http

AGR = DATASETS["agregadas"]
FOLDER = f"/sindicacion/{AGR.folder}/"
HEAD = FOLDER + AGR.head_file
ARCHIVE_2022 = FOLDER + "PlataformasAgregadasSinMenores_2022.zip"
START = datetime(2022, 1, 5, tzinfo=UTC)
END = START + timedelta(days=1)
EVIL = "\x1b[31m\r\nINFO forged"  # repaints a terminal, then forges a log line of its own


# -- counting manifest writes from outside --------------------------------------------------------
@dataclass
class ManifestWrites:
    """Every write of one manifest file, seen by the audit hook: replaced by a rename (the atomic
    way), or opened for writing in place (counted too, so no other way of writing goes unseen)."""

    path: str
    bytes: int = 0
    in_place: int = 0
    listed: list[int] = field(default_factory=list)  # pages each renamed-in manifest lists
    unlisted: list[set[str]] = field(default_factory=list)  # Bronze pages it did not list, at that moment
    lake: Path | None = None  # when set, each new manifest is read and compared with Bronze

    @property
    def count(self) -> int:
        return len(self.listed) + self.in_place

    def seen(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "os.rename" and _same(args[1], self.path):
            self.bytes += os.stat(args[0]).st_size
            self.listed.append(self._compare(Path(os.fsdecode(args[0]))) if self.lake else 0)
        elif event == "open" and args[0] is not None and _same(args[0], self.path) and _for_writing(args):
            self.in_place += 1

    def _compare(self, new_manifest: Path) -> int:
        """The manifest about to replace the old one lists every page in Bronze (the pages of the
        batch were renamed in just before it)."""
        assert self.lake is not None
        files = {p["file"] for p in json.loads(new_manifest.read_text(encoding="utf-8"))["pages"]}
        folder = pages_dir(self.lake, AGR.key)
        in_bronze = {str(p.relative_to(self.lake)) for p in folder.iterdir()} if folder.is_dir() else set()
        self.unlisted.append(in_bronze - files)
        return len(files)


_WATCHING: list[ManifestWrites] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    for watch in _WATCHING:
        watch.seen(event, args)


def _same(arg: Any, path: str) -> bool:
    try:
        return isinstance(arg, str | bytes | os.PathLike) and os.path.abspath(os.fsdecode(arg)) == path
    except (TypeError, ValueError):
        return False


def _for_writing(args: tuple[Any, ...]) -> bool:
    mode, flags = args[1], args[2]
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return bool(flags & (os.O_WRONLY | os.O_RDWR)) if isinstance(flags, int) else False


sys.addaudithook(_audit)  # hooks cannot be removed; this one does nothing unless a test is watching


@contextmanager
def manifest_writes(lake: Path, *, compare: bool = False) -> Iterator[ManifestWrites]:
    watch = ManifestWrites(os.path.abspath(manifest_path(lake, AGR.key, START, END)), lake=lake if compare else None)
    _WATCHING.append(watch)
    try:
        yield watch
    finally:
        _WATCHING.remove(watch)


# -- a site ------------------------------------------------------------------------------------------
def tiny_page(number: int) -> bytes:
    """A small valid feed page with one entry in the window (an archive of thousands of them)."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<feed xmlns="http://www.w3.org/2005/Atom"><id>t</id>'
        f"<title>t</title><updated>2022-01-05T12:00:00Z</updated><entry><id>{ID_PREFIX}{number}</id>"
        "<updated>2022-01-05T12:00:00Z</updated></entry></feed>"
    ).encode()


def archive(members: dict[str, bytes], *, encrypt: frozenset[str] = frozenset()) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    raw = bytearray(buf.getvalue())
    for name in encrypt:  # the "encrypted" bit in the member's local and central headers
        encoded = name.encode()
        for signature, flag_at, name_at in ((b"PK\x03\x04", 6, 30), (b"PK\x01\x02", 8, 46)):
            at = raw.find(signature)
            while at >= 0:
                if raw[at + name_at : at + name_at + len(encoded)] == encoded:
                    raw[at + flag_at] |= 0x1
                at = raw.find(signature, at + 4)
    return bytes(raw)


def many_members(count: int) -> dict[str, bytes]:
    return {f"PlataformasAgregadasSinMenores_20220105_120000_{i}.atom": tiny_page(i) for i in range(1, count + 1)}


def _client(site: LoopbackSite, **overrides: Any) -> FeedClient:
    config = {"base_url": site.base_url, "backoff_base": 0.0, "max_retries": 1, "read_timeout": 5.0}
    config.update(overrides)
    return FeedClient(ClientConfig(**config), AGR.key)


def _extract(site: LoopbackSite, lake: Path, *, client: FeedClient | None = None, progress=None, **kw) -> Manifest:
    site.routes.setdefault(ARCHIVE_2022, archive({}))  # chains that end in the window ask the archive
    request = ExtractRequest(
        dataset=AGR,
        start=START,
        end=END,
        lake=lake,
        run_id="test",
        overlap=timedelta(0),
        today=date(2026, 11, 29),
        **kw,
    )
    with client or _client(site) as c:
        return extract_interval(c, request, progress)


def bronze_files(lake: Path) -> set[str]:
    folder = pages_dir(lake, AGR.key)
    return {str(p.relative_to(lake)) for p in folder.iterdir()} if folder.is_dir() else set()


def listed_files(lake: Path) -> set[str]:
    return {p.file for p in Manifest.load(manifest_path(lake, AGR.key, START, END)).pages}


# -- F6: a bounded number of checkpoints ----------------------------------------------------------
def test_an_archive_of_2000_members_rewrites_the_manifest_a_bounded_number_of_times(lake, site) -> None:
    site.routes[ARCHIVE_2022] = archive(many_members(2000))
    with manifest_writes(lake) as writes:
        started = time.monotonic()
        manifest = _extract(site, lake, source="archives")
        elapsed = time.monotonic() - started
    assert len(manifest.pages) == 2000 and manifest.complete
    assert bronze_files(lake) == listed_files(lake) and len(bronze_files(lake)) == 2000
    # The default policy (module docstring, runbook): after the first page, then every 30 s or 1,000
    # pages, whichever is first, and the final manifest. Per landed page, this was 2,001 writes.
    assert (extract.CHECKPOINT_PAGES, extract.CHECKPOINT_SECONDS) == (1000, 30.0)
    assert writes.in_place == 0
    assert writes.count <= 1 + 2000 // 1000 + int(elapsed // 30) + 1, (writes.count, elapsed)


def test_each_checkpoint_lists_every_page_in_bronze_at_that_moment(lake, site) -> None:
    site.routes[ARCHIVE_2022] = archive(many_members(2000))
    with manifest_writes(lake, compare=True) as writes:
        manifest = _extract(site, lake, source="archives", checkpoint_pages=500, checkpoint_seconds=3600)
    # After the first page; when 500 pages wait (pages 501, 1001, 1501); the final manifest.
    assert writes.listed == [1, 501, 1001, 1501, 2000]
    assert writes.unlisted == [set()] * 5
    assert manifest.complete and all(p.newly_landed for p in manifest.pages)


def test_a_checkpoint_every_0_seconds_is_one_per_page(lake, site) -> None:
    site.routes[ARCHIVE_2022] = archive(many_members(30))
    with manifest_writes(lake) as writes:
        _extract(site, lake, source="archives", checkpoint_pages=10_000, checkpoint_seconds=0)
    assert writes.count == 30 + 1  # the time bound alone: every page waited "long enough"


def test_a_run_failing_mid_archive_lists_every_page_it_put_in_bronze(lake, site) -> None:
    members = many_members(1200)
    members["PlataformasAgregadasSinMenores_20220105_130000.atom"] = page([(9999, day(5))]) * 40  # too big
    site.routes[ARCHIVE_2022] = archive(members)
    client = _client(site, max_page_bytes=50_000)
    with manifest_writes(lake) as writes, pytest.raises(FeedError, match="over max_page_bytes; not landed"):
        _extract(site, lake, client=client, source="archives", checkpoint_pages=10_000, checkpoint_seconds=3600)
    manifest = Manifest.load(manifest_path(lake, AGR.key, START, END))
    assert not manifest.complete and manifest.stop_reason.startswith("interrupted: dataset agregadas: ")
    # The members landed before the big one waited for a checkpoint: they were put in Bronze and
    # listed before the run raised (the first page's checkpoint, then the failure's manifest).
    assert writes.count == 2
    assert len(manifest.pages) == 1200 and bronze_files(lake) == listed_files(lake)
    assert not any(incoming_dir(lake, AGR.key).rglob("*.atom")), "a landed page was left behind"


def test_a_rerun_that_fails_keeps_the_earlier_runs_pages_listed(lake, site) -> None:
    site.routes[ARCHIVE_2022] = archive(many_members(50))
    first = _extract(site, lake, source="archives")
    locked = "PlataformasAgregadasSinMenores_20220105_130000.atom"  # after the others (by its stamp)
    site.routes[ARCHIVE_2022] = archive({**many_members(60), locked: b"x"}, encrypt=frozenset({locked}))
    with pytest.raises(FeedError, match="encrypted"):
        _extract(site, lake, source="archives")
    again = Manifest.load(manifest_path(lake, AGR.key, START, END))
    assert {p.file for p in first.pages} < {p.file for p in again.pages} == bronze_files(lake)
    assert len(again.pages) == 60


# -- F6: killed for real between two checkpoints --------------------------------------------------
CHAIN = ["p2.atom", "p3.atom", "p4.atom", "big.atom", "old.atom"]


def _serve_chain(site: LoopbackSite, *, stall_big: bool) -> dict[str, bytes]:
    """head (Jan 6) -> p2, p3, p4 (Jan 5 and 6) -> big (Jan 5, ~240 KB) -> old (Jan 3): the window
    [Jan 5, Jan 7) takes all but `old`. `big` can stall half-way, to be caught downloading."""
    names = [AGR.head_file, *CHAIN]
    bodies = {
        AGR.head_file: page([(1, day(6, 20))], next_href="p2.atom"),
        "p2.atom": page([(2, day(6, 10))], next_href="p3.atom", self_href="p2.atom"),
        "p3.atom": page([(3, day(6, 2))], next_href="p4.atom", self_href="p3.atom"),
        "p4.atom": page([(4, day(5, 22))], next_href="big.atom", self_href="p4.atom"),
        "big.atom": page(
            [(100 + i, day(5, 1 + i % 20)) for i in range(40)], next_href="old.atom", self_href="big.atom"
        ),
        "old.atom": page([(5, day(3))], self_href="old.atom"),
    }
    for name in names:
        site.routes[FOLDER + name] = bodies[name]
    if stall_big:
        site.routes[FOLDER + "big.atom"] = Reply(bodies["big.atom"], stall_at=150_000, stall=30.0)
    return bodies


@pytest.mark.reliability
def test_a_run_killed_with_pages_waiting_leaves_no_unlisted_page_and_the_rerun_lands_them(tmp_path) -> None:
    from tests.reliability import harness

    lake = tmp_path / "lake"
    args = ["extract", "--dataset", AGR.key, "--since", "2022-01-05", "--until", "2022-01-07", "--lake", str(lake)]

    def downloading_big() -> str | None:
        """Fires once `big` is half-downloaded (the site stalls it): head, p2, p3 and p4 are landed by
        then, and with the default policy only the head page has had its checkpoint."""
        for path in incoming_dir(lake, AGR.key).rglob("page-*.atom"):
            try:
                if path.stat().st_size >= 65536:
                    return f"mid-download: {path.name}"
            except FileNotFoundError:
                continue
        return None

    with LoopbackSite() as site:
        bodies = _serve_chain(site, stall_big=True)
        args += ["--base-url", site.base_url, "--json"]
        killed = harness.run(args, trigger=downloading_big, workdir=tmp_path, name="kill")
        assert killed.killed, f"the extraction ended before it was caught: {killed.stderr[-2000:]}"

        manifest_file = manifest_path(
            lake.resolve(), AGR.key, datetime(2022, 1, 5, tzinfo=UTC), datetime(2022, 1, 7, tzinfo=UTC)
        )
        dead = json.loads(manifest_file.read_text())
        assert not dead["complete"] and "did not finish" in dead["stop_reason"]
        assert {p["file"] for p in dead["pages"]} == bronze_files(lake), "a page in Bronze that no manifest lists"
        # The head page was checkpointed at once; p2..p4 were landed but still waiting in the dead
        # run's folder: not in Bronze, so not listed, and fetched again by the rerun.
        assert len(dead["pages"]) == 1
        assert len(list(incoming_dir(lake, AGR.key).rglob("page-*.atom"))) == 4  # p2, p3, p4 and big's part

        _serve_chain(site, stall_big=False)
        rerun = harness.run(args, workdir=tmp_path, name="rerun").ok()

    got = json.loads(Path(rerun.json()["manifest"]).read_text())
    assert got["complete"] is True and got["stop_reason"] == "end of the live chain"
    import hashlib

    want = {hashlib.sha256(bodies[n]).hexdigest() for n in (AGR.head_file, *CHAIN[:-1])}
    assert {p["sha256"] for p in got["pages"]} == want
    assert {p["file"] for p in got["pages"]} == bronze_files(lake)
    assert not any(incoming_dir(lake, AGR.key).rglob("*.atom")), "the dead run's waiting pages were not swept"


# -- F7: loops on the page, not on the spelling of its URL -----------------------------------------
def _p2_linking_to_itself(site: LoopbackSite, href_for) -> None:
    """head -> p2 (as linked); p2's own next link names p2 again, spelled `href_for(n)` (n counts
    the requests). Every answer holds a new entry in the window, so each would land as a new page."""

    def p2(handler) -> Reply:
        n = site.hits[FOLDER + "p2.atom"]
        return Reply(page([(1000 + n, day(5, 12))], next_href=href_for(n + 1), self_href="p2.atom"))

    site.routes[HEAD] = page([(1, day(5, 20))], next_href=href_for(1))
    site.routes[FOLDER + "p2.atom"] = p2


@pytest.mark.parametrize(
    "href_for",
    [
        lambda n: f"p2.atom?x={n}&token=qv7731",
        lambda n: f"p2.atom#again-{n}",
        lambda n: "p2.atom" if n == 1 else f"HTTP://127.0.0.1:{{port}}/sindicacion/{AGR.folder}/{'./' * n}p2.atom",
    ],
    ids=["query", "fragment", "scheme-case-and-dot-segments"],
)
def test_links_that_differ_only_in_their_spelling_are_a_loop_refused_at_once(lake, site, href_for) -> None:
    port = site.base_url.split(":")[2].split("/")[0]
    _p2_linking_to_itself(site, lambda n: href_for(n).replace("{port}", port))
    with pytest.raises(FeedError) as caught:
        _extract(site, lake, max_pages=50)
    message = str(caught.value)
    assert 'p2.atom: rel="next" loops back to page 2 of this run' in message.replace("?…", "").replace("#again-2", "")
    assert "compared without their query string and fragment" in message
    assert site.hits[FOLDER + "p2.atom"] == 1  # not walked to the page cap of 50
    assert "qv7731" not in message  # the query is redacted in messages
    manifest = Manifest.load(manifest_path(lake, AGR.key, START, END))
    assert not manifest.complete and len(manifest.pages) == 2  # head and p2, landed before the loop


def test_no_query_string_reaches_a_bronze_file_name(lake, site) -> None:
    _p2_linking_to_itself(site, lambda n: f"p2.atom?x={n}&token=qv7731")
    with pytest.raises(FeedError, match="loops back"):
        _extract(site, lake, max_pages=50)
    site.routes[HEAD] = page([(1, day(5, 21))], next_href="p3.atom?next=/evil/qv7732.atom")
    site.routes[FOLDER + "p3.atom"] = page([(3, day(5, 9))])
    _extract(site, lake)
    names = sorted(Path(f).name for f in bronze_files(lake))
    assert len(names) == 4  # two heads, p2, p3
    for bad in ("?", "=", "qv7731", "qv7732", "x_1", "token", "evil"):
        assert not any(bad in n for n in names), (bad, names)
    assert sorted(n.split(".")[0] for n in names) == ["PlataformasAgregadasSinMenores"] * 2 + ["p2", "p3"]
    assert all(p.url.endswith(("PlataformasAgregadasSinMenores.atom", "p3.atom?…")) for p in _extract(site, lake).pages)


def test_page_address_is_one_spelling_of_a_page() -> None:
    address = extract.page_address
    assert address("HTTP://User:pw@Example.ORG:80/a/./b/../p%32%2e%61tom?x=1#f") == "http://example.org/a/p2.atom"
    assert address("https://example.org:443/x.atom") == "https://example.org/x.atom"
    assert address("https://example.org:8443/x.atom") == "https://example.org:8443/x.atom"
    assert address("http://h/A/B.atom") != address("http://h/a/b.atom")  # paths keep their case
    assert address("http://h/a%2fb") == "http://h/a%2Fb"  # an encoded `/` stays encoded
    assert address("http://h/a/b/..") == "http://h/a/" and address("http://h/../..") == "http://h/"
    assert address("http://[::1]:8080/p") == "http://[::1]:8080/p"
    assert extract.page_name("http://h/f/p2.atom?next=/a/b.atom") == "p2.atom"


# -- F5: server text reaches no log, progress message or exception raw ----------------------------
def _raw(text: str) -> bool:
    return any(c in text for c in "\x1b\r\n")


def _assert_nothing_raw(caplog, progress: list[str], error: BaseException | None) -> None:
    for record in caplog.records:
        assert not _raw(record.getMessage()), f"raw control characters in a log record: {record.getMessage()!r}"
    for message in progress:
        assert not _raw(message), f"raw control characters in a progress message: {message!r}"
    if error is not None:
        texts = [str(error), *(str(getattr(error, a, "")) for a in ("url", "reason"))]
        assert not any(_raw(t) for t in texts), f"raw control characters in the error: {texts!r}"


def test_a_link_from_a_broken_page_reaches_no_log_or_error_raw(lake, site, caplog) -> None:
    # A raw ESC makes the head page not well-formed: it is landed for quarantine and its links are
    # read by bytes, raw. Whether the URL policy refuses the link or it is fetched (p2 then ends early
    # every time, and is retried and quarantined, each step logged), nothing shows it raw.
    broken = page([(1, day(5, 20))], next_href="p2.atom#" + EVIL)
    site.routes[HEAD] = broken
    body = page([(2, day(5, 10))])
    site.routes[FOLDER + "p2.atom"] = Reply(body, send_length=False, cut_at=len(body) - 300)
    progress: list[str] = []
    error = None
    with caplog.at_level(logging.DEBUG):
        try:
            _extract(site, lake, progress=lambda m, _n: progress.append(m))
        except FeedError as err:
            error = err
    assert progress, "nothing was landed: the broken head page should have been"
    _assert_nothing_raw(caplog, progress, error)
    assert any("\\x1b" in r.getMessage() for r in caplog.records) or (error and "\\x1b" in str(error))


def test_archive_member_names_reach_no_log_or_error_raw(lake, site, caplog) -> None:
    landed = f"PlataformasAgregadasSinMenores{EVIL}_20220105_110000.atom"
    impossible = f"PlataformasAgregadasSinMenores{EVIL}_20221345_990000.atom"
    locked = f"PlataformasAgregadasSinMenores{EVIL}_20220105_120000.atom"
    members = {landed: page([(1, day(5, 11))]), impossible: page([(2, day(5, 3))]), locked: page([(3, day(5))])}
    site.routes[ARCHIVE_2022] = archive(members, encrypt=frozenset({locked}))
    progress: list[str] = []
    with caplog.at_level(logging.DEBUG), pytest.raises(FeedError, match="archive member is encrypted") as caught:
        _extract(site, lake, source="archives", progress=lambda m, _n: progress.append(m))
    _assert_nothing_raw(caplog, progress, caught.value)
    assert "\\x1b[31m\\r\\nINFO forged" in str(caught.value)  # shown, escaped, not dropped
    assert any("impossible" in r.getMessage() and "\\x1b" in r.getMessage() for r in caplog.records)
    assert all("\x1b" not in Path(f).name and "\n" not in f for f in bronze_files(lake))


# -- the measurement --------------------------------------------------------------------------------
def _io_counters() -> dict[str, int]:
    """This process's /proc/self/io (Linux): wchar = bytes handed to write(), write_bytes = to the disk."""
    try:
        lines = Path("/proc/self/io").read_text().splitlines()
    except OSError:
        return {}
    return {k: int(v) for k, v in (line.split(": ") for line in lines)}


def measure(members: int, lake_parent: Path) -> dict[str, Any]:
    """Extract one archive of `members` tiny members (source=archives) and report the cost."""
    import tempfile

    with tempfile.TemporaryDirectory(dir=lake_parent) as tmp, LoopbackSite() as site:
        lake = Path(tmp)
        site.routes[ARCHIVE_2022] = archive(many_members(members))
        with manifest_writes(lake) as writes:
            before, started = _io_counters(), time.monotonic()
            manifest = _extract(site, lake, source="archives")
            seconds, after = time.monotonic() - started, _io_counters()
        size = manifest_path(lake, AGR.key, START, END).stat().st_size
    return {
        "members": members,
        "pages_landed": len(manifest.pages),
        "seconds": round(seconds, 1),
        "manifest_writes": writes.count,
        "manifest_bytes_written": writes.bytes,
        "final_manifest_bytes": size,
        "process_wchar": after.get("wchar", 0) - before.get("wchar", 0),
        "process_write_bytes": after.get("write_bytes", 0) - before.get("write_bytes", 0),
        "lake_parent": str(lake_parent),
        "extract_module": extract.__file__,
    }


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Time one archive extraction and count its manifest writes.")
    parser.add_argument("--members", type=int, default=20_000)
    parser.add_argument("--lake-parent", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")))
    options = parser.parse_args()
    print(json.dumps(measure(options.members, options.lake_parent), indent=2))
