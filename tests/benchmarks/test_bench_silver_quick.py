"""The Silver benchmark measures what it says: its reference sees the same records as the real
parser, and the shared memory sampler (`_common.ProcessTree`) sees child processes. (The end-to-end run is
`make bench`: it starts three Spark sessions, minutes that belong in benchmarks, not in the suite.)

Real generated pages (real 643 entries), real lxml and pyarrow; the end-to-end run starts real Spark.
"""

# ruff: noqa: E402  (the repository root must be on sys.path before `benchmarks` is imported)
from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from benchmarks._common import ProcessTree, abba
from benchmarks.pagegen import generate_corpus

from benchmarks import bench_silver as bench
from placsp_provider.datasets import get_dataset
from placsp_provider.parser.page_parser import parse_page


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory):
    return generate_corpus(
        tmp_path_factory.mktemp("silver-bench"),
        pages=2,
        items_per_page=20,
        seed=bench.SEED,
        dataset_key=bench._DATASET,
        entry_pool=bench._POOL,
    )


@pytest.mark.unit
def test_reference_extracts_the_records_parse_page_reads(corpus) -> None:
    ds = get_dataset(bench._DATASET)
    counts: Counter[str] = Counter()
    parsed = Counter()
    for path in corpus.files:
        records = bench._reference_extract(str(path), counts)
        result = parse_page(path.read_bytes(), dataset=ds, source_file=path.name)
        parsed["entries"] += len(result.entries)
        parsed["tombstones"] += len(result.tombstones)
        parsed["lots"] += len(result.lots)
        parsed["results"] += sum(e["result_count"] for e in result.entries)
        ids = {r[0] for r in records if r[0] != "tombstone"}
        assert ids == {e["entry_id"] for e in result.entries}
        assert all(r[3] and r[4] for r in records if r[0] != "tombstone")  # folder id and status read
    assert counts["entries"] == parsed["entries"] == corpus.total_entries
    assert counts["tombstones"] == parsed["tombstones"] == corpus.total_tombstones
    assert counts["lots"] == parsed["lots"] > 0
    assert counts["results"] == parsed["results"] > 0


@pytest.mark.unit
def test_abba_alternates_pairs() -> None:
    assert abba(2, "on", "off") == ["on", "off", "off", "on"]
    assert abba(1, "on", "off") == ["on", "off"]


@pytest.mark.unit
def test_tree_sampler_sees_a_child_process() -> None:
    tree = ProcessTree(interval=0.05)
    tree.reset()
    tree.start()
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; b = bytearray(80_000_000); b[::4096] = b'x' * len(b[::4096]); time.sleep(1.0)",
        ]
    )
    try:
        time.sleep(1.2)  # the tree is re-scanned every second
    finally:
        child.wait()
        tree.stop()
    report = tree.report()
    assert report["workers"] >= 1  # anything that is not this process or a JVM
    assert report["workers_hwm_max_mb"] >= 80
    assert report["peak_total_mb"] >= 80


@pytest.mark.unit
def test_tree_sampler_counts_a_child_in_its_parents_address_space_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # The JVM starts helpers with vfork: until exec, the child shows its parent's VmRSS and VmSize.
    # That window is microseconds, too short to catch from a test, so /proc is stood in for here.
    proc = {
        1: (1300.0, 1300.0, 0.0, "java", 5_000_000),
        2: (1300.0, 1300.0, 0.0, "java", 5_000_000),  # the JVM's vfork child before exec
        3: (200.0, 200.0, 0.0, "python3", 900_000),  # a Python worker: its own memory
        4: (200.0, 200.0, 0.0, "python3", 900_000),  # a worker's twin under another parent: counted
    }
    tree = ProcessTree()
    tree.pids, tree.parent, tree._last_scan = [1, 2, 3, 4], {2: 1, 3: 1, 4: 2}, time.monotonic() + 60
    monkeypatch.setattr(tree, "_read", proc.get)
    tree.sample()
    assert tree.peak_total == 1300 + 200 + 200
    assert 2 not in tree.hwm


def _raw(tables: dict, again: dict | None = None) -> dict:
    config = {"pages": 20, "items_per_page": 500}
    return {
        "config": config,
        "measures": {"spark_ingest": {"run": {"contents": tables}}, "fresh_all": {"contents": again or tables}},
    }


@pytest.mark.unit
def test_contents_are_recorded_then_asserted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A speed change that alters Silver fails the benchmark; the record is written only when absent or asked."""
    monkeypatch.setattr(bench, "CONTENTS", tmp_path / "silver_contents.json")
    monkeypatch.delenv(bench.RECORD_CONTENTS, raising=False)
    tables = {"entries": {"rows": 9500, "checksum": "00ff"}, "lots": {"rows": 3, "checksum": "0a0b"}}
    assert "recorded" in bench._check_contents(_raw(tables), quick=False)["verdict"]
    assert "and to silver_contents.json (recorded" in bench._check_contents(_raw(tables), quick=False)["verdict"]
    changed = {**tables, "lots": {"rows": 3, "checksum": "0a0c"}}
    with pytest.raises(RuntimeError, match=r"Silver contents differ.*lots"):
        bench._check_contents(_raw(changed), quick=False)
    with pytest.raises(RuntimeError, match="two ingests of the same pages"):
        bench._check_contents(_raw(tables, again=changed), quick=False)
    monkeypatch.setenv(bench.RECORD_CONTENTS, "1")
    assert "recorded" in bench._check_contents(_raw(changed), quick=False)["verdict"]
    monkeypatch.delenv(bench.RECORD_CONTENTS)
    assert "and to silver_contents.json (recorded" in bench._check_contents(_raw(changed), quick=False)["verdict"]


@pytest.mark.unit
def test_process_age_counts_from_the_process_start() -> None:
    age = float(
        subprocess.run(
            [
                sys.executable,
                "-c",
                f"import sys, time; sys.path.insert(0, {str(_REPO)!r}); time.sleep(0.6); "
                "from benchmarks.bench_silver import _since_process_start; print(_since_process_start())",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert 0.6 <= age < 30


@pytest.mark.unit
def test_goals_are_computed_from_the_fresh_processes() -> None:
    """The goals on known numbers: the marginal speed is the older half's MB over the difference of the two
    fresh ingests, against the reference's MB/s; the fixed cost is a plain ratio of two processes."""

    def fresh(seconds: float, peak: float = 0.0) -> dict:
        return {"process_s": seconds, "ingest_tree": {"peak_total_mb": peak}}  # sampled by the child over its ingest

    raw = {
        "corpus": {"bytes": 400 * bench.MB},
        "half_bytes": 200 * bench.MB,
        "measures": {
            "reference": {"best_s": 4.0, "cpu_s_best": 4.0},
            "spark_route": {"best_s": 8.0, "cpu_s_best": 16.0},
            "fresh_half": fresh(100.0),
            "fresh_all": fresh(120.0, peak=2500.0),
            "bare": fresh(20.0),
            "one_page": fresh(40.0),
        },
    }
    values = bench._goal_values(raw)
    assert values["marginal"] == pytest.approx((0.10, False))  # 10 MB/s vs 100
    assert values["fixed"] == pytest.approx((2.0, True))
    assert values["route"] == pytest.approx((0.5, False))
    assert values["rss"] == (2500.0, False)


@pytest.mark.unit
def test_a_pairs_goal_is_the_median_of_its_rounds() -> None:
    """Interleaved pairs: round i is the i-th run of each side. The goal takes the median round, not the
    fastest of one side against the fastest of the other, which here pairs round 1's N-page ingest with
    round 3's 2N-page one and reads 4 s for a marginal that took 20 s in two rounds of three."""
    # Round 3: the 2N-page ingest ran in a quiet moment, its N-page partner did not.
    runs = {"fresh_half": [100.0, 110.0, 116.0], "fresh_all": [120.0, 130.0, 104.0]}
    ms = {key: {"process_s": min(seconds), "process_runs_s": seconds} for key, seconds in runs.items()} | {
        "one_page": {"process_s": 40.0, "process_runs_s": [40.0, 60.0, 44.0]},
        "bare": {"process_s": 10.0, "process_runs_s": [20.0, 20.0, 10.0]},
        "reference": {"best_s": 4.0},
    }
    raw = {"corpus": {"bytes": 400 * bench.MB}, "half_bytes": 200 * bench.MB, "measures": ms}
    rounds = bench._marginal_rounds(raw)
    assert rounds == pytest.approx([0.10, 0.10, float("inf")])  # 200 MB in 20 s against 100 MB/s; round 3 < 0
    assert bench._paired(ms, "one_page", "bare") == [(40.0, 20.0), (60.0, 20.0), (44.0, 10.0)]
    assert bench._fixed_rounds(ms) == pytest.approx([2.0, 3.0, 4.4])
    extra = {"spark_route": {"best_s": 4.0}, "fresh_all": ms["fresh_all"] | {"ingest_tree": {"peak_total_mb": 1.0}}}
    values = bench._goal_values(raw | {"measures": ms | extra})
    # The median rounds; best against best would read 200 MB in 4 s (104 - 100) and 40 / 10: 0.50x and 4.00.
    assert values["marginal"] == pytest.approx((0.10, False))
    assert values["fixed"] == pytest.approx((3.0, False))
    # Not interleaved (a side ran more often): only the fastest of each side compare.
    ms["bare"]["process_runs_s"] = [10.0]
    assert bench._paired(ms, "one_page", "bare") == [(40.0, 10.0)]


@pytest.mark.unit
def test_merges_at_once_count_once_in_wall_time() -> None:
    from benchmarks._lake import merge_wall_seconds

    def merge(ended: float, ms: int, table: str = "lots") -> dict:
        return {"table": table, "operation": "MERGE", "committed_at": ended, "metrics": {"executionTimeMs": ms}}

    commits = [
        merge(10.0, 2000, "entries"),  # 8-10
        merge(13.0, 2000),  # 11-13, beside the next
        merge(12.5, 1000, "results"),  # 11.5-12.5: inside the one above
        merge(14.0, 2000, "documents"),  # 12-14: overlaps it
        {"table": "entries", "operation": "CREATE TABLE", "committed_at": 1.0, "metrics": {}},
    ]
    assert merge_wall_seconds(commits) == pytest.approx(2.0 + 3.0)
    assert merge_wall_seconds([]) == 0.0
