"""Issue 36, item 3: a year's backfill in one run.

A year of real-shaped daily pages (`pagegen.REAL_SHAPE`, dataset licitaciones: 384 pages, ~1.2 GB,
182,400 entries) `placsp ingest`ed by one fresh process into a fresh lake, with the engine `placsp
ingest` picks (Spark on a local lake: the batch is above delta-rs's limit), against the single-core lxml
reference over the same pages (`bench_silver`'s `reference` child: the core fields by `iterparse`) in
a fresh process. ABBA rounds, medians (decision 0016); the pages are landed once, laid into each
round's fresh lake by hard links (not timed).

Memory: the peak RSS summed over the ingest's whole process tree (`placsp`, the JVM, the Python
workers), sampled every 0.2 s. Silver: each round's tables counted from the Delta tables (delta-rs),
equal in every round, and `entries` holding every generated entry id once.

Goals: reference / ingest >= 0.5x; peak RSS <= 2,048 MB. Not measured here: the same batch on the
Spark standalone cluster of the system test, the other half of the item.

    python -m benchmarks.run --only backfill [--quick]
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import REPO, BenchResult, Goal, ProcessTree, Table, abba, f1, f2, run_child, wait_for_quiet
from benchmarks._lake import land_template, link_lake
from benchmarks.pagegen import REAL_SHAPE, generate_corpus

NAME = "backfill"
TITLE = "A year's backfill in one run (issue 36)"
DATASET = "licitaciones"
SEED = 361
PAGES = 384  # a year of daily pages
ROUNDS = 5  # ingests and references, ABBA (decision 0016)
SPEED_GOAL = 0.5
RSS_GOAL_MB = 2048.0
_ID = re.compile(rb"<entry>.*?<id>([^<]+)</id>", re.S)


def ingest(template: Path, lake: Path) -> dict[str, Any]:
    """One timed `placsp ingest` of the template's pages into a fresh `lake` (laid out first, not
    timed): its wall seconds, its process tree's peak RSS, the engine and the rows of each table."""
    shutil.rmtree(lake, ignore_errors=True)
    link_lake(template, lake)
    wait_for_quiet(20)
    command = [sys.executable, "-m", "placsp_provider.cli", "ingest", "--dataset", DATASET, "--lake", str(lake)]
    command += ["--run-id", "bench-backfill", "--json"]
    started = time.perf_counter()
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tree = ProcessTree(interval=0.2, root=proc.pid)
    tree.start(clear=False)
    try:
        stdout, stderr = proc.communicate(timeout=3600)
    finally:
        tree.stop()
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"placsp ingest failed ({proc.returncode}):\n{stderr[-3000:]}")
    summary = json.loads(stdout)
    assert summary["conservation"]["balanced"], summary["conservation"]
    return {"seconds": seconds, "peak_mb": tree.report()["peak_total_mb"], "rows": table_rows(lake)}


def table_rows(lake: Path) -> dict[str, int]:
    """Rows of every lake table, and distinct entry ids, counted by delta-rs (not the run's summary)."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    from placsp_provider.lake import LAKE_TABLES, table_path

    rows = {t: DeltaTable(str(table_path(lake, t))).to_pyarrow_dataset().count_rows() for t in LAKE_TABLES}
    ids = DeltaTable(str(table_path(lake, "entries"))).to_pyarrow_table(columns=["entry_id"]).column(0)
    return rows | {"distinct entry ids": len(pc.unique(ids))}


def reference(files: list[str]) -> float:
    """The single-core lxml reference over the same pages, in a fresh process: its seconds."""
    wait_for_quiet(20)
    done = run_child("benchmarks.bench_silver", {"task": "reference", "files": files, "repeats": 1})
    return float(done["best_s"])


def run(quick: bool = False) -> BenchResult:
    started = time.perf_counter()
    pages, rounds = (8, 1) if quick else (PAGES, ROUNDS)
    with tempfile.TemporaryDirectory(prefix="placsp-bench-backfill-") as tmp_name:
        tmp = Path(tmp_name)
        corpus = generate_corpus(tmp / "pages", pages, dataset_key=DATASET, seed=SEED, **REAL_SHAPE.options())
        generated = {m for page in corpus.files for m in _ID.findall(page.read_bytes())}  # entries' own ids
        template = land_template(corpus.files, tmp / "template", DATASET)
        megabytes = sum(p.stat().st_size for p in corpus.files) / 1e6
        files = [str(p) for p in corpus.files]
        ingests: list[dict[str, Any]] = []
        references: list[float] = []
        for side in abba(rounds, "ingest", "reference"):
            if side == "ingest":
                ingests.append(ingest(template, tmp / "lake"))
                print(f"  ingest {ingests[-1]['seconds']:.1f} s, {ingests[-1]['peak_mb']:.0f} MB", flush=True)
            else:
                references.append(reference(files))
                print(f"  reference {references[-1]:.2f} s", flush=True)
    for r in ingests:
        assert r["rows"] == ingests[0]["rows"], f"two ingests of the same pages left different tables: {r['rows']}"
    assert ingests[0]["rows"]["entries"] == ingests[0]["rows"]["distinct entry ids"] == len(generated), (
        ingests[0]["rows"],
        len(generated),
    )
    return _result(ingests, references, pages, megabytes, time.perf_counter() - started)


def _result(
    ingests: list[dict[str, Any]], references: list[float], pages: int, megabytes: float, seconds: float
) -> BenchResult:
    import statistics

    ingest_s = statistics.median(r["seconds"] for r in ingests)
    reference_s = statistics.median(references)
    ratio = reference_s / ingest_s
    peak = max(r["peak_mb"] for r in ingests)
    speed = f"{pages} pages in one `placsp ingest`, speed vs the 1-core reference"
    memory = "peak RSS of the ingest's process tree"
    goals = [
        Goal(speed, f">= {SPEED_GOAL}x", f"{ratio:.2f}x", ratio >= SPEED_GOAL),
        Goal(memory, f"<= {RSS_GOAL_MB:,.0f} MB", f"{peak:,.1f} MB", peak <= RSS_GOAL_MB),
    ]
    rows = [
        ["`placsp ingest` (fresh process, fresh lake)", " / ".join(f2(r["seconds"]) for r in ingests), f2(ingest_s)],
        ["lxml reference, 1 core (fresh process)", " / ".join(f2(s) for s in references), f2(reference_s)],
    ]
    table = Table(["run", "rounds (s)", "median (s)"], rows)
    counts = ingests[0]["rows"]
    figures = [
        "peak RSS per round (MB): " + " / ".join(f1(r["peak_mb"]) for r in ingests),
        "Silver and the other tables, equal in every round: " + ", ".join(f"{t} {n:,}" for t, n in counts.items()),
    ]
    summary = (
        f"{pages} real-shaped daily pages ({megabytes:,.0f} MB) ingested by one `placsp ingest` (its engine's choice) "
        "into a fresh lake, against the single-core lxml reference over the same pages; fresh processes, ABBA "
        "rounds, medians. The Spark standalone cluster half of the item is not measured here."
    )
    raw = {"ingests": ingests, "references": references, "pages": pages, "megabytes": megabytes}
    return BenchResult(NAME, TITLE, summary, [table], raw, seconds, goals, figures)
