"""The extraction's streaming scan of a page (and `iter_items`, which bronze/completeness reads pages
with) in bounded memory, whatever the page holds (issue 31, F4).

Every child of the feed root is freed once it has ended, record or not; no child may hold more than
`MAX_NODES_PER_RECORD` nodes, nor the PIs before or after the root, nor one start tag as many `=`;
the page no more than `MAX_NODES_PER_PAGE` nodes and `MAX_NAMESPACE_DECLARATIONS` declarations.
Over a limit the page is "not well-formed for this pipeline", the limit named, and counted by the
byte scan, so the extraction still lands it and Silver still accounts for each record.

Memory is the peak RSS of a child process (`ru_maxrss` of the child itself), so the test process's
own memory does not muddle it. Before this, an 8 MB page of `<x/>` at the feed root took 580 MB,
inside an entry 275 MB, and 16 MB of them sent gzip'd (20 KB on the wire) 1.2 GB in the extraction.
"""

from __future__ import annotations

import gzip
import io
import zipfile
from pathlib import Path

import pytest
from lxml import etree

from placsp_provider import settings
from placsp_provider.feed import page_scan
from tests.pages import ATOM_ROOT, ID_PREFIX, day, entry
from tests.parser.test_hostile_xml import DECIDED_WITHIN_S, run_child

pytestmark = pytest.mark.unit

EIGHT_MB = 8 << 20
SCAN_PEAK_MB = 150  # measured 20-65 MB (the interpreter and lxml alone take ~20 MB)
EXTRACT_PEAK_MB = 200  # measured ~70 MB (requests, the loopback server and the landing included)


def _page(*parts: bytes, prolog: bytes = b"", epilog: bytes = b"") -> bytes:
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + prolog + ATOM_ROOT + b"".join(parts) + b"</feed>" + epilog


def _stuffed(number: int, inside: bytes) -> bytes:
    body = entry(number, day(5))
    return body[: -len(b"</entry>")] + inside + b"</entry>"


_SCAN = """
from lxml import etree
from placsp_provider.feed.page_scan import iter_items, scan_page

path = Path(sys.argv[1])
if sys.argv[2] == "scan":
    scan = scan_page(path)
    result = [scan.entries, scan.tombstones, scan.well_formed, scan.error, scan.links]
else:
    try:
        result = [len(list(iter_items(path))), None]
    except etree.XMLSyntaxError as err:
        result = [type(err).__name__, str(err)]
out(peak_mb=peak_mb(), result=result)
"""


def _in_child(tmp_path: Path, data: bytes, how: str) -> tuple[float, list]:
    path = tmp_path / "page.atom"
    path.write_bytes(data)
    got = run_child(_SCAN, str(path), how, timeout=120)
    return got["peak_mb"], got["result"]


LINKS = b'<link href="s.atom" rel="self"/><link href="n.atom" rel="next"/>'


@pytest.mark.parametrize("how", ["scan", "iter_items"])
def test_elements_at_the_feed_root_are_freed_as_they_end(how: str, tmp_path: Path) -> None:
    junk = b"<x/>" * (EIGHT_MB // 4)
    data = _page(b"<id>t</id>", junk, LINKS, entry(1, day(5)), junk, entry(2, day(5)), junk)
    peak, result = _in_child(tmp_path, data, how)
    print(f"{how}, 3 x 8 MB of elements at the feed root: peak RSS {peak:.0f} MB")  # shown by -rP
    assert peak < SCAN_PEAK_MB, peak
    if how == "scan":  # counted, and the header links read among 6 million freed siblings
        assert result == [2, 0, True, None, {"self": "s.atom", "next": "n.atom"}]
    else:
        assert result == [2, None]


# name: (what fills entry 2, or is put before / after the root)
FLOODS = {
    "elements in an entry": lambda: {"inside": b"<x/>" * (EIGHT_MB // 4)},
    "PIs in an entry": lambda: {"inside": b"<?x?>" * (EIGHT_MB // 5)},
    "elements in another child of the root": lambda: {"sibling": b"<y>" + b"<x/>" * (EIGHT_MB // 4) + b"</y>"},
    "PIs before the root": lambda: {"prolog": b"<?x?>" * (EIGHT_MB // 5)},
    "PIs after the root": lambda: {"epilog": b"<?x?>" * (EIGHT_MB // 5)},
    "attributes of one start tag": lambda: {
        "inside": b"<x" + b"".join(b' a%d=""' % i for i in range(EIGHT_MB // 11)) + b"/>"
    },
    "namespace declarations of one start tag": lambda: {
        "inside": b"<x" + b"".join(b' xmlns:p%d="u"' % i for i in range(EIGHT_MB // 17)) + b"/>"
    },
    "namespace declarations across elements": lambda: {
        "inside": b"".join(b'<x xmlns:p="u%d"/>' % i for i in range(settings.MAX_NAMESPACE_DECLARATIONS + 10))
    },
}
LIMIT_NAMED = {
    "namespace declarations across elements": (
        "namespace declarations, over the limit MAX_NAMESPACE_DECLARATIONS = 50,000"
    ),
    "attributes of one start tag": "`=` between two `<`",
    "namespace declarations of one start tag": "`=` between two `<`",
}


@pytest.mark.parametrize("how", ["scan", "iter_items"])
@pytest.mark.parametrize("flood", list(FLOODS))
def test_a_flood_stops_the_tree_in_bounded_memory_and_names_the_limit(flood: str, how: str, tmp_path: Path) -> None:
    parts = FLOODS[flood]()
    records = [entry(1, day(5)), _stuffed(2, parts.get("inside", b"")), parts.get("sibling", b""), entry(3, day(5))]
    data = _page(*records, prolog=parts.get("prolog", b""), epilog=parts.get("epilog", b""))
    peak, result = _in_child(tmp_path, data, how)
    print(f"{how}, {flood}: peak RSS {peak:.0f} MB")
    assert peak < SCAN_PEAK_MB, peak
    named = LIMIT_NAMED.get(flood, "over the limit MAX_NODES_PER_RECORD = 250,000")
    if how == "scan":
        entries, tombstones, well_formed, error, _links = result
        # every record start tag still counted, by the byte scan: Silver reconciles to these
        assert (entries, tombstones, well_formed) == (3, 0, False)
        assert error.startswith("not well-formed for this pipeline: more than ")
        assert named in error and "placsp_provider.settings" in error
    else:  # an XMLSyntaxError, so bronze/completeness falls back to the Silver parser's split
        assert result[0] == "TreeTooLargeError"
        assert result[1].startswith(f"file {tmp_path / 'page.atom'}: more than ") and named in result[1]


def test_the_page_limit_counts_every_node_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "page.atom"
    body = [entry(n, day(5)) for n in range(1, 41)]
    path.write_bytes(_page(*body))
    root = etree.parse(str(path)).getroot()
    nodes = sum(1 + len(e.attrib) for e in root.iter("*"))  # no PI in it
    assert path.stat().st_size > 4 * nodes  # the page is large enough to be counted
    monkeypatch.setattr(settings, "MAX_NODES_PER_PAGE", nodes)
    assert (page_scan.scan_page(path).well_formed, len(list(page_scan.iter_items(path)))) == (True, 40)
    monkeypatch.setattr(settings, "MAX_NODES_PER_PAGE", nodes - 1)
    scan = page_scan.scan_page(path)
    assert (scan.well_formed, scan.entries) == (False, 40)
    assert scan.error is not None and f"in the page, over the limit MAX_NODES_PER_PAGE = {nodes - 1:,}" in scan.error
    with pytest.raises(page_scan.TreeTooLargeError, match="MAX_NODES_PER_PAGE"):
        list(page_scan.iter_items(path))


def test_a_record_grown_past_the_limit_over_many_chunks_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Counting the open record is put off while too few bytes came to make it pass the limit: a
    # record growing slowly (one element every 2 KB) is still found, however it spreads.
    monkeypatch.setattr(settings, "MAX_NODES_PER_RECORD", 2_000)
    slow = b"".join(b"<x>" + b"t" * 2_000 + b"</x>" for _ in range(2_500))
    path = tmp_path / "page.atom"
    path.write_bytes(_page(entry(1, day(5)), _stuffed(2, slow), entry(3, day(5))))
    scan = page_scan.scan_page(path)
    assert (scan.well_formed, scan.entries) == (False, 3)
    assert scan.error is not None and "in one child of the feed root" in scan.error


def test_header_links_of_a_broken_page_are_read_in_linear_time(tmp_path: Path) -> None:
    # The byte scan reads the links before the first record; two of its patterns re-read the rest
    # of the header once per `<link` (or per byte of a long word): hours for these 1 MB headers.
    code = """
    import time
    from placsp_provider.feed.page_scan import scan_page
    seconds = []
    for name in sys.argv[1:]:
        started = time.perf_counter()
        scan = scan_page(Path(name))
        assert not scan.well_formed
        seconds.append(round(time.perf_counter() - started, 3))
    out(seconds=seconds)
    """
    headers = [b"<link" * 200_000, b"<link " + b"a" * 1_000_000 + b">", b"<link " * 200_000 + b">"]
    names = []
    for n, header in enumerate(headers):
        path = tmp_path / f"p{n}.atom"
        path.write_bytes(ATOM_ROOT + header + b"<bad></feed>" + entry(1, day(5)) + b"</feed>")
        names.append(str(path))
    got = run_child(code, *names)
    assert all(s < DECIDED_WITHIN_S for s in got["seconds"]), got


# -- the extraction over loopback: 16 MB of elements sent gzip'd --------------------------------------
_EXTRACT = """
import io, zipfile
from datetime import UTC, date, datetime, timedelta
from placsp_provider.bronze.extract import ExtractRequest, extract_interval
from placsp_provider.datasets import DATASETS
from placsp_provider.demo.loopback_site import LoopbackSite, Reply
from placsp_provider.feed.client import ClientConfig, FeedClient

gzipped, lake = Path(sys.argv[1]), Path(sys.argv[2])
agr = DATASETS["agregadas"]
folder = f"/sindicacion/{agr.folder}/"
empty = io.BytesIO()
zipfile.ZipFile(empty, "w").close()
with LoopbackSite() as site:
    site.routes[folder + agr.head_file] = Reply(gzipped, headers={"Content-Encoding": "gzip"})  # read per request
    archive = Reply(empty.getvalue(), content_type="application/zip")
    site.routes[folder + "PlataformasAgregadasSinMenores_2022.zip"] = archive
    before = peak_mb()
    request = ExtractRequest(
        dataset=agr, start=datetime(2022, 1, 5, tzinfo=UTC), end=datetime(2022, 1, 6, tzinfo=UTC), lake=lake,
        run_id="t", overlap=timedelta(0), today=date(2026, 11, 29),
    )
    config = ClientConfig(base_url=site.base_url, backoff_base=0.0, max_retries=0, read_timeout=30.0)
    with FeedClient(config, "agregadas") as client:
        manifest = extract_interval(client, request)
out(peak_mb=peak_mb(), before_mb=before, pages=[[p.entries, p.well_formed, p.error] for p in manifest.pages])
"""


@pytest.mark.http
@pytest.mark.parametrize("where", ["at the feed root", "inside an entry"])
def test_16_mb_of_elements_sent_gzipped_are_extracted_in_bounded_memory(where: str, tmp_path: Path) -> None:
    junk = b"<x/>" * (4 << 20)  # 16 MiB, ~20 KB gzip'd
    first = entry(1, day(5, 20))
    if where == "inside an entry":
        first = first[: -len(b"</entry>")] + junk + b"</entry>"
        junk = b""
    page = tmp_path / "page.atom.gz"
    page.write_bytes(gzip.compress(_page(b"<id>t</id>", first, junk, entry(2, day(5, 10)))))
    assert page.stat().st_size < 100_000  # a tiny download...
    lake = tmp_path / "lake"
    lake.mkdir()
    got = run_child(_EXTRACT, str(page), str(lake), timeout=180)
    print(f"extract_interval, 16 MB of elements {where}, gzip'd: peak RSS {got['peak_mb']:.0f} MB")
    # ... that the extraction now reads in bounded memory
    assert got["peak_mb"] < EXTRACT_PEAK_MB, got
    ((entries, well_formed, error),) = got["pages"]
    assert entries == 2  # landed, every record counted
    if where == "at the feed root":
        assert (well_formed, error) == (True, None)
    else:  # landed for quarantine; Silver dead-letters the record, the limit named
        assert well_formed is False and "over the limit MAX_NODES_PER_RECORD = 250,000" in error


def test_completeness_reads_a_page_over_a_limit_with_the_silver_split(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # bronze/completeness catches XMLSyntaxError from iter_items and falls back to parse_page.
    monkeypatch.setattr(settings, "MAX_NODES_PER_RECORD", 1_000)
    path = tmp_path / "page.atom"
    path.write_bytes(_page(entry(1, day(5)), _stuffed(2, b"<x/>" * 2_000), entry(3, day(5))))
    with pytest.raises(etree.XMLSyntaxError):
        list(page_scan.iter_items(path))
    from placsp_provider.datasets import get_dataset
    from placsp_provider.parser.page_parser import parse_page

    parsed = parse_page(path.read_bytes(), dataset=get_dataset("agregadas"), source_file=path.name)
    assert [row["entry_id"] for row in parsed.entries] == [f"{ID_PREFIX}1", f"{ID_PREFIX}3"]
    assert [d["error_type"] for d in parsed.dead_letters] == ["tree_too_large"]


def test_a_zip_member_is_scanned_the_same_way(tmp_path: Path) -> None:
    # Archive members land through the same scan (extract_member then scan_page).
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("m.atom", _page(entry(1, day(5)), b"<x/>" * 100_000, entry(2, day(5))))
    member = tmp_path / "m.atom"
    member.write_bytes(zipfile.ZipFile(buf).read("m.atom"))
    scan = page_scan.scan_page(member)
    assert (scan.entries, scan.well_formed) == (2, True)
