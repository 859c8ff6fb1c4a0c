"""What every benchmark shares: result types, machine facts, fresh-subprocess measurements.

What a benchmark module exposes and how its result becomes a section of docs/benchmarks.md:
benchmarks/run.py. Lakes, Spark and Delta helpers for the Spark benchmarks: `benchmarks/_lake.py`.

Memory is measured in a fresh child process per measurement (`python -m <module> --child spec.json`),
so the high-water mark belongs to that measurement alone. It is read from `VmHWM` in
/proc/self/status, the peak RSS of the child's own address space: on Linux `ru_maxrss` survives
`execve`, so a child forked from a parent holding 300 MB reports >= 300 MB there whatever it does.
The child prints one JSON line as the last line of its stdout.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from benchmarks.pagegen import Corpus

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "out"  # raw JSON results
MB = 1e6


@dataclass
class Table:
    columns: list[str]
    rows: list[list[str]]

    def markdown(self) -> str:
        lines = ["| " + " | ".join(self.columns) + " |", "|" + "---|" * len(self.columns)]
        return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in self.rows])


@dataclass
class Goal:
    what: str
    target: str  # ">= 0.8x"
    value: str  # as measured, formatted
    met: bool


@dataclass
class BenchResult:
    name: str
    title: str
    summary: str  # markdown, a few sentences: what was measured and how
    tables: list[Table]
    raw: dict[Any, Any]  # JSON-able; keys become strings in the JSON
    seconds: float = 0.0
    goals: list[Goal] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)  # markdown bullets: what the tables do not show


# -- machine facts ---------------------------------------------------------------------------------
def machine_facts() -> dict[str, str]:
    mem_kb = _proc_field("/proc/meminfo", r"^MemTotal:\s*(\d+) kB")
    facts = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": str(os.cpu_count()),
        "cpu": _proc_field("/proc/cpuinfo", r"^model name\s*:\s*(.+)$") or platform.processor() or "unknown",
        "memory": f"{int(mem_kb) / 1024 / 1024:.1f} GiB" if mem_kb else "unknown",
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "java": _java_version(),
    }
    import lxml.etree as etree
    import requests

    facts["lxml / libxml2"] = f"{etree.__version__} / {'.'.join(map(str, etree.LIBXML_VERSION))}"
    facts["requests"] = requests.__version__
    return facts


def _proc_field(path: str, pattern: str) -> str | None:
    """The first group of `pattern` (one line) in a /proc file; None where there is no such file or line."""
    try:
        match = re.search(pattern, Path(path).read_text(), re.M)
    except OSError:
        return None
    return match.group(1).strip() if match else None


def _java_version() -> str:
    try:
        done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return "not found"
    first = (done.stderr or done.stdout).strip().splitlines()
    return first[0] if first else "unknown"


# -- child processes -------------------------------------------------------------------------------
def peak_rss_mb() -> float:
    """High-water RSS of this process's address space (VmHWM), in MB (not `ru_maxrss`: see above)."""
    kb = _proc_field("/proc/self/status", r"^VmHWM:\s*(\d+) kB")
    if kb is None:
        raise RuntimeError("no VmHWM in /proc/self/status: the benchmarks measure memory on Linux")
    return int(kb) * 1024 / MB


def cpu_seconds(who: int = resource.RUSAGE_SELF) -> float:
    """CPU seconds of this process (or, with RUSAGE_CHILDREN, of the children it reaped)."""
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def child_main(scope: Mapping[str, Any]) -> None:
    """Entry point of a child (`run_child`): `--child spec.json`, whose task `spec["task"]` the function
    `_child_<task>` of `scope` (the benchmark module's `globals()`) does; its answer is the last line of stdout."""
    if len(sys.argv) != 3 or sys.argv[1] != "--child":
        raise SystemExit(f"usage: python -m {sys.argv[0]} --child spec.json (started by benchmarks.run)")
    payload = json.loads(Path(sys.argv[2]).read_text())
    result = scope[f"_child_{payload['task']}"](payload)
    sys.stdout.write("\n" + json.dumps(result) + "\n")


# -- formatting ------------------------------------------------------------------------------------
def f1(value: float) -> str:
    return f"{value:,.1f}"


def f2(value: float) -> str:
    return f"{value:,.2f}"


def med(runs: Iterable[dict[str, Any]], key: str = "seconds") -> float:
    return statistics.median(r[key] for r in runs)


def peak_mb(m: dict[str, Any]) -> str:
    """Peak RSS of a measurement: its process tree's (`ProcessTree.report()` under "tree", with the JVM's
    share) or one process's (`peak_rss_mb`)."""
    tree = m.get("tree")
    if not tree:
        return f1(m["peak_rss_mb"])
    return f1(tree["peak_total_mb"]) + (f" (JVM {f1(tree['jvm_hwm_mb'])})" if tree["jvm_hwm_mb"] else "")


def corpus_facts(corpus: Corpus) -> dict[str, Any]:
    return {
        "pages": len(corpus.pages),
        "entries": corpus.total_entries,
        "tombstones": corpus.total_tombstones,
        "bytes": corpus.bytes,
        "not_well_formed_pages": sum(not p.well_formed for p in corpus.pages),
        "corruptions": [c.kind for c in corpus.ground_truth],
    }


# -- process measurement (shared by the Spark benchmarks) -------------------------------------------
def busy_cpu_seconds() -> float:
    """CPU seconds the whole machine spent busy since boot (all processes), from /proc/stat."""
    with open("/proc/stat") as fh:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fh.readline().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def wait_for_quiet(max_wait: float, threshold: float = 0.3, window: float = 3.0) -> tuple[float, float]:
    """Wait up to `max_wait` s until the rest of the machine uses fewer than `threshold` cores (measured
    over `window` s); return (seconds waited, cores busy in the last window). Other sessions share
    this machine: a measurement next to them is worth little."""
    started = time.monotonic()
    if max_wait <= 0:
        window = 0.5  # quick runs: only note the load
    while True:
        b0 = busy_cpu_seconds()
        time.sleep(window)
        busy = (busy_cpu_seconds() - b0) / window
        if busy < threshold or time.monotonic() - started >= max_wait:
            return time.monotonic() - started, busy


def reap_forkserver() -> None:
    """Stop and reap this process's multiprocessing forkserver, if it started one (the ingest's parse
    workers come from it). The forkserver reaps its workers, so once it is reaped here their CPU reaches
    this process's parent through `RUSAGE_CHILDREN` (`run_child`'s child CPU); left to exit with this
    process, it is reparented and that CPU is lost, and the sampled tree misses what short-lived
    workers spent after its last sample: `run_child` counted it as other processes' load and ran
    the child again. Uses the forkserver's private `_stop` (Python 3.11), when it has one."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    stop = getattr(server, "_stop", None)
    if stop is not None and getattr(server, "_forkserver_pid", None) is not None:
        stop()


def run_child(module: str, payload: dict[str, Any], timeout: float = 1200, measure: bool = False) -> dict[str, Any]:
    """Run `python -m module --child <payload.json>` in a fresh interpreter; return its JSON answer. With
    `measure`, also its whole process tree (sampled from /proc every 0.5 s) and how much CPU the rest of
    the machine used meanwhile (its busy CPU minus the child's tree): the noise next to the measurement,
    under "other_load"."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(payload, fh)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")]))}
    busy0, t0, reaped0 = busy_cpu_seconds(), time.perf_counter(), cpu_seconds(resource.RUSAGE_CHILDREN)
    try:
        command = [sys.executable, "-m", module, "--child", fh.name]
        proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        tree = ProcessTree(interval=0.5, root=proc.pid) if measure else None
        if tree is not None:
            tree.start(clear=False)
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        finally:
            if tree is not None:
                tree.stop()
    finally:
        os.unlink(fh.name)
    lines = stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = "\n".join(stderr.strip().splitlines()[-15:])
        raise RuntimeError(f"benchmark child {module} {payload.get('task')} failed (exit {proc.returncode}):\n{tail}")
    result: dict[str, Any] = json.loads(lines[-1])
    if tree is not None:
        wall = time.perf_counter() - t0
        # The sampled tree misses the last half second of short-lived processes; what this process reaped
        # (the child itself, not the JVM it leaves behind) is exact. Take the larger.
        child_cpu = max(tree.cpu_seconds(), cpu_seconds(resource.RUSAGE_CHILDREN) - reaped0)
        other = max(busy_cpu_seconds() - busy0 - child_cpu, 0.0)
        load = {"wall_s": wall, "child_cpu_s": child_cpu, "other_cpu_s": other, "cores": other / wall}
        result["other_load"] = load | {"tree": tree.report()}
    return result


class ProcessTree:
    """RSS and CPU of this process and all its descendants (JVM, Python workers), sampled from /proc."""

    def __init__(self, interval: float = 0.2, root: int | None = None) -> None:
        self.root = root if root is not None else os.getpid()
        self.interval = interval
        self.pids: list[int] = [self.root]
        self.peak_total = 0.0
        self.hwm: dict[int, float] = {}
        self.comm: dict[int, str] = {}
        self.cpu: dict[int, float] = {}
        self.cpu0: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_scan = 0.0
        self._tick = os.sysconf("SC_CLK_TCK")
        self.baseline_total = 0.0
        self.parent: dict[int, int] = {}

    def _scan(self) -> None:
        kids: dict[int, list[int]] = defaultdict(list)
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                stat = Path(f"/proc/{name}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            kids[parent].append(int(name))
            self.parent[int(name)] = parent
        found, todo = [], [self.root]
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo.extend(kids.get(pid, []))
        self.pids = found
        self._last_scan = time.monotonic()

    def _read(self, pid: int) -> tuple[float, float, float, str, int] | None:
        try:
            status, stat = Path(f"/proc/{pid}/status").read_text(), Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        vm = {k: int(v) for k, v in re.findall(r"^(VmRSS|VmHWM|VmSize):\s*(\d+)", status, re.M)}
        if len(vm) < 3:  # a kernel thread, or a process on its way out
            return None
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / self._tick
        return vm["VmRSS"] * 1024 / MB, vm["VmHWM"] * 1024 / MB, cpu, comm, vm["VmSize"]

    def sample(self) -> None:
        if time.monotonic() - self._last_scan > 1.0:
            self._scan()
        total = 0.0
        read = {pid: got for pid in self.pids if (got := self._read(pid)) is not None}
        for pid, (rss, hwm, cpu, comm, size) in read.items():
            self.cpu[pid] = cpu
            self.cpu0.setdefault(pid, 0.0)
            mother = read.get(self.parent.get(pid, -1))
            if mother is not None and (mother[0], mother[4]) == (rss, size):
                # A child caught between vfork and exec (the JVM starts helpers that way) runs in
                # its parent's address space: the same memory, not more. Counting it doubled the
                # JVM at random samples.
                continue
            total += rss
            self.hwm[pid] = max(self.hwm.get(pid, 0.0), hwm)
            self.comm[pid] = comm
        self.peak_total = max(self.peak_total, total)

    def reset(self, clear: bool = True) -> None:
        """Forget peaks; reset each process's VmHWM (clear_refs 5) where the kernel lets us."""
        self._scan()
        for pid in self.pids if clear else ():
            with contextlib.suppress(OSError):
                Path(f"/proc/{pid}/clear_refs").write_text("5")
        read = {pid: got for pid in self.pids if (got := self._read(pid)) is not None}
        self.peak_total, self.hwm = 0.0, {}
        self.cpu0 = {pid: got[2] for pid, got in read.items()}  # CPU seconds so far
        self.baseline_total = sum(got[0] for got in read.values())  # RSS now
        self.cpu = dict(self.cpu0)

    def cpu_seconds(self) -> float:
        return sum(self.cpu[p] - self.cpu0.get(p, 0.0) for p in self.cpu)

    def start(self, clear: bool = True) -> None:
        """Sample every `interval` s from now on, peaks forgotten first (`reset`)."""
        self.reset(clear)
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(self.interval):
                self.sample()

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()

    def report(self) -> dict[str, Any]:
        jvm = [p for p in self.hwm if self.comm.get(p) == "java"]
        workers = [p for p in self.hwm if p != self.root and p not in jvm]
        return {
            "peak_total_mb": self.peak_total,
            "baseline_total_mb": self.baseline_total,
            "jvm_hwm_mb": sum(self.hwm[p] for p in jvm),
            "driver_hwm_mb": self.hwm.get(self.root, 0.0),
            "workers": len(workers),
            "workers_hwm_max_mb": max((self.hwm[p] for p in workers), default=0.0),
            "workers_hwm_sum_mb": sum(self.hwm[p] for p in workers),
        }


def measure_tree(fn: Callable[[], Any], tree: ProcessTree) -> tuple[Any, dict[str, Any]]:
    """Run `fn` once; return its result and the run's wall seconds, CPU of the process tree, peak memory
    (`tree.report()`, high-water marks reset first) and the cores other sessions used meanwhile (the noise)."""
    gc.collect()
    tree.start()
    busy0, t = busy_cpu_seconds(), time.perf_counter()
    try:
        result = fn()
    finally:
        seconds = time.perf_counter() - t
        tree.stop()
    cpu = tree.cpu_seconds()
    other = max(busy_cpu_seconds() - busy0 - cpu, 0.0) / seconds
    return result, {"seconds": seconds, "cpu_s": cpu, "other_cores": other, "tree": tree.report()}


def abba(repeats: int, a: str, b: str) -> list[str]:
    """a, b, b, a, a, b, ...: `repeats` runs of each, alternating pairs (linear drift hits both alike)."""
    return [key for i in range(repeats) for key in ((a, b) if i % 2 == 0 else (b, a))]
