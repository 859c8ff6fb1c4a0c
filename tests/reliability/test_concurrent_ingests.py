"""Two `placsp ingest` of one dataset started at once, in separate processes, on a fresh lake.

Both create the tables, parse the same pages and MERGE the same rows: the worst case a manual run
next to the scheduled one can make. Both must end well (one may wait or retry a commit), and the lake
must hold what one clean run writes: nothing twice, nothing lost. The two runs have different run
ids, and either may be the one whose rows stay, so run ids are compared neither (harness.RUN_ID_COLUMNS).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability import corpus, harness
from tests.reliability.conftest import Reference

# Real JVMs on a shared 2-core machine: minutes each under load; the clean runs are made in the first test's setup.
pytestmark = [pytest.mark.spark, pytest.mark.reliability, pytest.mark.timeout(1800)]


def test_two_ingests_started_at_once_both_end_and_write_everything_once(reference: Reference, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    corpus.land_day1(lake)
    runs = {run_id: harness.ingest_args(lake, corpus.DATASET, run_id) for run_id in ("one", "two")}
    harness.run_at_once(runs, workdir=tmp_path)
    harness.assert_same_lake(lake, reference.day1, ignore=harness.CLOCK_COLUMNS | harness.RUN_ID_COLUMNS)
    harness.assert_nothing_twice(lake)
    # Equal to the clean run's lake, whose conservation the reference checked against lxml; and every
    # row comes from one of the two runs.
    for table in ("entries", "tombstones", "results"):
        assert {r["_ingest_run_id"] for r in harness.read_table(lake, table)} <= {"one", "two"}
    assert {r["run_id"] for r in harness.read_table(lake, "dead_letters")} <= {"one", "two"}
