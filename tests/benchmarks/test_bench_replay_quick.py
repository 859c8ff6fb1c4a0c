"""The replay benchmark measures what it says: its broken records are exactly the dead letters the
parser makes, the person's fix makes each of them valid again through the replay's own parse, the
corrected pages hold those records and nothing else, and the report renders both run shapes.

The end-to-end smoke run is `.venv/bin/python -m benchmarks.run --only replay --quick` (its child
fails unless every dead letter is recovered, the second replay selects none and the replayed Silver
rows equal the ingested ones). It is not in the suite: a fresh JVM's first Delta ingest alone takes
longer than a test may.

Real generated pages (real 1044 entries), real lxml; no Spark.
"""

# ruff: noqa: E402  (the repository root must be on sys.path before `benchmarks` is imported)
from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

import pytest

_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from benchmarks import bench_replay as bench
from placsp_provider.datasets import get_dataset
from placsp_provider.dead_letters.record_bytes import parse_dead_letter
from placsp_provider.parser.page_parser import parse_page

_TINY = bench.Config(pages=2, items_per_page=8, repeats=1, fresh_lake=False, quiet_wait_s=0.0)


@pytest.fixture(scope="module")
def payload(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return bench.prepare(tmp_path_factory.mktemp("replay-bench"), _TINY)


@pytest.mark.unit
def test_broken_records_are_the_parsers_dead_letters_and_the_fix_makes_them_valid(payload) -> None:
    ds = get_dataset(bench._DATASET)
    fixes = payload["fixes"]
    assert 0 < len(fixes) < payload["corpus"]["entries"]  # a share, not all, not none
    broken_pages = sorted(Path(payload["broken_template"]).rglob("*.atom"))
    fixed_pages = sorted(Path(payload["fixed_template"]).rglob("*.atom"))
    assert len(broken_pages) == len(fixed_pages) == _TINY.pages
    dead = [d for p in broken_pages for d in parse_page(p.read_bytes(), dataset=ds, source_file=p.name).dead_letters]
    assert sorted(d["entry_id"] for d in dead) == sorted(fixes)
    assert {(d["stage"], d["error_type"], d["record_kind"]) for d in dead} == {
        ("validation", bench._ERROR_TYPE, "entry")
    }
    for d in dead:  # the person's fix, checked the way the runbook says: through the replay's parse
        again = parse_dead_letter(d, dataset=ds, raw_record=bench.fix_record(d["raw_record"], fixes[d["entry_id"]]))
        assert (len(again.entries), again.dead_letters) == (1, [])
    parsed = [parse_page(p.read_bytes(), dataset=ds, source_file=p.name) for p in fixed_pages]
    assert sorted(e["entry_id"] for r in parsed for e in r.entries) == sorted(fixes)
    assert all(not r.dead_letters and not r.tombstones for r in parsed)
    with pytest.raises(RuntimeError, match="no N/A amount"):
        bench.fix_record("<entry/>", next(iter(fixes.values())))


def _run(seconds: float, merges: list[tuple[str, float]], summary: dict[str, Any]) -> dict[str, Any]:
    tree = {
        "peak_total_mb": 2900.0,
        "baseline_total_mb": 2800.0,
        "jvm_hwm_mb": 2200.0,
        "driver_hwm_mb": 150.0,
        "workers": 3,
        "workers_hwm_max_mb": 160.0,
        "workers_hwm_sum_mb": 450.0,
    }
    return {
        "seconds": seconds,
        "cpu_s": seconds * 1.1,
        "other_cores": 0.1,
        "tree": tree,
        "merges": [list(m) for m in merges],  # as the child's JSON brings them (from Delta's history)
        "commits": [[t, "MERGE"] for t, _ in merges],
        "summary": summary,
    }


def _measures(fresh: bool, n: int = 100) -> dict[str, Any]:
    silver = ["entries", "lots", "lots", "documents", "documents", "results", "results", "tombstones", "entries"]
    replayed = {"selected": n, "recovered": n, "still_failing": 0, "abandoned": 0, "conservation": {"balanced": True}}
    ingested = {"silver": {"entries": n, "tombstones": 0}, "dead_letters": {"total": 0}}
    replay = _run(
        20.0,
        [(t, 3.0 if i == 8 else 1.0) for i, t in enumerate(silver)] + [("dead_letters", 1.0)],
        replayed,
    )
    ingest = _run(
        10.0,
        [(t, 0.7) for t in silver] + [("dead_letters", 0.5), ("reconciliation", 0.5)],
        ingested,
    )
    noop = _run(0.5, [], {"selected": 0})
    sums = {"entries": [n, 7], "lots": [0, 0], "documents": [n, 9], "results": [n, 11]}
    return {
        "broken": n,
        "silver_before": n,
        "broken_ingest": _run(60.0, [], ingested),
        "fix": _run(3.0, [("dead_letters", 2.5)], n),
        "replay": [dict(replay, seconds=30.0), replay],
        "noop": [noop, noop],
        "ingest_same": [ingest, ingest],
        "ingest_fresh": [ingest] if fresh else [],
        "order": ["replay", "ingest_same", *(["ingest_fresh"] if fresh else []), "ingest_same", "replay"],
        "checksums": {"replay": sums, "ingest_same": sums, **({"ingest_fresh": sums} if fresh else {})},
    }


@pytest.mark.unit
@pytest.mark.parametrize("fresh", [True, False], ids=["full-shape", "quick-shape"])
def test_report_renders_the_ratio_against_the_same_lake_ingest(fresh: bool) -> None:
    corpus = {"pages": 2, "entries": 200, "tombstones": 10, "bytes": 2e6, "broken": 100}
    corpus |= {"fixed_pages": 2, "fixed_bytes": 1e6}
    measures = _measures(fresh)
    assert bench.speed_ratio(measures) == pytest.approx(0.5)  # ingest 10 s / replay 20 s (the best runs)
    cfg = bench.FULL if fresh else bench.QUICK
    result = bench.report(cfg, corpus, measures, {"waited_s": 0.0, "other_cores_before": 0.0}, time.perf_counter())
    throughput, ratios, parts = result.tables
    assert throughput.rows[0][:5] == ["**`run_replay`** of the 100 fixed dead letters", "100", "20.00", "5.0", "0.50x"]
    assert len(throughput.rows) == (6 if fresh else 5)
    assert ratios.rows[0][1] == "0.50x" and all(math.isfinite(float(r[1].rstrip("x"))) for r in ratios.rows)
    assert parts.rows[0][:2] == [
        "Silver MERGEs (9, by delta-rs, one after another)",
        "11.00",
    ]  # Delta's executionTimeMs of each MERGE
    rest = next(r for r in parts.rows if r[0] == bench._REST)
    assert rest[1] == "8.00"  # 20 s minus 12 s of MERGEs
    assert any("second MERGE on `entries`" in f for f in result.findings)  # 3.00 s vs 0.70 s
    assert all(t.markdown() and t.text() for t in result.tables)
