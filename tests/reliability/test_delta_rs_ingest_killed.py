"""The daily run on delta-rs (`placsp ingest --engine delta-rs`, the real CLI, no JVM) killed with
SIGKILL after each of its commits, and two of them started at once.

Its reruns use the run id of the run they replace, as an Airflow retry does. The lake must end equal
to the clean daily run that Spark made (`reference.day2`): the same rows in every table, clocks
aside, so the chain proves the two engines' writes and their recovery alike. delta-rs commits
one table after another (dead letters, entries, the results' delete, the tombstone log, the
results' insert, the tombstones applied, the reconciliation), in a fraction of a second each: the
kill lands after every one of them in turn, not mid-MERGE (a MERGE's uncommitted files are named by
no commit and never read, as on Spark: tests/reliability/test_ingest_killed.py kills one).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from placsp_provider.delta_rs.tables import ensure_tables
from placsp_provider.lake import staging_dir
from tests.conservation import assert_conserved_with_delta_rs
from tests.reliability import corpus, harness
from tests.reliability.conftest import DAY1_RUN, DAY2_RUN, Reference, copy_lake
from tests.reliability.test_ingest_killed import DAILY_RUN_COMMITS

pytestmark = [pytest.mark.spark, pytest.mark.reliability, pytest.mark.timeout(1200)]


def ingest(lake: Path, run_id: str, tmp_path: Path, name: str, trigger: harness.Trigger | None = None):
    args = harness.ingest_args(lake, corpus.DATASET, run_id, engine="delta-rs")
    return harness.run(args, trigger=trigger, workdir=tmp_path, name=name)


def test_a_daily_run_on_delta_rs_killed_after_each_commit_ends_as_sparks_clean_run(
    reference: Reference, tmp_path: Path
) -> None:
    lake = copy_lake(reference.day1, tmp_path / "lake")
    corpus.land_day2(lake)
    remaining = Counter(DAILY_RUN_COMMITS)
    kills = 0
    while remaining.total() > 1:
        before = harness.commits(lake)
        killed = ingest(lake, DAY2_RUN, tmp_path, f"kill-{kills + 1}", harness.after_changes(lake, 1))
        assert killed.killed, f"the rerun ended before its next change:\n{killed.stderr[-3000:]}"
        kills += 1
        changed = Counter(c.table for c in harness.commits(lake) - before if harness.changes_rows(lake, c))
        # Nothing done twice: each change is one of the clean run's not made yet (the kill may land a
        # moment after a second commit).
        assert changed.total() >= 1 and not changed - remaining, (dict(changed), dict(remaining))
        remaining -= changed
        harness.assert_nothing_twice(lake)
    before = harness.commits(lake)
    ingest(lake, DAY2_RUN, tmp_path, "last").ok()
    changed = Counter(c.table for c in harness.commits(lake) - before if harness.changes_rows(lake, c))
    assert changed == remaining, (dict(changed), dict(remaining))  # nothing skipped, nothing twice
    # The reconciliation is written last, so the last run writes it unless the last kill landed after
    # it too (a loaded machine): then the run had done everything, and the rerun changes nothing.
    assert not changed or changed["reconciliation"] == 1, dict(changed)
    assert kills >= len(DAILY_RUN_COMMITS)  # at least one kill after a commit to each table
    counts = harness.assert_same_lake(lake, reference.day2)
    harness.assert_nothing_twice(lake)
    assert_conserved_with_delta_rs(lake, corpus.DATASET, DAY2_RUN, corpus.records(corpus.day2_pages()))
    assert counts["entries"] > 0 and counts["dead_letters"] > 0 and counts["reconciliation"] > 0
    harness.NOTES.append(f"daily run on delta-rs killed {kills} times, once after each change of the clean run")


def test_two_daily_runs_on_delta_rs_at_once_both_end_and_write_everything_once(
    reference: Reference, tmp_path: Path
) -> None:
    """delta-rs's commit check against a concurrent writer: the loser's MERGE fails and its whole
    write is done again from the new snapshot (`retry_on_conflict`), deciding afresh what is newer."""
    lake = copy_lake(reference.day1, tmp_path / "lake")
    corpus.land_day2(lake)
    runs = {run_id: harness.ingest_args(lake, corpus.DATASET, run_id, engine="delta-rs") for run_id in ("one", "two")}
    outcomes = harness.run_at_once(runs, workdir=tmp_path)
    harness.assert_same_lake(lake, reference.day2, ignore=harness.CLOCK_COLUMNS | harness.RUN_ID_COLUMNS)
    harness.assert_nothing_twice(lake)
    retried = sum("a concurrent writer committed first" in o.stderr for o in outcomes.values())
    harness.NOTES.append(f"two daily runs on delta-rs at once: {retried} of them wrote again after a conflict")


def test_a_daily_run_on_spark_and_one_on_delta_rs_at_once_both_end_and_write_everything_once(
    reference: Reference, tmp_path: Path
) -> None:
    """The two engines as concurrent writers of one dataset (a manual Spark run next to the scheduled
    delta-rs one). The delta-rs run starts once the Spark run has chosen its pages (its staging
    folder exists) and is done before Spark writes: Spark then MERGEs the same rows into tables
    another engine changed since its reads, through one Delta log and protocol."""
    lake = copy_lake(reference.day1, tmp_path / "lake")
    corpus.land_day2(lake)
    staging = staging_dir(lake, corpus.DATASET)
    spark_args = harness.ingest_args(lake, corpus.DATASET, "by-spark", engine="spark")
    outcomes: dict[str, harness.Outcome] = {}
    runner = threading.Thread(
        target=lambda: outcomes.update(spark=harness.run(spark_args, workdir=tmp_path, name="spark"))
    )
    runner.start()
    deadline = time.monotonic() + 600
    while not (staging.is_dir() and any(p.is_dir() for p in staging.iterdir())):
        assert runner.is_alive() and time.monotonic() < deadline, "the Spark run never staged its pages"
        time.sleep(0.05)
    outcomes["delta-rs"] = ingest(lake, "by-delta-rs", tmp_path, "delta-rs")
    runner.join()
    for engine, outcome in outcomes.items():
        assert outcome.returncode == 0, f"the {engine} ingest failed:\n{outcome.stderr[-4000:]}"
    assert outcomes["spark"].json()["files"]["ingested"] == 3  # it did not find them reconciled already
    harness.assert_same_lake(lake, reference.day2, ignore=harness.CLOCK_COLUMNS | harness.RUN_ID_COLUMNS)
    harness.assert_nothing_twice(lake)


def test_a_run_spark_parses_and_delta_rs_writes_killed_mid_write_ends_as_sparks_clean_run(
    reference: Reference, tmp_path: Path
) -> None:
    """`--engine spark+delta-rs` (the default for a fresh lake and mid-size batches): Spark's tasks
    stage the rows, the driver writes them with delta-rs. Killed after its second change, then rerun
    with the same run id: it ends as the clean run Spark made, nothing twice, and the killed run's
    staging folder is swept."""
    lake = copy_lake(reference.day1, tmp_path / "lake")
    corpus.land_day2(lake)
    args = harness.ingest_args(lake, corpus.DATASET, DAY2_RUN, engine="spark+delta-rs")
    before = harness.commits(lake)
    killed = harness.run(args, trigger=harness.after_changes(lake, 2), workdir=tmp_path, name="kill")
    assert killed.killed, f"the run ended before its second change:\n{killed.stderr[-3000:]}"
    changed = Counter(c.table for c in harness.commits(lake) - before if harness.changes_rows(lake, c))
    assert 2 <= changed.total() < len(DAILY_RUN_COMMITS) and not changed - Counter(DAILY_RUN_COMMITS)
    assert changed["reconciliation"] == 0  # written last: the files are not marked done
    harness.assert_nothing_twice(lake)
    rerun = harness.run(args, workdir=tmp_path, name="rerun").ok()
    assert "with engine spark+delta-rs" in rerun.stderr and "with delta-rs" in rerun.stderr  # the writer's log
    harness.assert_same_lake(lake, reference.day2)
    harness.assert_nothing_twice(lake)
    assert_conserved_with_delta_rs(lake, corpus.DATASET, DAY2_RUN, corpus.records(corpus.day2_pages()))
    staging = staging_dir(lake, corpus.DATASET)
    assert not staging.is_dir() or not any(staging.iterdir())


def test_a_first_load_on_delta_rs_killed_after_each_of_its_appends_ends_as_sparks_clean_run(
    reference: Reference, tmp_path: Path
) -> None:
    """A first load (no row of the dataset yet) appends instead of MERGEing (decision 0053). Killed
    after its first, second and third change, each time in a lake of its own (before any append, after
    one, after two): the rerun finds the dataset empty or loaded in part, appends or MERGEs, and the
    lake ends as the clean first run Spark's MERGEs made."""
    for n in (1, 2, 3):
        lake = tmp_path / f"lake-{n}"
        corpus.land_day1(lake)
        ensure_tables(lake)  # created here: a table's creation would count as a change
        before = harness.commits(lake)
        killed = ingest(lake, DAY1_RUN, tmp_path, f"kill-{n}", harness.after_changes(lake, n))
        assert killed.killed, f"the run ended before its change {n}:\n{killed.stderr[-3000:]}"
        appends = [c for c in harness.commits(lake) - before if harness.operation(lake, c) == "WRITE"]
        # Its dead letters are inserted first (a MERGE), then Silver's tables are appended side by side.
        assert bool(appends) is (n > 1), (n, appends)
        harness.assert_nothing_twice(lake)
        ingest(lake, DAY1_RUN, tmp_path, f"rerun-{n}").ok()
        harness.assert_same_lake(lake, reference.day1)
        harness.assert_nothing_twice(lake)
    harness.NOTES.append("a first load on delta-rs killed after each of its first 3 changes, then rerun")
