"""Instructions the parse side spends on one real-shaped page, beside the lxml reference's, counted by
valgrind's cachegrind: a figure the machine's load does not move (decision 0049).

    PYTHONPATH=provider:. .venv/bin/python -m benchmarks.parse_instructions

Each count is one child interpreter that parses the page, minus one that does everything else (the
imports, a tiny page through the same code, so first-call costs such as pyarrow importing pandas are not
counted). To compare two revisions, run
it in a worktree of each. Needs `valgrind` (Debian: `apt-get install valgrind`); takes ~3 minutes.
"""

from __future__ import annotations

import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

MODES = ("parse_page", "stage_page", "reference")


def _child(page: str, mode: str, whole: bool) -> None:
    from benchmarks.bench_silver import _reference_extract
    from placsp_provider.datasets import get_dataset
    from placsp_provider.ingest.staging import stage_page
    from placsp_provider.parser.page_parser import parse_page

    data, dataset = Path(page).read_bytes(), get_dataset("licitaciones")
    tiny = Path(tempfile.mkdtemp()) / "tiny.atom"
    tiny.write_bytes(data[: data.index(b"<entry")] + b"</feed>")
    run = {
        "parse_page": lambda path: parse_page(path.read_bytes(), dataset=dataset, source_file=path.name),
        "stage_page": lambda path: stage_page(
            path.read_bytes(), dataset=dataset, source_file=path.name, staging=tempfile.mkdtemp()
        ),
        "reference": lambda path: _reference_extract(str(path), Counter()),
    }[mode]
    run(tiny)
    gc.collect()  # in both children: what the imports left must not be walked by the page's collections
    gc.freeze()
    if whole:
        run(Path(page))


def _instructions(page: str, mode: str, *, whole: bool = True) -> int:
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    child = ["-m", "benchmarks.parse_instructions", "--child", page, mode, "whole" if whole else "tiny"]
    command += [sys.executable, *child]
    env = {**os.environ, "PYTHONHASHSEED": "0"}  # the same dict layouts in every child
    out = subprocess.run(command, capture_output=True, text=True, check=True, env=env).stderr
    found = re.search(r"I\s+refs:\s+([\d,]+)", out)
    if found is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{out[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        _child(argv[1], argv[2], argv[3] == "whole")
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    from benchmarks.pagegen import REAL_SHAPE, generate_corpus

    with tempfile.TemporaryDirectory(prefix="placsp-instructions-") as tmp:
        corpus = generate_corpus(Path(tmp), 1, dataset_key="licitaciones", **REAL_SHAPE.options())
        page = str(corpus.files[0])
        counts = {mode: _instructions(page, mode) - _instructions(page, mode, whole=False) for mode in MODES}
    for mode, count in counts.items():
        print(f"{mode:11s} {count / 1e6:8.1f} million instructions")
    print(f"stage_page at {counts['reference'] / counts['stage_page']:.3f}x the reference (one core)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
