"""Replay benchmark: dead letters replayed into Silver against the same records ingested from pages.

Corpus: `benchmarks.pagegen` pages of real entries (dataset `agregadas`, pool `1044`) where a known
share of the entries have one amount written as `N/A` (`na_amount`): today's code rejects each at
stage `validation` (`invalid_amount`) as one record-level dead letter, and accepts it once the amount
is put back. Everything runs in one fresh child interpreter and one SparkSession (`local[2]`, the
project's `get_session`):

1. `run_ingest` of the broken corpus into a lake (the JVM's first Delta work, reported as context):
   the valid entries reach Silver, the broken ones become dead letters. Then the fix a person makes
   (docs/runbook.md, "Fixing a record by hand"), in bulk: one Delta MERGE that replaces each dead
   letter's `raw_record` by the corrected XML and sets `status = 'fixed'`. That lake is the template.
2. The same corrected records written as pages: each broken page's own header (the same namespace
   declarations) and its corrected entries, nothing else; landed with a manifest as extraction does.
3. Timed, in ABBA order (replay, ingest, ingest, replay, ...) so drift and other sessions' load hit
   both alike, each on its own copy of the template:
   - replay: `run_replay(error_types=('invalid_amount',))`, then the same request again, which selects
     nothing (the cost of an idempotent no-op);
   - ingest, same lake: `run_ingest` of the corrected pages into a copy of the template, so Silver holds
     what the replay's Silver holds (the reference: same records, same starting tables, same end state);
   - once, in the middle: `run_ingest` of the corrected pages into a fresh lake.
4. Checks: every dead letter recovered, the no-op selects none, and the replayed Silver rows equal the
   ingested ones (count and xxhash64 over every column but the lineage ones). Then, in the driver
   process alone, `route_dead_letters` (batches of 4) over the fixed dead letters against `route_page` over the
   corrected pages: the per-record parse cost without Spark.

Where a run's time goes comes from Delta's own metrics: every commit the run made to the lake's tables,
read back from the table history with its `operationMetrics` (MERGE `executionTimeMs`); the rest of a
run (selection or page reading, parse, counts) is its wall time minus its MERGEs. No provider function
is wrapped. Memory is that of the child's whole process tree (driver, JVM, Python workers), sampled
(`_common.ProcessTree`), plus each process's high-water mark reset before each run.
"""

from __future__ import annotations

import gc
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks._common import (
    MB,
    BenchResult,
    ProcessTree,
    Table,
    abba,
    busy_cpu_seconds,
    child_main,
    delta_commits,
    delta_versions,
    f1,
    f2,
    land_template,
    merge_seconds,
    run_child,
    wait_for_quiet,
)
from benchmarks.pagegen import NA_AMOUNT, Corpus, generate_corpus

NAME = "replay"
TITLE = "Dead-letter replay vs ingest (the same records, one SparkSession)"
SEED = 20251130
_MODULE = "benchmarks.bench_replay"
_DATASET = "agregadas"
_POOL = "1044"
_ERROR_TYPE = "invalid_amount"
# Where and when a row was written, not what it holds: a replayed row names the broken page and the
# replay's run, an ingested one the corrected page and the ingest's run.
_LINEAGE = ("_source_file", "_ingest_run_id", "_ingested_at")
_COMPARED = ("entries", "lots", "documents", "results")
_FIXED_MANIFEST = "bench-fixed.json"


@dataclass(frozen=True)
class Config:
    pages: int = 8
    items_per_page: int = 500
    broken_share: float = 0.5  # of the entries: each becomes one dead letter, is fixed, then replayed
    repeats: int = 2  # timed runs of the replay and of the same-lake ingest (ABBA); best reported
    fresh_lake: bool = True  # also one ingest of the corrected pages into a fresh lake
    cores: int = 2
    quiet_wait_s: float = 15.0  # before the child, wait up to this long for other sessions to idle


FULL = Config()
QUICK = Config(pages=1, items_per_page=20, repeats=1, fresh_lake=False, quiet_wait_s=0.0)


# -- parent ---------------------------------------------------------------------------------------
def run(quick: bool = False) -> BenchResult:

    cfg = QUICK if quick else FULL
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="placsp-bench-replay-") as tmp_name:
        payload = prepare(Path(tmp_name), cfg)
        waited, busy = wait_for_quiet(cfg.quiet_wait_s)
        measures = run_child(_MODULE, {"task": "replay_vs_ingest", **payload}, timeout=1800)
    return report(cfg, payload["corpus"], measures, {"waited_s": waited, "other_cores_before": busy}, started)


def report(
    cfg: Config, corpus: dict[str, Any], measures: dict[str, Any], quiet: dict[str, float], started: float
) -> BenchResult:
    raw = {"config": cfg.__dict__, "corpus": corpus, "quiet_wait": quiet, "measures": measures}
    return BenchResult(
        name=NAME,
        title=TITLE,
        summary=_summary(cfg, raw),
        tables=_tables(raw),
        raw=raw,
        seconds=time.perf_counter() - started,
        findings=_findings(raw),
    )


def prepare(tmp: Path, cfg: Config) -> dict[str, Any]:
    """Generate and land the corpora (not timed); return the child's payload."""

    t = time.perf_counter()
    broken = generate_corpus(
        tmp / "broken",
        pages=cfg.pages,
        items_per_page=cfg.items_per_page,
        corruption_rate=cfg.broken_share,
        seed=SEED,
        dataset_key=_DATASET,
        entry_pool=_POOL,
        mix={NA_AMOUNT: 1},
    )
    fixes = _fixes(broken)
    fixed_pages = corrected_pages(broken, fixes, tmp / "fixed")
    fixed_view = Corpus(broken.spec, fixed_pages, [], [], 0, 0, 0)  # what `land_template` reads: dataset, files
    return {
        "cores": cfg.cores,
        "repeats": cfg.repeats,
        "fresh_lake": cfg.fresh_lake,
        "fixes": fixes,
        "work": str(tmp / "work"),
        "broken_template": str(land_template(broken, tmp / "bronze-broken")),
        "fixed_template": str(land_template(fixed_view, tmp / "bronze-fixed")),
        "corpus": {
            "pages": len(broken.pages),
            "entries": broken.total_entries,
            "tombstones": broken.total_tombstones,
            "bytes": broken.bytes,
            "broken": len(fixes),
            "fixed_pages": len(fixed_pages),
            "fixed_bytes": sum(p.stat().st_size for p in fixed_pages),
            "preparation_seconds": time.perf_counter() - t,
        },
    }


def _fixes(corpus: Corpus) -> dict[str, dict[str, str]]:
    """entry id -> what the person puts back: the element the generator broke and its real amount."""
    out = {}
    for c in corpus.ground_truth:
        if c.kind != NA_AMOUNT or c.masked_by:
            raise RuntimeError(f"unexpected corruption in the replay corpus: {c.kind} ({c.masked_by})")
        out[c.entry_id] = {"element": c.facts["element"], "original": c.facts["original"]}
    return out


def fix_record(raw: str, fix: dict[str, str]) -> str:
    """The correction a person makes to one broken record: the real amount where it says N/A."""
    element = re.escape(fix["element"])
    pattern = re.compile(rf"(<{element}\b[^>]*>)N/A(</{element}>)")
    fixed, n = pattern.subn(lambda m: m.group(1) + fix["original"] + m.group(2), raw, count=1)
    if n != 1:
        raise RuntimeError(f"no N/A amount in {fix['element']} to correct")
    return fixed


_ENTRY_RE = re.compile(rb"<entry>.*?</entry>", re.S)
_ID_RE = re.compile(rb"<id>([^<]+)</id>")


def corrected_pages(corpus: Corpus, fixes: dict[str, dict[str, str]], out: Path) -> list[Path]:
    """The broken entries, corrected, as pages: each broken page's header and its corrected entries in
    page order, nothing else; the same file names (landed under another sha256)."""
    out.mkdir(parents=True, exist_ok=True)
    written, found = [], 0
    for path in corpus.files:
        data = path.read_bytes()
        first = min(i for i in (data.find(b"<entry>"), data.find(b"<at:deleted-entry")) if i >= 0)
        records = []
        for match in _ENTRY_RE.finditer(data):
            ident = _ID_RE.search(match.group(0))
            fix = fixes.get(ident.group(1).decode()) if ident else None
            if fix is not None:
                records.append(b"    " + fix_record(match.group(0).decode("utf-8"), fix).encode("utf-8") + b"\n")
        if records:
            found += len(records)
            target = out / path.name
            target.write_bytes(data[:first].rstrip() + b"\n" + b"".join(records) + b"</feed>\n")
            written.append(target)
    if found != len(fixes):
        raise RuntimeError(f"found {found} of the {len(fixes)} broken entries in the pages")
    return written


# -- child: instruments ----------------------------------------------------------------------------
def _timed_run(fn: Callable[[], Any], spark: Any, lake: Path, tree: ProcessTree) -> dict[str, Any]:
    """One timed run: wall, CPU of the process tree, peak memory, the Delta commits it made (with their
    MERGE times, from the table history), and the CPU other sessions used meanwhile (the noise)."""
    since = delta_versions(spark, lake)
    gc.collect()
    tree.reset()
    tree.start()
    busy0, t = busy_cpu_seconds(), time.perf_counter()
    try:
        summary = fn()
    finally:
        seconds = time.perf_counter() - t
        tree.stop()
    cpu = tree.cpu_seconds()
    other = max(busy_cpu_seconds() - busy0 - cpu, 0.0) / seconds
    commits = delta_commits(spark, lake, since)
    if isinstance(summary, dict):  # the counts stay; entry id lists and paths do not
        summary = {k: v for k, v in summary.items() if k not in ("recovered_entries", "summary_file")}
    return {
        "seconds": seconds,
        "cpu_s": cpu,
        "other_cores": other,
        "tree": tree.report(),
        "merges": merge_seconds(commits),
        "commits": [(c["table"], c["operation"]) for c in commits],
        "summary": summary,
    }


# -- child: the steps --------------------------------------------------------------------------------
def _session(cores: int) -> Any:
    os.environ.setdefault("PLACSP_SPARK_LOG_LEVEL", "ERROR")
    from placsp_provider.spark.session import get_session

    return get_session("placsp-bench-replay", extra={"spark.master": f"local[{cores}]"})


def _add_bronze(template: Path, lake: Path, manifest_name: str = "bench.json") -> Path:
    """Hard-link a landed template's pages into `lake`; copy its manifest as `manifest_name`."""
    manifest = None
    for path in template.rglob("*"):
        if path.is_dir():
            continue
        target = lake / path.relative_to(template)
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".json":
            manifest = target.with_name(manifest_name)
            shutil.copy2(path, manifest)
        else:
            os.link(path, target)
    if manifest is None:
        raise RuntimeError(f"no manifest in {template}")
    return manifest


def _ingest(spark: Any, lake: Path, manifest: Path, run_id: str) -> dict[str, Any]:
    from placsp_provider.datasets import get_dataset
    from placsp_provider.spark.silver_job import IngestRequest, run_ingest

    return run_ingest(spark, IngestRequest(get_dataset(_DATASET), lake, run_id, manifests=(manifest,)))


def _replay(spark: Any, lake: Path, run_id: str, max_records: int) -> dict[str, Any]:
    from placsp_provider.spark.replay_job import ReplayRequest, run_replay

    request = ReplayRequest(_DATASET, lake, run_id, error_types=(_ERROR_TYPE,), max_records=max(max_records, 1))
    return run_replay(spark, request)


def fix_dead_letters(spark: Any, lake: Path, fixes: dict[str, dict[str, str]]) -> int:
    """The person's fix, in bulk: each broken record's `raw_record` replaced by the corrected XML and
    `status = 'fixed'`, one MERGE on `dead_letter_id` (the dataset in the condition: one partition)."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from placsp_provider.lake import table_path

    path = str(table_path(lake, "dead_letters"))
    letters = (
        spark.read.format("delta")
        .load(path)
        .where((F.col("dataset") == _DATASET) & (F.col("error_type") == _ERROR_TYPE))
        .select("dead_letter_id", "entry_id", "raw_record")
        .collect()
    )
    if sorted(r["entry_id"] for r in letters) != sorted(fixes):
        raise RuntimeError(f"the ingest wrote {len(letters)} {_ERROR_TYPE} dead letters; {len(fixes)} were broken")
    corrected = spark.createDataFrame(
        [(r["dead_letter_id"], fix_record(r["raw_record"], fixes[r["entry_id"]])) for r in letters],
        "dead_letter_id string, raw_record string",
    )
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(corrected.alias("s"), f"t.dataset = '{_DATASET}' AND t.dead_letter_id = s.dead_letter_id")
        .whenMatchedUpdate(set={"raw_record": "s.raw_record", "status": "'fixed'"})
        .execute()
    )
    return len(letters)


def silver_checksums(spark: Any, lake: Path, entry_ids: list[str]) -> dict[str, list[int]]:
    """Per Silver table, rows of the given entries: count and XOR of xxhash64 over every column but
    the lineage ones (every value computed; equal across lakes iff the same rows)."""
    from pyspark.sql import functions as F

    from placsp_provider.lake import table_path

    ids = F.broadcast(spark.createDataFrame([(i,) for i in entry_ids], "entry_id string"))
    out = {}
    for table in _COMPARED:
        df = spark.read.format("delta").load(str(table_path(lake, table))).join(ids, "entry_id")
        cols = [F.col(f"`{c}`") for c in sorted(df.columns) if c not in _LINEAGE]
        row = df.select(F.xxhash64(*cols).alias("h")).agg(F.count("*").alias("n"), F.bit_xor("h").alias("h")).first()
        out[table] = [int(row["n"]), int(row["h"] or 0)] if row is not None else [0, 0]
    return out


def _single_process(spark: Any, lake: Path, pages: list[Path]) -> dict[str, Any]:
    """The per-record parse without Spark, in this process (one core): `route_dead_letter` over the
    fixed dead letters vs `route_page` over the corrected pages (best of 2 each, after a small warm pass)."""
    from placsp_provider.datasets import get_dataset
    from placsp_provider.lake import table_path
    from placsp_provider.parser.page_parser import parse_dead_letter, parse_page
    from placsp_provider.spark.routing import REPLAY_INPUT_COLUMNS, route_dead_letters, route_page

    ds = get_dataset(_DATASET)
    letters = [
        r.asDict()
        for r in spark.read.format("delta")
        .load(str(table_path(lake, "dead_letters")))
        .where(f"dataset = '{_DATASET}' AND status = 'fixed'")
        .select(*REPLAY_INPUT_COLUMNS)
        .collect()
    ]
    datas = [(p.name, p.read_bytes()) for p in pages]
    jobs: dict[str, Callable[[], Any]] = {
        # As mapInArrow hands them over: batches of spark.sql.execution.arrow.maxRecordsPerBatch (4).
        "route_dead_letter": lambda: [
            route_dead_letters(letters[i : i + 4], dataset=ds) for i in range(0, len(letters), 4)
        ],
        "parse_dead_letter": lambda: [parse_dead_letter(d, dataset=ds) for d in letters],
        "route_page": lambda: [route_page(b, dataset=ds, source_file=n) for n, b in datas],
        "parse_page": lambda: [parse_page(b, dataset=ds, source_file=n) for n, b in datas],
    }
    out: dict[str, Any] = {"records": len(letters), "pages": len(datas)}
    route_dead_letters(letters[:20], dataset=ds)  # imports, lxml and pyarrow first calls: not timed
    route_page(datas[0][1], dataset=ds, source_file=datas[0][0])
    for name, job in jobs.items():
        runs = []
        for _ in range(2):
            gc.collect()
            t = time.perf_counter()
            result = job()
            runs.append(time.perf_counter() - t)
        out[name] = min(runs)
        if name == "route_dead_letter":
            out["batches_per_record"] = sum(len(b) for b in result) / max(len(letters), 1)
        elif name == "route_page":
            out["batches_per_page"] = sum(len(b) for b in result) / max(len(datas), 1)
    return out


def replay_vs_ingest(spark: Any, p: dict[str, Any]) -> dict[str, Any]:
    """Steps 1-4 of the module doc on `spark`. Every lake is its own folder under `p['work']` (Delta
    caches table state by path), removed once measured."""

    work = Path(p["work"])
    fixes: dict[str, dict[str, str]] = p["fixes"]
    n = len(fixes)
    tree = ProcessTree()
    out: dict[str, Any] = {"broken": n}
    base = work / "base"
    manifest = _add_bronze(Path(p["broken_template"]), base)
    runs: dict[str, list[dict[str, Any]]] = {"replay": [], "noop": [], "ingest_same": [], "ingest_fresh": []}
    order = abba(p["repeats"], "replay", "ingest_same")
    if p["fresh_lake"]:
        order.insert(len(order) // 2, "ingest_fresh")
    lakes: dict[str, Path] = {}
    out["broken_ingest"] = _timed_run(lambda: _ingest(spark, base, manifest, "bench-broken"), spark, base, tree)
    out["fix"] = _timed_run(lambda: fix_dead_letters(spark, base, fixes), spark, base, tree)
    out["silver_before"] = spark.read.format("delta").load(str(base / "silver" / "entries")).count()
    for i, what in enumerate(order):
        lake = work / f"{what}-{i}"
        if what != "ingest_fresh":
            shutil.copytree(base, lake)  # a real copy: runs rewrite Delta files, the template must stay
        fixed = _add_bronze(Path(p["fixed_template"]), lake, _FIXED_MANIFEST) if what != "replay" else manifest
        if what == "replay":
            runs["replay"].append(_timed_run(partial(_replay, spark, lake, f"bench-replay-{i}", n), spark, lake, tree))
            again = partial(_replay, spark, lake, f"bench-replay-{i}-again", n)
            runs["noop"].append(_timed_run(again, spark, lake, tree))
        else:
            ingest = partial(_ingest, spark, lake, fixed, f"bench-{what}-{i}")
            runs[what].append(_timed_run(ingest, spark, lake, tree))
        if what in lakes:
            shutil.rmtree(lakes[what], ignore_errors=True)
        lakes[what] = lake
    out.update(runs, order=order)
    ids = sorted(fixes)
    out["checksums"] = {what: silver_checksums(spark, lake, ids) for what, lake in lakes.items()}
    _check(out)
    out["single_process"] = _single_process(spark, base, sorted(Path(p["fixed_template"]).rglob("*.atom")))
    shutil.rmtree(work, ignore_errors=True)
    return out


def _check(out: dict[str, Any]) -> None:
    """A measurement of the wrong thing is worse than none: every count is checked."""
    n = out["broken"]
    for run in out["replay"]:
        s = run["summary"]
        if (s["selected"], s["recovered"], s["conservation"]["balanced"]) != (n, n, True):
            raise RuntimeError(f"replay of {n} fixed dead letters: {s['selected']} selected, {s['recovered']} back")
    if any(run["summary"]["selected"] for run in out["noop"]):
        raise RuntimeError("the same replay again selected dead letters: it must select none")
    for what in ("ingest_same", "ingest_fresh"):
        if any(run["summary"]["silver"]["entries"] != n for run in out[what]):
            raise RuntimeError(f"{what}: the corrected pages did not give {n} Silver entries")
    sums = out["checksums"]
    if sums["replay"]["entries"][0] != n or any(v != sums["replay"] for v in sums.values()):
        raise RuntimeError(f"replayed and ingested Silver rows differ: {sums}")


def _child_replay_vs_ingest(p: dict[str, Any]) -> dict[str, Any]:
    spark = _session(p["cores"])
    try:
        return replay_vs_ingest(spark, p)
    finally:
        spark.stop()


# -- report ---------------------------------------------------------------------------------------
def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return min(runs, key=lambda r: r["seconds"])


def speed_ratio(measures: dict[str, Any], reference: str = "ingest_same") -> float:
    """Replay speed / ingest speed on the same records (best runs; above 1: the replay is faster)."""
    return _best(measures[reference])["seconds"] / _best(measures["replay"])["seconds"]


def _mem(run: dict[str, Any]) -> tuple[str, str]:
    tree = run["tree"]
    workers = (
        f"Python workers {f1(tree['workers_hwm_max_mb'])} max / {f1(tree['workers_hwm_sum_mb'])} sum "
        f"({tree['workers']} processes), "
        if tree["workers"]
        else "no Python workers, "
    )
    return f1(tree["peak_total_mb"]), (
        f"{f1(tree['baseline_total_mb'])} before the run; JVM {f1(tree['jvm_hwm_mb'])}, {workers}"
        f"driver {f1(tree['driver_hwm_mb'])}"
    )


def _summary(cfg: Config, raw: dict[str, Any]) -> str:
    c, ms, wait = raw["corpus"], raw["measures"], raw["quiet_wait"]
    fresh = "; once, in the middle, an ingest of the same pages into a fresh lake" if cfg.fresh_lake else ""
    return (
        f"Corpus: {c['pages']} generated pages of {cfg.items_per_page} items (dataset `{_DATASET}`, pool "
        f"`{_POOL}`: real entries, ids and timestamps changed), {c['entries']:,} entries and "
        f"{c['tombstones']:,} tombstones in {c['bytes'] / MB:,.1f} MB. {c['broken']:,} entries "
        f"({c['broken'] / c['entries']:.0%}) have one amount written as `N/A`: the ingest turns each into a "
        f"record-level dead letter (`validation` / `{_ERROR_TYPE}`) and the other {ms['silver_before']:,} into "
        "Silver rows. A person's fix in bulk (one Delta MERGE: `raw_record` = the corrected XML, "
        "`status = 'fixed'`) makes them replayable. The same corrected records are also written as "
        f"{c['fixed_pages']} pages ({c['fixed_bytes'] / MB:,.1f} MB; each broken page's header and its "
        "corrected entries) for the ingest they are compared with. Everything runs in one fresh Python "
        f"process and one SparkSession (`local[{cfg.cores}]`, the project's `get_session`); the broken ingest "
        "and the fix are its first Delta work and warm it up. Then, in ABBA order, each on its own copy of "
        "the fixed lake: the replay (and the same replay again), and the ingest of the corrected pages "
        f"into the same lake, {cfg.repeats} run(s) each, best reported{fresh}. Memory: peak RSS of the whole "
        "process tree (driver + JVM + Python workers, sampled every 0.2 s) and per-process `VmHWM` reset "
        "before each run. Other sessions share this machine: the run waited "
        f"{wait['waited_s']:.0f} s (at most {cfg.quiet_wait_s:.0f}) for it to go idle "
        f"({wait['other_cores_before']:.2f} foreign cores busy when it started) and records the foreign CPU "
        "next to every run."
    )


_SILVER = ("entries", "lots", "documents", "results", "tombstones")
_REST = "the rest: outside Delta MERGEs (reading, parsing, routing, counts, history reads)"


def _parts(run: dict[str, Any], replay: bool) -> dict[str, float]:
    """label -> wall seconds of each kind of MERGE of a run (Delta's `executionTimeMs`), and the rest."""
    merges = run["merges"]
    silver = sum(sec for table, sec in merges if table in _SILVER)
    dead = sum(sec for table, sec in merges if table == "dead_letters")
    recon = sum(sec for table, sec in merges if table == "reconciliation")
    out = {f"Silver MERGEs ({sum(t in _SILVER for t, _ in merges)})": silver}
    if replay:
        out["status MERGE on `dead_letters`"] = dead
    else:
        out["dead letters insert-only MERGE (none to insert)"] = dead
        out["reconciliation MERGE"] = recon
    out[_REST] = run["seconds"] - sum(out.values())
    return out


def _rate(records: int, seconds: float) -> str:
    if not records:
        return ""
    rate = records / seconds
    return f"{rate:,.0f}" if rate >= 100 else f"{rate:.1f}"


def _merges_text(run: dict[str, Any]) -> str:
    return ", ".join(f"{name} {f2(sec)}" for name, sec in run["merges"])


def _tables(raw: dict[str, Any]) -> list[Table]:
    ms, c = raw["measures"], raw["corpus"]
    n = ms["broken"]
    replay, noop, same = _best(ms["replay"]), _best(ms["noop"]), _best(ms["ingest_same"])
    fresh = _best(ms["ingest_fresh"]) if ms["ingest_fresh"] else None

    def row(label: str, run: dict[str, Any], records: int, vs: bool = True) -> list[str]:
        peak, detail = _mem(run)
        sec = run["seconds"]
        return [
            label,
            f"{records:,}",
            f2(sec),
            _rate(records, sec),
            f"{same['seconds'] / sec:.2f}x" if vs else "",
            f2(run["cpu_s"]),
            f"{run['other_cores']:.2f}",
            peak,
            detail,
        ]

    rows = [
        row(f"**`run_replay`** of the {n:,} fixed dead letters", replay, n),
        row(f"**`run_ingest`** of the same {n:,} records as pages, into a copy of the same lake", same, n),
    ]
    if fresh is not None:
        rows.append(row("`run_ingest` of the same pages into a fresh lake", fresh, n))
    rows += [
        row("`run_replay` again, same request (selects nothing)", noop, 0, vs=False),
        row(
            f"context: `run_ingest` of the broken corpus, the JVM's first Delta work ({c['entries']:,} entries: "
            f"{ms['silver_before']:,} to Silver, {n:,} dead letters)",
            ms["broken_ingest"],
            c["entries"],
            vs=False,
        ),
        row(f"context: the person's bulk fix, one MERGE over {n:,} dead letters", ms["fix"], n, vs=False),
    ]
    s = replay["summary"]
    sums = ms["checksums"]
    same_rows = all(v == sums["replay"] for v in sums.values())
    runs_text = "; ".join(
        f"{label} " + ", ".join(f2(r["seconds"]) for r in ms[key])
        for key, label in (
            ("replay", "replay"),
            ("ingest_same", "ingest same lake"),
            ("ingest_fresh", "ingest fresh lake"),
            ("noop", "no-op replay"),
        )
        if ms[key]
    )
    throughput = Table(
        title=f"Throughput on the same {n:,} records",
        columns=[
            "run",
            "records",
            "seconds",
            "records/s",
            "speed vs ingest (same lake)",
            "CPU s",
            "other sessions (cores)",
            "peak RSS MB",
            "memory detail (MB)",
        ],
        rows=rows,
        notes=[
            "speed vs ingest = seconds of the same-lake ingest / these seconds (above 1: faster). CPU s: user + "
            "system CPU of the process tree during the run (driver, JVM, Python workers). Other sessions: CPU the "
            "rest of the machine used meanwhile, in cores (0 = the machine was ours).",
            f"Seconds per run (order {' '.join(ms['order'])}): {runs_text}.",
            f"Replay: selected {s['selected']:,}, recovered {s['recovered']:,}, still failing "
            f"{s['still_failing']}, abandoned {s['abandoned']}, conservation balanced "
            f"{s['conservation']['balanced']}; the second replay selected {noop['summary']['selected']}. "
            f"Ingest of the corrected pages: Silver {same['summary']['silver']}, dead letters "
            f"{same['summary']['dead_letters']['total']}.",
            f"Replayed Silver rows = ingested Silver rows ({', '.join(_COMPARED)} of the {n:,} records, count and "
            f"xxhash64 over every column but {', '.join(_LINEAGE)}; same-lake"
            + (" and fresh-lake" if fresh is not None else "")
            + " ingest): "
            + ("yes" if same_rows else "**no**")
            + " ("
            + ", ".join(f"{t} {v[0]:,}" for t, v in sums["replay"].items())
            + ").",
        ],
    )
    single = ms["single_process"]
    r_parts, i_parts = _parts(replay, True), _parts(same, False)
    ratio_rows = [
        ["replay vs ingest of the same records into the same lake (speed)", *_ratio(same, replay)],
    ]
    if fresh is not None:
        ratio_rows.append(["replay vs ingest of the same records into a fresh lake (speed)", *_ratio(fresh, replay)])
        ratio_rows.append(["ingest into the same lake vs into a fresh lake (time)", *_ratio(same, fresh)])
    ratio_rows += [
        ["no-op replay / replay (time)", *_ratio(noop, replay)],
        [
            "replay vs ingest outside Delta MERGEs (selection or page reading, parse, counts), on Spark (speed)",
            f"{i_parts[_REST] / r_parts[_REST]:.2f}x",
            "",
        ],
        [
            "`route_dead_letters` per record vs `route_page` per page, one process (speed)",
            f"{single['route_page'] / single['route_dead_letter']:.2f}x",
            "",
        ],
    ]
    ratios = Table(
        title="Ratios (same run)",
        columns=["ratio", "wall time", "CPU time"],
        rows=ratio_rows,
        notes=[
            "Speed ratios: reference seconds / replay seconds (below 1: the replay is slower); time ratios: "
            "first / second. CPU time ratios compare the CPU of the process tree; they move less than wall "
            "time when other sessions load the machine.",
            f"One process, one core, the same {single['records']:,} records: `route_dead_letters` (batches of 4) "
            f"over the fixed dead letters {f2(single['route_dead_letter'])} s "
            f"({single['batches_per_record']:.1f} Arrow batches per record; `parse_dead_letter` alone "
            f"{f2(single['parse_dead_letter'])} s), `route_page` over the "
            f"{single['pages']} corrected pages {f2(single['route_page'])} s "
            f"({single['batches_per_page']:.1f} batches per page; `parse_page` alone {f2(single['parse_page'])} s). "
            "The replay's re-parse repartitions its selection over the cores.",
            "Other sessions' CPU next to the runs compared, in cores: "
            + ", ".join(
                f"{label} {run['other_cores']:.2f}"
                for label, run in (("replay", replay), ("same-lake ingest", same), ("fresh-lake ingest", fresh))
                if run is not None
            )
            + " (the fresh-lake ingest ran once).",
        ],
    )
    rows = [
        [
            lr,
            f2(wr) if lr else "",
            f"{wr / replay['seconds']:.0%}" if lr else "",
            li,
            f2(wi) if li else "",
            f"{wi / same['seconds']:.0%}" if li else "",
        ]
        for (lr, wr), (li, wi) in zip(_pad(r_parts), _pad(i_parts), strict=True)
    ]
    phases = Table(
        title=(
            f"Where the time goes (best runs: replay {f2(replay['seconds'])} s, same-lake ingest "
            f"{f2(same['seconds'])} s), from Delta's table history"
        ),
        columns=["replay part", "seconds", "share", "ingest part", "seconds", "share"],
        rows=rows,
        notes=[
            f"Delta MERGEs by target table, seconds (`executionTimeMs` of each commit): replay "
            f"({len(replay['merges'])}) {_merges_text(replay)}; same-lake ingest ({len(same['merges'])}) "
            f"{_merges_text(same)}"
            + (f"; fresh-lake ingest ({len(fresh['merges'])}) {_merges_text(fresh)}" if fresh is not None else "")
            + ".",
            f"No-op replay ({f2(noop['seconds'])} s): {len(noop['merges'])} MERGEs, commits "
            + (", ".join(f"{t} {op}" for t, op in noop["commits"]) or "none")
            + ".",
        ],
    )
    return [throughput, ratios, phases]


def _ratio(reference: dict[str, Any], measured: dict[str, Any]) -> list[str]:
    return [
        f"{reference['seconds'] / measured['seconds']:.2f}x",
        f"{reference['cpu_s'] / measured['cpu_s']:.2f}x" if measured["cpu_s"] > 0 else "",
    ]


def _pad(parts: dict[str, float]) -> list[tuple[str, float]]:
    items = list(parts.items())
    return items + [("", 0.0)] * (4 - len(items))


def _findings(raw: dict[str, Any]) -> list[str]:
    ms = raw["measures"]
    n = ms["broken"]
    replay, noop, same = _best(ms["replay"]), _best(ms["noop"]), _best(ms["ingest_same"])
    fresh = _best(ms["ingest_fresh"]) if ms["ingest_fresh"] else None
    r_parts, i_parts = _parts(replay, True), _parts(same, False)
    r_merge = sum(sec for _, sec in replay["merges"])
    i_merge = sum(sec for _, sec in same["merges"])
    single = ms["single_process"]
    speed = speed_ratio(ms)
    same_rows = all(v == ms["checksums"]["replay"] for v in ms["checksums"].values())
    out = [
        f"The replay recovers {_rate(n, replay['seconds'])} records/s; ingesting the same records from pages into "
        f"the same lake runs at {_rate(n, same['seconds'])} records/s: the replay has {speed:.2f}x the ingest's "
        f"speed ({f2(replay['seconds'])} s vs {f2(same['seconds'])} s wall, {f2(replay['cpu_s'])} vs "
        f"{f2(same['cpu_s'])} CPU s)"
        + (", and both end in the same Silver rows." if same_rows else "; **their Silver rows differ**."),
        f"Both are mostly Delta MERGEs: {len(replay['merges'])} MERGEs take {f2(r_merge)} s of the replay "
        f"({r_merge / replay['seconds']:.0%}) and {len(same['merges'])} take {f2(i_merge)} s of the ingest "
        f"({i_merge / same['seconds']:.0%}).",
    ]
    apply_r, apply_i = _second(replay, "entries"), _second(same, "entries")
    if apply_r is not None and apply_i is not None and apply_r > 1.5 * apply_i:
        out.append(
            f"One MERGE makes most of the MERGE gap: the second MERGE on `entries` (the tombstones applied to the "
            f"entries the batch touched) takes {f2(apply_r)} s in the replay against {f2(apply_i)} s in the "
            f"same-lake ingest, on the same tables; all the other MERGEs take {f2(r_merge - apply_r)} s against "
            f"{f2(i_merge - apply_i)} s (the replay's include its status MERGE, the ingest's the dead-letter and "
            "reconciliation ones). That MERGE's source is built from the batch's rows (its tombstones and the "
            "winners among its entries, joined with the tombstone log)."
        )
    out.append(
        f"Outside Delta MERGEs the replay takes {f2(r_parts[_REST])} s (selection, re-parse, counts) against "
        f"{f2(i_parts[_REST])} s for the ingest (reading and parsing the pages, counts). Without Spark, in one "
        f"process, `route_dead_letters` needs {f2(single['route_dead_letter'])} s for the {single['records']:,} "
        f"records ({single['batches_per_record']:.1f} Arrow batches per record; the parse alone, "
        f"`parse_dead_letter`, {f2(single['parse_dead_letter'])} s) and `route_page` {f2(single['route_page'])} s "
        f"for the {single['pages']} pages that hold them ({single['batches_per_page']:.1f} batches per page)."
    )
    if fresh is not None:
        out.append(
            f"Into a fresh lake the same ingest took {f2(fresh['seconds'])} s (one run, next to "
            f"{fresh['other_cores']:.2f} foreign cores), into the lake that already holds {ms['silver_before']:,} "
            f"entries and the corpus' tombstones {f2(same['seconds'])} s (best of {len(ms['ingest_same'])}, next to "
            f"{same['other_cores']:.2f}); its tombstone-apply MERGE {f2(_second(fresh, 'entries') or 0.0)} s and "
            f"{f2(_second(same, 'entries') or 0.0)} s."
        )
    first, best = ms["replay"][0]["seconds"], replay["seconds"]
    if len(ms["replay"]) > 1 and first > 1.3 * best:
        out.append(
            f"The session's first replay took {f2(first)} s, the best {f2(best)} s (ingest: "
            f"{f2(ms['ingest_same'][0]['seconds'])} s, then {f2(same['seconds'])} s): what is still cold in the JVM "
            "after the broken ingest and the fix and what other sessions' load adds cannot be told apart here. A "
            "scheduled replay is a fresh spark-submit: it pays the cold figure, and the JVM's first Delta work on "
            f"top (the broken ingest above took {f2(ms['broken_ingest']['seconds'])} s)."
        )
    out += [
        f"A replay that finds nothing to do costs {f2(noop['seconds'])} s ({noop['summary']['selected']} "
        f"selected, {len(noop['merges'])} MERGEs): running it again changes nothing and costs little.",
        f"Peak memory of the process tree: replay {f1(replay['tree']['peak_total_mb'])} MB, ingest "
        f"{f1(same['tree']['peak_total_mb'])} MB (JVM {f1(replay['tree']['jvm_hwm_mb'])} and "
        f"{f1(same['tree']['jvm_hwm_mb'])} MB; largest Python worker {f1(replay['tree']['workers_hwm_max_mb'])} and "
        f"{f1(same['tree']['workers_hwm_max_mb'])} MB).",
    ]
    return out


def _second(run: dict[str, Any], table: str) -> float | None:
    """Seconds of the run's second MERGE into `table` (for entries: the tombstone apply)."""
    times = [sec for name, sec in run["merges"] if name == table]
    return times[1] if len(times) > 1 else None


if __name__ == "__main__":
    child_main({"replay_vs_ingest": _child_replay_vs_ingest})
