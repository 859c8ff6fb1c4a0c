"""What a replay re-parses for a dead letter: the exact bytes the ingest rejected, unless a person
corrected the record. Defined once; the replay's workers, the `fix` check and `show` use it.

A dead letter carries its record twice:
- `raw_bytes`: what the parser read, exactly: the page's XML declaration (when the page had one),
  then the record's bytes. Never changed after the ingest wrote it.
- `raw_record`: the same record as text for people (undecodable bytes shown as `\\xNN`), and the
  place where a person writes a corrected record (`placsp dead-letters fix`).

The rule: a dead letter re-parses `raw_bytes`, so the same bytes get the same verdict in every run.
Only a `fixed` dead letter whose `raw_record` a person changed re-parses that text (as UTF-8). A
`raw_record` that was never changed is worth nothing more than the bytes it shows: its `\\xf1`
is four characters that the feed never held, and re-parsing them would put them into Silver.

Dead letters written before `raw_bytes` existed (null there): see `legacy_bytes`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from placsp_provider.dead_letters.lifecycle import FIXED
from placsp_provider.lake_storage import LakePath
from placsp_provider.parser.page_parser import TRUNCATED, PageParseResult, parse_record
from placsp_provider.parser.page_split import split_declaration

if TYPE_CHECKING:
    from placsp_provider.datasets import Dataset

# What `bytes.decode("utf-8", "backslashreplace")` writes for a byte that does not decode.
ESCAPED_BYTE = re.compile(r"\\x[0-9a-f]{2}")
RECORD_KINDS = ("entry", "tombstone")  # a page- or file-level dead letter holds no one record


@dataclass(frozen=True)
class RecordToReplay:
    data: bytes | str  # bytes: exact; str: a person's text, parsed as UTF-8
    exact: bool  # the bytes the ingest rejected (so facts of their page, such as a cut, still hold)


def readable(raw_bytes: bytes) -> str:
    """The `raw_record` text the ingest writes for these bytes."""
    return split_declaration(raw_bytes)[1].decode("utf-8", "backslashreplace")


def record_to_replay(letter: Mapping[str, Any]) -> RecordToReplay:
    """What re-parsing `letter` (a dead-letter row) reads. A legacy row (no `raw_bytes`) gives its
    `raw_record`: the replay's selection fills `raw_bytes` first wherever the exact bytes can be
    known (`legacy_bytes`), and leaves out the ones that cannot."""
    exact = letter.get("raw_bytes")
    text = letter["raw_record"]
    if exact is None:
        return RecordToReplay(text, exact=False)
    if letter.get("status") == FIXED and text != readable(exact):
        return RecordToReplay(text, exact=False)  # a person's correction
    return RecordToReplay(bytes(exact), exact=True)


def legacy_bytes(letter: Mapping[str, Any], lake: LakePath) -> bytes | None:
    """The exact bytes of a dead letter written before `raw_bytes` existed, or None when they cannot
    be known (the runbook's "Dead letters written before raw_bytes").

    1. From Bronze: the landed page `source_file`, split as the ingest split it; the record at
       `record_offset` whose text is exactly `raw_record` (pages are content-addressed, so the same
       name holds the same bytes; the check guards against a page edited by hand).
    2. Else `raw_record` itself when it holds no `\\xNN`: `backslashreplace` changed nothing, so
       its UTF-8 is the record's bytes (without the page's XML declaration, as replays read it
       before).
    3. Else unknown: the record held bytes that did not decode, and the text cannot tell which.
    """
    text = letter["raw_record"]
    found = _from_bronze(letter, lake, {})
    if found is not None:
        return found
    if not ESCAPED_BYTE.search(text):
        return text.encode("utf-8")
    return None


def _from_bronze(letter: Mapping[str, Any], lake: LakePath, pages: dict[str, Any]) -> bytes | None:
    page = _bronze_page(letter["source_file"], lake, pages)
    if page is None:
        return None
    data, layout = page
    for span in layout.records:
        if span.start == letter["record_offset"] and span.kind == letter["record_kind"]:
            record = data[span.start : span.end]
            if record.decode("utf-8", "backslashreplace") == letter["raw_record"]:
                return bytes(layout.xml_declaration + record)
    return None


def _bronze_page(source: str, lake: LakePath, pages: dict[str, Any]) -> Any:
    """(bytes, layout) of a landed page as the ingest read it, or None; read and split once per page."""
    from placsp_provider.feed.prolog import to_utf8
    from placsp_provider.parser import page_split

    if source not in pages:
        root = lake.resolve()
        path = (root / source).resolve()
        pages[source] = None
        if root in path.parents and path.is_file():  # a name in the lake, never a path out of it
            try:
                data = to_utf8(path.read_bytes())
            except OSError:
                return None
            pages[source] = (data, page_split.scan_page(data))
    return pages[source]


def fill_legacy_bytes(letters: Any, lake: LakePath) -> tuple[Any, list[str]]:
    """A replay's selection (Arrow) with `raw_bytes` filled on legacy rows wherever the exact bytes can
    be known, and the rows left out whose record nobody can tell from invented text; their ids are
    returned. For each legacy record-level row:

    - its bytes found in Bronze (`legacy_bytes`' step 1: only while `raw_record` is still exactly the
      text of those bytes): filled, so `record_to_replay` reads the bytes, `fixed` or not;
    - else a `raw_record` holding `\\xNN` is left out, `fixed` or not: an undecodable byte and the
      four characters look alike, and a fix written before `fix` checked anything may still hold them;
    - else a `fixed` one replays its text (a person's), a `quarantined` one its text as UTF-8.
    """
    import pyarrow as pa

    column = letters.column("raw_bytes").to_pylist()
    if all(value is not None for value in column):
        return letters, []
    rows = letters.to_pylist()
    pages: dict[str, Any] = {}
    keep, unknown = [], []
    for index, row in enumerate(rows):
        if column[index] is None and row["record_kind"] in RECORD_KINDS:
            column[index] = _from_bronze(row, lake, pages)
            if column[index] is None and ESCAPED_BYTE.search(row["raw_record"]):
                unknown.append(row["dead_letter_id"])
                continue
            if column[index] is None and row["status"] != FIXED:
                column[index] = row["raw_record"].encode("utf-8")
        keep.append(index)
    position = letters.schema.get_field_index("raw_bytes")
    filled = letters.set_column(position, "raw_bytes", pa.array(column, pa.binary()))
    return filled.take(pa.array(keep, pa.int64())), unknown


def escapes_left(raw_bytes: bytes | None, raw_record: str, corrected: str) -> list[str]:
    """The `\\xNN` texts that stand for bytes the ingest could not decode and are still in the
    `corrected` text: left there, they would reach Silver as four characters the feed never held.
    Escapes the record really held as text (valid UTF-8 `\\xf1`) are not counted. `raw_bytes` None
    (a dead letter written before the column): every `\\xNN` of `raw_record` counts."""
    if raw_bytes is None:
        suspects = Counter({escape: 0 for escape in ESCAPED_BYTE.findall(raw_record)})
    else:
        text = split_declaration(raw_bytes)[1].decode("utf-8", "surrogateescape")
        undecoded = {f"\\x{ord(c) - 0xDC00:02x}" for c in text if 0xDC80 <= ord(c) <= 0xDCFF}
        held = Counter(ESCAPED_BYTE.findall(text))  # surrogates never match: these are real text
        suspects = Counter({escape: held[escape] for escape in undecoded})
    return sorted(escape for escape, literal in suspects.items() if corrected.count(escape) > literal)


def parse_dead_letter(
    dead_letter: Mapping[str, Any], *, dataset: Dataset, raw_record: bytes | str | None = None
) -> PageParseResult:
    """Re-parse a dead letter as the replay does (`record_to_replay`: its exact bytes, or a person's
    correction), or with the corrected `raw_record` given here; the ingest's own record path."""
    if raw_record is None:
        chosen = record_to_replay(dead_letter)
        raw, exact = chosen.data, chosen.exact
    else:
        raw, exact = raw_record, False
    return parse_record(
        raw,
        kind=dead_letter["record_kind"],
        dataset=dataset,
        source_file=dead_letter["source_file"],
        namespace_context=dead_letter["namespace_context"],
        record_offset=dead_letter["record_offset"],
        page_ended_inside=exact and dead_letter["error_type"] == TRUNCATED,
    )
