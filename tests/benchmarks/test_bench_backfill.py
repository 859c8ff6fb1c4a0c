"""The backfill benchmark's goals come from its rounds: the reference's median over the ingest's, the
largest peak of the rounds, and the cluster run's Silver against the local run's. The end-to-end run
is `.venv/bin/python -m benchmarks.run --only backfill --quick` (it asserts every round's tables equal,
`entries` holding every generated id once, and the cluster run's checksums); it is not in the suite:
it runs Spark on a corpus and a standalone cluster. No Spark, no Delta here."""

# ruff: noqa: E402  (the repository root must be on sys.path before `benchmarks` is imported)
from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from benchmarks import bench_backfill


def test_the_goals_are_the_medians_ratio_and_the_largest_peak() -> None:
    rows = {"entries": 10, "distinct entry ids": 10}
    ingests = [{"seconds": s, "peak_mb": m, "rows": rows} for s, m in ((30.0, 1900.0), (20.0, 2100.0), (40.0, 1000.0))]
    cluster = {"seconds": 50.0, "engine": "spark+delta-rs", "identical": True}
    result = bench_backfill._result(ingests, [9.0, 30.0, 15.0], cluster, 384, 1240.0, 1.0)
    speed, memory, on_cluster = result.goals
    assert (speed.value, speed.met) == ("0.50x", True)  # 15 s / 30 s
    assert (memory.value, memory.met) == ("2,100.0 MB", False)
    assert (on_cluster.value, on_cluster.met) == ("identical", True)
    assert "entries 10" in result.figures[1]
    different = bench_backfill._result(ingests, [9.0], {**cluster, "identical": False}, 384, 1240.0, 1.0)
    assert (different.goals[2].value, different.goals[2].met) == ("differs", False)
