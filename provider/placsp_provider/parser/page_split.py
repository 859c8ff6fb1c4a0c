"""Byte-level splitting of one PLACSP feed page into its records (entries and tombstones).

Why bytes and not a streaming parser: a page that is not well-formed as a whole (a truncated file, an
unclosed tag, three entries concatenated without a root) makes any whole-document parser stop or, worse,
swallow the rest of the page. Cutting the page into records first means a broken record costs only
itself: each record is then parsed standalone, wrapped in a synthetic element that carries the page
root's namespace declarations (see `wrap_record`).

Everything here is regex/`bytes.find` work over the page, so the cost is a few milliseconds per MB.
Every pattern is linear in the bytes it reads, whatever they are (issue 31's audit; each says why):
a quantifier that could give back what it took is possessive (`*+`, `++`) wherever giving back can
never lead to a match, so the change finds exactly the same matches.

Known limits (none occur in PLACSP pages): record start tags inside CDATA sections or comments would be
taken as records, and bytes between records (outside any record) are not looked at.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from placsp_provider import settings
from placsp_provider.feed.xml import (
    ATOM_NS,
    FLOOD_WHAT,
    NAMESPACES_WHAT,
    NODES_WHAT,
    TOMBSTONE_NS,
    AttributeFlood,
    ends_with_feed_end,
    tree_over_limits,
)

ENTRY = "entry"
TOMBSTONE = "tombstone"

_ATOM_NS_B = ATOM_NS.encode()
_TOMBSTONE_NS_B = TOMBSTONE_NS.encode()

# Anchored at the page's first byte: one attempt, each byte read at most twice (`[^>]*` gives back
# only to find the `?` before its `>`).
_XML_DECLARATION = re.compile(rb"\A(?:\xef\xbb\xbf)?\s*+(<\?xml\s[^>]*\?>)")
# The first `<` followed by a name character: `<?`, `<!` and `</` are skipped by construction.
# Stops at its first match; an attempt at any other `<` fails at its next byte.
_FIRST_ELEMENT = re.compile(rb"<((?:[A-Za-z_][\w.\-]*+:)?([A-Za-z_][\w.\-]*))")
# The rest of a start tag after its name: attributes with quoted values (which may hold `>`), then `>`.
# Matched once per record start (anchored). Each attribute parses one way only (blanks, a name that
# stops at the first blank or `=`, a value that stops at its first quote), and fewer attributes
# cannot be followed by `/>` or `>` (an attribute starts with blanks then a name byte): possessive,
# nothing is ever read twice. A value runs to the next quote of its kind, so the values of two
# record starts overlap in at most one other's bytes: linear over a page.
_START_TAG_REST = re.compile(rb"""(?:\s++[^\s=/>]++\s*+=\s*+(?:"[^"]*+"|'[^']*+'))*+\s*+(/?)>""")
# Run on one start tag (already matched by `_START_TAG_REST`): each attempt starts at a blank before
# `xmlns` and reads one attribute, possessively.
_XMLNS = re.compile(rb"""\sxmlns(?::([^\s=/>]++))?\s*+=\s*+(?:"([^"]*+)"|'([^']*+)')""")
# Tried once at the last `<` before each `entry` hit (`_record_starts`); reads one name.
_RECORD_START = re.compile(rb"<(?:([A-Za-z_][\w.\-]*+):)?(entry|deleted-entry)(?=[\s/>])")
# Where a record start tag's name ends: both names end with `entry`. A literal search for it is ~3x
# cheaper than trying `_RECORD_START` at each of a page's ~400,000 `<` (`_record_starts`; decision 0004).
_RECORD_NAME_END = re.compile(rb"entry(?=[\s/>])")

# Used only for dead letters, when the record did not parse: the first Atom `<id>` / the `ref=`.
# `_first_entry_id` says how these find what one quadratic regex used to.
_ID_TEXT = re.compile(rb"<(?:[A-Za-z_][\w.\-]*+:)?id(?:\s[^<>]*+)?>\s*+([^<\s][^<]*+)</")
_ID_TAG_WITH_LT = re.compile(rb"<(?:[A-Za-z_][\w.\-]*+:)?id\s[^<>]*+<")
_ID_TAG_NAME = re.compile(rb"<(?:[A-Za-z_][\w.\-]*+:)?id(?=[\s>])")
_BLANKS_RUN = re.compile(rb"\s*+")
# Searched in a tombstone's start tag only (up to its first `>`); each attempt starts at a blank
# before `ref`, reads one attribute possessively, and a value stops at the next quote of its kind.
_TOMBSTONE_REF = re.compile(rb"""\sref\s*+=\s*+(?:"([^"]*+)"|'([^']*+)')""")

WRAPPER_NAME = "placsp-record"


@dataclass(frozen=True)
class RecordSpan:
    """Where one record sits in the page: `data[start:end]`."""

    kind: str  # ENTRY or TOMBSTONE
    start: int  # offset of the `<` of its start tag
    end: int  # exclusive
    closed: bool  # its end tag (or `/>`) was found before the next record / the end of the page
    prefix: str  # the tag prefix it was written with ('' when unprefixed)


@dataclass(frozen=True)
class PageLayout:
    """What the byte scan learnt about a page."""

    xml_declaration: bytes  # the page's `<?xml ...?>`, or b''
    namespace_context: str  # xmlns declarations of the page root, e.g. 'xmlns="..." xmlns:cbc="..."'
    root_name: str | None  # qualified name of the first element, None when the page has no element
    has_feed_root: bool  # the first element is a `feed` (the normal case)
    feed_closed: bool  # the page ends with the root's end tag (False for a truncated page)
    records: tuple[RecordSpan, ...]

    @property
    def entries_seen(self) -> int:
        return sum(1 for r in self.records if r.kind == ENTRY)

    @property
    def tombstones_seen(self) -> int:
        return sum(1 for r in self.records if r.kind == TOMBSTONE)


def scan_page(data: bytes) -> PageLayout:
    """Find the page's namespace context and every record start tag, and where each record ends."""
    decl_match = _XML_DECLARATION.match(data)
    xml_declaration = decl_match.group(1) if decl_match else b""
    root = _FIRST_ELEMENT.search(data)
    bindings: dict[bytes, bytes] = {}
    root_name: str | None = None
    has_feed_root = False
    if root is not None:
        root_name = root.group(1).decode("utf-8", "backslashreplace")
        if root.group(2) not in (b"entry", b"deleted-entry"):
            # A record as first element means there is no wrapper root (the concatenated-fragment case):
            # its own declarations belong to it, not to the page.
            bindings = _declarations(data, root.end())
            has_feed_root = root.group(2) == b"feed"
    records = tuple(_find_records(data, bindings))
    feed_closed = ends_with_feed_end(data) if has_feed_root else True
    return PageLayout(xml_declaration, _format_context(bindings), root_name, has_feed_root, feed_closed, records)


def _declarations(data: bytes, name_end: int) -> dict[bytes, bytes]:
    """The xmlns declarations of the start tag whose name ends at `name_end` (prefix b'' = default)."""
    rest = _START_TAG_REST.match(data, name_end)
    tag = data[name_end : rest.end()] if rest else data[name_end : data.find(b">", name_end) + 1]
    return {(m.group(1) or b""): (m.group(2) if m.group(2) is not None else m.group(3)) for m in _XMLNS.finditer(tag)}


def _format_context(bindings: dict[bytes, bytes]) -> str:
    parts = []
    for prefix, uri in bindings.items():
        name = b"xmlns:" + prefix if prefix else b"xmlns"
        value = uri.replace(b"&", b"&amp;").replace(b'"', b"&quot;")
        parts.append((name + b'="' + value + b'"').decode("utf-8", "backslashreplace"))
    return " ".join(parts)


def _is_record_tag(data: bytes, match: re.Match[bytes], bindings: dict[bytes, bytes]) -> tuple[str, int | None] | None:
    """(kind, end of a self-closing start tag or None) when this tag opens a record, else None.

    Matching is on namespace URIs: the tag's prefix must be bound to the Atom (entries) or tombstone
    namespace, inline on the tag itself or by the page root. A prefix bound nowhere is accepted too, so
    an unbound `<at:deleted-entry>` or a root-less fragment (`<entry>` with no declarations at all) still
    counts as a record -- and then fails to parse, visibly -- instead of disappearing.
    """
    prefix = match.group(1) or b""
    is_entry = match.group(2) == b"entry"
    wanted = _ATOM_NS_B if is_entry else _TOMBSTONE_NS_B
    rest = _START_TAG_REST.match(data, match.end())
    inline = _declarations(data, match.end()) if rest else {}
    bound = inline.get(prefix, bindings.get(prefix))
    if bound is not None and bound != wanted:
        return None  # the same local name in another namespace: not a record
    self_closing_end = rest.end() if rest and rest.group(1) else None
    return (ENTRY if is_entry else TOMBSTONE), self_closing_end


def _find_records(data: bytes, bindings: dict[bytes, bytes]) -> list[RecordSpan]:
    starts: list[tuple[int, str, int | None, bytes]] = []
    for match in _record_starts(data):
        found = _is_record_tag(data, match, bindings)
        if found is not None:
            starts.append((match.start(), found[0], found[1], match.group(1) or b""))
    spans = []
    for i, (start, kind, end, prefix) in enumerate(starts):
        closed = True
        if end is None:  # not self-closing
            limit = starts[i + 1][0] if i + 1 < len(starts) else len(data)
            end, closed = _record_end(data, start, limit, kind, prefix)
        spans.append(RecordSpan(kind, start, end, closed, prefix.decode("ascii")))
    return spans


def _record_starts(data: bytes) -> Iterator[re.Match[bytes]]:
    """The matches of `_RECORD_START.finditer(data)`, found from the end of their names.

    A match holds one `<` (its first byte) and ends with `entry` plus a delimiter, so it starts at the
    last `<` before an `entry` hit and must end exactly where that hit ends. Hits do not overlap and
    each match ends at one place, so every match is found once. Each byte is searched for `<` once and
    each `<` before a hit is tried once (never per hit), so no text makes this slower than the plain
    `finditer`.
    """
    match: re.Match[bytes] | None = None  # `_RECORD_START` tried at the last `<` before the hit
    searched = 0
    for hit in _RECORD_NAME_END.finditer(data):
        found = data.rfind(b"<", searched, hit.start())
        if found >= 0:
            match = _RECORD_START.match(data, found)
        searched = hit.start()
        if match is not None and match.end() == hit.end():
            yield match


def _record_end(data: bytes, start: int, limit: int, kind: str, prefix: bytes) -> tuple[int, bool]:
    """(end, closed) of the record: its end tag, else the next record start or the end of the page
    (blanks before it belong to no record: raw_record stays tidy)."""
    found = _end_tag_pattern(prefix, b"entry" if kind == ENTRY else b"deleted-entry").search(data, start, limit)
    if found is None:
        return start + len(data[start:limit].rstrip()), False
    return found.end(), True


@lru_cache(maxsize=32)
def _end_tag_pattern(prefix: bytes, local: bytes) -> re.Pattern[bytes]:
    qname = prefix + b":" + local if prefix else local
    return re.compile(rb"</" + re.escape(qname) + rb"\s*+>")  # literal, then one run of blanks


def wrap_record(record: bytes, namespace_context: str, xml_declaration: bytes = b"") -> tuple[bytes, int]:
    """The record inside a synthetic root carrying the page's namespace declarations.

    Everything added before the record stays on the record's first line, so the parser's line numbers
    are the record's own line numbers; only columns on line 1 are shifted, by the returned prefix length.
    The page's XML declaration is kept so a declared encoding still applies to the record's bytes.
    """
    context = namespace_context.encode("utf-8")
    head = xml_declaration + b"<" + WRAPPER_NAME.encode() + (b" " + context if context else b"") + b">"
    return head + record + b"</" + WRAPPER_NAME.encode() + b">", len(head)


def tree_too_large(wrapped: bytes) -> str | None:
    """Why a record (as `wrap_record` wraps it) must not be parsed, or None: more than
    `MAX_NODES_PER_RECORD` nodes (elements, attributes, processing instructions; not the wrapper) or
    `=` between two `<` (one start tag's attributes, which libxml2 would build at once), or more than
    `MAX_NAMESPACE_DECLARATIONS` namespace declarations (the page root's included). Decided before
    the tree is built, building little more than the limit of it. The extraction's streaming scan
    counts the same way, per child of the root (nodes) and per page (`=` runs, declarations), so a
    record refused here is never in a page that scan found well-formed."""
    nodes, namespaces = settings.MAX_NODES_PER_RECORD, settings.MAX_NAMESPACE_DECLARATIONS
    over = "flood" if AttributeFlood(nodes).over(wrapped) else tree_over_limits(wrapped, nodes + 1, namespaces)
    if over is None:
        return None
    what, name, limit = {
        "flood": (FLOOD_WHAT, "MAX_NODES_PER_RECORD", nodes),
        "nodes": (NODES_WHAT, "MAX_NODES_PER_RECORD", nodes),
        "namespaces": (NAMESPACES_WHAT, "MAX_NAMESPACE_DECLARATIONS", namespaces),
    }[over]
    return (
        f"the record holds more than {limit:,} {what}, over the limit {name} = {limit:,} "
        "(placsp_provider.settings; real PLACSP records stay far below it): it was not parsed, so memory "
        "stays bounded"
    )


def recover_entry_id(record: bytes, kind: str) -> str | None:
    """The entry id (or tombstone ref) read with a byte regex, for records that did not parse."""
    if kind == TOMBSTONE:
        tag_end = record.find(b">")
        found = _TOMBSTONE_REF.search(record, 0, tag_end + 1 if tag_end >= 0 else len(record))
        raw = (found.group(1) if found.group(1) is not None else found.group(2)) if found else None
    else:
        raw = _first_entry_id(record)
    if raw is None:
        return None
    return raw.strip().decode("utf-8", "backslashreplace") or None


def _first_entry_id(record: bytes) -> bytes | None:
    """What `<(prefix:)?id(\\s[^>]*)?>\\s*([^<\\s][^<]*?)\\s*</` (searched) captured, give or take
    blanks at its end (the caller strips them), in linear time.

    That regex cost quadratic time on hostile bytes (`<id>a` + 1 MB of blanks + `x`: each lazy step
    re-read the blanks; `<id <id <id ...` with no `>`: each attempt read to the end). `_ID_TEXT` is
    the same pattern, except that an id tag's attributes may not hold a `<` (they never do in XML):
    its runs stop at the next `<` and never give back, so no byte is read twice. Its first match is
    the old one's unless an id tag with a `<` in its attributes comes before it (`_ID_TAG_WITH_LT`,
    linear too); then `_first_entry_id_by_hand` decides, exactly.
    """
    found = _ID_TEXT.search(record)
    before = found.start() + 1 if found else len(record)
    if _ID_TAG_WITH_LT.search(record, 0, before) is None:
        return found.group(1) if found else None
    return _first_entry_id_by_hand(record)


def _first_entry_id_by_hand(record: bytes) -> bytes | None:
    """The old regex's first match, in one pass: for each `<id` / `<prefix:id` tag in order, its end
    is the first `>` after its name; then blanks, then text up to the next `<`, which must open an
    end tag (`</`). The text must start with a byte that is neither blank nor `<`. Tags whose
    attributes hold another `<id` share their first `>`, so each `>` is looked for, and each text
    read, once.
    """
    gt = -1  # the first `>` after the last tag name looked at
    failed_at = -1  # a tag ending at this `>` did not give an id: no other will
    for name in _ID_TAG_NAME.finditer(record):
        if gt < name.end():
            gt = record.find(b">", name.end())
            if gt < 0:
                return None  # no `>` after this name, nor after any later one
        if gt == failed_at:
            continue
        failed_at = gt
        start = _BLANKS_RUN.match(record, gt + 1).end()  # type: ignore[union-attr]
        if start >= len(record) or record[start] == ord("<"):
            continue
        lt = record.find(b"<", start)
        if lt < 0 or record[lt + 1 : lt + 2] != b"/":
            continue
        return record[start:lt]
    return None


def line_of(data: bytes, offset: int) -> int:
    """1-based line number of a byte offset (for messages only, so the count runs on failures only)."""
    return data.count(b"\n", 0, offset) + 1


def column_of(data: bytes, offset: int) -> int:
    """1-based byte column of a byte offset on its line."""
    return offset - (data.rfind(b"\n", 0, offset) + 1) + 1


def split_declaration(raw: bytes) -> tuple[bytes, bytes]:
    """(the leading `<?xml ...?>`, the record) of a dead letter's `raw_bytes` (or of a corrected record
    that starts with a declaration); no declaration: (b"", raw)."""
    if raw.startswith(b"<?xml"):
        end = raw.find(b">")
        if end > 0 and raw[end - 1 : end] == b"?":
            return raw[: end + 1], raw[end + 1 :]
    return b"", raw
