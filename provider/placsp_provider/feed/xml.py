"""Hardened XML parsing: no entity expansion, no DTD, no network, bounded documents.

PLACSP pages never carry a DOCTYPE. A page that does is refused before any parser sees it
(`feed.prolog.dtd_refusal`: the whole prolog, any encoding), so an entity bomb or an external
entity is neither expanded nor fetched; lxml is configured the same way as a second line of defence.
"""

from __future__ import annotations

import re
from typing import IO, Any

from lxml import etree

ATOM_NS = "http://www.w3.org/2005/Atom"
TOMBSTONE_NS = "http://purl.org/atompub/tombstones/1.0"
ENTRY_TAG = f"{{{ATOM_NS}}}entry"
DELETED_ENTRY_TAG = f"{{{TOMBSTONE_NS}}}deleted-entry"

# A page that does not end with the root's end tag (followed only by what XML allows after it:
# whitespace, comments, PIs) was cut short, or is no feed. Only its last few KiB are looked at.
FEED_END_WINDOW = 4096
# `</feed>` or `</prefix:feed>`, as the end tag of a page's root. Linear: the name and the blanks are
# possessive and cannot give back what they took (the end tag's parts are delimited by `:` and `>`).
_FEED_END_TAG = re.compile(rb"</(?:[A-Za-z_][\w.\-]*+:)?feed\s*+>")
_BLANKS = b" \t\n\r\x0b\x0c"  # what `\s` matches in a bytes pattern


def ends_with_feed_end(data: bytes) -> bool:
    """Whether the last `FEED_END_WINDOW` bytes of `data` hold a root end tag (`</feed>`,
    `</prefix:feed>`) followed only by whitespace, comments (`<!--...-->`) and PIs (`<?...?>`).

    The verdicts are those of `</(prefix:)?feed\\s*>(?:\\s|<!--.*?-->|<\\?.*?\\?>)*\\Z` (DOTALL)
    searched in the window, on every input, decided in one pass (`_blank_from`) instead of that regex's exponential
    backtracking (issue 31: `</feed>` + 40 `<!---->` + one stray byte never finished).
    """
    window = data[-FEED_END_WINDOW:]
    ends = [found.end() for found in _FEED_END_TAG.finditer(window)]
    return bool(ends) and _blank_from(window, ends)


def _blank_from(window: bytes, starts: list[int]) -> bool:
    """Whether `window[i:]`, for some `i` in `starts` (ascending), is a sequence of single blanks,
    `<!--` X `-->` and `<?` X `?>`, X being any bytes (a closer may lie inside X).

    Dynamic programming from the end: `blank[i]` says `window[i:]` is such a sequence;
    `comment_closes[k]` says some `-->` at or after `k` is followed by such a sequence (so a `<!--`
    at `k - 4` can end there); `pi_closes[k]` the same for `?>`. Each position is decided once.
    """
    n = len(window)
    targets = set(starts)
    if n in targets:
        return True
    blank = bytearray(n + 5)
    comment_closes = bytearray(n + 5)
    pi_closes = bytearray(n + 5)
    blank[n] = 1
    for i in range(n - 1, starts[0] - 1, -1):
        byte = window[i]
        if byte in _BLANKS:
            ok = blank[i + 1]
        elif window.startswith(b"<!--", i):
            ok = comment_closes[i + 4]
        elif window.startswith(b"<?", i):
            ok = pi_closes[i + 2]
        else:
            ok = 0
        blank[i] = ok
        comment_closes[i] = comment_closes[i + 1] or (window.startswith(b"-->", i) and blank[i + 3])
        pi_closes[i] = pi_closes[i + 1] or (window.startswith(b"?>", i) and blank[i + 2])
        if ok and i in targets:
            return True
    return False


PARSER_OPTIONS: dict[str, Any] = {
    "resolve_entities": False,
    "no_network": True,
    "load_dtd": False,
    "dtd_validation": False,
    "huge_tree": False,  # keeps libxml2's depth and text-node limits on
    "remove_comments": True,
}


def make_parser(**overrides: Any) -> etree.XMLParser:
    """An `lxml` parser with the hardened options; `recover` is never on (errors must surface)."""
    return etree.XMLParser(**{**PARSER_OPTIONS, **overrides})


def iterparse(source: IO[bytes] | str, **kwargs: Any) -> Any:
    """`lxml.etree.iterparse` with the hardened options."""
    return etree.iterparse(source, **{**PARSER_OPTIONS, **kwargs})


# A document is fed to a counting parser this many bytes at a time (as `etree.iterparse` reads).
FEED_CHUNK = 1 << 15


def tree_over_limits(data: bytes, max_nodes: int, max_namespaces: int) -> str | None:
    """`"nodes"` when the document `data` (ASCII-compatible) holds more than `max_nodes` nodes
    (elements, attributes, processing instructions), `"namespaces"` when it holds more than
    `max_namespaces` namespace declarations, else None; decided without building much more than
    that of its tree.

    No node takes fewer than 4 bytes (`<a/>`, ` a=""`), and each declaration holds `xmlns`: a
    document of at most `4 * max_nodes` bytes with few enough `xmlns` is decided at once (without a
    count when it is too short to hold more: a real record, ~7 KB, is), any other is parsed a chunk
    at a time, counting.
    One that is not well-formed before a limit gives None: the parse proper reports its error.
    """
    if len(data) <= 4 * max_nodes and (
        len(data) < len(b"xmlns") * (max_namespaces + 1) or data.count(b"xmlns") <= max_namespaces
    ):
        return None
    parser: Any = etree.XMLPullParser(events=("start", "pi", "start-ns"), **PARSER_OPTIONS)
    counts = [0, 0]  # nodes, namespace declarations

    def over() -> str | None:
        for event, item in parser.read_events():
            if event == "start-ns":
                counts[1] += 1
            else:
                counts[0] += 1 + (len(item.attrib) if event == "start" else 0)
        if counts[0] > max_nodes:
            return "nodes"
        return "namespaces" if counts[1] > max_namespaces else None

    try:
        for at in range(0, len(data), FEED_CHUNK):
            parser.feed(data[at : at + FEED_CHUNK])
            if found := over():
                return found
        parser.close()
    except etree.XMLSyntaxError:
        return None
    return over()


# What the size limits count, as their messages say it (the streaming scan's and Silver's alike).
NODES_WHAT = "nodes (elements, attributes and processing instructions)"
FLOOD_WHAT = "`=` between two `<` (a start tag with as many attributes?)"
NAMESPACES_WHAT = "namespace declarations"


class AttributeFlood:
    """Finds, before libxml2 sees them, the bytes of a start tag that could hold more attributes
    and namespace declarations than `limit`.

    libxml2 waits for a start tag's `>` (up to 10 MB of it) and then builds all its attributes at
    once: 10 MB of `a=""` is a million attributes, ~350 MB, before any count can run. Each holds a
    `=`, and no `<` stands inside a tag, so `over`, fed a document's bytes in order (ASCII-compatible:
    UTF-8 for a wide page), says when some stretch without `<` holds more than `limit` `=`. Cheap:
    only the bytes before a chunk's first `<` and after its last one are counted, but for a chunk
    longer than the limit with that many `=` in it (a whole record in Silver, never a scan chunk).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.pending = 0  # `=` since the last `<`

    def over(self, data: bytes) -> bool:
        first = data.find(b"<")
        if first < 0:
            self.pending += data.count(b"=")
            return self.pending > self.limit
        if self.pending + data.count(b"=", 0, first) > self.limit:
            return True
        last = data.rfind(b"<")
        # A stretch wholly inside `data` is shorter than it: only a long `data` needs a look inside.
        inside = last - first > self.limit and data.count(b"=", first, last) > self.limit
        if inside and any(stretch.count(b"=") > self.limit for stretch in data[first:last].split(b"<")):
            return True
        self.pending = data.count(b"=", last)
        return self.pending > self.limit
