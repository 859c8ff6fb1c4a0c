"""The replay's stager (pure Python, no Spark started): dead letters re-parsed by the ingest's own
record path, their rows staged as Parquet (one file per table and task, in place whole or not at
all), one outcome per dead letter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from placsp_provider.datasets import get_dataset
from placsp_provider.dead_letters.record_bytes import parse_dead_letter
from placsp_provider.errors import BronzePageError
from placsp_provider.ingest.tally import dead_letter_id
from placsp_provider.parser.page_parser import parse_page
from placsp_provider.spark.routing import (
    REPLAY_INPUT_COLUMNS,
    REPLAY_OUTCOME,
    make_replay_stager,
    replay_dead_letters,
)
from tests.pages import ID_PREFIX, entry, page
from tests.staging import read_staged

pytestmark = pytest.mark.unit

AGREGADAS = get_dataset("agregadas")


def _letters() -> list[dict[str, Any]]:
    """Three dead letters as the table holds them: entry 2 (amount N/A, then fixed by hand), entry 3
    (amount N/A, still broken) and a file-level one (not re-parsed here)."""
    data = page([]).replace(b"</feed>", b"")
    for n in (2, 3):
        data += entry(n, "2022-01-05T10:00:00+01:00").replace(b'currencyID="EUR">', b'currencyID="EUR">N/A', 1)
    parsed = parse_page(data + b"</feed>", dataset=AGREGADAS, source_file="p.atom")
    assert [d["error_type"] for d in parsed.dead_letters] == ["invalid_amount"] * 2
    letters = []
    for d in parsed.dead_letters:
        d = {**d, "status": "quarantined", "attempts": 0}
        d["dead_letter_id"] = dead_letter_id(d["dataset"], d["stage"], "p.atom", d["record_offset"], d["raw_record"])
        letters.append(d)
    letters[0]["raw_record"] = letters[0]["raw_record"].replace('currencyID="EUR">N/A', 'currencyID="EUR">', 1)
    letters[0]["status"] = "fixed"
    whole_file = {**letters[1], "record_kind": "file", "stage": "reconciliation", "raw_record": "", "entry_id": None}
    whole_file["dead_letter_id"] = "f" * 64
    return [{c: d[c] for c in REPLAY_INPUT_COLUMNS} for d in (*letters, whole_file)]


def test_each_dead_letter_gets_one_outcome_and_only_recovered_rows_are_staged(tmp_path: Path) -> None:
    letters = _letters()
    (stage_out,) = list(make_replay_stager(AGREGADAS, str(tmp_path))(iter([pa.RecordBatch.from_pylist(letters)])))
    assert stage_out.schema.equals(REPLAY_OUTCOME)
    fixed, broken, whole_file = stage_out.to_pylist()
    # As selected: what the status update checks against.
    assert [o["dead_letter_id"] for o in (fixed, broken, whole_file)] == [d["dead_letter_id"] for d in letters]
    assert (fixed["status"], fixed["attempts"], broken["status"]) == ("fixed", 0, "quarantined")
    # The fixed one is an entry again; its rows are the plain parser's, staged in one file per table.
    expected = parse_dead_letter(letters[0], dataset=AGREGADAS)
    assert fixed["became"] == "entries" and fixed["new_error_type"] is None
    assert fixed["entry_version"].startswith(f"{ID_PREFIX}2\x1f2022-01-05T09:00:00")
    rows = {t: len(getattr(expected, t)) for t in ("entries", "lots", "documents", "results") if getattr(expected, t)}
    assert dict(fixed["rows"]) == rows and rows["entries"] == 1
    staged = read_staged(tmp_path)
    assert {t: staged[t].num_rows for t in staged} == rows
    assert all(f.stem == fixed["staged_key"] for t in staged for f in (tmp_path / t).iterdir())
    assert staged["entries"].column("entry_id").to_pylist() == [f"{ID_PREFIX}2"]
    # The broken one failed again: its new error, nothing staged for it.
    assert broken["became"] == "dead_letters" and broken["new_error_type"] == "invalid_amount"
    assert "N/A" in broken["new_error_message"] and broken["rows"] is None and broken["staged_key"] is None
    # The file-level one is not re-parsed here (its Bronze file is reprocessed by the ingest).
    assert whole_file["became"] is None and whole_file["rows"] is None


def test_a_dry_run_reports_the_same_outcomes_and_writes_nothing(tmp_path: Path) -> None:
    letters = _letters()
    dry = replay_dead_letters(letters, dataset=AGREGADAS, stage=None).to_pylist()
    (real,) = list(make_replay_stager(AGREGADAS, str(tmp_path / "s"))(iter([pa.RecordBatch.from_pylist(letters)])))
    strip = ("staged_key",)
    assert [{k: v for k, v in o.items() if k not in strip} for o in dry] == [
        {k: v for k, v in o.items() if k not in strip} for o in real.to_pylist()
    ]
    assert all(o["staged_key"] is None for o in dry)
    assert list(tmp_path.iterdir()) == [tmp_path / "s"]  # the real run's folder only


def test_a_task_stages_one_file_per_table_for_all_its_batches(tmp_path: Path) -> None:
    letters = _letters()
    batches = [pa.RecordBatch.from_pylist([letters[0]]), pa.RecordBatch.from_pylist(letters[1:])]
    second = {**letters[0], "dead_letter_id": "e" * 64, "record_offset": 99}
    batches.append(pa.RecordBatch.from_pylist([second]))
    outcomes = [o for b in make_replay_stager(AGREGADAS, str(tmp_path))(iter(batches)) for o in b.to_pylist()]
    assert len(outcomes) == 4
    assert len({o["staged_key"] for o in outcomes if o["staged_key"]}) == 1
    staged = read_staged(tmp_path)  # one file per table although three batches came
    assert staged["entries"].num_rows == 2


def test_a_task_that_fails_leaves_no_staged_file(tmp_path: Path) -> None:
    letters = _letters()

    def batches():
        yield pa.RecordBatch.from_pylist(letters[:1])
        raise RuntimeError("the executor was lost")

    with pytest.raises(RuntimeError, match="executor was lost"):
        list(make_replay_stager(AGREGADAS, str(tmp_path))(batches()))
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_rows_that_cannot_be_staged_are_a_clear_error_and_leave_no_file(tmp_path: Path) -> None:
    """An executor that cannot write under the lake's staging folder (a read-only mount, a full disk;
    staged here by a file standing where a table's folder must go, after `entries` was written)."""
    (tmp_path / "results").write_text("not a folder")
    with pytest.raises(BronzePageError) as raised:
        list(make_replay_stager(AGREGADAS, str(tmp_path))(iter([pa.RecordBatch.from_pylist(_letters())])))
    message = str(raised.value)
    assert message.startswith(
        f"dataset agregadas: dead letters: stage staging: cannot stage the replayed rows in {tmp_path} ("
    ), message
    assert "every Spark executor must be able to write under the lake's _staging folder" in message
    # The entries file begun before is gone too: nothing half-written stays.
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["results"]
