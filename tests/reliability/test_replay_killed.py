"""`placsp dead-letters replay` (the real CLI, Spark local) killed between its Silver MERGE and the
dead-letter status update, then run again.

The lake is the clean daily lake after a person did what the runbook says: entry 12's raw_record
corrected and marked `fixed` (`mark_fixed`, delta-rs), the miscounted manifest corrected. The replay then
MERGEs entry 12 (a record) and the miscount file (a whole-file reprocess, whose reconciliation row
turns `reconciled`), and only then writes the statuses. It is killed right after the reconciliation
commit, the last write before the status update. The rerun (same run id, as an Airflow retry) must
select what is left (all of it: nothing was marked), write nothing twice and count each attempt once.

What the replay changed is read from the tables against the lake before it (no second Spark process
for a clean replay: the suite's time goes to JVMs): Silver gains exactly entries 12, 41 and 42 and
their children, once, and loses nothing; the reconciliation changes only the miscount file's row;
every dead letter ends in one state, the one its story calls for.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from placsp_provider.dead_letters.fix import mark_fixed
from placsp_provider.dead_letters.lifecycle import QUARANTINED, REPLAYABLE, REPLAYED
from placsp_provider.lake import SILVER_TABLES, manifests_dir
from tests.pages import ID_PREFIX
from tests.reliability import corpus, harness
from tests.reliability.conftest import Reference, copy_lake

# Real JVMs on a shared 2-core machine: minutes each under load; the clean runs are made in the first test's setup.
pytestmark = [pytest.mark.spark, pytest.mark.reliability, pytest.mark.timeout(1800)]

RUN = "replay-1"
RECOVERED = {f"{ID_PREFIX}{n}" for n in (12, 41, 42)}  # 12 fixed by hand; 41 and 42 in the miscount file


def fixed_by_hand(lake: Path) -> Path:
    """As the runbook says: the corrected record written with `mark_fixed` (entry 12's title holds an
    apostrophe), the manifest corrected by a re-extraction."""
    letters = harness.read_table(lake, "dead_letters")
    (broken,) = [r for r in letters if r["entry_id"] == f"{ID_PREFIX}12"]
    mark_fixed(lake, corpus.DATASET, broken["dead_letter_id"], corpus.fixed_entry_12())
    assert "'" in corpus.fixed_entry_12()
    corpus.set_count(manifests_dir(lake, corpus.DATASET) / f"{corpus.DAY2}.json", "miscount", 2)
    return lake


def replay(lake: Path, tmp_path: Path, name: str, trigger: harness.Trigger | None = None) -> harness.Outcome:
    args = ["dead-letters", "replay", "--dataset", corpus.DATASET, "--lake", str(lake), "--run-id", RUN, "--json"]
    return harness.run(args, trigger=trigger, workdir=tmp_path, name=name)


def test_a_replay_killed_before_its_status_update_is_finished_once_by_the_rerun(
    reference: Reference, tmp_path: Path
) -> None:
    before = fixed_by_hand(copy_lake(reference.day2, tmp_path / "before"))
    lake = copy_lake(before, tmp_path / "lake")
    letters = harness.read_table(before, "dead_letters")
    replayable = {r["dead_letter_id"]: r for r in letters if r["status"] in REPLAYABLE}
    assert len(replayable) == 4  # 12 (fixed), 21 and 23 (N/A amounts), the miscount file

    commits_before = harness.commits(lake)
    killed = replay(lake, tmp_path, "killed", harness.after_commit_to(lake, "reconciliation"))
    assert killed.killed, f"the replay ended before its reconciliation commit:\n{killed.stderr[-3000:]}"
    written = {c.table for c in harness.commits(lake) - commits_before}
    assert {"entries", "results", "reconciliation"} <= written, written  # Silver was written...
    assert "dead_letters" not in written, f"the status update ran before the kill: {written}"  # ...statuses not
    harness.assert_nothing_twice(lake)

    still = [r for r in harness.read_table(lake, "dead_letters") if r["status"] in REPLAYABLE]
    rerun = replay(lake, tmp_path, "rerun").ok()
    assert rerun.json()["selected"] == len(still) == len(replayable), "the rerun did not select what was left"
    harness.assert_nothing_twice(lake)

    # Silver: exactly the recovered entries and their children were added, once; nothing else changed.
    for table in SILVER_TABLES:
        gone, added = harness.difference(before, lake, table)
        assert gone == [], f"{table}: rows changed or lost by the replay: {gone[:2]}"
        assert {r["entry_id"] for r in added} <= RECOVERED, f"{table}: rows of entries not replayed: {added[:2]}"
        assert all(r["_ingest_run_id"] == RUN for r in added), added[:2]
    _, added_entries = harness.difference(before, lake, "entries")
    assert Counter(r["entry_id"] for r in added_entries) == Counter(RECOVERED)
    _, added_results = harness.difference(before, lake, "results")
    assert {r["entry_id"] for r in added_results} == RECOVERED  # every recovered entry has its result

    # Reconciliation: only the miscount file's row changed, to reconciled by this replay.
    gone, added = harness.difference(before, lake, "reconciliation")
    assert [_stem(r["source_file"]) for r in gone] == ["miscount"] == [_stem(r["source_file"]) for r in added]
    assert (added[0]["status"], added[0]["run_id"], added[0]["valid_entries"]) == ("reconciled", RUN, 2)

    # Dead letters: the same ones, each in exactly one state, each attempt counted once.
    after = {r["dead_letter_id"]: r for r in harness.read_table(lake, "dead_letters")}
    assert after.keys() == {r["dead_letter_id"] for r in harness.read_table(before, "dead_letters")}
    states = {(r["entry_id"] or _stem(r["source_file"])): (r["status"], r["attempts"]) for r in after.values()}
    assert states == {
        f"{ID_PREFIX}12": (REPLAYED, 1),
        f"{ID_PREFIX}21": (QUARANTINED, 1),
        f"{ID_PREFIX}23": (QUARANTINED, 1),
        "miscount": (REPLAYED, 1),
    }, states
    for dl_id, was in replayable.items():
        now = after[dl_id]
        assert now["attempts"] == was["attempts"] + 1, now
        assert now["replay_run_id"] == (RUN if now["status"] == REPLAYED else None), now
        assert now["raw_record"] == was["raw_record"], "a replay must not touch the record it replays"


def _stem(source_file: str) -> str:
    return source_file.rsplit("/", 1)[-1].split(".")[0]
