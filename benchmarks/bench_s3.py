"""S3 benchmark: the same Silver ingest on an S3 lake and on local disk, as a ratio measured in one run.

The S3 lake is served by a real SeaweedFS server on 127.0.0.1 (`tests/s3/seaweedfs.py`: the binary built
once into `.cache/seaweedfs`), started by the benchmark with a data folder next to the local lakes (the
same disk). Three sizes:

- daily: the real bundled `agregadas` page of 2022-01-06 (476 entries, 24 tombstones, 3 MB; the demo
  site's head page, what `placsp_daily` ingests for that dataset) into a lake that holds the day before
  (the real page of 2022-01-05);
- daily, aged lake: the same page into a lake that also holds 30 earlier days (small generated
  `agregadas` pages, one ingest each: one commit and one data file per table and day, no checkpoint,
  no compaction: what a month looks like before the weekly table maintenance compacts it);
- batch: 20 `benchmarks.pagegen` pages of 500 items (~470 MB, the Silver benchmark's corpus) into a
  fresh lake.

A size's template is a local lake: its Bronze pages and manifests, and the tables of its earlier days
(ingested once by delta-rs, not timed). Each run gets a fresh copy, not timed: on disk, hard links
(`_lake.link_lake`; JSON files copied); on S3, the same files uploaded with obstore under the same keys.
A fresh child process then imports the ingest's modules and times `ingest.run.ingest` of the day's
manifest, with the same engine on both sides (`--engine`, default `delta-rs`; `auto` gives a large
batch `spark+delta-rs`, on S3 as on disk). Memory: the child's peak RSS (`VmHWM`, reset before the ingest); with a Spark
engine, its whole process tree (`_common.ProcessTree`). The server's CPU during each S3 run is read
from /proc: on a real bucket that work is another machine's.

The two sides run in ABBA order (local, s3, s3, local, ...), `rounds` runs each; the ratio of a size is
the median of its rounds (the i-th S3 run over the i-th local one; decision 0016).

Every run is checked before it counts, from the tables read back (not the run's summary): each
table's rows and a checksum of every value but the clock columns (DuckDB's hash of each row, XORed)
must equal those of every other run of the same size, on either side, and every entry id and
tombstone of the timed pages (read by a plain lxml pass over the page files) must be in `entries` or
`dead_letters` and in `tombstones`. In a full run, the batch's row counts must equal
`benchmarks/silver_contents.json` (the Silver benchmark's record of the same corpus ingested by Spark).
Where an S3 run's time goes, request by request: `benchmarks/s3_requests.py`.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import statistics
import tempfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks._common import (
    MB,
    OUT,
    BenchResult,
    Goal,
    ProcessTree,
    Table,
    abba,
    child_main,
    f1,
    f2,
    run_child,
    wait_for_quiet,
)
from benchmarks._lake import CLOCK_COLUMNS, link_lake, spark_session
from benchmarks.bench_silver import CONTENTS
from benchmarks.bench_silver import SEED as SILVER_SEED
from benchmarks.pagegen import generate_corpus
from placsp_provider.lake import LAKE_TABLES, manifests_dir

NAME = "s3"
TITLE = "Silver ingest on an S3 lake vs local disk (same engine)"
DELTA_RS = "delta-rs"
TARGET = 1.5  # issue 33: S3 within 1.5x of local disk, both sizes
_BUCKET = "placsp-bench"
_DAILY_DATASET = "agregadas"
_DAILY_ZIP = "1044_agregadas/PlataformasAgregadasSinMenores_202201_05-06.zip"
_DAILY_BEFORE = "PlataformasAgregadasSinMenores_20220105_030012.atom"  # the day before, in the lake already
_DAILY_PAGE = "PlataformasAgregadasSinMenores_20220106_030013.atom"  # the timed day
_BATCH_DATASET, _BATCH_POOL = "licitaciones", "643"  # the Silver benchmark's corpus (silver_contents.json)
_SIDES = ("local", "s3")
_LABELS = {"daily": "daily", "daily_aged": "daily, aged lake", "batch": "batch"}
PROFILE_ENV = "PLACSP_BENCH_PROFILE"  # a folder: each timed ingest's cProfile stats go there (slows it down)


@dataclass(frozen=True)
class Config:
    batch_pages: int = 20
    items_per_page: int = 500
    aged_days: int = 30  # earlier days of the aged lake, one ingest each
    rounds: int = 5  # runs of each side per size, ABBA order; the ratio is the median round
    cores: int = 2  # Spark's `local[cores]`, with a Spark engine
    quiet_wait_s: float = 30.0  # before each run, wait up to this long for the rest of the machine to idle


FULL = Config()
QUICK = Config(batch_pages=2, items_per_page=20, aged_days=2, rounds=1, quiet_wait_s=0.0)


@dataclass(frozen=True)
class Size:
    """One size of the benchmark: a landed template and what a run ingests from it."""

    name: str
    dataset: str
    template: Path  # a local lake: Bronze pages and manifests, and the tables of the earlier days if any
    manifest: str  # run_id of the timed manifest (`<run_id>.json`)
    pages: int
    bytes: int
    expected: dict[str, list[str]]  # entry ids and tombstone refs of the timed pages (plain lxml pass)
    what: str


# -- parent ---------------------------------------------------------------------------------------
def run(quick: bool = False, engine: str = DELTA_RS) -> BenchResult:
    cfg = QUICK if quick else FULL
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="placsp-bench-s3-") as tmp_name:
        tmp = Path(tmp_name)
        sizes = [_daily(tmp), _daily(tmp, "daily_aged", cfg.aged_days), _batch(tmp, cfg)]
        with s3_environment(tmp / "seaweedfs") as server:
            measures = {s.name: _measure_size(cfg, s, engine, tmp, server) for s in sizes}
    raw: dict[str, Any] = {"config": cfg.__dict__, "quick": quick, "engine": engine, "measures": measures}
    raw["sizes"] = {s.name: {"pages": s.pages, "bytes": s.bytes, "what": s.what} for s in sizes}
    # Kept before anything below can fail (a contents mismatch): minutes of measurements.
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"s3-measures{'-quick' if quick else ''}.json").write_text(json.dumps(raw, indent=2, default=str))
    raw["contents"] = {s.name: check_contents(s.name, measures[s.name]["runs"]) for s in sizes}
    if not quick:
        raw["contents"]["batch"]["record"] = _check_record(raw["contents"]["batch"]["tables"], cfg)
    return report(raw, time.perf_counter() - started)


@contextlib.contextmanager
def s3_environment(data: Path) -> Iterator[Any]:
    """A SeaweedFS server and the `AWS_*` environment every child inherits (a secret of this run's own;
    it is never printed and the environment is restored at the end)."""
    from tests.s3 import seaweedfs

    server = seaweedfs.start(data)
    env = {
        "AWS_ACCESS_KEY_ID": "placsp-bench",
        "AWS_SECRET_ACCESS_KEY": f"bench-{secrets.token_hex(12)}",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": server.endpoint,
        "AWS_ALLOW_HTTP": "true",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        server.create_bucket(_BUCKET)
        yield server
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


def _daily(tmp: Path, name: str = "daily", earlier_days: int = 0) -> Size:
    """The real pages of 2022-01-05 and -06: the template's lake holds the first (and `earlier_days`
    small generated days before it), ingested; the second is the run's."""
    from placsp_provider.demo.samples import land_pages, samples_dir

    folder = tmp / f"{name}-pages"
    folder.mkdir()
    with zipfile.ZipFile(samples_dir() / _DAILY_ZIP) as z:
        for page_name in (_DAILY_BEFORE, _DAILY_PAGE):
            (folder / page_name).write_bytes(z.read(page_name))
    template = tmp / f"template-{name}"
    earlier = []
    if earlier_days:
        corpus = generate_corpus(
            folder / "earlier",
            pages=earlier_days,
            items_per_page=20,
            seed=SILVER_SEED,
            dataset_key=_DAILY_DATASET,
            newest=datetime(2022, 1, 4, 3, tzinfo=UTC),
        )
        for i, page in enumerate(reversed(corpus.files)):  # oldest first, a manifest (a day) each
            earlier.append(land_pages(template, _DAILY_DATASET, [page], f"earlier-{i:03d}", link=True))
    earlier.append(land_pages(template, _DAILY_DATASET, [folder / _DAILY_BEFORE], "before", link=True))
    land_pages(template, _DAILY_DATASET, [folder / _DAILY_PAGE], "day", link=True)
    _ingest_earlier(template, _DAILY_DATASET, earlier)
    page = folder / _DAILY_PAGE
    what = f"the real `{_DAILY_DATASET}` page {page.stem[-15:-7]} into a lake holding the day before"
    if earlier_days:
        what = f"the same page, the lake holding {earlier_days} more earlier days (a commit and a file per table a day)"
    return Size(name, _DAILY_DATASET, template, "day", 1, page.stat().st_size, expected_ids([page]), what)


def _ingest_earlier(template: Path, dataset: str, manifests: list[Path]) -> None:
    """The earlier days into the template's lake, one ingest (one commit per table) each, by delta-rs."""
    from placsp_provider.datasets import get_dataset
    from placsp_provider.ingest.request import IngestRequest
    from placsp_provider.ingest.run import ingest

    for manifest in manifests:
        ingest(IngestRequest(get_dataset(dataset), template, "earlier", manifests=(manifest,)), DELTA_RS)


def _batch(tmp: Path, cfg: Config) -> Size:
    from placsp_provider.demo.samples import land_pages

    corpus = generate_corpus(
        tmp / "batch-pages",
        pages=cfg.batch_pages,
        items_per_page=cfg.items_per_page,
        seed=SILVER_SEED,
        dataset_key=_BATCH_DATASET,
        entry_pool=_BATCH_POOL,
    )
    template = tmp / "template-batch"
    land_pages(template, _BATCH_DATASET, corpus.files, "batch", link=True)
    what = f"{cfg.batch_pages} generated `{_BATCH_DATASET}` pages of {cfg.items_per_page} items into a fresh lake"
    return Size(
        "batch", _BATCH_DATASET, template, "batch", cfg.batch_pages, corpus.bytes, expected_ids(corpus.files), what
    )


def expected_ids(files: list[Path]) -> dict[str, list[str]]:
    """Entry ids and tombstone refs of `files` by a plain lxml pass: what the tables must hold, found
    without the provider's parser."""
    from placsp_provider.feed.xml import DELETED_ENTRY_TAG, ENTRY_TAG, iterparse
    from placsp_provider.parser.entry_fields import A

    entries, tombstones = set(), set()
    for path in files:
        for _, elem in iterparse(str(path), events=("end",), tag=(ENTRY_TAG, DELETED_ENTRY_TAG)):
            if elem.tag == DELETED_ENTRY_TAG:
                tombstones.add(elem.get("ref"))
            else:
                entries.add(elem.findtext(A["id"]))
            elem.clear()
    return {"entries": sorted(e for e in entries if e), "tombstones": sorted(t for t in tombstones if t)}


def _measure_size(cfg: Config, size: Size, engine: str, tmp: Path, server: Any) -> dict[str, Any]:
    ids_file = tmp / f"{size.name}-ids.json"
    ids_file.write_text(json.dumps(size.expected))
    order = abba(cfg.rounds, *_SIDES)
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in _SIDES}
    for i, side in enumerate(order):
        lake = _lay_lake(size, side, tmp, f"{size.name}-{i}")
        payload = {"lake": lake, "dataset": size.dataset, "engine": engine, "cores": cfg.cores}
        waited, busy = wait_for_quiet(cfg.quiet_wait_s)
        cpu0 = _process_cpu(server.process.pid)
        got = run_child(
            __name__,
            {"task": "ingest", **payload, "manifest": size.manifest, "check": True, "ids": str(ids_file)},
            timeout=3600,
            measure=True,
        )
        got["server_cpu_s"] = _process_cpu(server.process.pid) - cpu0 if side == "s3" else 0.0
        got["quiet_wait"] = {"waited_s": waited, "other_cores_before": busy}
        _drop_lake(lake)
        missing = {k: v for k, v in got["missing"].items() if v}
        if missing:
            raise RuntimeError(f"{size.name} on {side}: ids of the timed pages missing from the tables: {missing}")
        runs[side].append(got)
        other = got["other_load"]
        noise = max(other["other_cpu_s"] - got["server_cpu_s"], 0.0) / other["wall_s"]
        print(
            f"  {size.name} {side}: ingest {got['seconds']:.2f} s, peak RSS {f1(peak(got))} MB; "
            f"other processes used {noise:.2f} cores",
            flush=True,
        )
    return {"order": order, "runs": runs}


def _lay_lake(size: Size, side: str, tmp: Path, key: str) -> str:
    """A fresh copy of the template's lake: hard links on disk (JSON files copied: nothing a run writes
    reaches the template), or the same files uploaded under the same keys to the bucket. Returns the
    lake's root as `ingest` takes it."""
    if side == "local":
        link_lake(size.template, tmp / "lakes" / key)
        return str(tmp / "lakes" / key)
    import obstore

    store = _store()
    for path in sorted(size.template.rglob("*")):
        if path.is_file():
            obstore.put(store, f"{key}/{path.relative_to(size.template)}", path)
    return f"s3://{_BUCKET}/{key}"


def _drop_lake(lake: str) -> None:
    if not lake.startswith("s3://"):
        shutil.rmtree(lake)
        return
    import obstore

    store, prefix = _store(), lake.removeprefix(f"s3://{_BUCKET}/")
    keys = [meta["path"] for batch in obstore.list(store, prefix=prefix + "/") for meta in batch]
    for start in range(0, len(keys), 500):
        obstore.delete(store, keys[start : start + 500])


def _store() -> Any:
    from obstore.store import S3Store

    return S3Store(_BUCKET)  # from the AWS_* environment of `s3_environment`


def _process_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak(run: dict[str, Any]) -> float:
    """A run's peak RSS in MB: the ingest process's `VmHWM` (exact) when it is the only process, else
    the sampled peak of its process tree (driver, JVM, Python workers)."""
    tree = run["tree"]
    if tree["jvm_hwm_mb"] or tree["workers"]:
        return float(tree["peak_total_mb"])
    return float(run["hwm_mb"])


def check_contents(size: str, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Every run of a size, on either side, wrote the same tables (rows and checksums read back from the
    lake); an empty entries table counts as a failure. Returns the contents."""
    first = runs["local"][0]["contents"]
    for side, side_runs in runs.items():
        for i, got in enumerate(side_runs):
            if got["contents"] != first:
                diff = {t: (first.get(t), v) for t, v in got["contents"].items() if first.get(t) != v}
                raise RuntimeError(
                    f"{size}: the {side} lake of run {i + 1} holds other rows than the first local lake: {diff}"
                )
    if not first.get("entries", {}).get("rows"):
        raise RuntimeError(f"{size}: the entries table is empty after the ingest: nothing was measured")
    return {"tables": first, "verdict": f"equal in all {sum(map(len, runs.values()))} runs, local and S3"}


def _check_record(tables: dict[str, Any], cfg: Config) -> str:
    """The batch's row counts against the Silver benchmark's record of the same corpus (Spark's ingest)."""
    record = json.loads(CONTENTS.read_text())
    corpus = record["corpus"]
    if (corpus["pages"], corpus["items"], corpus["seed"]) != (cfg.batch_pages, cfg.items_per_page, SILVER_SEED):
        return f"not compared: {CONTENTS.name} was recorded for another corpus"
    want = {t: v["rows"] for t, v in record["tables"].items()}
    got = {t: v["rows"] for t, v in tables.items() if t in want}
    if got != want:
        raise RuntimeError(f"batch: rows by table {got} differ from {CONTENTS.name}'s {want} (Spark's ingest)")
    return f"rows equal {CONTENTS.name}'s (Spark's ingest of the same corpus, recorded {record['recorded']})"


# -- report ---------------------------------------------------------------------------------------
def rounds(runs: dict[str, list[dict[str, Any]]]) -> list[float]:
    """S3 seconds over local seconds, round by round (the i-th run of each side)."""
    return [s["seconds"] / loc["seconds"] for loc, s in zip(runs["local"], runs["s3"], strict=True)]


def report(raw: dict[str, Any], seconds: float) -> BenchResult:
    ms, sizes, cfg = raw["measures"], raw["sizes"], raw["config"]
    rows, goals, figures = [], [], []
    for name, m in ms.items():
        runs = m["runs"]
        ratios = rounds(runs)
        ratio = statistics.median(ratios)
        shown = f"{ratio:.2f}x" + (f" (rounds {min(ratios):.2f}x–{max(ratios):.2f}x)" if len(ratios) > 1 else "")
        goals.append(Goal(f"{_LABELS[name]}: S3 / local disk, ingest time", f"<= {TARGET}x", shown, ratio <= TARGET))
        size = sizes[name]
        med = {side: statistics.median(r["seconds"] for r in runs[side]) for side in _SIDES}
        mem = {side: max(peak(r) for r in runs[side]) for side in _SIDES}
        cpu = {side: statistics.median(r["cpu_s"] for r in runs[side]) for side in _SIDES}
        server = statistics.median(r["server_cpu_s"] for r in runs["s3"])
        rows.append(
            [
                f"{_LABELS[name]}: {size['what']} ({size['pages']} pages, {size['bytes'] / MB:,.1f} MB)",
                f2(med["local"]),
                f2(med["s3"]),
                f"{ratio:.2f}x",
                f"{f2(cpu['local'])} / {f2(cpu['s3'])} + {f2(server)}",
                f"{f1(mem['local'])} / {f1(mem['s3'])}",
            ]
        )
        tables = ", ".join(f"{t} {v['rows']:,}" for t, v in raw["contents"][name]["tables"].items())
        record = raw["contents"][name].get("record")
        figures.append(
            f"{_LABELS[name]}: seconds local {', '.join(f2(r['seconds']) for r in runs['local'])}; S3 "
            f"{', '.join(f2(r['seconds']) for r in runs['s3'])} (order {''.join(s[0] for s in m['order'])}). "
            f"Tables ({tables} rows) {raw['contents'][name]['verdict']}" + (f"; {record}" if record else "") + "."
        )
    table = Table(
        [
            "size",
            "local s (median)",
            "S3 s (median)",
            "S3 / local (median round)",
            "CPU s local / S3 + server",
            "peak RSS MB local / S3",
        ],
        rows,
    )
    summary = (
        f"`ingest` (engine `{raw['engine']}` on both sides) of landed Bronze pages on a local lake and on an S3 lake "
        f"served by SeaweedFS on 127.0.0.1 (same disk, same 2 cores), {cfg['rounds']} fresh child processes a side "
        "per size in ABBA order; landing and uploads are not timed. Every run's tables are read back and compared "
        "(rows, checksums, the pages' ids). CPU: the ingest process, and the S3 server's during the S3 runs."
    )
    return BenchResult(NAME, TITLE, summary, [table], raw, seconds, goals, figures)


# -- child ----------------------------------------------------------------------------------------
def _child_ingest(p: dict[str, Any]) -> dict[str, Any]:
    """`ingest` of one manifest of the lake, timed; then (with `check`) the lake's tables read back."""
    # Imported before the clock, on both sides alike: what is timed is the ingest's own work.
    import deltalake  # noqa: F401
    import duckdb  # noqa: F401
    import obstore  # noqa: F401
    import pyarrow.dataset  # noqa: F401

    from placsp_provider.datasets import get_dataset
    from placsp_provider.ingest.engines import needs_spark
    from placsp_provider.ingest.request import IngestRequest
    from placsp_provider.ingest.run import ingest
    from placsp_provider.lake import resolve_lake

    ds = get_dataset(p["dataset"])
    lake = resolve_lake(p["lake"])
    request = IngestRequest(ds, lake, "bench", manifests=(manifests_dir(lake, ds.key) / f"{p['manifest']}.json",))
    spark = spark_session("placsp-bench-s3", p["cores"]) if needs_spark(p["engine"]) else None
    tree = ProcessTree(interval=0.2)
    tree.start()  # this process's VmHWM reset first: the peak is the ingest's
    profile = _profiler(p)
    t0 = time.perf_counter()
    summary = ingest(request, p["engine"], spark=spark)
    seconds = time.perf_counter() - t0
    if profile is not None:  # `$PLACSP_BENCH_PROFILE`: where the time went, for `pstats` (not for the ratio)
        profile.disable()
        profile.dump_stats(Path(os.environ[PROFILE_ENV]) / f"{p['manifest']}-{p['lake'].replace('/', '_')}.prof")
    tree.stop()
    out: dict[str, Any] = {"seconds": seconds, "cpu_s": tree.cpu_seconds(), "tree": tree.report()}
    out["hwm_mb"] = out["tree"]["driver_hwm_mb"]
    out["summary"] = {k: summary[k] for k in ("engine", "read", "silver", "files")}  # context, not the check
    if p["check"]:
        out["contents"] = lake_contents(lake)
        out["missing"] = missing_ids(lake, ds.key, json.loads(Path(p["ids"]).read_text()))
    if spark is not None:
        spark.stop()
    return out


def _profiler(p: dict[str, Any]) -> Any:
    """A started cProfile of the timed ingest when `$PLACSP_BENCH_PROFILE` names a folder, else None."""
    if not os.environ.get(PROFILE_ENV) or not p["check"]:
        return None
    import cProfile

    profile = cProfile.Profile()
    profile.enable()
    return profile


def lake_contents(lake: Any) -> dict[str, dict[str, Any]]:
    """Per table of the lake: rows, and an XOR of DuckDB's hash of each row over every column but the
    clock columns, read back through the project's readers (`table_files`: Arrow's own filesystem, so
    over S3 on an S3 lake): equal contents, equal checksums."""
    import duckdb

    from placsp_provider.table_files import with_string_views

    con = duckdb.connect()
    out = {}
    for table in LAKE_TABLES:
        files = _files(lake, table)
        con.register("t", _files(lake, table, schema=with_string_views(files.schema)))
        skip = ", ".join(f'"{c}"' for c in sorted(CLOCK_COLUMNS & set(files.schema.names)))
        columns = f"* EXCLUDE ({skip})" if skip else "*"
        ((rows, checksum),) = con.sql(f"SELECT count(*), bit_xor(hash(row(*COLUMNS({columns})))) FROM t").fetchall()
        out[table] = {"rows": rows, "checksum": f"{(checksum or 0) & (2**64 - 1):016x}"}
        con.unregister("t")
    con.close()
    return out


def missing_ids(lake: Any, dataset: str, expected: dict[str, list[str]]) -> dict[str, list[str]]:
    """The expected entry ids found neither in `entries` nor in `dead_letters`, and tombstone refs not in
    `tombstones` (at most 5 of each)."""

    def ids(table: str) -> set[str]:
        rows = _files(lake, table, pruning=[("dataset", "=", dataset)]).to_table(columns=["entry_id"])
        return set(rows.column("entry_id").to_pylist())

    found = ids("entries") | ids("dead_letters")
    return {
        "entries": sorted(set(expected["entries"]) - found)[:5],
        "tombstones": sorted(set(expected["tombstones"]) - ids("tombstones"))[:5],
    }


def _files(lake: Any, table: str, **options: Any) -> Any:
    """A table's current files as a pyarrow dataset, as the project's readers open them (`table_files`:
    never deltalake's own Python filesystem, which can abort the process at exit: decision 0029)."""
    from placsp_provider.lake import table_path
    from placsp_provider.lake_storage import open_table
    from placsp_provider.table_files import table_files

    return table_files(open_table(table_path(lake, table)), **options)


if __name__ == "__main__":
    child_main(globals())
