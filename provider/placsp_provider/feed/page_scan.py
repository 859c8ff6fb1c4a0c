"""Count what a landed page holds, independently of Spark: these counts are what Silver reconciles to.

A streaming, hardened `iterparse` reads each page once with flat memory, handing to Python only the
few elements it counts. A page that is not well-formed is still described: the parser's message
(line, column) and the number of entry and tombstone start tags found by a byte scan, chunk by
chunk, so nothing it holds can go unaccounted for.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from lxml import etree

from placsp_provider.feed.prolog import dtd_refusal_file, utf8_chunks
from placsp_provider.feed.timestamps import isoformat, parse_rfc3339
from placsp_provider.feed.xml import (
    ATOM_NS,
    DELETED_ENTRY_TAG,
    ENTRY_TAG,
    FEED_END,
    FEED_END_WINDOW,
    iterparse,
)

_LINK_TAG = f"{{{ATOM_NS}}}link"
_UPDATED_TAG = f"{{{ATOM_NS}}}updated"
_ID_TAG = f"{{{ATOM_NS}}}id"
_FEED_TAG = f"{{{ATOM_NS}}}feed"
_RECORD_TAGS = (ENTRY_TAG, DELETED_ENTRY_TAG)

# Start tags only (`<entry>`, `<entry xml:lang=..>`, `<atom:entry>`), never `</entry>` or `<entryX`.
ENTRY_START = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?entry[\s>/]")
TOMBSTONE_START = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?deleted-entry[\s>/]")
# Header links are read by bytes when the page cannot be parsed; both attribute orders occur.
_LINK_BYTES = re.compile(rb"<(?:[\w.-]+:)?link\b([^>]*)/?>")
_ATTR = re.compile(rb"""(\w+)\s*=\s*["']([^"']*)["']""")

# The byte scan reads a page this many bytes at a time, whatever its size...
BYTE_SCAN_CHUNK = 1 << 20
# ... and keeps only this many first bytes to read the header links from (`header_links`: the links
# before the first record). Real headers take a few hundred bytes; if the first record started
# later, the page is read as one without records: links from its first 64 KiB.
HEADER_BYTES = 1 << 20
# The longest tail after the last `<` of a chunk that can still become a start tag without a long
# `prefix:` name: `<` + a prefix + `:deleted-entry` stays within it for prefixes up to 49 bytes.
_SHORT_TAIL = 64
# `<` + a name too long to be `entry` or `deleted-entry` itself, so only usable as a prefix, then
# maybe `:` and the start of the local name. Whatever follows, `<_` + group(1) + it is a start tag
# exactly when the original tail + it is one: the name's only role left is to be a valid prefix.
_LONG_NAME_TAIL = re.compile(rb"<[A-Za-z_][\w.-]{14,}(:[\w.-]{0,13}|)")


@dataclass
class PageScan:
    """What one page holds, as counted by the hardened streaming parser (or the byte scan)."""

    entries: int = 0
    tombstones: int = 0
    min_updated: datetime | None = None
    max_updated: datetime | None = None
    min_deleted: datetime | None = None
    max_deleted: datetime | None = None
    links: dict[str, str] = field(default_factory=dict)
    well_formed: bool = True
    error: str | None = None  # parser message with line and column when not well-formed
    is_feed: bool = True
    bad_timestamps: int = 0
    cut_short: bool = False  # not well-formed AND no `</feed>` at its end: the download may have been cut

    @property
    def items(self) -> int:
        return self.entries + self.tombstones

    def newest(self) -> datetime | None:
        stamps = [t for t in (self.max_updated, self.max_deleted) if t is not None]
        return max(stamps) if stamps else None

    def oldest(self) -> datetime | None:
        stamps = [t for t in (self.min_updated, self.min_deleted) if t is not None]
        return min(stamps) if stamps else None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("min_updated", "max_updated", "min_deleted", "max_deleted"):
            value = out[key]
            out[key] = isoformat(value) if value is not None else None
        return out


def scan_page(path: Path) -> PageScan:
    """Scan a page file; never raises on bad content, describes it instead.

    A page in UTF-16/32 is counted as lxml reads it, and by the byte scan after transcoding to
    UTF-8: the same records the Silver parser (which transcodes the same way) will find.
    """
    refusal = dtd_refusal_file(path)
    if refusal is not None:
        return _byte_scan(path, f"not well-formed for this pipeline: page {refusal}")
    scan = PageScan()
    try:
        _stream(path, scan)
    except etree.XMLSyntaxError as err:
        return _byte_scan(path, _syntax_message(err))
    return scan


def _stream(path: Path, scan: PageScan) -> None:
    # Only `end` events of records reach Python: libxml2 still parses (and checks) every byte, but
    # no other element becomes a Python object except the root's other children (header `<link>`,
    # `<title>`, ...), looked at once each when they are freed. Start events are not needed: a
    # record's time and the root's tag are read once the element is complete.
    # Only direct children of the root are counted: an entry nested in another element, or a link
    # inside an entry, is never taken as the feed's own.
    # Blank text between elements is never kept (`remove_blank_text`): a sixth fewer instructions
    # (most of a page's text nodes are indentation). It cannot change a result: elements and
    # attributes are untouched, and the only text read, an entry's `<updated>`, is stripped before
    # it is parsed. libxml2 drops whitespace-only text only when markup follows it: before a CDATA
    # section or a comment the stamp is the same once stripped; before a child element (or PI) the
    # text read was blank already and stays a bad time stamp (test_updated_text_around_blanks).
    events = iterparse(str(path), events=("end",), tag=_RECORD_TAGS, remove_blank_text=True)
    root: Any = None
    min_updated: datetime | None = None
    max_updated: datetime | None = None
    min_deleted: datetime | None = None
    max_deleted: datetime | None = None
    for _event, elem in events:
        parent = elem.getparent()
        if root is None:
            if parent is None:
                continue  # the root itself is an entry or a tombstone: not a record of a page
            root = elem.getroottree().getroot()
        if parent is not root:
            continue  # nested deeper: freed with its ancestor below the root
        if elem.tag == ENTRY_TAG:
            scan.entries += 1
            updated = next(elem.iterchildren(_UPDATED_TAG), None)  # as findtext, without ElementPath
            stamp = _stamp(scan, None if updated is None else updated.text)
            if stamp is not None:
                if min_updated is None or stamp < min_updated:
                    min_updated = stamp
                if max_updated is None or stamp > max_updated:
                    max_updated = stamp
        else:
            scan.tombstones += 1
            stamp = _stamp(scan, elem.get("when"))
            if stamp is not None:
                if min_deleted is None or stamp < min_deleted:
                    min_deleted = stamp
                if max_deleted is None or stamp > max_deleted:
                    max_deleted = stamp
        # Free the subtree and every earlier sibling (records already counted, and those never
        # reported: <title>, <updated>, header links, read here first): memory stays flat.
        elem.clear()
        done = root.index(elem)
        _note_links(scan, root, done)
        del root[:done]
    root = events.root  # set once the whole document is parsed, also when no record was seen
    scan.is_feed = root.tag == _FEED_TAG
    _note_links(scan, root, len(root))  # the root's children after its last record
    scan.min_updated, scan.max_updated = min_updated, max_updated
    scan.min_deleted, scan.max_deleted = min_deleted, max_deleted


def _note_links(scan: PageScan, root: Any, stop: int) -> None:
    """`rel -> href` of the root's `<link>` children before position `stop`, in document order."""
    for child in root[:stop]:
        if child.tag == _LINK_TAG:
            rel, href = child.get("rel"), child.get("href")
            if rel and href:
                scan.links[rel] = href


def iter_items(path: Path) -> Iterator[tuple[str, str, datetime | None]]:
    """(`entry`, id, updated) or (`tombstone`, ref, when) of each record of a well-formed page, as
    the same hardened streaming parser reads them (None for a time stamp that does not parse).

    Raises `lxml.etree.XMLSyntaxError` on a page that is not well-formed: call `scan_page` first.
    """
    for _event, elem in iterparse(str(path), events=("end",), tag=(ENTRY_TAG, DELETED_ENTRY_TAG)):
        parent = elem.getparent()
        if parent is None or parent.getparent() is not None:
            continue  # only direct children of the root are the page's records
        if elem.tag == ENTRY_TAG:
            yield ("entry", (elem.findtext(_ID_TAG) or "").strip(), _time_or_none(elem.findtext(_UPDATED_TAG)))
        else:
            yield ("tombstone", (elem.get("ref") or "").strip(), _time_or_none(elem.get("when")))
        elem.clear()
        while elem.getprevious() is not None:
            del parent[0]


def _time_or_none(text: str | None) -> datetime | None:
    try:
        return parse_rfc3339(text) if text else None
    except ValueError:
        return None


def _stamp(scan: PageScan, text: str | None) -> datetime | None:
    """The record's time stamp, or None (counted in `bad_timestamps`) when missing or not RFC 3339."""
    if not text:
        scan.bad_timestamps += 1
        return None
    try:
        return parse_rfc3339(text)
    except ValueError:
        scan.bad_timestamps += 1
        return None


def _syntax_message(err: etree.XMLSyntaxError) -> str:
    # lxml's message already carries "line L, column C"; keep it verbatim, people search for it.
    text = str(err.msg or err)
    if "line" not in text and err.position:
        text += f", line {err.position[0]}, column {err.position[1]}"
    return f"not well-formed: {text}"


def count_start_tags(data: bytes) -> tuple[int, int]:
    """Entry and tombstone start tags found by a plain byte scan."""
    return len(ENTRY_START.findall(data)), len(TOMBSTONE_START.findall(data))


def header_links(data: bytes) -> dict[str, str]:
    """`rel -> href` of the `<link>` elements before the first record, read as bytes."""
    first = ENTRY_START.search(data)
    first_tomb = TOMBSTONE_START.search(data)
    ends = [m.start() for m in (first, first_tomb) if m is not None]
    header = data[: min(ends)] if ends else data[:65536]
    links: dict[str, str] = {}
    for match in _LINK_BYTES.finditer(header):
        attrs = {k.decode(): v.decode("utf-8", "replace") for k, v in _ATTR.findall(match.group(1))}
        if "rel" in attrs and "href" in attrs:
            links[attrs["rel"]] = attrs["href"]
    return links


def _byte_scan(path: Path, message: str, chunk_size: int | None = None) -> PageScan:
    """Count entry and tombstone start tags by bytes, reading `chunk_size` (by default
    `BYTE_SCAN_CHUNK`) bytes at a time.

    Memory is bounded by the chunk, the header (`HEADER_BYTES`) and a tail of at most
    `_SHORT_TAIL` bytes, whatever the page size. Every start tag is counted exactly once, also when
    a chunk boundary splits it: see `_split_tail`.
    """
    chunk_size = BYTE_SCAN_CHUNK if chunk_size is None else chunk_size
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    entries = tombstones = 0
    head: list[bytes] = []  # the first HEADER_BYTES bytes, for the header links
    head_size = 0
    carry = b""
    tail = b""
    with path.open("rb") as fh:
        for chunk in utf8_chunks(iter(lambda: fh.read(chunk_size), b"")):
            if not chunk:
                continue
            tail = (tail + chunk[-FEED_END_WINDOW:])[-FEED_END_WINDOW:]
            if head_size < HEADER_BYTES:
                head.append(chunk[: HEADER_BYTES - head_size])  # no copy when the whole chunk fits
                head_size += len(head[-1])
            data = carry + chunk if carry else chunk
            cut, carry = _split_tail(data)
            entries += len(ENTRY_START.findall(data, 0, cut))  # as in data[:cut], without a copy
            tombstones += len(TOMBSTONE_START.findall(data, 0, cut))
    found = count_start_tags(carry)  # the end of the page: nothing more can follow the tail
    entries, tombstones = entries + found[0], tombstones + found[1]
    return PageScan(
        entries=entries,
        tombstones=tombstones,
        links=header_links(b"".join(head)),
        well_formed=False,
        error=message,
        cut_short=FEED_END.search(tail) is None,
    )


def _split_tail(data: bytes) -> tuple[int, bytes]:
    """Where the bytes whose start tags are all decided end in `data`, and the tail to carry over.

    A start tag (`ENTRY_START`, `TOMBSTONE_START`) holds one `<`, its first byte, so a tag that
    starts before the last `<` ends before it: only the tail from the last `<` may still become a
    start tag once the next chunk arrives. It is carried over (and left out of the decided bytes,
    so it is counted once, with the next chunk). A short tail is carried as is; a long one is
    either decided (no more bytes can make it a start tag) or an unfinished `prefix:` name, which
    is carried in a shortened form that any following bytes turn into a start tag exactly when they
    would the original.
    """
    cut = data.rfind(b"<")
    if cut < 0:
        return len(data), b""
    if len(data) - cut <= _SHORT_TAIL:
        return cut, data[cut:]
    long_name = _LONG_NAME_TAIL.fullmatch(data, cut)
    if long_name is None:
        return len(data), b""
    return cut, b"<_" + long_name.group(1)
