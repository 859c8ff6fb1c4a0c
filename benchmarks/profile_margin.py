"""Where the ingest's margin goes (issue 36; decision 0047): a study, not a `make bench` benchmark.

    PYTHONPATH=provider:. .venv/bin/python -m benchmarks.profile_margin            # 24 vs 48 pages, 2 rounds
    PYTHONPATH=provider:. .venv/bin/python -m benchmarks.profile_margin --pages 4 --rounds 1   # a smoke run

Real-shaped pages (`pagegen.REAL_SHAPE`), N and 2N of them, each ingested into a fresh lake by a fresh
process, as `bench_silver`'s marginal does; the margin of each part is its 2N-page time minus its
N-page time, medians over alternating rounds. Two engines:

- `auto`, what `placsp ingest` picks for these batches (a fresh lake under 512 MB: `spark+delta-rs`):
  Spark's tasks parse and stage, delta-rs writes from the driver. The driver is sampled (below); the
  tasks' own time comes from Spark's event log (`SparkListenerTaskEnd` metrics: run time, CPU, GC;
  stage submission to completion), Spark's own accounting, never a wrapper around provider code.
- `delta-rs` asked for by name: the same `stage_page` run in this one process, then the same writer,
  so the sampler sees every part of the parse (split, lxml, field extraction, Arrow, Parquet).

The sampler (a statistical profiler, no dependency): a SIGALRM every `--interval` s of wall time
reads the main thread's stack and puts the time since the last sample into the bucket of the innermost
frame that `_BUCKETS` names (`Sampler` says why not a sampling thread); threads of `side_by_side`
(the writer's MERGEs of different tables at once) are sampled too, per table, as a second view
(their time overlaps the main thread's wait). Sampling costs the measured process a few per cent;
shares, not seconds, are the result. Nothing in
`provider/` is wrapped or patched. Raw JSON: `benchmarks/out/profile-margin.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

from benchmarks._common import OUT, abba, child_main, run_child
from benchmarks._lake import land_template, link_lake
from benchmarks.pagegen import REAL_SHAPE, generate_corpus

_DATASET = "licitaciones"
SEED = 20251129

# (file name, function) or function -> bucket; the innermost frame of a sample that is named here decides.
_BUCKETS: dict[tuple[str, str] | str, str] = {
    # the parse side: `stage_page`, in this process (delta-rs engine) or in Spark's Python workers
    ("staging.py", "read_page"): "parse: read the page",
    ("page_split.py", "scan_page"): "parse: split the page into records (regex scan)",
    ("page_split.py", "wrap_record"): "parse: wrap each record (namespaces)",
    ("page_split.py", "tree_too_large"): "parse: wrap each record (namespaces)",
    ("page_parser.py", "_parse_one"): "parse: lxml tree of each record",
    ("validation.py", "has_replacement_characters"): "parse: lxml tree of each record",
    ("page_parser.py", "_route"): "field extraction (+ record digest)",
    ("entry_fields.py", "extract_entry"): "field extraction (+ record digest)",
    ("entry_fields.py", "extract_tombstone"): "field extraction (+ record digest)",
    ("page_parser.py", "parse_page_in_parts"): "parse: other (parts, counts)",
    ("staging.py", "table_batches"): "Arrow building (Python dicts -> record batches)",
    ("staging.py", "_write_staged"): "staging: Parquet encoding + write",
    ("staging.py", "stage_page"): "staging: other (versions, tally, concat)",
    ("engines.py", "stage"): "parse: other (parts, counts)",
    ("silver_job.py", "stage"): "Spark parse-and-stage (the driver waits on the tasks)",
    # the driver, whatever parsed
    ("session.py", "get_session"): "Spark session start",
    ("engines.py", "choose_engine"): "engine choice, manifests",
    ("request.py", "pages_to_ingest"): "engine choice, manifests",
    ("run.py", "prepare_tables"): "create the fresh lake's tables",
    ("tally.py", "tally_files"): "tally and plan",
    ("tally.py", "plan_batch"): "tally and plan",
    ("batch.py", "read_staged"): "write: read the staged Parquet back",
    ("batch.py", "kept"): "write: read the staged Parquet back",
    ("batch.py", "dead_letters"): "reconciliation: rows (dead letters, files)",
    ("batch.py", "reconciliation"): "reconciliation: rows (dead letters, files)",
    ("silver_write.py", "_open_side_by_side"): "write: open the Delta tables",
    ("silver_write.py", "_current"): "MERGE: read the versions Silver holds",
    ("silver_write.py", "_greatest"): "MERGE: newest wins within the batch",
    ("silver_write.py", "_merge_silver"): "MERGE/commit: Silver tables (entries, children, tombstones)",
    ("silver_write.py", "_write_batch"): "reconciliation: MERGE/commit (+ dead letters)",
    ("summary.py", "finish"): "run summary",
    ("staging.py", "run_staging"): "staging folder (create, remove)",
    ("run.py", "staged"): "staging folder (create, remove)",
}
# Functions a writer's side-by-side thread runs, per table (the second view).
_THREAD_STEPS = ("_insert_children", "_delete_older_children", "_insert_tombstones", "_apply_tombstones")


def _bucket(frame: FrameType | None) -> str:
    while frame is not None:
        code = frame.f_code
        name = _BUCKETS.get((os.path.basename(code.co_filename), code.co_name))
        if name is not None:
            return name
        frame = frame.f_back
    return "other (imports, Python start)"


def _thread_step(frame: FrameType | None) -> str | None:
    while frame is not None:
        if frame.f_code.co_name in _THREAD_STEPS:
            return f"{frame.f_code.co_name}({frame.f_locals.get('table', 'tombstones')})"
        frame = frame.f_back
    return None


class Sampler:
    """Every `interval` s of wall time (SIGALRM), the main thread's bucket (`_bucket`) and each lake
    thread's step, counted. A signal handler runs in the main thread between two bytecodes, so the
    time spent in C or Rust (lxml, pyarrow, delta-rs, a socket read from the JVM) goes to the Python
    frame that called it; a sampling thread would instead catch the main thread wherever it lets go
    of the GIL (lxml's parse, every record) and blame it for time it did not take."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.main: dict[str, float] = {}
        self.threads: dict[str, float] = {}
        self.started = self.stopped = self._last = 0.0
        self._previous: Any = None

    def _sample(self, signum: int, frame: FrameType | None) -> None:
        del signum
        now = time.perf_counter()
        elapsed, self._last = now - self._last, now
        bucket = _bucket(frame)
        self.main[bucket] = self.main.get(bucket, 0.0) + elapsed
        main_id = threading.main_thread().ident
        for ident, other in sys._current_frames().items():
            if ident != main_id and (step := _thread_step(other)) is not None:
                self.threads[step] = self.threads.get(step, 0.0) + elapsed

    def __enter__(self) -> Sampler:
        self.started = self._last = time.perf_counter()
        self._previous = signal.signal(signal.SIGALRM, self._sample)
        signal.setitimer(signal.ITIMER_REAL, self.interval, self.interval)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, self._previous)
        self.stopped = time.perf_counter()
        rest = self.stopped - self._last  # since the last sample
        self.main["other (imports, Python start)"] = self.main.get("other (imports, Python start)", 0.0) + rest


# -- parent ---------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Profile the real-shaped marginal ingest (issue 36).")
    parser.add_argument("--pages", type=int, default=48, help="2N real-shaped pages (default 48)")
    parser.add_argument("--rounds", type=int, default=2, help="ABBA rounds of each engine's pair (default 2)")
    parser.add_argument("--interval", type=float, default=0.002, help="sampling interval, s (default 0.002)")
    parser.add_argument("--engines", default="auto,delta-rs", help="comma-separated (default auto,delta-rs)")
    args = parser.parse_args(argv)
    out: dict[str, Any] = {"args": vars(args), "engines": {}}
    with tempfile.TemporaryDirectory(prefix="placsp-profile-margin-") as tmp_name:
        tmp = Path(tmp_name)
        corpus = generate_corpus(tmp / "pages", args.pages, seed=SEED, dataset_key=_DATASET, **REAL_SHAPE.options())
        half = len(corpus.files) // 2
        templates = {
            "half": land_template(corpus.files[:half], tmp / "bronze-half", _DATASET),
            "all": land_template(corpus.files, tmp / "bronze-all", _DATASET),
        }
        extra = [str(f) for f in corpus.files[half:]]
        out["corpus"] = {"pages": len(corpus.files), "entries": corpus.total_entries, "bytes": corpus.bytes}
        out["extra"] = {"pages": len(extra), "bytes": sum(p.bytes for p in corpus.pages[half:])}
        for engine in args.engines.split(","):
            runs: dict[str, list[dict[str, Any]]] = {"half": [], "all": [], "reference": []}
            for i, which in enumerate(abba(args.rounds, "half", "all")):
                lake = tmp / f"lake-{engine}-{which}-{i}"
                payload = {"task": "profiled_ingest", "template": str(templates[which]), "lake": str(lake)}
                payload |= {"engine": engine, "interval": args.interval, "event_log": str(tmp / f"events-{i}")}
                runs[which].append(run_child("benchmarks.profile_margin", payload))
                print(f"  {engine} {which}: {runs[which][-1]['process_s']:.2f} s", flush=True)
                if i % 2 == 1:  # the reference over the extra pages, in the same state of the machine
                    reference = {"task": "reference", "files": extra, "repeats": 3}
                    runs["reference"].append(run_child("benchmarks.bench_silver", reference))
            out["engines"][engine] = {"runs": runs, "margin": _margin(runs)}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "profile-margin.json").write_text(json.dumps(out, indent=2, default=str) + "\n")
    for engine, got in out["engines"].items():
        print(f"\n{engine}: {_describe(got['margin'])}\n{_table(got['margin'])}")
    print(f"\nraw JSON: {OUT / 'profile-margin.json'}")
    return 0


def _margin(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per bucket, the median over rounds of (2N-page seconds - N-page seconds); the same for the whole
    process, Spark's task metrics and the lake threads' steps; the reference's rounds."""

    def diff(get: Any) -> float:
        return statistics.median(get(a) - get(h) for h, a in zip(runs["half"], runs["all"], strict=True))

    keys = {k for r in runs["half"] + runs["all"] for k in r["buckets"]}
    buckets = {k: diff(lambda r, k=k: r["buckets"].get(k, 0.0)) for k in keys}
    threads = {k for r in runs["half"] + runs["all"] for k in r["threads"]}
    spark = {k for r in runs["half"] + runs["all"] for k in r.get("spark", {})}
    refs = [r["best_s"] for r in runs["reference"]]
    process = [a["process_s"] - h["process_s"] for h, a in zip(runs["half"], runs["all"], strict=True)]
    return {
        "process_s": statistics.median(process),
        "process_rounds_s": process,
        "reference_s": statistics.median(refs),
        "ratio_rounds": [ref / p if p > 0 else float("inf") for ref, p in zip(refs, process, strict=True)],
        "buckets": dict(sorted(buckets.items(), key=lambda kv: -kv[1])),
        "threads": {k: diff(lambda r, k=k: r["threads"].get(k, 0.0)) for k in sorted(threads)},
        "spark": {k: diff(lambda r, k=k: r.get("spark", {}).get(k, 0.0)) for k in sorted(spark)},
        "engine": runs["all"][0]["engine"],
    }


def _describe(m: dict[str, Any]) -> str:
    rounds = ", ".join(f"{x:.2f}x" for x in m["ratio_rounds"])
    return (
        f"engine {m['engine']}: margin {m['process_s']:.2f} s (rounds "
        f"{', '.join(f'{p:.2f}' for p in m['process_rounds_s'])}), reference {m['reference_s']:.2f} s; "
        f"ratio rounds {rounds}"
    )


def _table(m: dict[str, Any]) -> str:
    total = sum(v for v in m["buckets"].values() if v > 0) or 1.0
    lines = ["| part | margin s | share |", "|---|---|---|"]
    lines += [f"| {k} | {v:.2f} | {v / total:.0%} |" for k, v in m["buckets"].items() if abs(v) >= 0.005]
    if m["spark"]:
        lines += ["", "Spark's own metrics, margin: " + ", ".join(f"{k} {v:.2f} s" for k, v in m["spark"].items())]
    if m["threads"]:
        lines += ["", "Lake threads, margin: " + ", ".join(f"{k} {v:.2f} s" for k, v in m["threads"].items())]
    return "\n".join(lines)


# -- child ----------------------------------------------------------------------------------------
def _child_profiled_ingest(p: dict[str, Any]) -> dict[str, Any]:
    """`placsp ingest`'s work in a fresh process (as `bench_silver._child_fresh_ingest`), sampled from the
    first import of the provider to the end of `ingest`; Spark with its event log on."""
    lake = Path(p["lake"])
    manifests = tuple(sorted(link_lake(Path(p["template"]), lake)))
    with Sampler(p["interval"]) as sampler:
        from placsp_provider.datasets import get_dataset
        from placsp_provider.ingest.engines import choose_engine, needs_spark
        from placsp_provider.ingest.request import IngestRequest
        from placsp_provider.ingest.run import ingest

        request = IngestRequest(get_dataset(_DATASET), lake, "bench", manifests=manifests)
        engine = choose_engine(request, p["engine"])
        spark = None
        if needs_spark(engine):
            os.environ.setdefault("PLACSP_SPARK_LOG_LEVEL", "ERROR")
            from placsp_provider.spark.session import get_session

            Path(p["event_log"]).mkdir(parents=True, exist_ok=True)
            events = {"spark.eventLog.enabled": "true", "spark.eventLog.dir": Path(p["event_log"]).as_uri()}
            events["spark.eventLog.compress"] = "false"  # plain JSON lines, read by `_spark_metrics`
            spark = get_session("placsp-profile", extra={"spark.master": "local[2]", **events})
        summary = ingest(request, engine, spark=spark)
    process_s, buckets = _since_process_start(), dict(sampler.main)
    unsampled = process_s - (sampler.stopped - sampler.started)  # the interpreter's start, the lake's links
    buckets["other (imports, Python start)"] = buckets.get("other (imports, Python start)", 0.0) + unsampled
    out: dict[str, Any] = {"process_s": process_s, "engine": engine, "buckets": buckets, "threads": sampler.threads}
    out["read"] = summary["read"]
    if spark is not None:
        app = spark.sparkContext.applicationId
        spark.stop()
        out["spark"] = _spark_metrics(Path(p["event_log"]), app)
    return out


def _since_process_start() -> float:
    from benchmarks.bench_silver import _since_process_start as since

    return since()


def _spark_metrics(folder: Path, app: str) -> dict[str, float]:
    """Spark's own accounting of the run's tasks (event log): stages' wall time (submission to completion),
    tasks' run time, CPU time, JVM GC time and deserialisation, summed, in seconds."""
    logs = sorted(folder.rglob(f"events_*_{app}"))  # `eventlog_v2_<app>/events_1_<app>`
    got: Counter[str] = Counter()
    for line in (line for log in logs for line in log.read_text().splitlines() if line.strip()):
        event = json.loads(line)
        kind = event.get("Event")
        if kind == "SparkListenerTaskEnd" and event.get("Task Metrics"):
            m = event["Task Metrics"]
            got["tasks"] += 1
            got["task run time s"] += m.get("Executor Run Time", 0) / 1e3
            got["task CPU s"] += m.get("Executor CPU Time", 0) / 1e9
            got["task JVM GC s"] += m.get("JVM GC Time", 0) / 1e3
            got["task deserialise s"] += m.get("Executor Deserialize Time", 0) / 1e3
        elif kind == "SparkListenerStageCompleted":
            info = event["Stage Info"]
            if info.get("Submission Time") and info.get("Completion Time"):
                got["stages"] += 1
                got["stage wall s"] += (info["Completion Time"] - info["Submission Time"]) / 1e3
    return dict(got)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child_main(globals())
    else:
        raise SystemExit(main())
