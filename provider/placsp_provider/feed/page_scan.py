"""Count what a landed page holds, independently of Spark: these counts are what Silver reconciles to.

A streaming, hardened `iterparse` reads each page once with flat memory. A page that is not
well-formed is still described: the parser's message (line, column) and the number of entry and
tombstone start tags found by a byte scan, so nothing it holds can go unaccounted for.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from lxml import etree

from placsp_provider.feed.timestamps import isoformat, parse_rfc3339
from placsp_provider.feed.xml import (
    ATOM_NS,
    DELETED_ENTRY_TAG,
    ENTRY_TAG,
    dtd_refusal,
    iterparse,
)

_LINK_TAG = f"{{{ATOM_NS}}}link"
_UPDATED_TAG = f"{{{ATOM_NS}}}updated"
_FEED_TAG = f"{{{ATOM_NS}}}feed"

# Start tags only (`<entry>`, `<entry xml:lang=..>`, `<atom:entry>`), never `</entry>` or `<entryX`.
ENTRY_START = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?entry[\s>/]")
TOMBSTONE_START = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?deleted-entry[\s>/]")
# Header links are read by bytes when the page cannot be parsed; both attribute orders occur.
_LINK_BYTES = re.compile(rb"<(?:[\w.-]+:)?link\b([^>]*)/?>")
_ATTR = re.compile(rb"""(\w+)\s*=\s*["']([^"']*)["']""")


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
    """Scan a page file; never raises on bad content, describes it instead."""
    with path.open("rb") as fh:
        head = fh.read(65536)
    refusal = dtd_refusal(head)
    if refusal is not None:
        return _byte_scan(path, f"not well-formed for this pipeline: page {refusal}")
    scan = PageScan()
    try:
        _stream(path, scan)
    except etree.XMLSyntaxError as err:
        return _byte_scan(path, _syntax_message(err))
    return scan


def _stream(path: Path, scan: PageScan) -> None:
    depth = 0
    root_seen = False
    context = iterparse(str(path), events=("start", "end"))
    for event, elem in context:
        if event == "start":
            depth += 1
            if depth == 1:
                root_seen = True
                scan.is_feed = elem.tag == _FEED_TAG
            continue
        depth -= 1
        if depth != 1:
            if depth == 0:
                elem.clear()
            continue
        # A direct child of <feed> just ended.
        tag = elem.tag
        if tag == ENTRY_TAG:
            scan.entries += 1
            _note_time(scan, elem.findtext(_UPDATED_TAG), "updated")
        elif tag == DELETED_ENTRY_TAG:
            scan.tombstones += 1
            _note_time(scan, elem.get("when"), "deleted")
        elif tag == _LINK_TAG:
            rel, href = elem.get("rel"), elem.get("href")
            if rel and href:
                scan.links[rel] = href
        # Free the subtree and the already-seen siblings: memory stays flat whatever the page size.
        elem.clear()
        parent = elem.getparent()
        if parent is not None:
            while elem.getprevious() is not None:
                del parent[0]
    if not root_seen:
        scan.is_feed = False


def _note_time(scan: PageScan, text: str | None, which: str) -> None:
    if not text:
        scan.bad_timestamps += 1
        return
    try:
        value = parse_rfc3339(text)
    except ValueError:
        scan.bad_timestamps += 1
        return
    lo, hi = f"min_{which}", f"max_{which}"
    if getattr(scan, lo) is None or value < getattr(scan, lo):
        setattr(scan, lo, value)
    if getattr(scan, hi) is None or value > getattr(scan, hi):
        setattr(scan, hi, value)


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


def _byte_scan(path: Path, message: str) -> PageScan:
    # Pages are bounded by the client's size limit, so one read is fine here; this path is rare.
    data = path.read_bytes()
    entries, tombstones = count_start_tags(data)
    return PageScan(
        entries=entries,
        tombstones=tombstones,
        links=header_links(data),
        well_formed=False,
        error=message,
    )
