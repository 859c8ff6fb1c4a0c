"""Byte-level splitting of pages into records, checked against real pages and lxml's own count."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from lxml import etree

from placsp_provider.feed.xml import ATOM_NS, DELETED_ENTRY_TAG, ENTRY_TAG, TOMBSTONE_NS, make_parser
from placsp_provider.parser import page_split
from placsp_provider.parser.page_split import ENTRY, TOMBSTONE

pytestmark = pytest.mark.unit

SAMPLES = Path(__file__).resolve().parents[2] / "include" / "placsp_samples"
PAGE_2022 = SAMPLES / "1044_agregadas" / "PlataformasAgregadasSinMenores_20220104_030016_1.atom"
VERSION7 = SAMPLES / "643_licitaciones" / "resolvedWithLotsAllAwarded" / "version7.atom"
FRAGMENT = next((SAMPLES / "643_licitaciones" / "fragment_not_wellformed").glob("*.atom"))


def _lxml_counts(data: bytes) -> tuple[int, int]:
    """Independent count: a whole-document parse of a well-formed page."""
    root = etree.fromstring(data, parser=make_parser())
    return len(root.findall(ENTRY_TAG)), len(root.findall(DELETED_ENTRY_TAG))


def test_2022_page_tombstones_declared_inline_are_found_by_uri() -> None:
    data = PAGE_2022.read_bytes()
    layout = page_split.scan_page(data)
    assert (layout.entries_seen, layout.tombstones_seen) == (117, 383)  # as SOURCES.md says
    assert (layout.entries_seen, layout.tombstones_seen) == _lxml_counts(data)
    assert layout.has_feed_root and layout.feed_closed
    # the 2022 root does not bind the tombstone namespace: each tombstone declares it inline
    assert f'xmlns="{ATOM_NS}"' in layout.namespace_context
    assert TOMBSTONE_NS not in layout.namespace_context
    assert 'xmlns:cbc="urn:dgpe:names:draft:codice:schema:xsd:CommonBasicComponents-2"' in (layout.namespace_context)
    assert layout.xml_declaration.startswith(b"<?xml")


def test_records_are_exactly_the_record_bytes() -> None:
    data = PAGE_2022.read_bytes()
    layout = page_split.scan_page(data)
    for span in layout.records:
        raw = data[span.start : span.end]
        assert span.closed
        if span.kind == ENTRY:
            assert raw.startswith(b"<entry>") and raw.endswith(b"</entry>")
        else:
            assert raw.startswith(b"<at:deleted-entry ") and raw.endswith(b"/>")
    # tombstones come first on a page, then entries, newest first
    kinds = [span.kind for span in layout.records]
    assert kinds == [TOMBSTONE] * 383 + [ENTRY] * 117


def test_2025_root_declares_the_tombstone_namespace() -> None:
    layout = page_split.scan_page(VERSION7.read_bytes())
    assert f'xmlns:at="{TOMBSTONE_NS}"' in layout.namespace_context
    assert layout.entries_seen == 1


def test_fragment_without_root_falls_back_to_unprefixed_entries() -> None:
    data = FRAGMENT.read_bytes()
    layout = page_split.scan_page(data)
    assert layout.namespace_context == ""
    assert not layout.has_feed_root
    assert [span.kind for span in layout.records] == [ENTRY] * 3
    assert all(span.closed for span in layout.records)
    assert [span.start for span in layout.records] == [m.start() for m in re.finditer(rb"<entry>", data)]


def test_prefixed_atom_and_other_namespaces_are_told_apart_by_uri() -> None:
    page = (
        f'<a:feed xmlns:a="{ATOM_NS}" xmlns:t="{TOMBSTONE_NS}" xmlns:x="urn:other">'
        '<t:deleted-entry ref="r1" when="2022-01-01T00:00:00Z"/>'
        "<a:entry><a:id>1</a:id></a:entry>"
        "<x:entry>not atom</x:entry>"  # same local name, another namespace: not a record
        "<entry>unbound default: not atom either, the root has no default namespace</entry>"
        '<z:deleted-entry xmlns:z="urn:not-tombstones" ref="r2"/>'
        f'<y:deleted-entry xmlns:y="{TOMBSTONE_NS}" ref="r3" when="2022-01-01T00:00:00Z"/>'
        "</a:feed>"
    ).encode()
    layout = page_split.scan_page(page)
    found = [(span.kind, span.prefix) for span in layout.records]
    # `<entry>` with no default namespace anywhere is kept (fallback): it will fail visibly later
    assert found == [(TOMBSTONE, "t"), (ENTRY, "a"), (ENTRY, ""), (TOMBSTONE, "y")]


def test_default_namespace_bound_elsewhere_excludes_unprefixed_entry() -> None:
    page = f'<feed xmlns="urn:other" xmlns:a="{ATOM_NS}"><entry/><a:entry/></feed>'.encode()
    assert [span.prefix for span in page_split.scan_page(page).records] == ["a"]


def test_missing_end_tag_ends_the_record_at_the_next_record() -> None:
    page = (
        f'<feed xmlns="{ATOM_NS}"><entry><id>1</id></entry>\n'
        "<entry><id>2</id>\n   \n"  # no </entry>
        "<entry><id>3</id></entry></feed>"
    ).encode()
    layout = page_split.scan_page(page)
    assert [span.closed for span in layout.records] == [True, False, True]
    assert page[layout.records[1].start : layout.records[1].end] == b"<entry><id>2</id>"
    assert page[layout.records[2].start : layout.records[2].end] == b"<entry><id>3</id></entry>"


def test_truncated_page_ends_the_last_record_at_end_of_page() -> None:
    data = PAGE_2022.read_bytes()
    cut = data.index(b"<cbc:ContractFolderID>", data.index(b"<entry>")) + 5
    layout = page_split.scan_page(data[:cut])
    assert layout.records[-1].end == cut and not layout.records[-1].closed
    assert not layout.feed_closed
    assert all(span.closed for span in layout.records[:-1])


def test_self_closing_tombstone_with_gt_in_an_attribute() -> None:
    page = (
        f'<feed xmlns="{ATOM_NS}" xmlns:at="{TOMBSTONE_NS}">'
        '<at:deleted-entry ref="a>b" when="2022-01-01T00:00:00Z"/><entry/></feed>'
    ).encode()
    records = page_split.scan_page(page).records
    assert page[records[0].start : records[0].end].endswith(b'when="2022-01-01T00:00:00Z"/>')
    assert records[1].kind == ENTRY and records[1].closed


def test_tombstone_with_comment_child_ends_at_its_end_tag() -> None:
    page = (
        f'<feed xmlns="{ATOM_NS}"><at:deleted-entry xmlns:at="{TOMBSTONE_NS}" ref="r" when="w">'
        '<at:comment type="ANULADA"/></at:deleted-entry ></feed>'
    ).encode()
    (span,) = page_split.scan_page(page).records
    assert page[span.start : span.end].endswith(b"</at:deleted-entry >")


def test_empty_inputs_have_no_records() -> None:
    for data in (b"", b"   ", f'<?xml version="1.0"?><feed xmlns="{ATOM_NS}"></feed>'.encode()):
        assert page_split.scan_page(data).records == ()


def test_wrapper_keeps_the_records_line_numbers() -> None:
    record = b"<entry>\n<id>1</id>\n<title>unclosed\n</entry>"
    wrapped, head_length = page_split.wrap_record(record, f'xmlns="{ATOM_NS}"', b'<?xml version="1.0"?>')
    assert wrapped[head_length:].startswith(record)
    with pytest.raises(etree.XMLSyntaxError) as raised:
        etree.fromstring(wrapped, parser=make_parser())
    # the mismatch is on the record's 4th line, where </entry> meets the open <title> of line 3
    assert raised.value.msg.startswith("Opening and ending tag mismatch: title line 3 and entry")
    assert raised.value.position[0] == 4


def test_recover_entry_id_from_unparsable_bytes() -> None:
    assert (
        page_split.recover_entry_id(b"<entry>\n  <id> https://x/sindicacion/a/1 </id><cbc:Bad", ENTRY)
        == "https://x/sindicacion/a/1"
    )
    assert page_split.recover_entry_id(b'<at:deleted-entry ref="https://x/1" when="w"/>', TOMBSTONE) == ("https://x/1")
    assert page_split.recover_entry_id(b"<entry><title>no id</title>", ENTRY) is None


def test_line_and_column_of_an_offset() -> None:
    data = b"ab\ncd\nef"
    assert page_split.line_of(data, data.index(b"e")) == 3
    assert page_split.column_of(data, data.index(b"f")) == 2


# -- finding record start tags from the end of their names ---------------------------------------------
_SOUP_TOKENS = (
    b"<",
    b"</",
    b"entry",
    b"deleted-",
    b"deleted-entry",
    b"at:",
    b"a.b-c:",
    b":",
    b"x",
    b" ",
    b"\n",
    b">",
    b"/>",
    b"/",
    b"<!-- entry -->",
    b"entry ",
    b"<entryX",
    b'q="<entry>"',
    b"\xc3\xa9",
    b"1",
)


def test_record_starts_equal_the_plain_regex_on_random_byte_soups() -> None:
    # `_record_starts` replaced `_RECORD_START.finditer` (3x faster on real pages): it must find exactly
    # the same matches, whatever the bytes.
    import random

    rng = random.Random(15)
    for _ in range(4000):
        soup = b"".join(rng.choice(_SOUP_TOKENS) for _ in range(rng.randrange(0, 40)))
        expected = [m.span() for m in page_split._RECORD_START.finditer(soup)]
        assert [m.span() for m in page_split._record_starts(soup)] == expected, soup


def test_record_starts_equal_the_plain_regex_on_real_pages() -> None:
    for page in (PAGE_2022, VERSION7, FRAGMENT):
        data = page.read_bytes()
        expected = [m.span() for m in page_split._RECORD_START.finditer(data)]
        assert [m.span() for m in page_split._record_starts(data)] == expected
        assert expected


class _CountingPattern:
    """`_RECORD_START` with its `match` calls counted."""

    def __init__(self, pattern: re.Pattern[bytes]) -> None:
        self.pattern, self.matches = pattern, 0

    def match(self, data: bytes, pos: int) -> re.Match[bytes] | None:
        self.matches += 1
        return self.pattern.match(data, pos)


def test_record_starts_tries_each_lt_once_however_many_entry_words_follow(monkeypatch: pytest.MonkeyPatch) -> None:
    # A long tag name followed by 20,000 `entry` words: trying the start pattern once per word would
    # rescan the name each time (quadratic). Each `<` is tried at most once.
    counting = _CountingPattern(page_split._RECORD_START)
    monkeypatch.setattr(page_split, "_RECORD_START", counting)
    soup = b"<" + b"n" * 100_000 + b" " + b"entry " * 20_000 + b"<entry>x</entry>"
    found = list(page_split._record_starts(soup))
    assert [m.start() for m in found] == [soup.rindex(b"<entry>")]
    assert counting.matches <= soup.count(b"<")
