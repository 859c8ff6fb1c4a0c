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

# The root's end tag at the end of a page, followed only by what XML allows after it (whitespace,
# comments, PIs). A page without it was cut short (or is no feed). Search the last few KiB only.
FEED_END = re.compile(rb"</(?:[A-Za-z_][\w.\-]*:)?feed\s*>(?:\s|<!--.*?-->|<\?.*?\?>)*\Z", re.DOTALL)
FEED_END_WINDOW = 4096

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
    opts = {**PARSER_OPTIONS, **overrides}
    return etree.XMLParser(**opts)


def iterparse(source: IO[bytes] | str, **kwargs: Any) -> Any:
    """`lxml.etree.iterparse` with the hardened options."""
    return etree.iterparse(source, **{**PARSER_OPTIONS, **kwargs})
