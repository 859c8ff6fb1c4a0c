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

import sys
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


def _run(seconds: float, merges: list[tuple[str, float]], summary: Any, silver_wall: float = 0.0) -> dict[str, Any]:
    tree = {"peak_total_mb": 2900.0, "baseline_total_mb": 2800.0, "jvm_hwm_mb": 2200.0, "driver_hwm_mb": 150.0,
            "workers": 3, "workers_hwm_max_mb": 160.0, "workers_hwm_sum_mb": 450.0}  # fmt: skip
    status = sum(sec for table, sec in merges if table == "dead_letters")
    return {
        "seconds": seconds,
        "cpu_s": seconds * 1.1,
        "other_cores": 0.1,
        "tree": tree,
        "silver_merge_wall_s": silver_wall,  # the union of the Silver MERGEs' spans, from Delta's history
        "merge_wall_s": silver_wall + status,
        "merges": [list(m) for m in merges],  # as the child's JSON brings them (from Delta's history)
        "commits": [[t, "MERGE"] for t, _ in merges],
        "summary": summary,
    }


def _raw(fresh: bool, n: int = 100) -> dict[str, Any]:
    silver = ["entries", "lots", "documents", "results", "tombstones", "entries"]
    replay = _run(20.0, [(t, 1.0) for t in silver] + [("dead_letters", 1.0)], {"selected": n}, silver_wall=4.0)
    ingest = _run(10.0, [(t, 0.7) for t in silver] + [("dead_letters", 0.5)], {}, silver_wall=3.0)
    noop = _run(0.5, [], {"selected": 0})
    measures = {
        "broken": n,
        "broken_ingest": _run(60.0, [], {}),
        "fix": _run(3.0, [("dead_letters", 2.5)], n),
        "replay": [dict(replay, seconds=30.0), replay],
        "noop": [noop, noop],
        "ingest_same": [ingest, ingest],
        "ingest_fresh": [ingest] if fresh else [],
        "order": ["replay", "ingest_same", *(["ingest_fresh"] if fresh else []), "ingest_same", "replay"],
    }
    corpus = {"pages": 2, "entries": 200, "tombstones": 10, "bytes": 2e6, "broken": n, "fixed_pages": 2}
    config = (bench.FULL if fresh else bench.QUICK).__dict__
    return {
        "config": config,
        "corpus": corpus | {"fixed_bytes": 1e6},
        "quiet_wait": {"waited_s": 0.0},
        "measures": measures,
    }


@pytest.mark.unit
@pytest.mark.parametrize("fresh", [True, False], ids=["full-shape", "quick-shape"])
def test_report_gives_the_goal_against_the_same_lake_ingest(fresh: bool) -> None:
    result = bench.report(_raw(fresh), 1.0)
    (goal,) = result.goals
    assert (goal.value, goal.met) == ("0.50x", False)  # ingest 10 s / replay 20 s (the best runs)
    (table,) = result.tables
    assert table.rows[0][:3] == ["`run_replay` of the 100 fixed dead letters", "20.00", "0.50x"]
    assert len(table.rows) == (6 if fresh else 5)
    # Delta's own figures: the Silver MERGEs' span, the status MERGE, the rest of the run's 20 s.
    assert "Silver MERGEs (6, by delta-rs) 4.00 s, the status MERGE (delta-rs) 1.00 s, the rest" in result.figures[1]
    assert "the rest (selection, parse, counts) 15.00 s" in result.figures[1]
    assert table.markdown().count("\n") == len(table.rows) + 1
