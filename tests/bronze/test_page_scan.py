"""`scan_page`: the counts Silver reconciles to, from the streaming parser or the chunked byte scan.

The expected numbers on the real sample pages were taken from the implementation before the
event-filtered `iterparse` and the chunked byte scan: they must never change.
"""

from __future__ import annotations

import tracemalloc
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from placsp_provider.feed import page_scan
from placsp_provider.feed.page_scan import PageScan, scan_page
from tests.conftest import SAMPLES

pytestmark = pytest.mark.unit

ATOM = b'xmlns="http://www.w3.org/2005/Atom" xmlns:at="http://purl.org/atompub/tombstones/1.0"'
FEED = b"<feed " + ATOM + b">"


def _entry(updated: str = "2022-01-03T00:00:00Z", inner: bytes = b"") -> bytes:
    return b"<entry><id>x</id>" + inner + f"<updated>{updated}</updated></entry>".encode()


def _write(tmp_path: Path, data: bytes, name: str = "page.atom") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


# -- the real pages: results identical to the previous implementation ----------------------------
# name -> (entries, tombstones, min_updated, max_updated, min_deleted, max_deleted, next link)
_AGR = "PlataformasAgregadasSinMenores"
_L643 = "https://contrataciondelestado.es/sindicacion/sindicacion_643/licitacionesPerfilesContratanteCompleto3.atom"
EXPECTED: dict[str, tuple[int, int, str | None, str | None, str | None, str | None, str | None]] = {
    f"1044_agregadas/{_AGR}_2019.zip!{_AGR}_20190103_031259.atom": (
        304,
        196,
        "2018-12-31T05:58:40.982000Z",
        "2019-01-02T15:18:17.649000Z",
        "2018-12-30T23:18:55.155000Z",
        "2019-01-02T13:10:54.651000Z",
        f"{_AGR}_20181231_031557.atom",
    ),
    f"1044_agregadas/{_AGR}_2019.zip!{_AGR}_20190104_030736.atom": (
        494,
        6,
        "2019-01-02T15:25:26.175000Z",
        "2019-01-03T11:26:10.453000Z",
        "2019-01-03T10:12:19.436000Z",
        "2019-01-03T11:11:04.264000Z",
        f"{_AGR}_20190103_031259.atom",
    ),
    f"1044_agregadas/{_AGR}_2019.zip!{_AGR}_20190105_030744.atom": (
        498,
        2,
        "2019-01-03T11:26:10.658000Z",
        "2019-01-04T12:21:55.045000Z",
        "2019-01-03T13:11:04.889000Z",
        "2019-01-03T23:11:11.562000Z",
        f"{_AGR}_20190104_030736.atom",
    ),
    f"1044_agregadas/{_AGR}_20220104_030016_1.atom": (
        117,
        383,
        "2021-12-30T23:14:15.739000Z",
        "2022-01-03T00:11:41.826000Z",
        "2021-12-30T23:13:12.414000Z",
        "2022-01-02T23:11:41.879000Z",
        f"{_AGR}_20211231_030012.atom",
    ),
    f"1044_agregadas/{_AGR}_20220104_030016_1_single.atom": (
        1,
        0,
        "2022-01-03T00:11:41.826000Z",
        "2022-01-03T00:11:41.826000Z",
        None,
        None,
        f"{_AGR}_20211231_030012.atom",
    ),
    f"1044_agregadas/{_AGR}_202201_05-06.zip!{_AGR}_20220105_030012.atom": (
        475,
        25,
        "2022-01-03T12:56:20.849000Z",
        "2022-01-04T12:12:09.464000Z",
        "2022-01-03T23:11:56.497000Z",
        "2022-01-04T00:12:01.376000Z",
        f"{_AGR}_20220104_030016.atom",
    ),
    f"1044_agregadas/{_AGR}_202201_05-06.zip!{_AGR}_20220106_030013.atom": (
        476,
        24,
        "2022-01-04T12:12:09.536000Z",
        "2022-01-05T11:12:24.901000Z",
        "2022-01-04T13:13:12.670000Z",
        "2022-01-04T23:12:13.328000Z",
        f"{_AGR}_20220105_030012.atom",
    ),
    "1143_menores/contratosMenoresPerfilesContratantes.atom": (
        2,
        0,
        "2025-02-01T01:03:51.620000Z",
        "2025-02-01T01:03:51.640000Z",
        None,
        None,
        "contratosMenoresPerfilesContratantes_20250201_042305.atom",
    ),
    "643_licitaciones/resolvedWithLotsAllAwarded/version7.atom": (
        1,
        0,
        "2025-08-18T07:00:00Z",
        "2025-08-18T07:00:00Z",
        None,
        None,
        None,
    ),
    "643_licitaciones/resolvedWithNoLots/version11.atom": (
        1,
        0,
        "2025-08-18T07:00:00Z",
        "2025-08-18T07:00:00Z",
        None,
        None,
        None,
    ),
}
FRAGMENT = (
    "643_licitaciones/fragment_not_wellformed/"
    "contrataciondelestadoes_sindicacion_licitacionesPerfilContratante_17540944.atom"
)


def _sample_pages() -> list[str]:
    names = [str(p.relative_to(SAMPLES)) for p in sorted(SAMPLES.rglob("*.atom"))]
    for archive in sorted(SAMPLES.rglob("*.zip")):
        with zipfile.ZipFile(archive) as zf:
            names += [f"{archive.relative_to(SAMPLES)}!{m}" for m in zf.namelist() if m.endswith(".atom")]
    return names


def _sample(name: str, tmp_path: Path) -> Path:
    if "!" not in name:
        return SAMPLES / name
    archive, member = name.split("!")
    with zipfile.ZipFile(SAMPLES / archive) as zf:
        return _write(tmp_path, zf.read(member), member)


def test_every_sample_page_has_expected_results() -> None:
    # A new sample page must get its expected numbers here too.
    assert sorted(_sample_pages()) == sorted([*EXPECTED, FRAGMENT])


def _page_id(name: str) -> str:
    return name.rsplit("/", 1)[-1].replace("!", "/")


@pytest.mark.parametrize("name", sorted(EXPECTED), ids=_page_id)
def test_real_page_counts_unchanged(name: str, tmp_path: Path) -> None:
    scan = scan_page(_sample(name, tmp_path)).to_json()
    got = (
        scan["entries"],
        scan["tombstones"],
        scan["min_updated"],
        scan["max_updated"],
        scan["min_deleted"],
        scan["max_deleted"],
        scan["links"].get("next"),
    )
    assert got == EXPECTED[name]
    assert scan["well_formed"] and scan["is_feed"] and scan["error"] is None
    assert scan["bad_timestamps"] == 0
    if name.startswith("643_"):
        assert scan["links"] == {"first": _L643, "self": _L643}
    else:
        assert set(scan["links"]) >= {"first", "next", "self"}


def test_real_page_not_well_formed_unchanged() -> None:
    scan = scan_page(SAMPLES / FRAGMENT)
    assert (scan.entries, scan.tombstones, scan.links, scan.well_formed) == (3, 0, {}, False)
    assert scan.error is not None and scan.error.startswith("not well-formed: Namespace prefix cac-place-ext")
    assert scan.error.endswith("line 7, column 44")


@pytest.mark.parametrize(
    "name", [n for n in sorted(EXPECTED) if n.endswith("030012.atom") or "030016_1." in n], ids=_page_id
)
@pytest.mark.parametrize("chunk_size", [4093, 65536])
def test_byte_scan_agrees_with_the_parser_on_real_pages(name: str, chunk_size: int, tmp_path: Path) -> None:
    path = _sample(name, tmp_path)
    parsed = scan_page(path)
    by_bytes = page_scan._byte_scan(path, "forced", chunk_size=chunk_size)
    assert (by_bytes.entries, by_bytes.tombstones) == (parsed.entries, parsed.tombstones)
    assert by_bytes.links == parsed.links


# -- what the streaming parser counts --------------------------------------------------------------
def test_entry_nested_in_another_element_is_not_counted(tmp_path: Path) -> None:
    data = FEED + b"<wrapper>" + _entry("2020-01-01T00:00:00Z") + b"</wrapper>" + _entry() + b"</feed>"
    scan = scan_page(_write(tmp_path, data))
    assert (scan.entries, scan.well_formed, scan.is_feed) == (1, True, True)
    assert scan.oldest() == scan.newest()  # the nested entry's time was not read either
    assert scan.min_updated == datetime(2022, 1, 3, tzinfo=UTC)


def test_entry_inside_an_entry_is_not_counted(tmp_path: Path) -> None:
    data = FEED + _entry(inner=_entry("2020-01-01T00:00:00Z")) + b"</feed>"
    scan = scan_page(_write(tmp_path, data))
    assert (scan.entries, scan.bad_timestamps) == (1, 0)
    assert scan.min_updated == datetime(2022, 1, 3, tzinfo=UTC)


def test_link_inside_an_entry_is_not_a_feed_link(tmp_path: Path) -> None:
    inner = b'<link rel="next" href="entry-next.atom"/><link rel="alternate" href="detail"/>'
    data = FEED + b'<link rel="next" href="feed-next.atom"/>' + _entry(inner=inner) + b"</feed>"
    assert scan_page(_write(tmp_path, data)).links == {"next": "feed-next.atom"}
    # Nor when the feed has no next link of its own (last page of the chain).
    data = FEED + b'<link rel="self" href="me.atom"/>' + _entry(inner=inner) + b"</feed>"
    assert scan_page(_write(tmp_path, data)).links == {"self": "me.atom"}


def test_entry_times_read_before_and_after_inner_links(tmp_path: Path) -> None:
    # <updated> before a <link> inside the entry must survive until the entry ends.
    body = b'<entry><updated>2022-01-05T00:00:00Z</updated><link rel="next" href="x"/></entry>'
    data = FEED + body + _entry("2022-01-02T00:00:00Z") + b"</feed>"
    scan = scan_page(_write(tmp_path, data))
    assert (scan.entries, scan.bad_timestamps) == (2, 0)
    assert scan.max_updated == datetime(2022, 1, 5, tzinfo=UTC)


def test_tombstones_and_bad_timestamps(tmp_path: Path) -> None:
    data = (
        FEED
        + b'<at:deleted-entry ref="a" when="2022-01-01T00:00:00+01:00"/>'
        + b'<at:deleted-entry ref="b" when="yesterday"/>'
        + b"<entry><id>c</id></entry>"
        + b"<wrapper><at:deleted-entry ref='d' when='2000-01-01T00:00:00Z'/></wrapper>"
        + b"</feed>"
    )
    scan = scan_page(_write(tmp_path, data))
    assert (scan.entries, scan.tombstones, scan.bad_timestamps) == (1, 2, 2)
    assert scan.min_deleted == datetime(2021, 12, 31, 23, tzinfo=UTC)
    assert scan.min_deleted == scan.max_deleted


def test_feed_links_anywhere_among_the_roots_children_of_a_long_page(tmp_path: Path) -> None:
    # Thousands of records (the parser reads 32 KB at a time, records are freed as they end): links
    # of the root before, between and after them all count, in document order (a later rel wins);
    # links inside records or other elements never do.
    records = [_entry(f"2022-01-03T00:{n % 60:02d}:00Z", b'<link rel="next" href="in.atom"/>') for n in range(3000)]
    records[1500] += b'<link rel="next" href="middle.atom"/><wrapper><link rel="up" href="no.atom"/></wrapper>'
    records[2999] += b'<at:deleted-entry ref="r" when="2022-01-01T00:00:00Z"/>'
    data = FEED + b'<link rel="self" href="s.atom"/><link rel="next" href="first.atom"/>' + b"\n".join(records)
    data += b'<link rel="last" href="l.atom"/><link rel="self" href="after.atom"/></feed>'
    scan = scan_page(_write(tmp_path, data))
    assert (scan.well_formed, scan.entries, scan.tombstones, scan.bad_timestamps) == (True, 3000, 1, 0)
    assert scan.links == {"self": "after.atom", "next": "middle.atom", "last": "l.atom"}
    assert (scan.min_updated, scan.max_updated) == (
        datetime(2022, 1, 3, tzinfo=UTC),
        datetime(2022, 1, 3, 0, 59, tzinfo=UTC),
    )


def test_time_stamps_compare_as_times_not_as_strings(tmp_path: Path) -> None:
    # Ordered as strings: 23:00Z < 23:30-01:00 < 00:30+02:00. As times: 22:30Z < 23:00Z < 00:30Z.
    stamps = ["2022-01-02T23:30:00-01:00", "2022-01-02T23:00:00Z", "2022-01-03T00:30:00+02:00"]
    data = FEED + b"".join(_entry(s) for s in stamps)
    data += b"".join(f'<at:deleted-entry ref="r" when="{s}"/>'.encode() for s in stamps) + b"</feed>"
    scan = scan_page(_write(tmp_path, data))
    oldest, newest = datetime(2022, 1, 2, 22, 30, tzinfo=UTC), datetime(2022, 1, 3, 0, 30, tzinfo=UTC)
    assert (scan.min_updated, scan.max_updated, scan.min_deleted, scan.max_deleted) == (oldest, newest) * 2
    assert scan.to_json()["max_updated"] == "2022-01-03T00:30:00Z"


@pytest.mark.parametrize(
    ("updated", "good"),
    [
        ("\n  2022-01-03T00:00:00Z\n", True),
        ("  <![CDATA[2022-01-03T00:00:00Z]]>  ", True),
        ("  <!-- c -->2022-01-03T00:00:00Z", True),
        ("2022-01-03T00:00:00Z<x/>", True),
        ("  <?pi x?>2022-01-03T00:00:00Z", False),  # the text before its first child is blank
        ("  <x/>2022-01-03T00:00:00Z", False),
        ("   ", False),
        ("", False),
    ],
    ids=["padded", "cdata", "comment", "child-after", "pi-first", "child-first", "blank", "empty"],
)
def test_updated_text_around_blanks(updated: str, good: bool, tmp_path: Path) -> None:
    # The text of <updated> up to its first child, stripped: blank text the parser drops around markup
    # (`remove_blank_text`) must not turn a bad time stamp into a good one, nor the other way round.
    data = FEED + f"<entry>\n  <id>x</id>\n  <updated>{updated}</updated>\n</entry>\n</feed>".encode()
    scan = scan_page(_write(tmp_path, data))
    assert (scan.entries, scan.bad_timestamps) == (1, 0 if good else 1)
    assert scan.min_updated == (datetime(2022, 1, 3, tzinfo=UTC) if good else None)


@pytest.mark.parametrize(
    "data",
    [
        b"<html><body><feed " + ATOM + b"><entry/></feed></body></html>",
        b"<entry " + ATOM + b"><updated>2022-01-03T00:00:00Z</updated></entry>",  # a single entry
        b'<feed xmlns="urn:not-atom"><entry/></feed>',
    ],
    ids=["html", "atom-entry-root", "feed-in-other-namespace"],
)
def test_well_formed_but_not_a_feed(data: bytes, tmp_path: Path) -> None:
    scan = scan_page(_write(tmp_path, data))
    assert (scan.well_formed, scan.is_feed, scan.entries, scan.error) == (True, False, 0, None)


def test_children_of_a_non_feed_root_are_counted_as_before(tmp_path: Path) -> None:
    # Not a feed (extraction refuses it), but its direct Atom entries are still described.
    data = b"<html " + ATOM + b">" + _entry() + b"</html>"
    scan = scan_page(_write(tmp_path, data))
    assert (scan.is_feed, scan.entries) == (False, 1)


@pytest.mark.parametrize("data", [b"", b"  \n"], ids=["empty", "blank"])
def test_empty_document_is_not_well_formed(data: bytes, tmp_path: Path) -> None:
    scan = scan_page(_write(tmp_path, data))
    assert (scan.well_formed, scan.items, scan.links) == (False, 0, {})
    assert scan.error is not None and scan.error.startswith("not well-formed: ") and "line" in scan.error


def test_page_with_a_dtd_is_refused_before_parsing_and_counted_by_bytes(tmp_path: Path) -> None:
    data = b'<?xml version="1.0"?>\n<!DOCTYPE feed>\n' + FEED + _entry() + _entry() + b"</feed>"
    scan = scan_page(_write(tmp_path, data))
    assert (scan.well_formed, scan.entries, scan.min_updated) == (False, 2, None)
    assert scan.error is not None and "declares a DTD" in scan.error


def test_not_well_formed_keeps_parser_message_with_line_and_column(tmp_path: Path) -> None:
    data = FEED + b'\n<link rel="next" href="n.atom"/>\n' + _entry() + b"\n<entry><title>x</entry>\n"
    data += b'<at:deleted-entry ref="r" when="2022-01-01T00:00:00Z"/>' + _entry() + b"</feed>"
    scan = scan_page(_write(tmp_path, data))
    assert scan.error is not None
    assert scan.error.startswith("not well-formed: Opening and ending tag mismatch: title line 4 and entry")
    assert scan.error.endswith("line 4, column 24")
    assert (scan.well_formed, scan.entries, scan.tombstones) == (False, 3, 1)
    assert scan.links == {"next": "n.atom"}
    assert scan.to_json()["error"] == scan.error


# -- the byte scan: chunked, every start tag counted once -------------------------------------------
SPLIT_PAGE = (
    FEED
    + b'<link rel="self" href="s.atom"/><atom:link href="n.atom" rel="next"/>'
    + b"<entry><title>x</entry>"  # not well-formed
    + b"<atom:entry xml:lang='es'/><at:deleted-entry ref='r'/>\n<entry\n/></entry><entryX/><deleted-entry>"
    + b"<"
    + b"p" * 100
    + b":entry>"
    + b"<"
    + b"q" * 60
    + b":deleted-entry/>"  # prefixes longer than the tail
    + b"<"
    + b"e" * 80
    + b">"  # a long name that is no start tag
    + b"</feed>"
)


def test_byte_scan_counts_a_start_tag_split_across_chunks_once(tmp_path: Path) -> None:
    path = _write(tmp_path, SPLIT_PAGE)
    reference = page_scan.count_start_tags(SPLIT_PAGE)
    assert reference == (4, 3)
    for chunk_size in range(1, len(SPLIT_PAGE) + 2):  # every possible boundary, inside every tag
        scan = page_scan._byte_scan(path, "m", chunk_size=chunk_size)
        assert (scan.entries, scan.tombstones) == reference, chunk_size
        assert scan.links == {"self": "s.atom", "next": "n.atom"}, chunk_size


def test_scan_page_uses_the_module_chunk_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = FEED + b"<entry><title>x</entry><at:deleted-entry ref='r'/><entry/></feed>"
    # The first chunk ends inside `<at:deleted-entry`, right after `<at:`.
    monkeypatch.setattr(page_scan, "BYTE_SCAN_CHUNK", data.index(b"<at:deleted-entry") + len(b"<at:"))
    scan = scan_page(_write(tmp_path, data))
    assert (scan.well_formed, scan.entries, scan.tombstones) == (False, 2, 1)


def test_byte_scan_reads_header_links_before_the_first_record(tmp_path: Path) -> None:
    data = FEED + b'<link rel="next" href="feed.atom"/><bad>'
    data += _entry(inner=b'<link rel="next" href="in.atom"/>')
    data += b'<link rel="prev" href="after-first-record.atom"/></feed>'
    for chunk_size in (1, 7, 1 << 20):
        scan = page_scan._byte_scan(_write(tmp_path, data), "m", chunk_size=chunk_size)
        assert scan.links == {"next": "feed.atom"}


def test_byte_scan_header_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(page_scan, "HEADER_BYTES", 200)
    data = FEED + b'<link rel="self" href="s.atom"/><bad>'
    data += b" " * (200 - len(data)) + b'<link rel="next" href="beyond.atom"/>' + _entry() + b"</feed>"
    scan = page_scan._byte_scan(_write(tmp_path, data), "m", chunk_size=64)
    assert (scan.entries, scan.links) == (1, {"self": "s.atom"})


def test_byte_scan_memory_does_not_grow_with_page_size(tmp_path: Path) -> None:
    def peak(copies: int) -> tuple[PageScan, int]:
        record = _entry(inner=b"<title>" + b"t" * 930 + b"</title>") + b"\n"  # about 1 KB
        data = FEED + b"<bad></feed>" + record * copies + b"</feed>"  # the parser fails at once
        path = _write(tmp_path, data, f"p{copies}.atom")
        tracemalloc.start()
        try:
            scan = scan_page(path)
            return scan, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            path.unlink()

    eight_mb, eight_mb_peak = peak(8_000)
    large, large_peak = peak(32_000)
    assert (eight_mb.entries, large.entries, large.well_formed) == (8_000, 32_000, False)
    # A few chunks and the header, the same for both pages; reading the whole file would be 32 MB.
    assert large_peak < 4 * page_scan.BYTE_SCAN_CHUNK + page_scan.HEADER_BYTES
    assert large_peak < eight_mb_peak + (64 << 10)


def test_byte_scan_refuses_a_chunk_size_below_one(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="chunk_size"):
        page_scan._byte_scan(_write(tmp_path, b"<x"), "m", chunk_size=0)
