"""Count what a landed page holds, independently of Spark: these counts are what Silver reconciles to.

A streaming, hardened parser reads each page once with flat memory (`_PageTree`). A page that is
not well-formed, or whose tree would be too large to hold ("not well-formed for this pipeline"), is
still described: the parser's message and the entry and tombstone start tags a byte scan finds,
chunk by chunk, so nothing it holds can go unaccounted for.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from itertools import islice
from pathlib import Path
from typing import Any, cast

from lxml import etree

from placsp_provider import settings
from placsp_provider.feed.prolog import dtd_refusal_file, prolog_pis_file, utf8_chunks, wide_encoding
from placsp_provider.feed.timestamps import isoformat, parse_rfc3339
from placsp_provider.feed.xml import (
    ATOM_NS,
    DELETED_ENTRY_TAG,
    ENTRY_TAG,
    FEED_CHUNK,
    FEED_END_WINDOW,
    FLOOD_WHAT,
    NAMESPACES_WHAT,
    NODES_WHAT,
    PARSER_OPTIONS,
    AttributeFlood,
    ends_with_feed_end,
)

_LINK_TAG = f"{{{ATOM_NS}}}link"
_UPDATED_TAG = f"{{{ATOM_NS}}}updated"
_ID_TAG = f"{{{ATOM_NS}}}id"
_FEED_TAG = f"{{{ATOM_NS}}}feed"
_RECORD_TAGS = (ENTRY_TAG, DELETED_ENTRY_TAG)

# Every regex here runs on untrusted bytes, so each is linear in its input (issue 31's audit).
# Start tags only (`<entry>`, `<entry xml:lang=..>`, `<atom:entry>`), never `</entry>` or `<entryX`:
# only a `<` starts an attempt, which reads the name after it once (`[\w.-]` holds no `<`).
ENTRY_START = re.compile(rb"<(?:[A-Za-z_][\w.-]*+:)?entry[\s>/]")
TOMBSTONE_START = re.compile(rb"<(?:[A-Za-z_][\w.-]*+:)?deleted-entry[\s>/]")
# Header links of a page that cannot be parsed; both attribute orders occur. `[^>]*` runs to the
# first `>`: searched only up to the header's last `>` (`header_links`), every attempt that gets that
# far succeeds and the search resumes after it, so no byte is read twice.
_LINK_BYTES = re.compile(rb"<(?:[\w.-]++:)?link\b([^>]*)/?>")
# An attempt starts at the first byte of a word only (`(?<!\w)`: without it a long word is re-read
# from each of its bytes), and no quantifier can give back what it took. Neither changes a match: a
# shorter word or value is followed by a byte that cannot continue the pattern.
_ATTR = re.compile(rb"""(?<!\w)(\w++)\s*+=\s*+["']([^"']*+)["']""")

# The byte scan reads a page this many bytes at a time, and keeps only the first `HEADER_BYTES` to
# read the header links from (real headers take a few hundred bytes; a first record past them reads
# as a page without records: links from its first 64 KiB).
BYTE_SCAN_CHUNK = 1 << 20
HEADER_BYTES = 1 << 20
# The longest tail after the last `<` of a chunk that can still become a start tag without a long
# `prefix:` name: `<` + a prefix + `:deleted-entry` stays within it for prefixes up to 49 bytes.
_SHORT_TAIL = 64
# `<` + a name too long to be `entry` or `deleted-entry` itself, so only usable as a prefix, then
# maybe `:` and the start of the local name. Whatever follows, `<_` + group(1) + it is a start tag
# exactly when the original tail + it is one: the name's only role left is to be a valid prefix.
# Linear: one `fullmatch` per chunk, and the name is read once (it can only end at a `:` or the end).
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
        return max((t for t in (self.max_updated, self.max_deleted) if t is not None), default=None)

    def oldest(self) -> datetime | None:
        return min((t for t in (self.min_updated, self.min_deleted) if t is not None), default=None)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("min_updated", "max_updated", "min_deleted", "max_deleted"):
            out[key] = isoformat(out[key]) if out[key] is not None else None
        return out


class TreeTooLargeError(etree.XMLSyntaxError):
    """A page whose tree would be too large to hold: not well-formed for this pipeline. An
    `XMLSyntaxError`, so every caller that falls back on a page that does not parse does so here too.
    """

    def __init__(self, where: str, reason: str) -> None:
        code = etree.ErrorTypes.ERR_RESOURCE_LIMIT
        super().__init__(f"{where}: {reason}", code, 0, 0)  # type: ignore[call-arg]  # lxml-stubs lack it
        self.reason = reason


def scan_page(path: Path) -> PageScan:
    """Scan a page file; never raises on bad content, describes it instead.

    A page in UTF-16/32 is counted by the byte scan after transcoding to UTF-8, as the Silver parser
    transcodes it. The message names no dataset or page: the file may be a download's temporary one.
    """
    refusal = dtd_refusal_file(path)
    if refusal is not None:
        return _byte_scan(path, f"not well-formed for this pipeline: page {refusal}")
    scan = PageScan()
    try:
        _stream(path, scan)
    except TreeTooLargeError as err:
        return _byte_scan(path, f"not well-formed for this pipeline: {err.reason}")
    except etree.XMLSyntaxError as err:
        return _byte_scan(path, _syntax_message(err))
    return scan


def _stream(path: Path, scan: PageScan) -> None:
    # Only the records (direct children of the root: an entry nested deeper, or a link inside an
    # entry, is never the feed's own) and the root's `<link>` children become Python objects.
    # Blank text is never kept (`remove_blank_text`, decision 0003): it cannot change a result, as
    # the only text read, an entry's `<updated>`, is stripped before it is parsed. libxml2 drops
    # whitespace-only text only when markup follows it: before a CDATA section or a comment the
    # stamp is the same once stripped; before a child element (or PI) the text read was blank
    # already and stays a bad time stamp (test_updated_text_around_blanks).
    tree = _PageTree(path, remove_blank_text=True, before_freeing=lambda root: _note_links(scan, root))
    for elem in tree.records():
        if elem.tag == ENTRY_TAG:
            scan.entries += 1
            updated = next(elem.iterchildren(_UPDATED_TAG), None)  # as findtext, without ElementPath
            stamp = _stamp(scan, None if updated is None else updated.text)
            if stamp is not None:
                scan.min_updated, scan.max_updated = _widen(scan.min_updated, scan.max_updated, stamp)
        else:
            scan.tombstones += 1
            stamp = _stamp(scan, elem.get("when"))
            if stamp is not None:
                scan.min_deleted, scan.max_deleted = _widen(scan.min_deleted, scan.max_deleted, stamp)
    scan.is_feed = tree.root.tag == _FEED_TAG


def _widen(low: datetime | None, high: datetime | None, stamp: datetime) -> tuple[datetime, datetime]:
    return (stamp if low is None else min(low, stamp), stamp if high is None else max(high, stamp))


def _note_links(scan: PageScan, root: Any) -> None:
    """`rel -> href` of the root's `<link>` children, in document order (a later one wins); called
    before each batch of them is freed (the last one maybe twice in a row: the same result)."""
    for child in root.iterchildren(_LINK_TAG):
        rel, href = child.get("rel"), child.get("href")
        if rel and href:
            scan.links[rel] = href


def iter_items(path: Path) -> Iterator[tuple[str, str, datetime | None]]:
    """(`entry`, id, updated) or (`tombstone`, ref, when) of each record of a well-formed page, as
    the same hardened streaming parser reads them (None for a time stamp that does not parse).

    Raises `lxml.etree.XMLSyntaxError` on a page that is not well-formed, `TreeTooLargeError` (one,
    naming the file and the limit) on a page over a size limit: call `scan_page` first.
    """
    for elem in _PageTree(path).records():
        if elem.tag == ENTRY_TAG:
            yield ("entry", (elem.findtext(_ID_TAG) or "").strip(), _time_or_none(elem.findtext(_UPDATED_TAG)))
        else:
            yield ("tombstone", (elem.get("ref") or "").strip(), _time_or_none(elem.get("when")))


# Node counts (elements, PIs) by XPath, in C, without a Python object per node. Each is one axis
# from one context node (a union, or a step from each child, merges node-sets in quadratic time).
# Before an element: all nodes before it in document order but its ancestors, i.e. for a child of
# the root, its earlier siblings' subtrees and the PIs before the root (left out: no ancestor).
# Comments are never kept (`remove_comments`) and an entity reference cannot occur (no DTD declares
# one: a syntax error), so elements and PIs are all of lxml's children of an element.
_ELEMENTS_BELOW = etree.XPath("count(descendant::*)")
_ATTRIBUTES_BELOW = etree.XPath("count(descendant-or-self::*/@*)")  # an element's own too
_PIS_BELOW = etree.XPath("count(descendant::processing-instruction())")
_ELEMENTS_BEFORE = etree.XPath("count(preceding::*)")
_ATTRIBUTES_BEFORE = etree.XPath("count(preceding::*/@*)")
_PIS_BEFORE = etree.XPath("count(preceding::processing-instruction()[ancestor::*])")
_PIS_AFTER = etree.XPath("count(following-sibling::processing-instruction())")
_IN_A_CHILD = "in one child of the feed root (a record or not)"


class _FloodGuard:
    """`AttributeFlood` over a page's raw chunks: those of a UTF-16/32 page are looked at in UTF-8
    (a wide character can hold a byte `<` or `=` otherwise)."""

    def __init__(self, limit: int) -> None:
        self.flood = AttributeFlood(limit)
        self.decoder: codecs.IncrementalDecoder | None = None
        self.started = False

    def over(self, chunk: bytes) -> bool:
        if not self.started:
            self.started = True
            codec = wide_encoding(chunk[:4])
            if codec is not None:
                self.decoder = codecs.getincrementaldecoder(codec)(errors="replace")
        if self.decoder is not None:
            chunk = self.decoder.decode(chunk).encode("utf-8")
        return self.flood.over(chunk)


class _PageTree:
    """A page parsed by the hardened pull parser `FEED_CHUNK` bytes at a time (as `iterparse` reads,
    so lxml's messages are the same), with memory bounded whatever the page's shape.

    - The records it yields, and every other child of the root, are freed once they have ended:
      after each chunk, all the root's children but the last (which may still be open).
    - No child of the root may hold more than `MAX_NODES_PER_RECORD` nodes (elements, attributes,
      PIs), nor the PIs before the root (read from the text first, `prolog_pis_file`: lxml keeps
      them, and handing them to Python one by one costs quadratic time) or after it, nor a stretch
      without `<` as many `=` (`AttributeFlood`: a start tag's attributes are built all at once,
      when its `>` arrives). The page may hold no more than `MAX_NODES_PER_PAGE` nodes and
      `MAX_NAMESPACE_DECLARATIONS` declarations. Over a limit: `TreeTooLargeError`. Depth is
      bounded by libxml2 (`XML_MAX_DEPTH`).
    - Counting is by XPath, in C, and only where a limit could be passed. A node built after a
      count took at least one byte fed after it, but for the attributes of a start tag still
      pending then (no more than its `=`, `slack`). What still grows (the root's open last child,
      or the PIs after the root) is counted again once enough bytes have come to make it pass the
      limit, or double: it is found over the limit before it holds about twice it, and each count
      costs no more steps than bytes came since the one before. Freed children are counted when
      they could hold more than the limit, and all of them when the file is large enough to pass
      `MAX_NODES_PER_PAGE` (a node takes 4 bytes or more: `<a/>`, ` a=""`, `<?a?>`). The records
      of a real page never come near: the overhead is a few calls per chunk.
    """

    def __init__(
        self, path: Path, *, remove_blank_text: bool = False, before_freeing: Callable[[Any], None] | None = None
    ) -> None:
        self.path = path
        self.where = f"file {path}"
        self.remove_blank_text = remove_blank_text
        self.before_freeing = before_freeing
        self.root: Any = None
        self.root_ended = False
        self.count_page = path.stat().st_size > 4 * settings.MAX_NODES_PER_PAGE
        self.nodes = 0  # counted so far: the root, the PIs before it, its freed children
        self.namespaces = 0  # namespace declarations, all handed over as `start-ns` events
        self.flood = _FloodGuard(settings.MAX_NODES_PER_RECORD)
        self.growing = 0  # nodes of what still grows when last counted
        self.slack = 0  # then the `=` of a start tag still pending: attributes to come without bytes
        self.bytes_since = 0  # bytes fed since then

    def records(self) -> Iterator[Any]:
        """Each entry and tombstone that is a direct child of the root, once it has ended (read
        among the root's ended children after each chunk, just before they are freed)."""
        limit = settings.MAX_NODES_PER_RECORD
        self.nodes = prolog_pis_file(self.path, stop_after=limit)
        if self.nodes > limit:
            self._too_large("MAX_NODES_PER_RECORD", "before the page's root")
        # Only the root's start and end reach Python as events (no event per record), and each
        # namespace declaration (a few hundred in a real page). Without the root's tag (the page does
        # not parse that far, and the parse below fails the same way), the first record's end hands
        # the root over.
        root_tag = _root_tag(self.path)
        parser = etree.XMLPullParser(
            events=("start", "end", "start-ns") if root_tag else ("end", "start-ns"),
            tag=root_tag or _RECORD_TAGS,
            remove_blank_text=self.remove_blank_text,
            **PARSER_OPTIONS,
        )
        with self.path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(FEED_CHUNK), b""):
                if self.flood.over(chunk):
                    self._too_large("MAX_NODES_PER_RECORD", "", FLOOD_WHAT)
                parser.feed(chunk)
                self._events(parser)
                yield from self._ended_records(final=False)
                self.bytes_since += len(chunk)
                self._free(final=False)
        root = parser.close()
        self._events(parser)
        if self.root is None:
            self._found_root(root)
        yield from self._ended_records(final=True)
        self._free(final=True)

    def _events(self, parser: Any) -> None:
        for event, elem in parser.read_events():
            if event == "start-ns":
                self.namespaces += 1
                if self.namespaces > settings.MAX_NAMESPACE_DECLARATIONS:
                    self._too_large("MAX_NAMESPACE_DECLARATIONS", "", NAMESPACES_WHAT)
            elif elem.getparent() is None:
                if event == "end":
                    self.root_ended = True
                elif self.root is None:
                    self._found_root(elem)
            elif self.root is None:  # a record's end, the root's tag unknown
                self._found_root(elem.getroottree().getroot())

    def _found_root(self, root: Any) -> None:
        self.root = root
        self.nodes += 1 + len(root.attrib)

    def _ended_records(self, *, final: bool) -> Iterator[Any]:
        """The records among the root's children that have ended: all but the last one while the
        root is open (an element followed by a sibling has ended). An entry or a tombstone that is
        the root itself, or is nested deeper, is no record of the page."""
        root = self.root
        if root is None or not len(root):
            return
        last = None if final or self.root_ended else root[-1]
        for record in root.iterchildren(*_RECORD_TAGS):
            if record is last:
                return
            yield record

    def _free(self, *, final: bool) -> None:
        root = self.root
        if root is None:
            return
        complete = final or self.root_ended
        done = len(root) - (0 if complete else 1)
        limit = settings.MAX_NODES_PER_RECORD
        if done > 0 and (self.count_page or self.growing + self.slack + self.bytes_since > limit):
            if complete:
                freed = _nodes_of(root) - 1 - len(root.attrib)
            else:
                last = root[-1]
                if isinstance(last.tag, str):
                    freed = sum(_count(path, last) for path in (_ELEMENTS_BEFORE, _ATTRIBUTES_BEFORE, _PIS_BEFORE))
                else:  # a PI: all the others are freed
                    freed = _nodes_of(root) - 1 - len(root.attrib) - 1
                del last
            if freed > limit:
                self._check_each(root, done)
            self.nodes += freed
            self._check_page()
        if done > 0:
            if self.before_freeing is not None:
                self.before_freeing(root)
            del root[:done]
        if final:
            self.growing = _count(_PIS_AFTER, root)
            self._check_growing()
            self.nodes += self.growing
            self._check_page()
        elif self.bytes_since >= max(limit - self.growing - self.slack, self.growing):
            if self.root_ended:
                self.growing = _count(_PIS_AFTER, root)
            else:
                last = root[-1] if len(root) else None
                self.growing = _nodes_of(last) if last is not None and isinstance(last.tag, str) else 0
            self.slack = self.flood.flood.pending
            self.bytes_since = 0
            self._check_growing()

    def _check_growing(self) -> None:
        if self.growing > settings.MAX_NODES_PER_RECORD:
            where = "after the page's root" if self.root_ended else _IN_A_CHILD
            self._too_large("MAX_NODES_PER_RECORD", where)

    def _check_page(self) -> None:
        if self.nodes > settings.MAX_NODES_PER_PAGE:
            self._too_large("MAX_NODES_PER_PAGE", "in the page")

    def _check_each(self, root: Any, done: int) -> None:
        """Which of the first `done` children is over the limit (their nodes together are)."""
        for child in islice(root.iterchildren(), done):
            if isinstance(child.tag, str) and _nodes_of(child) > settings.MAX_NODES_PER_RECORD:
                self._too_large("MAX_NODES_PER_RECORD", _IN_A_CHILD)

    def _too_large(self, name: str, where: str, what: str = NODES_WHAT) -> None:
        limit = getattr(settings, name)
        raise TreeTooLargeError(
            self.where,
            f"more than {limit:,} {what}{' ' + where if where else ''}, over the limit {name} = "
            f"{limit:,} (placsp_provider.settings; real PLACSP pages stay far below it): its tree is not built",
        )


def _count(path: etree.XPath, node: Any) -> int:
    return int(cast(float, path(node)))


def _nodes_of(element: Any) -> int:
    """The element, its attributes, and the elements, attributes and PIs inside it."""
    return 1 + sum(_count(path, element) for path in (_ELEMENTS_BELOW, _ATTRIBUTES_BELOW, _PIS_BELOW))


_PROBE_CHUNK = 1 << 11  # a real page's root start tag ends within its first kilobyte


def _root_tag(path: Path) -> str | None:
    """The root element's tag (`{ns}name`), read from the first bytes with the hardened parser, or
    None when the page does not parse that far (the streaming parse then fails the same way)."""
    parser: Any = etree.XMLPullParser(events=("start",), **PARSER_OPTIONS)
    flood = _FloodGuard(settings.MAX_NODES_PER_RECORD)
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(_PROBE_CHUNK), b""):
            if flood.over(chunk):
                return None  # the streaming parse stops at the same bytes
            try:
                parser.feed(chunk)
            except etree.XMLSyntaxError:
                return None
            for _event, elem in parser.read_events():
                return str(elem.tag)
    return None


def _time_or_none(text: str | None) -> datetime | None:
    try:
        return parse_rfc3339(text) if text else None
    except ValueError:
        return None


def _stamp(scan: PageScan, text: str | None) -> datetime | None:
    """The record's time stamp, or None (counted in `bad_timestamps`) when missing or not RFC 3339."""
    stamp = _time_or_none(text)
    if stamp is None:
        scan.bad_timestamps += 1
    return stamp


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
    ends = [m.start() for m in (ENTRY_START.search(data), TOMBSTONE_START.search(data)) if m is not None]
    header = data[: min(ends)] if ends else data[:65536]
    links: dict[str, str] = {}
    for match in _LINK_BYTES.finditer(header, 0, header.rfind(b">") + 1):  # see _LINK_BYTES
        attrs = {k.decode(): v.decode("utf-8", "replace") for k, v in _ATTR.findall(match.group(1))}
        if "rel" in attrs and "href" in attrs:
            links[attrs["rel"]] = attrs["href"]
    return links


def _byte_scan(path: Path, message: str, chunk_size: int | None = None) -> PageScan:
    """Count entry and tombstone start tags by bytes, `chunk_size` (`BYTE_SCAN_CHUNK`) at a time.

    Memory is bounded by the chunk, the header (`HEADER_BYTES`) and a short tail, whatever the page
    size. Every start tag is counted exactly once, also when a chunk boundary splits it (`_split_tail`).
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
    return PageScan(
        entries=entries + found[0],
        tombstones=tombstones + found[1],
        links=header_links(b"".join(head)),
        well_formed=False,
        error=message,
        cut_short=not ends_with_feed_end(tail),
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
