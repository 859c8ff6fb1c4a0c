"""What every benchmark shares: result types, machine facts, fresh-subprocess measurements.

A benchmark module exposes `NAME`, `TITLE` and `run(quick: bool = False) -> BenchResult`;
`benchmarks.run` does the rest (printing, JSON, docs/benchmarks.md).

Memory is measured in a fresh child process per measurement (`python -m <module> --child spec.json`),
so the high-water mark belongs to that measurement alone. It is read from `VmHWM` in
/proc/self/status, the peak RSS of the child's own address space: on Linux `ru_maxrss` survives
`execve`, so a child forked from a parent holding 300 MB reports >= 300 MB there whatever it does
(measured: ru_maxrss 310 MB, VmHWM 9.8 MB for an empty child of a 300 MB parent). The child
prints one JSON line as the last line of its stdout.
"""

from __future__ import annotations

import json
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MB = 1e6


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)

    def markdown(self) -> str:
        out = [f"#### {self.title}", "", "| " + " | ".join(self.columns) + " |"]
        out.append("|" + "|".join("---" for _ in self.columns) + "|")
        out += ["| " + " | ".join(row) + " |" for row in self.rows]
        if self.notes:
            out.append("")
            out += [f"- {note}" for note in self.notes]
        return "\n".join(out)

    def text(self) -> str:
        widths = [max(len(str(c)), *(len(r[i]) for r in self.rows)) for i, c in enumerate(self.columns)]
        line = "  ".join(c.ljust(w) for c, w in zip(self.columns, widths, strict=True))
        out = [self.title, line, "  ".join("-" * w for w in widths)]
        out += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in self.rows]
        out += [f"  {n}" for n in self.notes]
        return "\n".join(out)


@dataclass
class BenchResult:
    name: str
    title: str
    summary: str  # markdown paragraph: what was measured and how
    tables: list[Table]
    raw: dict[str, Any]
    seconds: float = 0.0
    findings: list[str] = field(default_factory=list)  # markdown bullets

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# -- machine facts ---------------------------------------------------------------------------------
def machine_facts() -> dict[str, str]:
    facts = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": str(os.cpu_count()),
        "cpu": _cpu_model(),
        "memory": _mem_total(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "java": _java_version(),
    }
    try:
        import lxml.etree as etree
        import requests

        facts["lxml / libxml2"] = f"{etree.__version__} / {'.'.join(map(str, etree.LIBXML_VERSION))}"
        facts["requests"] = requests.__version__
    except ImportError:  # pragma: no cover
        pass
    return facts


def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown"
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    return match.group(1).strip() if match else "unknown"


def _mem_total() -> str:
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return "unknown"
    match = re.search(r"^MemTotal:\s*(\d+) kB", text, re.M)
    return f"{int(match.group(1)) / 1024 / 1024:.1f} GiB" if match else "unknown"


def _java_version() -> str:
    try:
        done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return "not found"
    first = (done.stderr or done.stdout).strip().splitlines()
    return first[0] if first else "unknown"


# -- child processes -------------------------------------------------------------------------------
def peak_rss_mb() -> float:
    """High-water RSS of this process's address space (VmHWM), in MB; ru_maxrss where /proc is missing."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return ru_maxrss_mb()
    match = re.search(r"^VmHWM:\s*(\d+) kB", status, re.M)
    return int(match.group(1)) * 1024 / MB if match else ru_maxrss_mb()


def ru_maxrss_mb() -> float:
    """`getrusage(RUSAGE_SELF).ru_maxrss` in MB (Linux reports KiB); inherited across execve, see above."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / MB


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_child(module: str, payload: dict[str, Any], timeout: float = 600) -> dict[str, Any]:
    """Run `python -m module --child <payload.json>` in a fresh interpreter; return its JSON answer."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(payload, fh)
        spec = fh.name
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    try:
        done = subprocess.run(
            [sys.executable, "-m", module, "--child", spec],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    finally:
        os.unlink(spec)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        raise RuntimeError(f"benchmark child {module} failed (exit {done.returncode}):\n{tail}")
    return json.loads(lines[-1])


def child_main(handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]]) -> None:
    """Entry point of a child: `--child spec.json`, where spec["task"] names the handler."""
    if len(sys.argv) != 3 or sys.argv[1] != "--child":
        raise SystemExit(f"usage: python -m {sys.argv[0]} --child spec.json (started by benchmarks.run)")
    payload = json.loads(Path(sys.argv[2]).read_text())
    result = handlers[payload["task"]](payload)
    sys.stdout.write("\n" + json.dumps(result) + "\n")


# -- formatting ------------------------------------------------------------------------------------
def median(values: list[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2


def f1(value: float) -> str:
    return f"{value:,.1f}"


def f2(value: float) -> str:
    return f"{value:,.2f}"
