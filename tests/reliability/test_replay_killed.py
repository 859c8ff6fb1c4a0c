"""`placsp dead-letters replay` (the real CLI, Spark local) killed between its Silver MERGE and the
dead-letter status update, then run again.

The lake is the clean daily lake after a person did what the runbook says: entry 12's raw_record
corrected and marked `fixed` (with delta-rs), the miscounted manifest corrected. The replay then
MERGEs entry 12 (a record) and the miscount file (a whole-file reprocess, whose reconciliation row
turns `reconciled`), and only then writes the statuses. It is killed right after the reconciliation
commit, the last write before the status update. The rerun must select what is left (all of it:
nothing was marked), write nothing twice, count each attempt once, and leave the lake as a replay
that was never killed leaves it (same run id, clock columns aside).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from placsp_provider.dead_letters.lifecycle import FIXED, QUARANTINED, REPLAYABLE, REPLAYED, STATUSES
from placsp_provider.lake import manifests_dir, table_path
from tests.pages import ID_PREFIX
from tests.reliability import corpus, harness
from tests.reliability.conftest import Reference, copy_lake

# Real JVMs on a shared 2-core machine: minutes each under load; the clean runs are made in the first test's setup.
pytestmark = [pytest.mark.spark, pytest.mark.reliability, pytest.mark.timeout(1800)]

RUN = "replay-1"
SILVER = ("entries", "lots", "documents", "results", "tombstones")


def fixed_by_hand(lake: Path) -> Path:
    from deltalake import DeltaTable

    letters = harness.read_table(lake, "dead_letters")
    (broken,) = [r for r in letters if r["entry_id"] == f"{ID_PREFIX}12"]
    DeltaTable(str(table_path(lake, "dead_letters"))).update(
        predicate=f"dataset = '{corpus.DATASET}' AND dead_letter_id = '{broken['dead_letter_id']}'",
        new_values={"raw_record": corpus.fixed_entry_12(), "status": FIXED},
    )
    corpus.set_count(manifests_dir(lake, corpus.DATASET) / f"{corpus.DAY2}.json", "miscount", 2)
    return lake


def replay(lake: Path, tmp_path: Path, name: str, trigger: harness.Trigger | None = None) -> harness.Outcome:
    args = ["dead-letters", "replay", "--dataset", corpus.DATASET, "--lake", str(lake), "--run-id", RUN, "--json"]
    return harness.run(args, trigger=trigger, workdir=tmp_path, name=name)


def test_a_replay_killed_before_its_status_update_is_finished_once_by_the_rerun(
    reference: Reference, tmp_path: Path
) -> None:
    base = fixed_by_hand(copy_lake(reference.day2, tmp_path / "base"))
    clean = copy_lake(base, tmp_path / "clean")
    lake = copy_lake(base, tmp_path / "lake")
    replayable = [r for r in harness.read_table(base, "dead_letters") if r["status"] in REPLAYABLE]
    assert len(replayable) == 4  # 12 (fixed), 21 and 23 (N/A amounts), the miscount file

    replay(clean, tmp_path, "clean").ok()

    before = harness.commits(lake)
    killed = replay(lake, tmp_path, "killed", harness.after_commit_to(lake, "reconciliation"))
    assert killed.killed, f"the replay ended before its reconciliation commit:\n{killed.stderr[-3000:]}"
    new = harness.commits(lake) - before
    assert {"entries", "results", "reconciliation"} <= {c.table for c in new}, new  # Silver was written
    assert "dead_letters" not in {c.table for c in new}, f"the status update ran before the kill: {new}"
    harness.assert_nothing_twice(lake)

    still = [r for r in harness.read_table(lake, "dead_letters") if r["status"] in REPLAYABLE]
    rerun = replay(lake, tmp_path, "rerun").ok()
    assert rerun.json()["selected"] == len(still) == len(replayable), "the rerun did not select what was left"

    harness.assert_same_lake(lake, clean)
    harness.assert_nothing_twice(lake)
    letters = {r["dead_letter_id"]: r for r in harness.read_table(lake, "dead_letters")}
    assert {r["status"] for r in letters.values()} <= set(STATUSES)
    for r in replayable:  # each selected dead letter: one state, one attempt counted
        after = letters[r["dead_letter_id"]]
        assert after["attempts"] == r["attempts"] + 1, after
    states = {(r["entry_id"] or _stem(r["source_file"])): r["status"] for r in letters.values()}
    assert states == {
        f"{ID_PREFIX}12": REPLAYED,
        f"{ID_PREFIX}21": QUARANTINED,
        f"{ID_PREFIX}23": QUARANTINED,
        "miscount": REPLAYED,
    }, states
    entries = Counter(r["entry_id"] for r in harness.read_table(lake, "entries"))
    assert {f"{ID_PREFIX}{n}" for n in (12, 41, 42)} <= set(entries) and max(entries.values()) == 1


def _stem(source_file: str) -> str:
    return source_file.rsplit("/", 1)[-1].split(".")[0]
