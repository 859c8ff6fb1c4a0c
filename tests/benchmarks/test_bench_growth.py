"""The growth benchmark measures what it says: its new daily page holds newer versions of entries both
lakes hold and new entries otherwise, and its section renders from a run's raw JSON.

The end-to-end smoke run is `.venv/bin/python -m benchmarks.run --only growth --quick` (it asserts the
new page's Silver rows equal in both lakes). It is not in the suite: it builds two lakes and runs Spark.

Real generated pages (real entries), real lxml (`scan_page`); no Spark, no Delta.
"""

# ruff: noqa: E402  (the repository root must be on sys.path before `benchmarks` is imported)
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from benchmarks import bench_growth
from placsp_provider.feed.page_scan import scan_page

_ENTRY = re.compile(rb"<entry>.*?<id>([^<]+)</id>.*?<updated>([^<]+)</updated>", re.S)


def _entries(page: Path) -> dict[bytes, bytes]:
    return dict(_ENTRY.findall(page.read_bytes()))


def test_the_new_page_updates_entries_of_the_small_lake(tmp_path: Path) -> None:
    new, older = bench_growth.make_pages(tmp_path, 30)
    assert len(older) == 30
    held: dict[bytes, bytes] = {}
    for page in older[: bench_growth.SMALL]:  # the small lake's pages, also the large lake's newest
        held |= _entries(page)
    daily = _entries(new)
    updates = {i: u for i, u in daily.items() if i in held}
    assert len(updates) == bench_growth.UPDATED
    assert all(u > held[i] for i, u in updates.items())  # newer versions (one time zone: text order)
    assert not set(daily) & {i for page in older[bench_growth.SMALL :] for i in _entries(page)}
    scan = scan_page(new)  # still a well-formed page of the real shape
    assert (scan.entries, scan.tombstones) == (475, 25)


def test_the_section_renders_from_raw_runs() -> None:
    commit = {"table": "entries", "operation": "MERGE", "files_before": 1, "num_target_files_removed": 1}
    run = {
        "seconds": 2.0,
        "commits": [commit | {"execution_time_ms": 9}],
        "reads": dict.fromkeys(bench_growth.READS, 1.0),
    }
    slow = run | {"seconds": 3.2}
    flat = run | {"seconds": 2.4}
    runs = {e: {"small": [run, run], "large": [slow, slow]} for e in bench_growth.ENGINES}
    # Without the maintained lakes (a run from before decision 0052), the goals are the lakes as built.
    result = bench_growth._result(runs, {"entries": 475}, True, 1.0, 24, 384)
    assert [(g.value, g.met) for g in result.goals] == [("1.60x", False)] * len(bench_growth.ENGINES)
    # With them, the goals are theirs.
    maintained = {e + bench_growth.MAINTAINED: {"small": [run, run], "large": [flat, flat]} for e in runs}
    result = bench_growth._result(runs | maintained, {"entries": 475}, True, 1.0, 24, 384)
    assert [(g.value, g.met) for g in result.goals] == [("1.20x", True)] * len(bench_growth.ENGINES)
    assert all("maintained" in g.what for g in result.goals)
    assert "entries 1/1 9" in result.figures[0]
