"""Replay benchmark: dead letters replayed into Silver against the same records ingested from pages.

Corpus (`benchmarks.pagegen`, dataset `agregadas`, pool `1044`): a known share of the entries have one amount
written as `N/A`, so the ingest makes each one `validation`/`invalid_amount` dead letter. In one fresh child
and one SparkSession (`local[2]`): `ingest` of that corpus, then the person's fix in bulk (docs/runbook.md,
"Fixing a record by hand"), one Delta MERGE; that lake is the template. Reference: `ingest` of the same
corrected records as pages (each broken page's header and its corrected entries), written by delta-rs as the
Spark job writes such a batch (the replay writes its records the same way). ABBA order, each run on its
own copy of the template: `run_replay`, the same replay again (a no-op), the same-lake ingest; once, a
fresh-lake ingest. Checked: every dead letter recovered, the no-op selects none, replayed Silver rows =
ingested ones (count and xxhash64 over every column but lineage). Where the time goes comes from Delta's own
metrics (MERGE `executionTimeMs` in the table history), no provider function is wrapped; memory is the
child's whole process tree (`_common.ProcessTree`).
"""

from __future__ import annotations

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
    Goal,
    ProcessTree,
    Table,
    abba,
    child_main,
    corpus_facts,
    f1,
    f2,
    measure_tree,
    run_child,
    wait_for_quiet,
)
from benchmarks._lake import (
    delta_commits,
    delta_versions,
    hash_all,
    land_template,
    link_lake,
    merge_seconds,
    merge_wall_seconds,
    spark_session,
)
from benchmarks.pagegen import NA_AMOUNT, Corpus, generate_corpus
from placsp_provider.lake import CHILD_TABLES, SILVER_TABLES, table_path

NAME = "replay"
TITLE = "Dead-letter replay vs ingest (the same records, one SparkSession)"
SEED = 20251130
_DATASET = "agregadas"
_POOL = "1044"
_ERROR_TYPE = "invalid_amount"
# Where and when a row was written, not what it holds: a replayed row names the broken page and the
# replay's run, an ingested one the corrected page and the ingest's run.
_LINEAGE = ("_source_file", "_ingest_run_id", "_ingested_at")
_COMPARED = ("entries", *CHILD_TABLES)
_FIXED_MANIFEST = "bench-fixed.json"  # next to the broken corpus' own `bench.json` in the same lake


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
        measures = run_child(__name__, {"task": "replay_vs_ingest", **payload}, timeout=1800)
    quiet = {"waited_s": waited, "other_cores_before": busy}
    raw = {"config": cfg.__dict__, "corpus": payload["corpus"], "quiet_wait": quiet, "measures": measures}
    return report(raw, time.perf_counter() - started)


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
    fixes = {}  # entry id -> what the person puts back: the element the generator broke and its real amount
    for c in broken.ground_truth:
        if c.kind != NA_AMOUNT or c.masked_by:
            raise RuntimeError(f"unexpected corruption in the replay corpus: {c.kind} ({c.masked_by})")
        fixes[c.entry_id] = {"element": c.facts["element"], "original": c.facts["original"]}
    fixed_pages = corrected_pages(broken, fixes, tmp / "fixed")
    return {
        "cores": cfg.cores,
        "repeats": cfg.repeats,
        "fresh_lake": cfg.fresh_lake,
        "fixes": fixes,
        "work": str(tmp / "work"),
        "broken_template": str(land_template(broken.files, tmp / "bronze-broken", _DATASET)),
        "fixed_template": str(land_template(fixed_pages, tmp / "bronze-fixed", _DATASET)),
        "corpus": {
            **{k: v for k, v in corpus_facts(broken).items() if k in ("pages", "entries", "tombstones", "bytes")},
            "broken": len(fixes),
            "fixed_pages": len(fixed_pages),
            "fixed_bytes": sum(p.stat().st_size for p in fixed_pages),
            "preparation_seconds": time.perf_counter() - t,
        },
    }


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


# -- child ----------------------------------------------------------------------------------------
def _timed_run(fn: Callable[[], Any], spark: Any, lake: Path, tree: ProcessTree) -> dict[str, Any]:
    """One timed run (`_common.measure_tree`) and the Delta commits it made, with their MERGE times."""
    since = delta_versions(spark, lake)
    summary, measured = measure_tree(fn, tree)
    commits = delta_commits(spark, lake, since)
    if isinstance(summary, dict):  # the counts stay; entry id lists and paths do not
        summary = {k: v for k, v in summary.items() if k not in ("recovered_entries", "summary_file")}
    # MERGEs of different tables run at once: the time they took is the union of their spans.
    silver = merge_wall_seconds([c for c in commits if c["table"] in SILVER_TABLES])
    walls = {"silver_merge_wall_s": silver, "merge_wall_s": merge_wall_seconds(commits)}
    commit_names = [(c["table"], c["operation"]) for c in commits]
    return measured | walls | {"merges": merge_seconds(commits), "commits": commit_names, "summary": summary}


def fix_dead_letters(spark: Any, lake: Path, fixes: dict[str, dict[str, str]]) -> int:
    """The person's fix, in bulk: each broken record's `raw_record` replaced by the corrected XML and
    `status = 'fixed'`, one MERGE on `dead_letter_id` (the dataset in the condition: one partition)."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

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

    ids = F.broadcast(spark.createDataFrame([(i,) for i in entry_ids], "entry_id string"))
    out = {}
    for table in _COMPARED:
        df = spark.read.format("delta").load(str(table_path(lake, table))).join(ids, "entry_id")
        row = hash_all(df.select(*[f"`{c}`" for c in sorted(df.columns) if c not in _LINEAGE]))
        out[table] = [int(row["n"]), int(row["h"] or 0)]
    return out


def replay_vs_ingest(spark: Any, p: dict[str, Any]) -> dict[str, Any]:
    """Steps 1-4 of the module doc on `spark`. Every lake is its own folder under `p['work']` (Delta
    caches table state by path), removed once measured."""
    work = Path(p["work"])
    fixes: dict[str, dict[str, str]] = p["fixes"]
    n = len(fixes)

    def ingest(lake: Path, manifest: Path, run_id: str, engine: str = "spark+delta-rs") -> dict[str, Any]:
        """The Spark job's ingest: parsed on Spark, written by delta-rs, as the Spark job's default engine
        writes a batch this size, and as the replay writes its recovered records."""
        from placsp_provider.datasets import get_dataset  # imported in the first timed run that needs it
        from placsp_provider.ingest.request import IngestRequest
        from placsp_provider.ingest.run import ingest as run_ingest

        request = IngestRequest(get_dataset(_DATASET), lake, run_id, manifests=(manifest,))
        return dict(run_ingest(request, engine, spark=spark))

    def replay(lake: Path, run_id: str) -> dict[str, Any]:
        from placsp_provider.spark.replay_job import ReplayRequest, run_replay

        request = ReplayRequest(_DATASET, lake, run_id, error_types=(_ERROR_TYPE,), max_records=max(n, 1))
        return run_replay(spark, request)

    tree = ProcessTree()
    out: dict[str, Any] = {"broken": n}
    base = work / "base"
    (manifest,) = link_lake(Path(p["broken_template"]), base)
    runs: dict[str, list[dict[str, Any]]] = {"replay": [], "noop": [], "ingest_same": [], "ingest_fresh": []}
    order = abba(p["repeats"], "replay", "ingest_same")
    if p["fresh_lake"]:
        order.insert(len(order) // 2, "ingest_fresh")
    lakes: dict[str, Path] = {}
    # The JVM's first Delta work (context): Spark's MERGEs, which also warm the session for the rest.
    out["broken_ingest"] = _timed_run(lambda: ingest(base, manifest, "bench-broken", "spark"), spark, base, tree)
    out["fix"] = _timed_run(lambda: fix_dead_letters(spark, base, fixes), spark, base, tree)
    out["silver_before"] = spark.read.format("delta").load(str(base / "silver" / "entries")).count()
    for i, what in enumerate(order):
        lake = work / f"{what}-{i}"
        if what != "ingest_fresh":
            shutil.copytree(base, lake)  # a real copy: runs rewrite Delta files, the template must stay
        if what == "replay":
            runs["replay"].append(_timed_run(partial(replay, lake, f"bench-replay-{i}"), spark, lake, tree))
            runs["noop"].append(_timed_run(partial(replay, lake, f"bench-replay-{i}-again"), spark, lake, tree))
        else:
            (fixed,) = link_lake(Path(p["fixed_template"]), lake, _FIXED_MANIFEST)
            runs[what].append(_timed_run(partial(ingest, lake, fixed, f"bench-{what}-{i}"), spark, lake, tree))
        if what in lakes:
            shutil.rmtree(lakes[what], ignore_errors=True)
        lakes[what] = lake
    out.update(runs, order=order)
    out["checksums"] = {what: silver_checksums(spark, lake, sorted(fixes)) for what, lake in lakes.items()}
    _check(out)
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
    spark = spark_session("placsp-bench-replay", p["cores"])
    try:
        return replay_vs_ingest(spark, p)
    finally:
        spark.stop()


# -- report ---------------------------------------------------------------------------------------
GOAL = 1.0  # issue 15: the replay at least as fast as an ingest of the same records into the same lake


def report(raw: dict[str, Any], seconds: float) -> BenchResult:
    cfg, c, ms = raw["config"], raw["corpus"], raw["measures"]
    n = ms["broken"]
    best = {key: min(ms[key], key=lambda r: r["seconds"]) for key in ("replay", "noop", "ingest_same", "ingest_fresh")
            if ms[key]}  # fmt: skip
    same = best["ingest_same"]["seconds"]

    def row(label: str, run: dict[str, Any] | None, vs: bool = False) -> list[list[str]]:
        if run is None:
            return []
        ratio = f"{same / run['seconds']:.2f}x" if vs else ""
        return [[label, f2(run["seconds"]), ratio, f2(run["cpu_s"]), f1(run["tree"]["peak_total_mb"])]]

    rows = [
        *row(f"`run_replay` of the {n:,} fixed dead letters", best["replay"], True),
        *row("`ingest` of the same records into a copy of the same lake", best["ingest_same"], True),
        *row("`ingest` of the same pages into a fresh lake", best.get("ingest_fresh"), True),
        *row("`run_replay` again (selects nothing)", best["noop"]),
        *row("context: ingest of the broken pages, the JVM's first Delta work", ms["broken_ingest"]),
        *row(f"context: the bulk fix, one MERGE over {n:,} dead letters", ms["fix"]),
    ]
    replay = best["replay"]
    merges = replay["merges"]
    silver = replay["silver_merge_wall_s"]  # MERGEs of different tables run at once: the union of their spans
    silver_merges = sum(t in SILVER_TABLES for t, _ in merges)
    status = sum(sec for t, sec in merges if t == "dead_letters")
    runs = {k: " / ".join(f2(r["seconds"]) for r in ms[k]) for k in ("replay", "ingest_same")}
    ratio = same / replay["seconds"]
    what = "dead-letter replay vs an ingest of the same records into the same lake"
    goal = Goal(what, f">= {GOAL:.1f}x", f"{ratio:.2f}x", ratio >= GOAL)
    return BenchResult(
        NAME,
        TITLE,
        f"{c['pages']} generated pages (`{_DATASET}`), {c['entries']:,} entries + {c['tombstones']:,} tombstones in "
        f"{c['bytes'] / MB:,.1f} MB; {n:,} entries have an amount `N/A`: dead letters, fixed in bulk by one MERGE. "
        f"The ingest compared with: the same corrected records as {c['fixed_pages']} pages "
        f"({c['fixed_bytes'] / MB:,.1f} MB). One SparkSession (`local[{cfg['cores']}]`), best of {cfg['repeats']}.",
        [Table(["run", "seconds", "vs same-lake ingest", "CPU s", "peak RSS MB (tree)"], rows)],
        raw,
        seconds,
        goals=[goal],
        figures=[
            f"Every run: replay {runs['replay']} s, same-lake ingest {runs['ingest_same']} s (ABBA); at ~1 s a run the "
            "ratio moves between runs.",
            f"Replay time: Silver MERGEs ({silver_merges}, by delta-rs) {f2(silver)} s, the "
            f"status MERGE (delta-rs) {f2(status)} s, the rest (selection, parse, counts) "
            f"{f2(replay['seconds'] - replay['merge_wall_s'])} s "
            "([0030](decisions/0030-replay-status-update-by-delta-rs.md), "
            "[0033](decisions/0033-replay-selection-by-delta-rs.md)).",
            f"Checked by the run: all {n:,} recovered, conservation balanced, the replay's Silver rows equal the "
            "ingests' (count and xxhash64 over every column but lineage).",
        ],
    )


if __name__ == "__main__":
    child_main(globals())
