"""`make bench`: run every registered benchmark, print its tables, write docs/benchmarks.md and raw JSON.

    .venv/bin/python -m benchmarks.run                  # all benchmarks, updates docs/benchmarks.md
    .venv/bin/python -m benchmarks.run --only extract   # one of them (the other docs sections are kept)
    .venv/bin/python -m benchmarks.run --quick          # tiny sizes, smoke test only: docs untouched
    .venv/bin/python -m benchmarks.run --only s3 --engine spark+delta-rs   # the S3 benchmark's engine

A benchmark is a module with `NAME`, `TITLE` and `run(quick: bool = False) -> BenchResult`
(see benchmarks/_common.py); add it to BENCHMARKS below, one line. `--engine` goes to the benchmarks
whose `run` takes an `engine` (the S3 one). Its section of docs/benchmarks.md
is short on purpose: its goals (target, value, met), a table or two, a few figures, the rerun
command; the rest is in the raw JSON, why a figure is what it is in docs/decisions/. A section whose
name is not a benchmark here (e.g. `xml_reader_study`, a one-off study whose code is gone) is static:
every run keeps it as it is, where it is (before the benchmarks' sections if it was, else after).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import re
import sys
import time
from dataclasses import asdict
from pathlib import Path

from benchmarks._common import OUT, REPO, BenchResult, machine_facts

BENCHMARKS: tuple[str, ...] = (
    "benchmarks.bench_extract",
    "benchmarks.bench_silver",
    "benchmarks.bench_dead_letters",
    "benchmarks.bench_replay",
    "benchmarks.bench_completeness",
    "benchmarks.bench_quality",
    "benchmarks.bench_s3",
    "benchmarks.bench_growth",
    "benchmarks.bench_backfill",
)
NAMES = [m.rsplit(".", 1)[-1].removeprefix("bench_") for m in BENCHMARKS]  # what `--only` takes

DOCS = REPO / "docs" / "benchmarks.md"
# Bytes of docs/benchmarks.md (issue 32): a section that grows past it says too much (15,000 for six
# benchmarks; 18,000 since the S3 one; 19,000 since the real-shaped Silver case and the PLACSP view's reads;
# 21,500 since the lake-growth one; 23,000 since the year's backfill).
LIMIT = 23_000
_HEADER = """# Benchmarks

Written by `make bench` (`.venv/bin/python -m benchmarks.run`): one section per benchmark, rewritten
by its run (a run of one benchmark keeps the others); a study run once is a static section that names
its date and revision. Raw results: `benchmarks/out/*.json` (not committed). One machine's figures:
compare ratios measured in one run, not seconds across runs or machines.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the PLACSP provider benchmarks.")
    parser.add_argument("--only", action="append", choices=NAMES, help="run only this benchmark (repeatable)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes; does not touch docs/benchmarks.md")
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite docs/benchmarks.md")
    parser.add_argument("--out", type=Path, default=OUT, help="folder for the raw JSON results")
    parser.add_argument("--engine", help="ingest engine of the benchmarks that take one (s3; default delta-rs)")
    args = parser.parse_args(argv)
    chosen = [m for m, n in zip(BENCHMARKS, NAMES, strict=True) if not args.only or n in args.only]
    if args.engine and not any(_takes_engine(importlib.import_module(m)) for m in chosen):
        parser.error("--engine: none of the chosen benchmarks takes an engine (only s3 does)")

    facts = machine_facts()
    print("machine: " + ", ".join(f"{k} {v}" for k, v in facts.items()), flush=True)
    sections: dict[str, str] = {}
    started = time.perf_counter()
    for module_name, name in zip(BENCHMARKS, NAMES, strict=True):
        if args.only and name not in args.only:
            continue
        module = importlib.import_module(module_name)
        print(f"\n== {module.TITLE}{' (quick)' if args.quick else ''}", flush=True)
        options = {"engine": args.engine} if args.engine and _takes_engine(module) else {}
        result: BenchResult = module.run(quick=args.quick, **options)
        sections[result.name] = section(result, facts["date"])
        print("\n" + sections[result.name], flush=True)
        args.out.mkdir(parents=True, exist_ok=True)
        raw = {"machine": facts, "quick": args.quick, "command": "make bench", **asdict(result)}
        (args.out / f"{result.name}{'-quick' if args.quick else ''}.json").write_text(
            json.dumps(raw, indent=2, default=str) + "\n"
        )
    print(f"\nall benchmarks: {time.perf_counter() - started:.0f} s; raw JSON in {args.out}")
    if sections and not args.quick and not args.no_docs:
        size = write_docs(DOCS, sections, facts)
        print(f"wrote {DOCS.relative_to(REPO) if DOCS.is_relative_to(REPO) else DOCS}: {size:,} bytes")
        if size > LIMIT:
            print(f"warning: over {LIMIT:,} bytes; keep each section to its goals, tables and a few figures")
    return 0


def _takes_engine(module: object) -> bool:
    return "engine" in inspect.signature(module.run).parameters  # type: ignore[attr-defined]


def section(result: BenchResult, date: str) -> str:
    """A benchmark's section of docs/benchmarks.md: what was measured, its goals, its tables, a few
    figures and how to rerun it."""
    lines = [f"## {result.title}", "", f"Measured {date} in {result.seconds:.0f} s. {result.summary}"]
    if result.goals:
        lines += ["", "| goal | target | measured | met |", "|---|---|---|---|"]
        lines += [f"| {g.what} | {g.target} | {g.value} | {'yes' if g.met else '**no**'} |" for g in result.goals]
    for table in result.tables:
        lines += ["", table.markdown()]
    if result.figures:
        lines += ["", *(f"- {figure}" for figure in result.figures)]
    module = f"benchmarks/bench_{result.name}.py"
    lines += ["", f"Rerun: `.venv/bin/python -m benchmarks.run --only {result.name}`; method: `{module}`."]
    return "\n".join(lines) + "\n"


def write_docs(path: Path, sections: dict[str, str], facts: dict[str, str]) -> int:
    """Replace the sections that ran, keep the others (static ones where they were: before the
    benchmarks' sections or after), refresh the header and machine facts; return the file's bytes."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    found = [(m.group(1), m.group(0)) for m in re.finditer(r"<!-- bench:(\w+) -->\n.*?<!-- /bench:\1 -->\n", old, re.S)]
    kept = dict(found)
    for name, body in sections.items():
        kept[name] = f"<!-- bench:{name} -->\n{body}<!-- /bench:{name} -->\n"
    first = next((i for i, (name, _) in enumerate(found) if name in NAMES), len(found))
    leading = [name for name, _ in found[:first]]
    names = leading + [n for n in NAMES if n in kept] + [n for n in kept if n not in NAMES and n not in leading]
    machine = ["## Machine of the last run", "", "| fact | value |", "|---|---|"]
    machine += [f"| {k} | {v} |" for k, v in facts.items()]
    text = "\n".join([_HEADER, *machine, "", *(kept[n] for n in names)]).rstrip() + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return len(text.encode("utf-8"))


if __name__ == "__main__":
    sys.exit(main())
