"""A replay re-parses the bytes the ingest rejected, never their text: on real Spark and real Delta.

Every adversarial kind of record is ingested, then replayed with the form's defaults (every
quarantined dead letter of the dataset) without anybody fixing anything. Each must stay a dead letter
with the same error type, and Silver must hold no text the feed never held (`\\xNN` is how
`raw_record` shows an undecodable byte; before `raw_bytes`, a replay re-parsed that text, which is
valid, and wrote `Cami\\xf1o` into Silver). Only a person's fix changes the verdict, once.

The same holds for a lake an earlier release wrote (a dead-letter table without `raw_bytes`): the
exact bytes come from Bronze, and a dead letter whose bytes nobody can know is left out, untouched.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from placsp_provider.datasets import get_dataset
from placsp_provider.dead_letters.fix import fix_record
from placsp_provider.ingest.request import IngestRequest
from placsp_provider.ingest.run import ingest as run_ingest
from placsp_provider.lake import table_path
from placsp_provider.spark.replay_job import ReplayRequest, run_replay
from tests.pages import ID_PREFIX, day, entry, page
from tests.spark.bronze import land

pytestmark = pytest.mark.spark

DS = "agregadas"
WHEN = day(5, 10)
ESCAPED_BYTE = re.compile(r"\\x[0-9a-fA-F]{2}")


def _in_page(record: bytes, good: int) -> bytes:
    """`record` after one good entry, in a page of its own (so each kind is its own case)."""
    return page([(good, WHEN)]).replace(b"</feed>", record + b"</feed>")


def _pages() -> dict[str, bytes]:
    latin1 = entry(1, WHEN).replace(b"<title>", "<title>Cami\xf1o ".encode("latin-1"), 1)
    unclosed = entry(2, WHEN).replace(b"</cbc:ContractFolderID>", b"", 1)
    unbound = entry(3, WHEN).replace(b"<title>", b"<zz:note>x</zz:note><title>", 1)
    bad_timestamp = entry(4, "yesterday at noon")
    bad_id = re.sub(rb"<id>[^<]*</id>", b"<id>not-an-entry-id</id>", entry(5, WHEN), count=1)
    dtd = b'<?xml version="1.0"?>\n<!DOCTYPE feed [<!ENTITY x "y">]>\n' + page([(60, WHEN)]).split(b"?>", 1)[1]
    whole = page([(70, WHEN), (71, WHEN)])
    cut = whole[: whole.index(b"<entry>", whole.index(b"<entry>") + 1) + 700]  # inside entry 71: file cut short
    return {
        "encoding.atom": _in_page(latin1, 11),
        "unclosed.atom": _in_page(unclosed, 12),
        "unbound.atom": _in_page(unbound, 13),
        "timestamp.atom": _in_page(bad_timestamp, 14),
        "badid.atom": _in_page(bad_id, 15),
        "dtd.atom": dtd,
        "truncated.atom": cut,
    }


EXPECTED = {  # page stem -> the error type of its dead letter
    "encoding": "encoding",
    "unclosed": "xml_syntax",
    "unbound": "unbound_prefix",
    "timestamp": "invalid_timestamp",
    "badid": "invalid_entry_id",
    "dtd": "dtd_refused",
    "truncated": "truncated",
}


def _rows(lake: Path, name: str) -> list[dict]:
    from deltalake import DeltaTable

    return DeltaTable(str(table_path(lake, name))).to_pyarrow_table().to_pylist()


def _letters(lake: Path) -> dict[str, dict]:
    """The dead letters by page stem (one per page here, checked)."""
    letters: dict[str, dict] = {}
    for row in _rows(lake, "dead_letters"):
        stem = row["source_file"].split("/")[-1].split(".")[0]
        assert stem not in letters, f"two dead letters of {stem}: {letters.get(stem)}, {row}"
        letters[stem] = row
    return letters


def _silver(lake: Path) -> dict[str, list[dict]]:
    return {t: _rows(lake, t) for t in ("entries", "lots", "documents", "results", "tombstones")}


def _texts(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _texts(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _texts(v)]
    return []


def _invented_text(lake: Path, pages: dict[str, bytes]) -> list[tuple[str, str, str]]:
    """(table, column, value) of every Silver string holding `\\xNN` that no landed page holds."""
    held = {m.decode("latin-1") for body in pages.values() for m in re.findall(rb"\\x[0-9a-fA-F]{2}", body)}
    found = []
    for name, rows in _silver(lake).items():
        for row in rows:
            for column, value in row.items():
                for text in _texts(value):
                    invented = set(ESCAPED_BYTE.findall(text)) - held
                    if invented:
                        found.append((name, column, text))
    return found


@pytest.fixture(scope="module")
def ingested(spark, tmp_path_factory) -> Path:
    lake = tmp_path_factory.mktemp("exact") / "lake"
    land(lake, DS, _pages())
    run_ingest(IngestRequest(get_dataset(DS), lake, "ingest-1"), "spark", spark=spark)
    return lake


@pytest.fixture
def lake(ingested: Path, tmp_path: Path) -> Path:
    shutil.copytree(ingested, tmp_path / "lake")
    return tmp_path / "lake"


def _replay_defaults(spark, lake: Path, run_id: str) -> dict:
    return run_replay(spark, ReplayRequest(DS, lake, run_id))


def test_the_ingest_gives_one_dead_letter_of_each_kind(ingested: Path) -> None:
    letters = _letters(ingested)
    assert {stem: row["error_type"] for stem, row in letters.items()} == EXPECTED
    assert "Cami\\xf1o" in letters["encoding"]["raw_record"]  # the text shows the byte as four characters
    assert b"Cami\xf1o" in letters["encoding"]["raw_bytes"]  # the bytes hold the byte
    for row in letters.values():
        if row["record_kind"] == "entry":
            assert row["raw_bytes"].startswith(b'<?xml version="1.0" encoding="UTF-8"?><entry')


def test_an_unfixed_replay_keeps_every_verdict_and_invents_nothing(spark, lake: Path) -> None:
    pages = _pages()
    silver_before = _silver(lake)
    summary = _replay_defaults(spark, lake, "replay-unfixed")
    assert (summary["selected"], summary["recovered"]) == (len(EXPECTED), 0), summary
    after = _letters(lake)
    assert {stem: row["error_type"] for stem, row in after.items()} == EXPECTED
    assert {row["status"] for row in after.values()} == {"quarantined"}
    assert {row["attempts"] for row in after.values()} == {1}
    assert _silver(lake) == silver_before  # nothing reached Silver
    assert _invented_text(lake, pages) == []
    again = _replay_defaults(spark, lake, "replay-unfixed-2")  # and again: the same verdicts
    assert again["recovered"] == 0 and {r["error_type"] for r in _letters(lake).values()} == set(EXPECTED.values())


def test_a_fixed_record_is_replayed_once_with_the_persons_text(spark, lake: Path) -> None:
    letters = _letters(lake)
    broken = letters["encoding"]
    corrected = broken["raw_record"].replace("Cami\\xf1o", "Camiño")
    fix_record(lake, broken["dead_letter_id"], corrected.encode("utf-8"))
    summary = _replay_defaults(spark, lake, "replay-fixed")
    assert summary["recovered"] == 1 and summary["recovered_entries"] == [f"{ID_PREFIX}1"]
    (row,) = [e for e in _rows(lake, "entries") if e["entry_id"] == f"{ID_PREFIX}1"]
    assert row["title"].startswith("Camiño ")
    assert _letters(lake)["encoding"]["status"] == "replayed"
    assert _invented_text(lake, _pages()) == []
    silver = _silver(lake)
    assert _replay_defaults(spark, lake, "replay-fixed-again")["recovered"] == 0
    assert _silver(lake) == silver  # once


def _as_an_earlier_release_wrote_it(lake: Path) -> None:
    """The dead-letter table rewritten without `raw_bytes`, as before the column existed."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from placsp_provider.ingest.tables import table_schema

    rows = [{k: v for k, v in r.items() if k != "raw_bytes"} for r in _rows(lake, "dead_letters")]
    schema = table_schema("dead_letters")
    schema = schema.remove(schema.get_field_index("raw_bytes"))
    shutil.rmtree(table_path(lake, "dead_letters"))
    table = pa.Table.from_pylist(rows, schema=schema)
    write_deltalake(str(table_path(lake, "dead_letters")), table, partition_by=["dataset"])


def test_a_lake_of_an_earlier_release_replays_the_bytes_from_bronze(spark, lake: Path) -> None:
    _as_an_earlier_release_wrote_it(lake)
    summary = _replay_defaults(spark, lake, "replay-legacy")
    assert (summary["recovered"], summary["needs_fix"]["count"]) == (0, 0), summary
    assert {stem: row["error_type"] for stem, row in _letters(lake).items()} == EXPECTED
    assert _invented_text(lake, _pages()) == []


def test_a_legacy_dead_letter_whose_bytes_nobody_can_know_is_left_out_untouched(spark, lake: Path) -> None:
    _as_an_earlier_release_wrote_it(lake)
    for landed in (lake / "bronze" / DS / "pages").glob("*"):
        if landed.name.startswith(("encoding", "unclosed")):
            landed.unlink()
    before = _letters(lake)
    summary = _replay_defaults(spark, lake, "replay-legacy-gone")
    assert summary["needs_fix"] == {"count": 1, "dead_letter_ids": [before["encoding"]["dead_letter_id"]]}
    assert summary["recovered"] == 0 and summary["selected"] == len(EXPECTED) - 1
    after = _letters(lake)
    assert (after["encoding"]["status"], after["encoding"]["attempts"]) == ("quarantined", 0)  # not attempted
    # unclosed's text holds no \xNN: it is its bytes (without the page's declaration), still broken
    assert (after["unclosed"]["error_type"], after["unclosed"]["attempts"]) == ("xml_syntax", 1)
    assert _invented_text(lake, _pages()) == []
