"""Issue 36, item 2: a daily run's cost flat as the lake grows.

One new real-shaped daily page (`pagegen.REAL_SHAPE`, dataset licitaciones) `placsp ingest`ed into a
SMALL lake (the 24 pages before it) and into a LARGE one (the 384 pages before it: 16x, a year of daily
pages), each ingest a fresh `placsp ingest` process into a fresh copy of the lake (the copy not timed),
in alternating rounds (ABBA), medians, for each writer (`--engine delta-rs` and `--engine spark`).
Both lakes are built once per run, each by one `placsp ingest` of all its pages into a fresh lake
(the engine `auto` picks; not timed).

The new page is a daily page of the real shape whose entries are new but for `UPDATED` of them, newer
versions of entries the 24 pages hold (so in both lakes): a daily batch updates old entries too.

Goal: large / small <= 1.5x for each writer, into both lakes after `placsp maintain` (`<engine>
maintained`): the layout the weekly `placsp_maintenance` DAG keeps, Silver in the order of its
versions' time in files of `MAINTAINED_FILE_MB` (decision 0051). Beside them, the lakes as one ingest
built them (`<engine>`, no goal): a lake between a backfill and its first maintenance. The new page's
rows in Silver (every Silver table's rows of the run, clock columns aside) must be the same in both
lakes: asserted.

After each ingest, what the daily DAG reads next, each a fresh `placsp` process, timed alike: the
contracts of the run's scope, the dead-letter gate's count, the volume check (whose versions cache is
built with each lake, as the daily runs before would leave it).

Where the time goes: each commit's `operationMetrics` (delta-rs's or Spark's: files rewritten, execution
ms), read from the Delta log after the run (decisions 0048, 0051, 0052).

    python -m benchmarks.bench_growth build DIR        # the lakes, kept (then: measure DIR [rounds])
    python -m benchmarks.bench_growth docs OUT.json    # the docs section again from a run's raw JSON
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import REPO, BenchResult, Goal, Table, abba, f2, wait_for_quiet
from benchmarks._lake import land_template, link_lake
from benchmarks.pagegen import REAL_SHAPE, generate_corpus

NAME = "growth"
TITLE = "A daily page into a lake 16x larger (issue 36)"
DATASET = "licitaciones"
SEED = 36
SMALL, LARGE = 24, 384
UPDATED = 50  # entries of the new page that update entries of the 24 pages before it
ROUNDS = 5  # runs of each lake per writer, in ABBA order (decision 0016: five a side)
GOAL = 1.5
ENGINES = ("delta-rs", "spark")
# The goals: both lakes after table maintenance, Silver's files cut at this size. The pages are
# clones of two real fragments and compress far better than real ones: 1 MiB holds ~13,000 entries
# (a month of the bench's daily page), as the default 64 MiB would hold a month of a real dataset.
MAINTAINED_FILE_MB = 1
MAINTAINED = " maintained"
_ID = re.compile(rb"(<entry>.*?<id>)([^<]+)(</id>)", re.S)
_RUN_ID = "bench-growth-daily"


def make_pages(folder: Path, pages: int, seed: int = SEED, small: int = SMALL) -> tuple[Path, list[Path]]:
    """`pages` + 1 real-shaped pages, newest first: the new daily page, then the lake's pages. The new
    page's first `UPDATED` entries take the ids of entries of the `small` pages after it (newer versions
    of entries both lakes hold)."""
    corpus = generate_corpus(folder, pages + 1, dataset_key=DATASET, seed=seed, **REAL_SHAPE.options())
    new, older = corpus.files[0], corpus.files[1:]
    donors = [m.group(2) for page in older[:small] for m in _ID.finditer(page.read_bytes())][::37][:UPDATED]
    taken = iter(donors)

    def swap(m: re.Match[bytes]) -> bytes:
        donor = next(taken, None)
        return m.group(1) + (donor if donor is not None else m.group(2)) + m.group(3)

    new.write_bytes(_ID.sub(swap, new.read_bytes()))
    return new, older


def build_lakes(root: Path, small: int = SMALL, large: int = LARGE) -> dict[str, Path]:
    """The new page's template and the two lakes (Bronze landed, Silver by one `placsp ingest` each)."""
    new, older = make_pages(root / "pages", large, small=small)
    out = {"new": land_template([new], root / "new", DATASET)}
    for name, count in (("small", small), ("large", large)):
        lake = land_template(older[:count], root / name, DATASET)
        _placsp(["ingest", "--dataset", DATASET, "--lake", str(lake), "--run-id", f"build-{name}"])
        # The volume series' cache of the pages so far, as the daily runs before leave it.
        _placsp(READS["volume"](lake), ok=(0, 1))
        out[name] = lake
    return out


def maintained_lake(src: Path, dst: Path) -> Path:
    """A copy of the lake after `placsp maintain` (Spark's, on a local lake), files of `MAINTAINED_FILE_MB`."""
    shutil.copytree(src, dst, symlinks=True)
    _placsp(["maintain", "--lake", str(dst)], env={"PLACSP_MAINTENANCE_FILE_MB": str(MAINTAINED_FILE_MB)})
    return dst


# What a daily DAG run reads after the ingest, each a fresh `placsp` process: the contracts of the run's
# scope, the dead-letter gate's count of the run, the volume check (exit 1: failing rules or an anomaly).
READS: dict[str, Any] = {
    "contracts": lambda lake: ["quality", "check", "--dataset", DATASET, "--lake", str(lake), "--run-id", _RUN_ID],
    "gate": lambda lake: ["dead-letters", "stats", "--dataset", DATASET, "--lake", str(lake), "--run-id", _RUN_ID],
    "volume": lambda lake: ["quality", "volume", "--dataset", DATASET, "--lake", str(lake), "--json"],
}


def _placsp(
    args: list[str], timeout: float = 3600, ok: tuple[int, ...] = (0,), env: dict[str, str] | None = None
) -> tuple[float, str]:
    """`placsp <args>` in a fresh process; its wall seconds and stdout."""
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "placsp_provider.cli", *args],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    seconds = time.perf_counter() - t0
    if done.returncode not in ok:
        raise RuntimeError(f"placsp {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, done.stdout


def daily_run(base: Path, new: Path, work: Path, engine: str) -> dict[str, Any]:
    """A fresh copy of `base` (not timed), the new page landed beside its pages, then one timed
    `placsp ingest --engine <engine>` of its manifest; the commits it made (from the Delta log)."""
    lake = work / "lake"
    shutil.rmtree(lake, ignore_errors=True)
    shutil.copytree(base, lake, symlinks=True)
    (manifest,) = link_lake(new, lake, "daily.json")
    before = table_versions(lake)
    wait_for_quiet(20)
    args = ["ingest", "--dataset", DATASET, "--lake", str(lake), "--engine", engine, "--manifest", str(manifest)]
    seconds, out = _placsp([*args, "--run-id", _RUN_ID, "--json"])
    summary = json.loads(out)
    assert summary["conservation"]["balanced"], summary["conservation"]
    reads = {name: _placsp(command(lake), ok=(0, 1))[0] for name, command in READS.items()}
    return {"seconds": seconds, "lake": lake, "commits": commits_since(lake, before), "reads": reads}


def table_versions(lake: Path) -> dict[str, int]:
    from deltalake import DeltaTable

    from placsp_provider.lake import LAKE_TABLES, table_path

    return {
        t: DeltaTable(str(table_path(lake, t))).version()
        for t in LAKE_TABLES
        if (table_path(lake, t) / "_delta_log").is_dir()
    }


def commits_since(lake: Path, before: dict[str, int]) -> list[dict[str, Any]]:
    """Each commit after `before`: table, operation, and the file counts of its operationMetrics
    (delta-rs: files scanned and skipped by a MERGE; both: files added and removed), with the table's
    file count before it."""
    from deltalake import DeltaTable

    from placsp_provider.lake import table_path

    out = []
    for table, version in before.items():
        delta = DeltaTable(str(table_path(lake, table)))
        files_before = len(DeltaTable(str(table_path(lake, table)), version=version).file_uris())
        for commit in reversed(delta.history(delta.version() - version)):
            metrics = commit.get("operationMetrics") or {}
            keep = {k: v for k, v in metrics.items() if "file" in k.lower() or "time" in k.lower()}
            out.append({"table": table, "operation": commit.get("operation"), "files_before": files_before, **keep})
    return out


def run_contents(lake: Path) -> dict[str, list[str]]:
    """Every Silver table's rows written by the daily run, clock columns aside, as sorted JSON lines."""
    import pyarrow.compute as pc

    from placsp_provider.lake import SILVER_TABLES, table_path
    from placsp_provider.lake_storage import open_table
    from placsp_provider.table_files import table_files

    out = {}
    for table in SILVER_TABLES:
        rows = table_files(open_table(table_path(lake, table))).to_table()
        rows = rows.filter(pc.equal(rows.column("_ingest_run_id").cast("string"), _RUN_ID))
        rows = rows.drop_columns([c for c in rows.column_names if c in CLOCK_COLUMNS])
        out[table] = sorted(json.dumps(r, sort_keys=True, default=str) for r in rows.to_pylist())
    return out


CLOCK_COLUMNS = frozenset({"_ingested_at", "processing_timestamp", "ingested_at", "_ingest_run_id"})


def run(quick: bool = False) -> BenchResult:
    started = time.perf_counter()
    small, large, rounds = (4, 16, 1) if quick else (SMALL, LARGE, ROUNDS)
    with tempfile.TemporaryDirectory(prefix="placsp-bench-growth-") as tmp_name:
        tmp = Path(tmp_name)
        lakes = build_lakes(tmp, small, large)
        for size in ("small", "large"):
            lakes[size + MAINTAINED] = maintained_lake(lakes[size], tmp / f"{size}-maintained")
        return measure(lakes, tmp / "work", rounds, started, small, large)


def measure(lakes: dict[str, Path], work: Path, rounds: int, started: float, small: int, large: int) -> BenchResult:
    variants = [*ENGINES, *([e + MAINTAINED for e in ENGINES] if "large" + MAINTAINED in lakes else [])]
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {e: {"small": [], "large": []} for e in variants}
    contents: dict[str, dict[str, Any]] = {}
    for engine in variants:
        suffix = MAINTAINED if engine.endswith(MAINTAINED) else ""
        for size in abba(rounds, "small", "large"):
            r = daily_run(lakes[size + suffix], lakes["new"], work, engine.split()[0])
            key = f"{engine}/{size}"
            if key not in contents:
                contents[key] = run_contents(r.pop("lake"))
            r.pop("lake", None)
            runs[engine][size].append(r)
            print(f"  {engine:9} {size:5} lake: {r['seconds']:.2f} s", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    for engine in variants:
        assert contents[f"{engine}/small"] == contents[f"{engine}/large"], (
            f"{engine}: the new page's Silver rows differ"
        )
    same_engines = all(contents[f"{e}/large"] == contents[f"{ENGINES[0]}/large"] for e in variants)
    rows_written = {t: len(v) for t, v in contents[f"{ENGINES[0]}/large"].items()}
    return _result(runs, rows_written, same_engines, time.perf_counter() - started, small, large)


def _median(values: list[float]) -> float:
    import statistics

    return statistics.median(values)


def _files_touched(commits: list[dict[str, Any]]) -> str:
    """Each MERGE of a run: files it rewrote of the table's files, and its execution ms (delta-rs or
    Spark `operationMetrics`); a child table's first MERGE deletes, its second inserts."""
    parts = []
    for c in commits:
        if c["operation"] == "MERGE":
            removed = c.get("num_target_files_removed", c.get("numTargetFilesRemoved", "?"))
            ms = c.get("execution_time_ms", c.get("executionTimeMs", "?"))
            parts.append(f"{c['table']} {removed}/{c['files_before']} {ms}")
    return ", ".join(parts)


def _result(
    runs: dict[str, Any], rows_written: dict[str, int], same_engines: bool, seconds: float, small: int, large: int
) -> BenchResult:
    goals, rows, reads, figures = [], [], [], []
    maintained = [e + MAINTAINED for e in ENGINES]
    with_goal = maintained if set(maintained) <= set(runs) else ENGINES  # lakes measured before 0052: as built
    for engine, by_size in runs.items():
        s = [r["seconds"] for r in by_size["small"]]
        b = [r["seconds"] for r in by_size["large"]]
        ratio = _median(b) / _median(s)
        pairs = " ".join(f"{y / x:.2f}x" for x, y in zip(s, b, strict=True))
        rows.append([engine, " / ".join(f2(x) for x in s), " / ".join(f2(x) for x in b), f"{ratio:.2f}x", pairs])
        if engine not in with_goal:  # the lakes as one ingest built them: no goal, no detail
            continue
        figures.append(
            f"{engine}, large lake, MERGEs (files rewritten/table files ms): "
            + _files_touched(by_size["large"][-1]["commits"])
        )
        lakes = " (both lakes maintained)" if engine in maintained else ""
        what = f"`--engine {engine.split()[0]}`: a page into {large} pages / into {small}{lakes}"
        goals.append(Goal(what, f"<= {GOAL}x", f"{ratio:.2f}x", ratio <= GOAL))
        for read in READS:
            rs = _median([r["reads"][read] for r in by_size["small"]])
            rb = _median([r["reads"][read] for r in by_size["large"]])
            reads.append([engine, read, f2(rs), f2(rb), f"{rb / rs:.2f}x"])
    figures.append(
        "the new page's Silver rows (clock columns aside) equal in both lakes for each engine: "
        + ", ".join(f"{t} {n:,}" for t, n in rows_written.items())
        + f"; equal across engines: {'yes' if same_engines else 'no'}"
    )
    summary = (
        f"One new real-shaped daily page (475 entries, {UPDATED} newer versions of older ones; 25 tombstones) "
        f"`placsp ingest`ed into copies of lakes of {small} and {large} pages ({large // small}x), each built by one "
        "`placsp ingest`; fresh processes, ABBA rounds, medians. "
        f"`<engine>{MAINTAINED}` (the goals): into both lakes after `placsp maintain` (files of "
        f"{MAINTAINED_FILE_MB} MiB), the layout the weekly maintenance keeps; `<engine>`: the lakes as built, "
        "before any maintenance, no goal. "
        "After each ingest, fresh `placsp` processes: the run-scope contracts, the gate's count, the volume check. "
        "Why: decisions 0048, 0051, 0052."
    )
    table = Table(["engine", f"{small} pages (s)", f"{large} pages (s)", "median ratio", "pairs"], rows)
    read_table = Table(["engine", "after the ingest", f"{small} pages (s)", f"{large} pages (s)", "ratio"], reads)
    raw = {"runs": runs, "rows_written": rows_written, "same_engines": same_engines, "small": small, "large": large}
    return BenchResult(NAME, TITLE, summary, [table, read_table], raw, seconds, goals, figures)


if __name__ == "__main__":
    if sys.argv[1] == "docs":  # the section again from a run's raw JSON (benchmarks/out/growth.json)
        from benchmarks.run import DOCS, section, write_docs

        done = json.loads(Path(sys.argv[2]).read_text())
        raw = done["raw"]
        again = _result(raw["runs"], raw["rows_written"], raw["same_engines"], done["seconds"], SMALL, LARGE)
        write_docs(DOCS, {NAME: section(again, done["machine"]["date"])}, done["machine"])
    elif sys.argv[1] == "build":
        build_lakes(Path(sys.argv[2]), *(int(a) for a in sys.argv[3:]))
    else:  # measure lakes built before: measure <root> [rounds]
        root = Path(sys.argv[2])
        names = ("new", "small", "large", "small" + MAINTAINED, "large" + MAINTAINED)
        lakes = {n: root / n for n in names if (root / n).is_dir()}
        res = measure(
            lakes, root / "work", int(sys.argv[3]) if len(sys.argv) > 3 else 1, time.perf_counter(), SMALL, LARGE
        )
        print(json.dumps(res.raw, indent=1, default=str))
        for g in res.goals:
            print(g)
