"""Parse one PLACSP feed page into Silver rows and dead letters: the heart of the Silver ingest.

`parse_page` is plain Python (no Spark, no Airflow) so the Spark job can call it from `mapInArrow` on
the raw bytes of each page (`binaryFile`), and tests can call it directly.

How a page is read:
1. A page that declares a DTD or entities is refused whole (`dtd_refused`): one dead letter with
   record_kind 'page', nothing parsed, nothing expanded or fetched. Its records are still counted from
   the byte scan (records_seen / entries_seen / tombstones_seen), so the refusal is visible in counts;
   for such a page the per-record conservation rule below does not apply -- the page dead letter stands
   for all of them, and the page itself stays in Bronze.
2. Otherwise the page is cut into records at the byte level (`page_split`), and each record is parsed
   with the hardened parser, wrapped in the page root's namespace declarations: ~32 records in one
   document when that gives each exactly what its own document gives, else each alone
   (`_parse_together`). A broken record costs only itself; the dead letter carries lxml's exact message.
3. A parsed record is turned into rows (`entry_fields`) and validated (`validation`); any problem makes
   the whole record one dead letter (stage 'validation') and contributes no rows at all.

Conservation: every record start tag found yields exactly one entry/tombstone row or exactly one dead
letter with that record_kind. Page-level dead letters (record_kind 'page') come in addition, and only
for `dtd_refused`, `not_a_feed` (non-empty bytes with no feed root and no record) and `truncated`
(the page lost its `</feed>` after its last complete record, so records may be missing unseen).
"""

from __future__ import annotations

import hashlib
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from lxml import etree

from placsp_provider.datasets import Dataset
from placsp_provider.dead_letters.lifecycle import STAGE_PARSE, STAGE_VALIDATION
from placsp_provider.feed.prolog import dtd_refusal, to_utf8
from placsp_provider.feed.xml import ATOM_NS, DELETED_ENTRY_TAG, ENTRY_TAG, make_parser
from placsp_provider.parser import page_split
from placsp_provider.parser.entry_fields import extract_entry, extract_tombstone
from placsp_provider.parser.page_split import ENTRY, TOMBSTONE, PageLayout, RecordSpan
from placsp_provider.parser.silver_schema import DEAD_LETTERS
from placsp_provider.parser.silver_schema import RECORD_DIGEST_COLUMN as RECORD_DIGEST
from placsp_provider.parser.validation import (
    ENCODING_ERROR,
    Problems,
    describe_replacement_characters,
    has_replacement_characters,
)
from placsp_provider.parser.version import PARSER_VERSION

Row = dict[str, Any]

PAGE = "page"

# Error types of stage 'parse'.
XML_SYNTAX = "xml_syntax"
ENCODING = "encoding"
UNBOUND_PREFIX = "unbound_prefix"
TRUNCATED = "truncated"
UNCLOSED_RECORD = "unclosed_record"
UNEXPECTED_ELEMENT = "unexpected_element"
DTD_REFUSED = "dtd_refused"
NOT_A_FEED = "not_a_feed"
# Over settings.MAX_NODES_PER_RECORD or MAX_NAMESPACE_DECLARATIONS: refused before its tree is built.
TREE_TOO_LARGE = "tree_too_large"
# Stage 'validation', for a bug in extraction: the record is kept visible instead of failing the task.
EXTRACTION_FAILED = "extraction_failed"

DEAD_LETTER_KEYS = tuple(DEAD_LETTERS.names)

_ENCODING_CODES = frozenset(
    {
        etree.ErrorTypes.ERR_INVALID_ENCODING,
        etree.ErrorTypes.ERR_UNKNOWN_ENCODING,
        etree.ErrorTypes.ERR_UNSUPPORTED_ENCODING,
    }
)
_PAGE_EXCERPT_BYTES = 4096
_EXPECTED_TAG = {ENTRY: ENTRY_TAG, TOMBSTONE: DELETED_ENTRY_TAG}
# Records parsed as one document (`_parse_together`), as many as fit in this many bytes (~32 real-shaped
# records, 4 heavy ones; fewer or more parsed slower).
_TOGETHER_BYTES = 200_000
_ATOM_ID = f"{{{ATOM_NS}}}id"


@dataclass(frozen=True)
class PageParseResult:
    """Rows and dead letters of one page (or of one replayed record), filled as its records are parsed."""

    entries_seen: int  # entry start tags found by the splitter
    tombstones_seen: int
    entries: list[Row] = field(default_factory=list)  # one per valid <entry>
    lots: list[Row] = field(default_factory=list)
    documents: list[Row] = field(default_factory=list)
    results: list[Row] = field(default_factory=list)
    tombstones: list[Row] = field(default_factory=list)  # one per valid <at:deleted-entry>
    dead_letters: list[Row] = field(default_factory=list)  # one per failed record (+ page-level ones)

    @property
    def records_seen(self) -> int:
        return self.entries_seen + self.tombstones_seen


@dataclass(slots=True)  # one per record: not frozen, whose checked sets cost ~1 ms a real-shaped page
class _RecordContext:
    """Everything a record's dead letter needs to say where it came from and how to re-parse it."""

    dataset: Dataset
    source_file: str
    kind: str
    raw: bytes
    offset: int
    namespace_context: str
    xml_declaration: bytes = b""
    page: bytes | None = None  # the whole page, to translate positions into page lines
    closed: bool = True
    truncated: bool = False  # unclosed AND the page ends inside it


def parse_page(data: bytes, *, dataset: Dataset, source_file: str) -> PageParseResult:
    """Rows of every valid record of one feed page, and one dead letter per record that is not."""
    (result,) = parse_page_in_parts(data, dataset=dataset, source_file=source_file)
    return result


def parse_page_in_parts(
    data: bytes, *, dataset: Dataset, source_file: str, bytes_per_part: int | None = None
) -> Iterator[PageParseResult]:
    """`parse_page`'s rows and dead letters, a part at a time: a part ends with the record that brings
    its records' bytes to `bytes_per_part` (None: the page in one part).

    A heavy page (24 MB, 500 entries) makes ~10,000 rows; a consumer that turns each part into Arrow
    and lets it go holds one part's rows at a time instead of the page's. Rows follow bytes, whatever
    a page's shape, so the bound is in bytes. The parts together hold exactly what `parse_page`
    returns, in the same order; every part carries the page's counts (`*_seen`), and page-level dead
    letters come in the last part. There is always at least one part.
    """
    # The splitter looks for ASCII markup: a UTF-16/32 page is read as UTF-8, as lxml reads it for
    # the extraction's count, so both count the same records.
    data = to_utf8(data)
    layout = page_split.scan_page(data)
    out = PageParseResult(layout.entries_seen, layout.tombstones_seen)
    refusal = dtd_refusal(data)
    if refusal is not None:
        out.dead_letters.append(_page_dead_letter(data, layout, dataset, source_file, DTD_REFUSED, refusal))
        yield out
        return
    if not layout.records and not layout.has_feed_root and data.strip():
        reason = (
            f"no Atom <feed> root and no <entry>/<at:deleted-entry> found (first element: "
            f"{layout.root_name or 'none'}); not a PLACSP feed page, or not UTF-8/ASCII-compatible"
        )
        out.dead_letters.append(_page_dead_letter(data, layout, dataset, source_file, NOT_A_FEED, reason))
        yield out
        return
    parser = _record_parser()  # one per page: lxml parsers are reusable but not shareable across threads
    last = len(layout.records) - 1
    part_bytes = 0
    together: list[_RecordContext] = []  # records parsed as one document (`_parse_records`)
    together_bytes = 0
    for index, span in enumerate(layout.records):
        if bytes_per_part and part_bytes >= bytes_per_part:
            _parse_records(together, parser, out)
            together, together_bytes = [], 0
            yield out
            out = PageParseResult(layout.entries_seen, layout.tombstones_seen)
            part_bytes = 0
        size = span.end - span.start
        part_bytes += size
        if together and together_bytes + size > _TOGETHER_BYTES:  # a record over the bound goes alone
            _parse_records(together, parser, out)
            together, together_bytes = [], 0
        together.append(
            _RecordContext(
                dataset=dataset,
                source_file=source_file,
                kind=span.kind,
                raw=data[span.start : span.end],
                offset=span.start,
                namespace_context=layout.namespace_context,
                xml_declaration=layout.xml_declaration,
                page=data,
                closed=span.closed,
                truncated=_is_truncated(span, index == last, layout),
            )
        )
        together_bytes += size
    _parse_records(together, parser, out)
    if _page_lost_its_end(layout):
        reason = (
            "the page does not end with </feed> although its last record is complete: it was cut "
            "between records, so records after the cut are missing (re-download the page)"
        )
        out.dead_letters.append(_page_dead_letter(data, layout, dataset, source_file, TRUNCATED, reason))
    yield out


def parse_record(
    raw: bytes | str,
    *,
    kind: str,
    dataset: Dataset,
    source_file: str,
    namespace_context: str | bytes = "",
    record_offset: int = 0,
    page_ended_inside: bool = False,
) -> PageParseResult:
    """Re-parse ONE record (a dead letter's raw_bytes or a corrected raw_record, + namespace_context)
    through the page code path.

    `kind` is the dead letter's record_kind ('entry' or 'tombstone'). Bytes are read as the ingest
    read them: a leading XML declaration (as `raw_bytes` keeps the page's) applies to the record. A
    `str` (a person's text) is encoded as UTF-8. A record that still has no end tag is reported as
    `truncated` when `page_ended_inside` (its page was cut inside it: a fact of the original bytes),
    else as `unclosed_record`.
    """
    if kind not in _EXPECTED_TAG:
        raise ValueError(f"record kind must be 'entry' or 'tombstone' to re-parse, not {kind!r}")
    declaration, data = page_split.split_declaration(raw.encode("utf-8") if isinstance(raw, str) else raw)
    context_text = namespace_context.decode("utf-8") if isinstance(namespace_context, bytes) else namespace_context
    # A record still missing its end tag must be reported as such again, not as a generic syntax error.
    # Scanned inside the page root's declarations, as the page scan saw it: a nested `<x:entry>` whose
    # prefix the root binds to another namespace is no record start, here as there.
    wrapped, head = page_split.wrap_record(data, context_text)
    spans = [span for span in page_split.scan_page(wrapped).records if span.start >= head]
    closed = spans[0].closed if len(spans) == 1 else True
    out = PageParseResult(int(kind == ENTRY), int(kind == TOMBSTONE))
    _parse_one(
        _RecordContext(
            dataset=dataset,
            source_file=source_file,
            kind=kind,
            raw=data,
            offset=record_offset,
            namespace_context=context_text,
            xml_declaration=declaration,
            closed=closed,
            truncated=page_ended_inside and not closed,
        ),
        _record_parser(),
        out,
    )
    return out


# ---------------------------------------------------------------------------------------------------
# One record


def _record_parser() -> etree.XMLParser:
    # Whitespace-only text between elements is dropped by libxml2 (6% fewer instructions for a page:
    # decision 0004): no field reads it, every text read is stripped, the dead letter keeps the raw bytes.
    return make_parser(remove_blank_text=True)


def _parse_records(contexts: list[_RecordContext], parser: etree.XMLParser, out: PageParseResult) -> None:
    """Each record parsed, validated and routed, in order: parsed as one document when they all parse
    that way, each in a document of its own otherwise."""
    elements = _parse_together(contexts, parser) if len(contexts) > 1 else None
    if elements is None:
        for context in contexts:
            _parse_one(context, parser, out)
        return
    for context, element in zip(contexts, elements, strict=True):
        _extract(context, element, out)


def _parse_together(contexts: list[_RecordContext], parser: etree.XMLParser) -> list[etree._Element] | None:
    """The records' elements, from ONE document that wraps them all, or None when that document does
    not give each record exactly what its own document would (`_parse_one` then decides, one by one).

    One document of ~32 real-shaped records costs a fifth less to parse than 32 documents (12.5
    against 15.9 ms a page's records). It gives the same elements: the splitter found every start tag
    of a record element that this document could hold at its top level (same bytes, same namespace
    declarations), so when its top level holds exactly one element per record, each of the expected
    tag, in order, each one starts where its record starts and ends before the next one starts, at the
    first end tag the splitter found: each record's bytes are that element, as in its own document.
    Any other document (a syntax error anywhere, an `xml:id` twice, a record unclosed or in another
    namespace, the limits exceeded) is set aside.
    """
    if not all(context.closed for context in contexts):
        return None
    first = contexts[0]
    document, _ = page_split.wrap_record(
        b"".join(context.raw for context in contexts), first.namespace_context, first.xml_declaration
    )
    # Within the limits, so is each record: its nodes, declarations and runs of `=` are the document's.
    if page_split.tree_too_large(document) is not None:
        return None
    try:
        wrapper = etree.fromstring(document, parser=parser)
    except etree.XMLSyntaxError:
        return None
    elements = [child for child in wrapper if isinstance(child.tag, str)]
    if len(elements) != len(contexts):
        return None
    if any(element.tag != _EXPECTED_TAG[context.kind] for element, context in zip(elements, contexts, strict=True)):
        return None
    return elements


def _parse_one(context: _RecordContext, parser: etree.XMLParser, out: PageParseResult) -> None:
    wrapped, head_length = page_split.wrap_record(context.raw, context.namespace_context, context.xml_declaration)
    too_large = page_split.tree_too_large(wrapped)
    if too_large is not None:
        if not context.closed:
            too_large += "; it has no end tag either (the page was cut inside it, or it is unclosed)"
        entry_id = page_split.recover_entry_id(context.raw, context.kind)
        out.dead_letters.append(_dead_letter(context, STAGE_PARSE, TREE_TOO_LARGE, too_large, entry_id))
        return
    try:
        wrapper = etree.fromstring(wrapped, parser=parser)
    except etree.XMLSyntaxError as err:
        out.dead_letters.append(_syntax_dead_letter(context, err, head_length))
        return
    element = _single_record_element(context, wrapper, out)
    if element is not None:
        _extract(context, element, out)


def _extract(context: _RecordContext, element: etree._Element, out: PageParseResult) -> None:
    """The rows of a record that parsed, or its dead letter (stage validation)."""
    problems = Problems()
    if has_replacement_characters(context.raw):
        problems.add(ENCODING_ERROR, describe_replacement_characters(element))
    try:
        _route(context, element, problems, out)
    except Exception as err:  # a bug must cost one record, visibly, not the whole Spark task
        where = traceback.extract_tb(err.__traceback__)[-1]
        reason = (
            f"field extraction raised {type(err).__name__}: {err} (at {where.filename}:{where.lineno}); "
            "this is a bug in the provider, please report it with this record"
        )
        out.dead_letters.append(
            _dead_letter(context, STAGE_VALIDATION, EXTRACTION_FAILED, reason, _entry_id_of(element, context))
        )


def _single_record_element(
    context: _RecordContext, wrapper: etree._Element, out: PageParseResult
) -> etree._Element | None:
    """The record's element, checked to be exactly one element of the expected Atom/tombstone tag."""
    elements = [child for child in wrapper if isinstance(child.tag, str)]
    expected = _EXPECTED_TAG[context.kind]
    if len(elements) == 1 and elements[0].tag == expected:
        return elements[0]
    found = ", ".join(str(e.tag) for e in elements[:3]) or "no element"
    reason = (
        f"the record must be exactly one {expected} element, found {len(elements)}: {found} "
        "(a namespace declaration missing from the page root, or a record pasted twice?)"
    )
    entry_id = page_split.recover_entry_id(context.raw, context.kind)
    out.dead_letters.append(_dead_letter(context, STAGE_PARSE, UNEXPECTED_ELEMENT, reason, entry_id))
    return None


def _route(context: _RecordContext, element: etree._Element, problems: Problems, out: PageParseResult) -> None:
    digest = hashlib.sha256(context.raw).hexdigest()  # the tie-break of last resort (ingest.rules)
    if context.kind == TOMBSTONE:
        row = extract_tombstone(element, dataset=context.dataset, source_file=context.source_file, problems=problems)
        if problems:
            out.dead_letters.append(_validation_dead_letter(context, problems, row["entry_id"]))
        else:
            row[RECORD_DIGEST] = digest
            out.tombstones.append(row)
        return
    rows = extract_entry(element, dataset=context.dataset, source_file=context.source_file, problems=problems)
    if problems:
        out.dead_letters.append(_validation_dead_letter(context, problems, rows.entry["entry_id"]))
        return
    for row in (rows.entry, *rows.lots, *rows.documents, *rows.results):
        row[RECORD_DIGEST] = digest
    out.entries.append(rows.entry)
    out.lots.extend(rows.lots)
    out.documents.extend(rows.documents)
    out.results.extend(rows.results)


def _entry_id_of(element: etree._Element, context: _RecordContext) -> str | None:
    if context.kind == TOMBSTONE:
        text = element.get("ref")
    else:
        text = next((child.text for child in element.iterchildren(_ATOM_ID)), None)
    return (text or "").strip() or None


# ---------------------------------------------------------------------------------------------------
# Classification and messages


def _is_truncated(span: RecordSpan, is_last: bool, layout: PageLayout) -> bool:
    """An unclosed last record of a page that also lacks its closing root tag: the file was cut."""
    return (not span.closed) and is_last and (not layout.has_feed_root or not layout.feed_closed)


def _page_lost_its_end(layout: PageLayout) -> bool:
    """Cut between records: no record reports it, so the page must (records may be missing)."""
    if not layout.has_feed_root or layout.feed_closed:
        return False
    return not layout.records or layout.records[-1].closed


def _parse_error_type(context: _RecordContext, err: etree.XMLSyntaxError) -> str:
    if not context.closed:
        return TRUNCATED if context.truncated else UNCLOSED_RECORD
    code = getattr(err, "code", None)  # libxml2's error code (absent from lxml's type stubs)
    if code == etree.ErrorTypes.NS_ERR_UNDEFINED_NAMESPACE:
        return UNBOUND_PREFIX
    # older libxml2 says "Input is not proper UTF-8, indicate encoding !" with a generic code
    if code in _ENCODING_CODES or "UTF-8" in (err.msg or ""):
        return ENCODING
    return XML_SYNTAX


def _syntax_dead_letter(context: _RecordContext, err: etree.XMLSyntaxError, head_length: int) -> Row:
    error_type = _parse_error_type(context, err)
    lead = {
        TRUNCATED: "the page ends inside this record (file cut short); ",
        UNCLOSED_RECORD: "this record has no end tag before the next record starts; ",
        UNBOUND_PREFIX: "a namespace prefix is not declared (by the page root or the record); ",
        ENCODING: "the record's bytes are not valid in the page's encoding (UTF-8 unless declared); ",
        XML_SYNTAX: "the record is not well-formed XML; ",
    }[error_type]
    wrapper_note = (
        f" ({page_split.WRAPPER_NAME} is the synthetic element that wraps the record for parsing)"
        if page_split.WRAPPER_NAME in (err.msg or "")
        else ""
    )
    reason = f"{lead}lxml: {err.msg}{_position_note(context, err, head_length)}{wrapper_note}"
    entry_id = page_split.recover_entry_id(context.raw, context.kind)
    return _dead_letter(context, STAGE_PARSE, error_type, reason, entry_id)


def _position_note(context: _RecordContext, err: etree.XMLSyntaxError, head_length: int) -> str:
    """lxml's line/column translated to the record and to the page (the wrapper shifts line 1 only)."""
    line, column = err.position if err.position else (0, 0)
    if line <= 0:
        return ""
    record_column = column - head_length if line == 1 else column
    note = f" [record line {line}, column {max(record_column, 1)}"
    if context.page is not None:
        page_line = page_split.line_of(context.page, context.offset) + line - 1
        page_column = (
            page_split.column_of(context.page, context.offset) - 1 + record_column if line == 1 else record_column
        )
        note += f"; page line {page_line}, column {max(page_column, 1)}"
    return note + "; lxml's own line numbers count from the record's first line]"


def _validation_dead_letter(context: _RecordContext, problems: Problems, entry_id: str | None) -> Row:
    return _dead_letter(context, STAGE_VALIDATION, problems.error_type, problems.describe(), entry_id)


def _dead_letter(context: _RecordContext, stage: str, error_type: str, reason: str, entry_id: str | None) -> Row:
    what = "entry" if context.kind == ENTRY else "tombstone"
    where = f"byte offset {context.offset}"
    if context.page is not None:
        where += f", page line {page_split.line_of(context.page, context.offset)}"
    message = (
        f"Dataset {context.dataset.key}, file {context.source_file}: {what} "
        f"{entry_id or '(id not readable)'} ({where}) was rejected at stage {stage} "
        f"[{error_type}]: {reason}. The page's other records are unaffected; fix the record "
        "(raw_record) and replay it."
    )
    return _dead_letter_row(context, stage, error_type, message, entry_id)


def _dead_letter_row(context: _RecordContext, stage: str, error_type: str, message: str, entry_id: str | None) -> Row:
    return {
        "dataset": context.dataset.key,
        "source_file": context.source_file,
        "stage": stage,
        "error_type": error_type,
        "error_message": message,
        "raw_record": context.raw.decode("utf-8", "backslashreplace"),
        "namespace_context": context.namespace_context,
        "record_kind": context.kind,
        "entry_id": entry_id,
        "record_offset": context.offset,
        "raw_bytes": context.xml_declaration + context.raw,
        "parser_version": PARSER_VERSION,
    }


def _page_dead_letter(
    data: bytes, layout: PageLayout, dataset: Dataset, source_file: str, error_type: str, reason: str
) -> Row:
    """One dead letter for the whole page. raw_record is an excerpt (the page stays in Bronze):
    the prolog (where a DTD sits) or, for a truncated page, its last bytes."""
    if error_type == TRUNCATED:
        offset = max(len(data) - _PAGE_EXCERPT_BYTES, 0)
        excerpt = data[offset:]
    else:
        offset = 0
        first_record = layout.records[0].start if layout.records else len(data)
        excerpt = data[: min(first_record, _PAGE_EXCERPT_BYTES)]
    counts = f"{layout.entries_seen} entries and {layout.tombstones_seen} tombstones found by the byte scan"
    verdict = (
        "is incomplete; its complete records were processed"
        if error_type == TRUNCATED
        else "was rejected as a whole, no record of it was parsed"
    )
    message = (
        f"Dataset {dataset.key}, file {source_file}: the page {verdict} (stage parse) "
        f"[{error_type}]: {reason} ({counts}). raw_record holds an excerpt "
        f"({'its last bytes' if error_type == TRUNCATED else 'its prolog'}); the page itself stays "
        "in Bronze."
    )
    context = _RecordContext(dataset, source_file, PAGE, excerpt, offset, layout.namespace_context)
    return _dead_letter_row(context, STAGE_PARSE, error_type, message, None)
