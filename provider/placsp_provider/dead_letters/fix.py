"""Look at a dead letter's record, and write a person's corrected record into it (status `fixed`),
ready for a replay (docs/runbook.md, "Fixing a record by hand"). delta-rs, no Spark.

`placsp dead-letters show` prints the exact bytes the ingest rejected (`raw_bytes`);
`placsp dead-letters fix` takes the corrected record from a file, checks that it parses as one
record of the dead letter's kind and dataset with the parser the replay will run (nothing is written
otherwise), writes it into `raw_record`, sets `fixed` and reads both back. `raw_bytes` keeps the
original (what was rejected stays on record); a replay then re-parses the person's text
(`dead_letters.record_bytes`).

The record reaches the table as an Arrow value in a MERGE, never inside an SQL string: apostrophes
(L'Ajuntament, d'Urgell: common in the feeds), backslashes and non-ASCII text arrive as written.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import Any

from placsp_provider.datasets import get_dataset
from placsp_provider.dead_letters.lifecycle import FIXED, REPLAYED
from placsp_provider.dead_letters.record_bytes import RECORD_KINDS, escapes_left, legacy_bytes
from placsp_provider.errors import ConfigError, PlacspError
from placsp_provider.lake import DEAD_LETTER_TABLE, resolve_lake, table_path
from placsp_provider.lake_storage import LakePath
from placsp_provider.parser.page_split import split_declaration
from placsp_provider.table_files import table_files, text_equals
from placsp_provider.untrusted import printable

_ID = re.compile(r"[0-9a-f]{64}")
# The encoding an XML declaration names, if any (the declaration is at most a few hundred bytes).
_DECLARED_ENCODING = re.compile(rb"""\bencoding\s*=\s*["']([A-Za-z0-9._-]{1,40})["']""")
_COLUMNS: tuple[str, ...] = ("dataset", "dead_letter_id", "source_file", "stage", "error_type", "record_kind")
_COLUMNS += ("entry_id", "record_offset", "namespace_context", "raw_record", "raw_bytes", "status")


class DeadLetterNotFoundError(PlacspError):
    """No dead letter has that id (in that dataset)."""


class RecordFixRefusedError(PlacspError):
    """The corrected record was not written: it does not parse, or the dead letter cannot take a fix."""


@dataclass(frozen=True)
class DeadLetterRecord:
    """One dead letter's record and what identifies it."""

    row: dict[str, Any]

    @property
    def dataset(self) -> str:
        return str(self.row["dataset"])

    def exact_bytes(self, lake: LakePath) -> bytes | None:
        """The bytes the ingest rejected: `raw_bytes`, or for a dead letter written before that column
        the bytes `record_bytes.legacy_bytes` can establish; None when nobody can know them."""
        if self.row["raw_bytes"] is not None:
            return bytes(self.row["raw_bytes"])
        if self.row["record_kind"] not in RECORD_KINDS:
            return self.row["raw_record"].encode("utf-8")
        return legacy_bytes(self.row, lake)

    def describe(self) -> str:
        r = self.row
        return printable(
            f"dead letter {r['dead_letter_id']}: dataset {r['dataset']}, file {r['source_file']}, "
            f"{r['record_kind']} {r['entry_id'] or '(id not readable)'}, stage {r['stage']} [{r['error_type']}], "
            f"status {r['status']}"
        )


def find_dead_letter(lake: LakePath, dead_letter_id: str, dataset: str | None = None) -> DeadLetterRecord:
    """The dead letter with this id (in `dataset`'s partition when given; ids are unique across
    datasets); a named error when there is none."""
    from placsp_provider.lake_storage import open_table

    where = f"dataset {get_dataset(dataset).key}" if dataset else "any dataset"
    if not _ID.fullmatch(dead_letter_id):
        raise ConfigError(f"{printable(dead_letter_id, 80)!s} is not a dead_letter_id (64 hex characters)")
    path = table_path(resolve_lake(lake), DEAD_LETTER_TABLE)
    if not (path / "_delta_log").is_dir():
        raise DeadLetterNotFoundError(f"no dead-letter table under {lake} (is it the lake root?)")
    pruning = [("dataset", "=", get_dataset(dataset).key)] if dataset else None
    table = open_table(path)
    present = {f.name for f in table.schema().fields}  # a table of an earlier release lacks raw_bytes
    columns = [c for c in _COLUMNS if c in present]
    files = table_files(table, pruning)
    rows = files.to_table(columns=columns, filter=text_equals("dead_letter_id", dead_letter_id)).to_pylist()
    if not rows:
        raise DeadLetterNotFoundError(f"no dead letter {dead_letter_id} in {where} of {path}")
    return DeadLetterRecord({"raw_bytes": None, **rows[0]})


def corrected_text(data: bytes) -> str:
    """The corrected record in a file, as the text a replay parses: UTF-8 (a UTF-8 BOM and an XML
    declaration that says UTF-8, as `show` prints it, are taken off), surrounding whitespace trimmed."""
    whole = len(data)
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    declaration, record = split_declaration(data.lstrip())
    if declaration:
        named = _DECLARED_ENCODING.search(declaration)
        if named and named.group(1).decode("ascii").lower().replace("_", "-") not in ("utf-8", "utf8"):
            raise RecordFixRefusedError(
                f"the corrected record declares encoding {named.group(1).decode('ascii')!r}; save it as UTF-8 "
                "and remove (or correct) its XML declaration"
            )
    try:
        return record.decode("utf-8").strip()
    except UnicodeDecodeError as err:
        raise RecordFixRefusedError(
            f"the corrected record is not UTF-8 text: byte {err.object[err.start]:#04x} at offset "
            f"{whole - len(record) + err.start} does not decode; save the file as UTF-8"
        ) from None


def check_fix(letter: DeadLetterRecord, text: str) -> None:
    """Refuse (naming why) a correction the replay would not turn into exactly one row of the dead
    letter's kind: the replay's own parser and validation on what the replay will read once it is
    `fixed` (`record_to_replay`: the text, or the exact bytes when the text is unchanged), and no
    `\\xNN` left standing for a byte that did not decode."""
    from placsp_provider.dead_letters.record_bytes import parse_dead_letter

    r = letter.row
    if r["status"] == REPLAYED:
        raise RecordFixRefusedError(f"{letter.describe()}: it was replayed into Silver already; nothing to fix")
    if r["record_kind"] not in RECORD_KINDS:
        raise RecordFixRefusedError(
            f"{letter.describe()}: a whole page or file is not fixed record by record; re-extract its interval "
            "and replay it (docs/runbook.md, 'Re-ingest')"
        )
    if not text:
        raise RecordFixRefusedError(f"{letter.describe()}: the corrected record is empty")
    if left := escapes_left(r["raw_bytes"], r["raw_record"], text):
        raise RecordFixRefusedError(
            f"{letter.describe()}: the corrected record still holds {', '.join(left[:5])}, the text that shows "
            "a byte the ingest could not decode; write the character it stands for (e.g. ñ for \\xf1 in "
            "Latin-1): left as is it would reach Silver as four characters the feed never held; nothing was written"
        )
    result = parse_dead_letter({**r, "status": FIXED, "raw_record": text}, dataset=get_dataset(letter.dataset))
    if result.dead_letters:
        failed = result.dead_letters[0]
        raise RecordFixRefusedError(
            f"{letter.describe()}: the corrected record still fails [{failed['error_type']}]: "
            f"{printable(failed['error_message'], 1500)} -- nothing was written"
        )
    rows = result.entries if r["record_kind"] == "entry" else result.tombstones
    if len(rows) != 1:
        raise RecordFixRefusedError(
            f"{letter.describe()}: the corrected record must be exactly one {r['record_kind']}; nothing was written"
        )


def fix_record(lake: LakePath, dead_letter_id: str, data: bytes, dataset: str | None = None) -> DeadLetterRecord:
    """Check the corrected record (`data`, a file's bytes), write it into the dead letter's
    `raw_record`, set status `fixed`, and read it back; the dead letter as now committed."""
    letter = find_dead_letter(lake, dead_letter_id, dataset)
    text = corrected_text(data)
    check_fix(letter, text)
    _write_fix(resolve_lake(lake), letter, text)
    stored = find_dead_letter(lake, dead_letter_id, letter.dataset)
    if (stored.row["raw_record"], stored.row["status"]) != (text, FIXED):
        raise PlacspError(f"{letter.describe()}: the record read back differs from the one written")
    return stored


def mark_fixed(lake: LakePath, dataset: str, dead_letter_id: str, raw_record: str) -> None:
    """`fix_record` for a corrected record held as text (the Python form of `placsp dead-letters fix`)."""
    fix_record(resolve_lake(lake), dead_letter_id, raw_record.encode("utf-8"), dataset)


def _write_fix(lake: LakePath, letter: DeadLetterRecord, text: str) -> None:
    """One MERGE: the record and the status, only if the dead letter still has the status it was read
    with (a replay that moved it since wins, and this says so)."""
    import pyarrow as pa

    from placsp_provider.dead_letters.status import merge_by_id

    r = letter.row
    source = pa.table(
        {
            "dead_letter_id": pa.array([r["dead_letter_id"]], pa.string()),
            "raw_record": pa.array([text], pa.string()),
            "status": pa.array([FIXED], pa.string()),
        }
    )
    status_was = r["status"].replace("'", "''")
    merge = merge_by_id(lake, get_dataset(letter.dataset).key, source)
    done = merge.when_matched_update(
        updates={"raw_record": "s.raw_record", "status": "s.status"}, predicate=f"t.status = '{status_was}'"
    ).execute()
    if int(done.get("num_target_rows_updated") or 0) != 1:
        raise PlacspError(
            f"{letter.describe()}: not written: its status changed while the fix was checked (a replay ran?); "
            "look again with `placsp dead-letters show`"
        )
