"""`make bench`: run every registered benchmark, print its tables, write docs/benchmarks.md and raw JSON.

    .venv/bin/python -m benchmarks.run                  # all benchmarks, updates docs/benchmarks.md
    .venv/bin/python -m benchmarks.run --only extract   # one of them (the other docs sections are kept)
    .venv/bin/python -m benchmarks.run --quick          # tiny sizes, smoke test only: docs untouched

A benchmark is a module with `NAME`, `TITLE` and `run(quick: bool = False) -> BenchResult`
(see benchmarks/_common.py); add it to BENCHMARKS below, one line. A section of docs/benchmarks.md
whose name is not a benchmark here (e.g. `xml_reader_study`, a one-off study whose code is gone) is
static: every run keeps it as it is, after the benchmarks' sections.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
import time
from pathlib import Path

from benchmarks._common import REPO, BenchResult, machine_facts

BENCHMARKS: tuple[str, ...] = (
    "benchmarks.bench_extract",
    "benchmarks.bench_silver",
    "benchmarks.bench_dead_letters",
    "benchmarks.bench_replay",
    "benchmarks.bench_completeness",
    "benchmarks.bench_quality",
)

DOCS = REPO / "docs" / "benchmarks.md"
OUT = REPO / "benchmarks" / "out"
_HEADER = """# Benchmarks

Measured with `make bench` (which runs `.venv/bin/python -m benchmarks.run`); this file is rewritten
by it, one section per benchmark (a run of one benchmark keeps the other sections; a study run once
is kept as a static section that names its date and code revision). Raw results go
to `benchmarks/out/*.json` (not committed). The numbers are from one machine: compare ratios
measured in the same run rather than absolute figures across machines.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the PLACSP provider benchmarks.")
    names = [m.rsplit(".", 1)[-1].removeprefix("bench_") for m in BENCHMARKS]
    parser.add_argument("--only", action="append", choices=names, help="run only this benchmark (repeatable)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes; does not touch docs/benchmarks.md")
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite docs/benchmarks.md")
    parser.add_argument("--out", type=Path, default=OUT, help="folder for the raw JSON results")
    args = parser.parse_args(argv)

    facts = machine_facts()
    print("machine: " + ", ".join(f"{k} {v}" for k, v in facts.items()), flush=True)
    sections: dict[str, str] = {}
    started = time.perf_counter()
    for module_name, name in zip(BENCHMARKS, names, strict=True):
        if args.only and name not in args.only:
            continue
        module = importlib.import_module(module_name)
        print(f"\n== {module.TITLE}{' (quick)' if args.quick else ''}", flush=True)
        result: BenchResult = module.run(quick=args.quick)
        for table in result.tables:
            print("\n" + table.text())
        for finding in result.findings:
            print(f"\n* {finding}")
        print(f"\n({result.name}: {result.seconds:.0f} s)", flush=True)
        args.out.mkdir(parents=True, exist_ok=True)
        raw = {"machine": facts, "quick": args.quick, "command": "make bench", **result.to_json()}
        (args.out / f"{result.name}{'-quick' if args.quick else ''}.json").write_text(
            json.dumps(raw, indent=2, default=str) + "\n"
        )
        sections[result.name] = _section(result, facts)
    print(f"\nall benchmarks: {time.perf_counter() - started:.0f} s; raw JSON in {args.out}")
    if sections and not args.quick and not args.no_docs:
        write_docs(DOCS, sections, facts)
        print(f"wrote {DOCS.relative_to(REPO) if DOCS.is_relative_to(REPO) else DOCS}")
    return 0


def _section(result: BenchResult, facts: dict[str, str]) -> str:
    lines = [
        f"## {result.title}",
        "",
        f"Measured {facts['date']} with `make bench` on {facts['nproc']} cores ({facts['cpu']}), "
        f"{facts['memory']} RAM, Python {facts['python']}, Java: {facts['java']}; "
        f"took {result.seconds:.0f} s.",
        "",
        result.summary,
        "",
    ]
    for table in result.tables:
        lines += [table.markdown(), ""]
    if result.findings:
        lines += ["#### Observations", ""] + [f"- {f}" for f in result.findings] + [""]
    return "\n".join(lines).rstrip() + "\n"


def write_docs(path: Path, sections: dict[str, str], facts: dict[str, str]) -> None:
    """Replace the sections that ran, keep the others, refresh the header and machine facts."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    kept = {m.group(1): m.group(0) for m in re.finditer(r"<!-- bench:(\w+) -->\n.*?<!-- /bench:\1 -->\n", old, re.S)}
    for name, body in sections.items():
        kept[name] = f"<!-- bench:{name} -->\n{body}<!-- /bench:{name} -->\n"
    order = [m.rsplit(".", 1)[-1].removeprefix("bench_") for m in BENCHMARKS]
    ordered = [kept[n] for n in order if n in kept] + [v for k, v in kept.items() if k not in order]
    machine = ["## Machine of the last run", "", "| fact | value |", "|---|---|"]
    machine += [f"| {k} | {v} |" for k, v in facts.items()]
    text = "\n".join([_HEADER, *machine, "", *ordered])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.rstrip() + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
