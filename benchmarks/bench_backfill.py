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

Goals: reference / ingest >= 0.5x; peak RSS <= 2,048 MB. The other half of the item: the same batch
ingested once more on a Spark standalone cluster of one worker (the system test's shape: the pip
pyspark's `spark-class` Master and Worker, on loopback), with the engine `auto` takes when the Spark
connection is a cluster, must leave Silver identical to the first local round's (a checksum of every
table's sorted rows, clocks aside).

    python -m benchmarks.run --only backfill [--quick]
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks._common import (
    REPO,
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


# Columns that differ between any two runs of the same batch.
CLOCKS = frozenset({"_ingested_at", "ingested_at", "processing_timestamp", "last_attempt_at", "replayed_at"})


def checksums(lake: Path) -> dict[str, str]:
    """sha256 of every lake table's rows sorted by their keys, clocks aside: equal for the same rows,
    whatever the files, the row order or the engine's string type."""
    import hashlib

    from deltalake import DeltaTable

    from placsp_provider.ingest.tables import table_schema
    from placsp_provider.lake import LAKE_TABLES, table_path
    from placsp_provider.parser.silver_schema import BUSINESS_KEYS

    keys = {**BUSINESS_KEYS, "dead_letters": ("dead_letter_id",), "reconciliation": ("dataset", "source_file")}
    out = {}
    for table in LAKE_TABLES:
        schema = table_schema(table)
        rows = DeltaTable(str(table_path(lake, table))).to_pyarrow_table().select(schema.names).cast(schema)
        rows = rows.drop_columns([c for c in rows.column_names if c in CLOCKS])
        rows = rows.sort_by([(k, "ascending") for k in keys[table]])
        digest = hashlib.sha256()
        for batch in rows.to_batches(max_chunksize=20_000):
            for row in batch.to_pylist():
                digest.update(json.dumps(row, sort_keys=True, default=str).encode())
        out[table] = digest.hexdigest()
    return out


@contextmanager
def standalone_cluster(work: Path) -> Iterator[tuple[str, str]]:
    """A Spark standalone master and one worker (2 cores) on loopback; the master's URL and its state's
    (JSON)."""
    import socket
    import urllib.request

    import pyspark

    spark_home = Path(pyspark.__file__).resolve().parent
    ports = []
    for _ in range(3):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            ports.append(probe.getsockname()[1])
    master_port, master_ui, worker_ui = ports
    url = f"spark://127.0.0.1:{master_port}"
    env = {**os.environ, "SPARK_HOME": str(spark_home), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    env["SPARK_LOG_DIR"] = str(work / "logs")
    spark_class = str(spark_home / "bin" / "spark-class")
    commands = [
        [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(master_port)],
        [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "2"],
    ]
    commands[0] += ["--webui-port", str(master_ui)]
    commands[1] += ["--memory", "4g", "--webui-port", str(worker_ui), "--work-dir", str(work / "worker")]
    work.mkdir(parents=True, exist_ok=True)
    services = []
    try:
        for i, command in enumerate(commands):
            log = (work / f"service-{i}.log").open("wb")
            services.append(
                subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            )
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{master_ui}/json/", timeout=5) as answer:
                    if json.load(answer).get("aliveworkers", 0) >= 1:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the standalone cluster did not start: see {work}")
            time.sleep(1)
        yield url, f"http://127.0.0.1:{master_ui}/json/"
    finally:
        for service in services:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(service.pid, signal.SIGTERM)
        for service in services:
            try:
                service.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(service.pid, signal.SIGKILL)


def cluster_ingest(template: Path, lake: Path, work: Path) -> dict[str, Any]:
    """The batch ingested once by a driver here on a standalone cluster: its seconds, engine, checksums."""
    shutil.rmtree(lake, ignore_errors=True)
    link_lake(template, lake)
    import urllib.request

    with standalone_cluster(work) as (master, state):
        wait_for_quiet(20)
        started = time.perf_counter()
        done = run_child("benchmarks.bench_backfill", {"task": "cluster", "master": master, "lake": str(lake)})
        seconds = time.perf_counter() - started
        with urllib.request.urlopen(state, timeout=10) as answer:
            apps = [a["name"] for a in json.load(answer).get("completedapps", [])]
        assert apps == ["placsp-backfill-cluster"], f"the ingest did not run on the cluster: {apps}"
    return {"seconds": seconds, "engine": done["engine"], "rows": table_rows(lake), "checksums": checksums(lake)}


def _child_cluster(p: dict[str, Any]) -> dict[str, Any]:
    """One ingest whose Spark session is on the cluster at `p["master"]`, with the engine `auto` takes
    for a Spark cluster (the operator's choice, `spark_cluster`)."""
    from pyspark.sql import SparkSession

    from placsp_provider.datasets import get_dataset
    from placsp_provider.ingest.engines import choose_engine
    from placsp_provider.ingest.request import IngestRequest
    from placsp_provider.ingest.run import ingest
    from placsp_provider.lake_storage import lake_path
    from placsp_provider.spark.jars import ensure_jars, spark_env
    from placsp_provider.spark.session import DELTA_CONF, driver_conf

    for key, value in spark_env().items():  # executors run this same interpreter
        os.environ.setdefault(key, value)
    conf = {**DELTA_CONF, **driver_conf(), "spark.master": p["master"], "spark.ui.enabled": "false"}
    conf["spark.jars"] = ",".join(str(j) for j in ensure_jars())
    spark = SparkSession.builder.appName("placsp-backfill-cluster").config(map=conf).getOrCreate()
    request = IngestRequest(get_dataset(DATASET), lake_path(p["lake"]), "bench-backfill")
    engine = choose_engine(request, spark_cluster=lambda: True)
    summary = ingest(request, engine, spark=spark)
    assert summary["conservation"]["balanced"], summary["conservation"]
    spark.stop()
    return {"engine": engine}


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
        local = checksums(tmp / "lake")  # the last round's: every round's tables are equal (below)
        cluster = cluster_ingest(template, tmp / "lake", tmp / "cluster")
        print(f"  on the standalone cluster {cluster['seconds']:.1f} s, engine {cluster['engine']}", flush=True)
    for r in ingests:
        assert r["rows"] == ingests[0]["rows"], f"two ingests of the same pages left different tables: {r['rows']}"
    assert ingests[0]["rows"]["entries"] == ingests[0]["rows"]["distinct entry ids"] == len(generated), (
        ingests[0]["rows"],
        len(generated),
    )
    cluster["identical"] = cluster["checksums"] == local
    return _result(ingests, references, cluster, pages, megabytes, time.perf_counter() - started)


def _result(
    ingests: list[dict[str, Any]],
    references: list[float],
    cluster: dict[str, Any],
    pages: int,
    megabytes: float,
    seconds: float,
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
        Goal(
            "the same pages on a Spark standalone cluster (one worker): Silver vs the local run",
            "identical",
            "identical" if cluster["identical"] else "differs",
            cluster["identical"],
        ),
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
        f"standalone cluster (one worker, 2 cores): {f2(cluster['seconds'])} s, engine {cluster['engine']} "
        f"(`auto`'s with a cluster); every table's checksum {'equal to' if cluster['identical'] else 'DIFFERENT from'} "
        "the local run's",
    ]
    summary = (
        f"{pages} real-shaped daily pages ({megabytes:,.0f} MB) ingested by one `placsp ingest` (its engine's choice) "
        "into a fresh lake, against the single-core lxml reference over the same pages; fresh processes, ABBA "
        "rounds, medians; then once on a Spark standalone cluster."
    )
    raw = {"ingests": ingests, "references": references, "cluster": cluster, "pages": pages, "megabytes": megabytes}
    return BenchResult(NAME, TITLE, summary, [table], raw, seconds, goals, figures)


if __name__ == "__main__":
    child_main(globals())
