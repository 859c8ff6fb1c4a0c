"""`placsp dead-letters show` and `fix` on real Delta tables (delta-rs, no Spark), with dead letters the
real parser made from real-entry pages, landed in a real Bronze area.

A fix is checked by the replay's own parser before anything is written; `show` prints the exact bytes
the ingest rejected, invalid UTF-8 included; both work on a table an earlier release wrote (no
`raw_bytes` column).
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from placsp_provider.datasets import get_dataset
from placsp_provider.dead_letters.fix import (
    DeadLetterNotFoundError,
    RecordFixRefusedError,
    find_dead_letter,
    fix_record,
    mark_fixed,
)
from placsp_provider.errors import ConfigError
from placsp_provider.ingest.tally import dead_letter_id
from placsp_provider.lake import table_path
from placsp_provider.parser.page_parser import parse_page
from tests.pages import ID_PREFIX, day, entry, page
from tests.spark.bronze import land

pytestmark = pytest.mark.unit

DS = "agregadas"
PLACSP = [sys.executable, "-m", "placsp_provider.cli"]
TITLE = "L'Ajuntament d'Alp \\ «Camiño» 'quoted'"


def _pages() -> dict[str, bytes]:
    latin1 = entry(2, day(5)).replace(b"<title>", "<title>Cami\xf1o ".encode("latin-1"), 1)
    unclosed = entry(3, day(5)).replace(b"</cbc:ContractFolderID>", b"", 1)
    return {
        "latin1.atom": page([(1, day(5))]).replace(b"</feed>", latin1 + b"</feed>"),
        "unclosed.atom": page([(4, day(5))]).replace(b"</feed>", unclosed + b"</feed>"),
    }


def _ingest_dead_letters(lake: Path, *, legacy: bool = False) -> dict[str, dict[str, Any]]:
    """Land the pages; write their dead letters as the ingest does (real parser, real ids), in the
    table's schema, or in the schema before `raw_bytes` (`legacy`). By page stem."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from placsp_provider.ingest.tables import table_schema

    manifest = land(lake, DS, _pages())

    rows = []
    for landed in json.loads(manifest.read_text())["pages"]:
        data = (lake / landed["file"]).read_bytes()
        for d in parse_page(data, dataset=get_dataset(DS), source_file=landed["file"]).dead_letters:
            key = (d["dataset"], d["stage"], d["source_file"], d["record_offset"], d["raw_record"])
            rows.append(
                {
                    **d,
                    "dead_letter_id": dead_letter_id(*key),
                    "run_id": "ingest-1",
                    "processing_timestamp": datetime(2022, 1, 5, tzinfo=UTC),
                    "status": "quarantined",
                    "attempts": 0,
                }
            )
    schema = table_schema("dead_letters")
    if legacy:
        schema = schema.remove(schema.get_field_index("raw_bytes"))
        rows = [{k: v for k, v in r.items() if k != "raw_bytes"} for r in rows]
    table = pa.Table.from_pylist(rows, schema=schema)
    write_deltalake(str(table_path(lake, "dead_letters")), table, partition_by=["dataset"])
    return {r["source_file"].split("/")[-1].split(".")[0]: r for r in rows}


def _fixed_entry(number: int) -> bytes:
    return entry(number, day(5)).replace(b"<title>", f"<title>{TITLE} ".encode(), 1)


def run(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*PLACSP, *args], capture_output=True, timeout=120)


def _table_version(lake: Path) -> int:
    from deltalake import DeltaTable

    return DeltaTable(str(table_path(lake, "dead_letters"))).version()


def test_show_prints_the_exact_bytes_the_ingest_rejected(lake: Path) -> None:
    letters = _ingest_dead_letters(lake)
    latin1 = letters["latin1"]
    assert latin1["error_type"] == "encoding" and "Cami\\xf1o" in latin1["raw_record"]
    out = run("dead-letters", "show", "--lake", str(lake), "--id", latin1["dead_letter_id"])
    assert out.returncode == 0, out.stderr
    assert out.stdout == b'<?xml version="1.0" encoding="UTF-8"?>' + latin1["raw_bytes"].split(b"?>", 1)[1]
    assert b"Cami\xf1o " in out.stdout and b"\\xf1" not in out.stdout  # the byte, not its four-character text
    assert out.stderr.decode().count("\n") == 1 and "encoding" in out.stderr.decode()
    text = run("dead-letters", "show", "--lake", str(lake), "--id", latin1["dead_letter_id"], "--text")
    assert text.stdout.decode() == latin1["raw_record"]


def test_fix_checks_the_record_then_stores_it_whole(lake: Path, tmp_path: Path) -> None:
    letters = _ingest_dead_letters(lake)
    unclosed = letters["unclosed"]
    fixed = tmp_path / "fixed.xml"
    fixed.write_bytes(b'<?xml version="1.0" encoding="UTF-8"?>\n' + _fixed_entry(3) + b"\n")
    out = run("dead-letters", "fix", "--lake", str(lake), "--id", unclosed["dead_letter_id"], "--file", str(fixed))
    assert out.returncode == 0, out.stderr
    stored = find_dead_letter(lake, unclosed["dead_letter_id"]).row
    assert stored["status"] == "fixed"
    assert stored["raw_record"] == _fixed_entry(3).decode()  # apostrophes, backslash, «», ñ kept
    assert TITLE in stored["raw_record"]
    assert bytes(stored["raw_bytes"]) == unclosed["raw_bytes"]  # what was rejected stays on record
    other = find_dead_letter(lake, letters["latin1"]["dead_letter_id"]).row
    assert (other["status"], other["raw_record"]) == ("quarantined", letters["latin1"]["raw_record"])
    shown = run("dead-letters", "show", "--lake", str(lake), "--id", unclosed["dead_letter_id"], "--text")
    assert shown.stdout == _fixed_entry(3)


@pytest.mark.parametrize(
    ("corrected", "why"),
    [
        (lambda: entry(3, day(5)).replace(b"</cbc:ContractFolderID>", b"", 1), "still fails [xml_syntax]"),
        (lambda: entry(3, "yesterday"), "still fails [invalid_timestamp]"),
        (lambda: entry(3, day(5)) + entry(4, day(5)), "still fails [unexpected_element]"),
        (lambda: _fixed_entry(3).replace("ñ".encode(), b"\xf1"), "not UTF-8"),
        (lambda: b'<?xml version="1.0" encoding="ISO-8859-1"?>' + entry(3, day(5)), "declares encoding"),
        (lambda: b"  \n", "is empty"),
    ],
    ids=["still-unclosed", "bad-timestamp", "two-entries", "latin-1-bytes", "latin-1-declared", "empty"],
)
def test_a_fix_that_would_not_parse_is_refused_and_nothing_is_written(lake: Path, corrected, why: str) -> None:
    letters = _ingest_dead_letters(lake)
    version = _table_version(lake)
    with pytest.raises(RecordFixRefusedError, match=why.replace("[", r"\[").replace("]", r"\]")):
        fix_record(lake, letters["unclosed"]["dead_letter_id"], corrected())
    assert _table_version(lake) == version
    assert find_dead_letter(lake, letters["unclosed"]["dead_letter_id"]).row["status"] == "quarantined"


def test_a_fix_that_leaves_an_undecoded_byte_as_text_is_refused(lake: Path) -> None:
    # `\xf1` in raw_record stands for the byte 0xF1 the feed sent; a fix that keeps it (editing
    # something else) would put the four characters into Silver.
    letters = _ingest_dead_letters(lake)
    latin1 = letters["latin1"]
    edited = latin1["raw_record"].replace("<title>", "<title>Obras ", 1)
    with pytest.raises(RecordFixRefusedError, match=r"still holds \\xf1, the text that shows a byte"):
        fix_record(lake, latin1["dead_letter_id"], edited.encode())
    fixed = fix_record(lake, latin1["dead_letter_id"], latin1["raw_record"].replace("\\xf1", "ñ").encode())
    assert "Camiño " in fixed.row["raw_record"] and fixed.row["status"] == "fixed"


def test_the_replays_status_update_skips_a_dead_letter_fixed_since_it_was_selected(lake: Path) -> None:
    # A replay selected the record as it was; a person's fix written meanwhile must not be marked
    # replayed by that replay's outcome (the next replay reads the fix).
    from placsp_provider.dead_letters.status import StatusChange, record_outcomes

    letters = _ingest_dead_letters(lake)
    unclosed = letters["unclosed"]
    selected = unclosed["raw_record"]
    fix_record(lake, unclosed["dead_letter_id"], _fixed_entry(3))
    change = StatusChange(unclosed["dead_letter_id"], "fixed", 0, selected, "replayed", None, None)
    assert record_outcomes(lake, DS, "replay-race", [change], datetime(2022, 1, 6, tzinfo=UTC)) == 0
    row = find_dead_letter(lake, unclosed["dead_letter_id"]).row
    assert (row["status"], row["raw_record"]) == ("fixed", _fixed_entry(3).decode())
    current = StatusChange(unclosed["dead_letter_id"], "fixed", 0, row["raw_record"], "replayed", None, None)
    assert record_outcomes(lake, DS, "replay-ok", [current], datetime(2022, 1, 6, tzinfo=UTC)) == 1


def test_legacy_rows_are_filled_from_bronze_or_left_out_when_their_text_may_hold_invented_bytes(lake: Path) -> None:
    import pyarrow as pa

    from placsp_provider.dead_letters.record_bytes import fill_legacy_bytes
    from placsp_provider.spark.routing import REPLAY_INPUT_COLUMNS

    letters = _ingest_dead_letters(lake)
    latin1, unclosed = letters["latin1"], letters["unclosed"]
    gone = {**latin1, "dead_letter_id": "1" * 64, "source_file": "bronze/agregadas/pages/gone.atom"}
    rows = [
        {**latin1, "raw_bytes": None},  # in Bronze: its exact bytes
        {**gone, "raw_bytes": None},  # not in Bronze, \xf1 in its text: left out
        {**gone, "raw_bytes": None, "dead_letter_id": "2" * 64, "status": "fixed"},  # an old unchecked fix: too
        {**unclosed, "raw_bytes": None, "source_file": "bronze/agregadas/pages/gone.atom"},  # no \xNN: its text
        {**unclosed, "raw_bytes": None, "dead_letter_id": "3" * 64, "status": "fixed", "source_file": "x"},
    ]
    table = pa.Table.from_pylist([{c: r[c] for c in REPLAY_INPUT_COLUMNS} for r in rows])
    table = table.set_column(table.schema.get_field_index("raw_bytes"), "raw_bytes", pa.nulls(5, pa.binary()))
    filled, unknown = fill_legacy_bytes(table, lake)
    assert unknown == ["1" * 64, "2" * 64]
    by_id = {r["dead_letter_id"]: r["raw_bytes"] for r in filled.to_pylist()}
    assert by_id[latin1["dead_letter_id"]] == latin1["raw_bytes"]  # the page's declaration and the byte 0xF1
    assert by_id[unclosed["dead_letter_id"]] == unclosed["raw_record"].encode()
    assert by_id["3" * 64] is None  # a fixed one without \xNN: the person's text is replayed


def test_a_refused_fix_is_one_line_on_the_command_line(lake: Path, tmp_path: Path) -> None:
    letters = _ingest_dead_letters(lake)
    broken = tmp_path / "broken.xml"
    broken.write_bytes(entry(3, "yesterday"))
    dl_id = letters["unclosed"]["dead_letter_id"]
    out = run("dead-letters", "fix", "--lake", str(lake), "--id", dl_id, "--file", str(broken))
    assert out.returncode == 2
    err = out.stderr.decode()
    assert err.startswith("placsp dead-letters: error: dead letter ") and err.count("\n") == 1, err
    assert "invalid_timestamp" in err and "Traceback" not in err and "nothing was written" in err


def test_unknown_malformed_and_replayed_ids_are_named_errors(lake: Path) -> None:
    from deltalake import DeltaTable

    letters = _ingest_dead_letters(lake)
    with pytest.raises(DeadLetterNotFoundError, match="no dead letter efef"):
        mark_fixed(lake, DS, "ef" * 32, _fixed_entry(3).decode())
    with pytest.raises(ConfigError, match="not a dead_letter_id"):
        mark_fixed(lake, DS, "x' OR '1'='1", _fixed_entry(3).decode())
    with pytest.raises(DeadLetterNotFoundError):  # the id exists, in another dataset's partition
        mark_fixed(lake, "licitaciones", letters["unclosed"]["dead_letter_id"], _fixed_entry(3).decode())
    unclosed = letters["unclosed"]["dead_letter_id"]
    DeltaTable(str(table_path(lake, "dead_letters"))).update(
        predicate=f"dead_letter_id = '{unclosed}'", new_values={"status": "replayed"}
    )
    with pytest.raises(RecordFixRefusedError, match="replayed into Silver already"):
        mark_fixed(lake, DS, unclosed, _fixed_entry(3).decode())


def test_a_table_of_an_earlier_release_gains_raw_bytes_and_show_finds_the_bytes_in_bronze(lake: Path) -> None:
    from deltalake import DeltaTable

    letters = _ingest_dead_letters(lake, legacy=True)
    path = str(table_path(lake, "dead_letters"))
    assert "raw_bytes" not in {f.name for f in DeltaTable(path).schema().fields}
    latin1 = letters["latin1"]
    out = run("dead-letters", "show", "--lake", str(lake), "--id", latin1["dead_letter_id"])
    assert out.returncode == 0, out.stderr
    page_bytes = next((lake / "bronze" / DS / "pages").glob("latin1*")).read_bytes()
    offset = latin1["record_offset"]
    record = page_bytes[offset : page_bytes.index(b"</entry>", offset) + len(b"</entry>")]
    assert out.stdout == b'<?xml version="1.0" encoding="UTF-8"?>' + record
    assert "raw_bytes" not in {f.name for f in DeltaTable(path).schema().fields}  # a look changes no table
    # Its Bronze page gone, the text cannot tell the byte 0xf1 from the four characters `\xf1`.
    for landed in (lake / "bronze" / DS / "pages").glob("latin1*"):
        landed.unlink()
    gone = run("dead-letters", "show", "--lake", str(lake), "--id", latin1["dead_letter_id"])
    assert gone.returncode == 2 and b"cannot be known" in gone.stderr and gone.stdout == b""


HOSTILE = "\x1b[31m\r\nINFO forged line \u202egnp \x9b"


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_the_cli_prints_no_control_character_from_the_table(lake: Path, as_json: bool) -> None:
    from tests.sensors import dead_letter_rows, write_dead_letters

    rows = dead_letter_rows(2)
    for row in rows:
        row["entry_id"] = f"{ID_PREFIX}{HOSTILE}"
        row["source_file"] = f"bronze/agregadas/pages/p{HOSTILE}.atom"
    write_dead_letters(lake, rows)
    args = ["dead-letters", "stats", "--lake", str(lake), *(["--json"] if as_json else [])]
    out = run(*args)
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode()
    assert "forged" in text  # the samples are shown...
    for raw in ("\x1b", "\r", "\u202e", "\x9b"):  # ...without a character a terminal would act on
        assert raw not in text
    assert not any(line.startswith("INFO forged") for line in text.splitlines())
    if as_json:
        assert any(HOSTILE in sample for sample in json.loads(text)["samples"])  # the same data for a program
    shown = run("dead-letters", "show", "--lake", str(lake), "--id", rows[0]["dead_letter_id"])
    assert "\x1b" not in shown.stderr.decode() and "\r" not in shown.stderr.decode()
