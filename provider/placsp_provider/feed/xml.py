"""Hardened XML parsing: no entity expansion, no DTD, no network, bounded documents.

PLACSP pages never carry a DOCTYPE. A page that does is refused before any parser sees it, so an
entity bomb or an external entity is neither expanded nor fetched; lxml is configured the same way
as a second line of defence.
"""

from __future__ import annotations

import re
from typing import IO, Any

from lxml import etree

ATOM_NS = "http://www.w3.org/2005/Atom"
TOMBSTONE_NS = "http://purl.org/atompub/tombstones/1.0"
ENTRY_TAG = f"{{{ATOM_NS}}}entry"
DELETED_ENTRY_TAG = f"{{{TOMBSTONE_NS}}}deleted-entry"

# Only the prolog can hold a DOCTYPE; 64 KiB is far more than any real prolog.
_PROLOG_BYTES = 65536
_DOCTYPE = re.compile(rb"<!DOCTYPE", re.IGNORECASE)
_ENTITY = re.compile(rb"<!ENTITY", re.IGNORECASE)

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


def dtd_refusal(head: bytes) -> str | None:
    """Reason to refuse a document from its first bytes, or None when it has no DTD."""
    prolog = head[:_PROLOG_BYTES]
    if _ENTITY.search(prolog):
        return "declares XML entities (<!ENTITY>): refused without expanding them (entity-expansion guard)"
    if _DOCTYPE.search(prolog):
        return "declares a DTD (<!DOCTYPE>), which PLACSP feeds never do: refused without loading it"
    return None


def iterparse(source: IO[bytes] | str, **kwargs: Any) -> Any:
    """`lxml.etree.iterparse` with the hardened options."""
    return etree.iterparse(source, **{**PARSER_OPTIONS, **kwargs})


def parse_bytes(data: bytes) -> etree._Element:
    """Parse a whole small document (one entry) with the hardened parser."""
    return etree.fromstring(data, parser=make_parser())
