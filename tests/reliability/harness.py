"""Real processes, killed for real: start a `placsp` command in a process group of its own, watch
the lake's Delta logs (or any file) while it runs, and SIGKILL the whole group (the Python driver,
its Spark JVM and the JVM's Python workers) the moment a trigger sees what it waits for.

Nothing here imports Spark: the lake is read back with delta-rs, as a person checking it would.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from placsp_provider.lake import LAKE_TABLES, table_path

PLACSP = [sys.executable, "-m", "placsp_provider.cli"]
COMMIT = re.compile(r"^(\d{20})\.json$")
POLL = 0.005  # seconds between looks at the lake: a MERGE takes about a second, a kill lands well inside it

# Columns that differ between two correct runs of the same data, and why:
# - when a row was written (the clock): `_ingested_at` (Silver), `processing_timestamp` (dead letters),
#   `ingested_at` (reconciliation), `last_attempt_at` / `replayed_at` (replay);
# - which run wrote it, only where two *different* runs write the same rows (two concurrent ingests;
#   the crash tests rerun with the same --run-id, as an Airflow retry does, and compare run ids too).
CLOCK_COLUMNS = frozenset({"_ingested_at", "processing_timestamp", "ingested_at", "last_attempt_at", "replayed_at"})
RUN_ID_COLUMNS = frozenset({"_ingest_run_id", "run_id", "replay_run_id"})


def env() -> dict[str, str]:
    """The environment of every `placsp` process. Their JVMs start with the project's own driver
    defaults (`spark.session.DEFAULT_DRIVER_JAVA_OPTIONS`: C1 with a full-size code cache, serial GC),
    as a user's `placsp ingest` does; the ones set here before were a copy of them without the code
    cache, whose 48 MB a run can fill."""
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


# -- watching the lake ---------------------------------------------------------------------------------
@dataclass(frozen=True, order=True)
class Commit:
    table: str
    version: int

    def __str__(self) -> str:
        return f"{self.table} v{self.version}"


def commits(lake: Path, tables: Iterable[str] = LAKE_TABLES) -> set[Commit]:
    """Every commit file under the tables' `_delta_log` (a commit is visible once its JSON is there:
    Delta writes it to a temp name and renames it)."""
    found: set[Commit] = set()
    for table in tables:
        log = table_path(lake, table) / "_delta_log"
        try:
            names = os.listdir(str(log))
        except FileNotFoundError:
            continue
        found.update(Commit(table, int(m.group(1))) for n in names if (m := COMMIT.match(n)))
    return found


def data_files(lake: Path, table: str) -> set[str]:
    """The Parquet files of a table, committed or not (a MERGE writes them before its commit)."""
    root = Path(str(table_path(lake, table)))  # a local lake: these tests watch files on this disk
    if not root.is_dir():
        return set()
    return {str(p.relative_to(root)) for p in root.rglob("*.parquet") if "_delta_log" not in p.parts}


Trigger = Callable[[], str | None]  # polled while the process runs: a reason to kill it now, or None


class Recorder:
    """A trigger that never fires: it records the commits of the run, in the order they appear."""

    def __init__(self, lake: Path) -> None:
        self.lake, self.seen = lake, commits(lake)
        self.order: list[Commit] = []

    def __call__(self) -> str | None:
        now = commits(self.lake)
        self.order.extend(sorted(now - self.seen))
        self.seen = now
        return None


def operation(lake: Path, commit: Commit) -> str | None:
    """The commit's operation (WRITE, MERGE, CREATE TABLE, ...), from its commitInfo."""
    log = table_path(lake, commit.table) / "_delta_log" / f"{commit.version:020d}.json"
    infos = [json.loads(line).get("commitInfo") for line in log.read_text().splitlines()]
    return next((info.get("operation") for info in infos if info is not None), None)


def changes_rows(lake: Path, commit: Commit) -> bool:
    """Whether a commit changed rows (a table's creation does). A MERGE whose clause conditions turned
    every match down (`s.updated > t.updated` on a rerun) still rewrites the files that hold matches
    and commits them, every row copied; a Spark MERGE that matched nothing commits the dataset's txn
    alone (decision 0052): commits, but not changes."""
    log = table_path(lake, commit.table) / "_delta_log" / f"{commit.version:020d}.json"
    for line in log.read_text().splitlines():
        info = json.loads(line).get("commitInfo")
        if info is not None:
            if info.get("operation") != "MERGE":
                return True
            metrics = info.get("operationMetrics") or {}
            # delta-spark's names, then delta-rs's
            names = [f"numTargetRows{k}" for k in ("Inserted", "Updated", "Deleted")]
            names += [f"num_target_rows_{k}" for k in ("inserted", "updated", "deleted")]
            return any(int(metrics.get(name, 0)) for name in names)
    return True


def after_changes(lake: Path, n: int = 1) -> Trigger:
    """Fires right after the n-th new commit that changed rows (copy-only rewrites do not count)."""
    before, judged = commits(lake), dict[Commit, bool]()

    def check() -> str | None:
        new = commits(lake) - before
        for c in new - judged.keys():
            judged[c] = changes_rows(lake, c)
        changed = sorted(c for c in new if judged[c])
        return (
            f"after {len(changed)} new commit(s) that changed rows: {', '.join(map(str, changed))}"
            if len(changed) >= n
            else None
        )

    return check


def after_commits(lake: Path, n: int = 1) -> Trigger:
    """Fires right after the n-th commit that was not in the lake when the process started."""
    before = commits(lake)

    def check() -> str | None:
        new = commits(lake) - before
        return f"after {len(new)} new commit(s): {', '.join(map(str, sorted(new)))}" if len(new) >= n else None

    return check


def after_commit_to(lake: Path, table: str) -> Trigger:
    """Fires right after the first new commit to `table`."""
    before = commits(lake, (table,))

    def check() -> str | None:
        new = commits(lake, (table,)) - before
        return f"after commit {min(new)}" if new else None

    return check


def mid_merge(lake: Path, table: str) -> Trigger:
    """Fires when a MERGE into `table` has written data files but not committed them yet."""
    files_before, commits_before = data_files(lake, table), commits(lake, (table,))

    def check() -> str | None:
        if commits(lake, (table,)) - commits_before:
            raise AssertionError(f"{table} got a commit before any new data file was seen: mid-MERGE missed")
        new = data_files(lake, table) - files_before
        return f"mid-MERGE into {table}: {len(new)} uncommitted data file(s)" if new else None

    return check


# -- running and killing -------------------------------------------------------------------------------
@dataclass
class Outcome:
    returncode: int
    killed: str | None  # the trigger's reason when the process was killed, else None
    stdout: str
    stderr: str
    seconds: float
    args: list[str] = field(default_factory=list)
    cpu_seconds: float = 0.0  # user + system time of the group's processes, sampled (a load-independent cost)

    def ok(self) -> Outcome:
        assert self.killed is None and self.returncode == 0, f"{self.args}: rc {self.returncode}\n{self.stderr[-4000:]}"
        return self

    def json(self) -> Any:
        return json.loads(self.stdout)


def run_at_once(runs: Mapping[str, list[str]], *, workdir: Path) -> dict[str, Outcome]:
    """`placsp <args>` of each named run, started together (a barrier) and each run to its end; every
    one must exit 0 (the concurrent-writer tests: two ingests of one lake at once)."""
    import threading

    outcomes: dict[str, Outcome] = {}
    start = threading.Barrier(len(runs))

    def one(name: str) -> None:
        start.wait()
        outcomes[name] = run(runs[name], workdir=workdir, name=name)

    threads = [threading.Thread(target=one, args=(name,)) for name in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name, outcome in outcomes.items():
        assert outcome.returncode == 0, f"{name}: placsp {' '.join(runs[name])} failed:\n{outcome.stderr[-4000:]}"
    assert outcomes.keys() == runs.keys(), f"runs that never ended: {sorted(runs.keys() - outcomes.keys())}"
    return outcomes


def run(
    args: list[str],
    *,
    trigger: Trigger | None = None,
    timeout: float = 900,
    workdir: Path,
    name: str = "placsp",
) -> Outcome:
    """Run `placsp <args>` to its end, or SIGKILL its process group as soon as `trigger` fires."""
    workdir.mkdir(parents=True, exist_ok=True)
    out_path, err_path = workdir / f"{name}.stdout", workdir / f"{name}.stderr"
    started = time.monotonic()
    with out_path.open("wb") as out, err_path.open("wb") as err:
        # A session of its own: the JVM spark-submit starts and its Python workers share the group,
        # so one killpg ends them all, as a machine losing power or the OOM killer would.
        proc = subprocess.Popen([*PLACSP, *args], stdout=out, stderr=err, env=env(), start_new_session=True)
        killed = None
        cpu = _CpuMeter(proc.pid)
        try:
            while proc.poll() is None:
                if time.monotonic() - started > timeout:
                    raise AssertionError(f"placsp {' '.join(args)} still running after {timeout:.0f} s")
                if trigger is not None and (killed := trigger()) is not None:
                    cpu.sample()
                    kill_group(proc)
                    break
                cpu.sample(every=0.5)
                time.sleep(POLL)
        finally:
            if proc.poll() is None:
                kill_group(proc)
    outcome = Outcome(
        proc.returncode,
        killed,
        out_path.read_text(errors="replace"),
        err_path.read_text(errors="replace"),
        time.monotonic() - started,
        args,
        cpu.seconds,
    )
    RUNS.append(outcome)
    return outcome


RUNS: list[Outcome] = []  # every process this session ran: the suite reports their cost at the end
NOTES: list[str] = []  # facts worth a line in the report (see `summary_lines`)


def cost_report() -> dict[str, list[Any]]:
    """This process's runs and notes, as plain data: a pytest-xdist worker sends it to the controller
    (tests/conftest.py), which prints every worker's together."""
    runs = [
        {
            "spark": bool(r.args) and r.args[0] in ("ingest", "dead-letters") and "delta-rs" not in r.args,
            "killed": r.killed is not None,
            "seconds": r.seconds,
            "cpu_seconds": r.cpu_seconds,
        }
        for r in RUNS
    ]
    return {"runs": runs, "notes": list(NOTES)}


def summary_lines(reports: Iterable[Mapping[str, list[Any]]]) -> list[str]:
    """What the placsp processes cost: wall time depends on the machine's load, CPU time much less."""
    reports = list(reports)
    runs = [run for report in reports for run in report["runs"]]
    lines = [f"reliability: {note}" for report in reports for note in report["notes"]]
    if runs:
        spark, killed = sum(r["spark"] for r in runs), sum(r["killed"] for r in runs)
        wall, cpu = sum(r["seconds"] for r in runs), sum(r["cpu_seconds"] for r in runs)
        lines.insert(
            0,
            f"reliability: {len(runs)} placsp processes ({spark} with Spark, {killed} killed): "
            f"{wall:.0f} s wall, {cpu:.0f} s CPU",
        )
    return lines


class _CpuMeter:
    """CPU time of a process group, from /proc (Linux): the last value seen of each member."""

    def __init__(self, pgid: int) -> None:
        self.pgid, self.last = pgid, 0.0
        self.per_pid: dict[str, float] = {}
        self.tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def sample(self, every: float = 0.0) -> None:
        now = time.monotonic()
        if now - self.last < every:
            return
        self.last = now
        for pid in os.listdir("/proc") if os.path.isdir("/proc") else []:
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == self.pgid:  # fields after the command: state, ppid, pgrp, ...
                self.per_pid[pid] = (int(fields[11]) + int(fields[12])) / self.tick  # utime, stime

    @property
    def seconds(self) -> float:
        return sum(self.per_pid.values())


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group and wait until no member of it is left."""
    pgid = proc.pid  # start_new_session: the leader's pid is the group's id
    with contextlib.suppress(ProcessLookupError):  # it may have ended on its own meanwhile
        os.killpg(pgid, signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"process group {pgid} still alive 30 s after SIGKILL")


def ingest_args(lake: Path, dataset: str, run_id: str, engine: str = "spark") -> list[str]:
    """`placsp ingest`, its engine named: the CLI's default (auto) would take delta-rs for a daily run
    into an existing lake, and each engine is killed by tests of its own."""
    return ["ingest", "--dataset", dataset, "--lake", str(lake), "--run-id", run_id, "--engine", engine, "--json"]


# -- comparing lakes -----------------------------------------------------------------------------------
def read_table(lake: Path, table: str) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    return DeltaTable(str(table_path(lake, table))).to_pyarrow_table().to_pylist()


def _canonical(row: Mapping[str, Any], ignore: frozenset[str]) -> str:
    return json.dumps({k: v for k, v in row.items() if k not in ignore}, sort_keys=True, default=str)


@dataclass(frozen=True)
class TableContents:
    rows: int
    checksum: str  # sha256 of the sorted canonical rows: independent of file layout and row order
    canonical: tuple[str, ...]  # kept to show the difference when two lakes differ


def contents(lake: Path, ignore: frozenset[str] = CLOCK_COLUMNS) -> dict[str, TableContents]:
    """Row count and an order-independent checksum of every table of the lake (delta-rs)."""
    out = {}
    for table in LAKE_TABLES:
        canonical = tuple(sorted(_canonical(r, ignore) for r in read_table(lake, table)))
        out[table] = TableContents(len(canonical), hashlib.sha256("\n".join(canonical).encode()).hexdigest(), canonical)
    return out


def assert_same_lake(got: Path, want: Path, ignore: frozenset[str] = CLOCK_COLUMNS) -> dict[str, int]:
    """Per-table row counts and checksums equal; on a difference, the rows that differ. Returns the counts."""
    a, b = contents(got, ignore), contents(want, ignore)
    problems = []
    for table in LAKE_TABLES:
        if (a[table].rows, a[table].checksum) != (b[table].rows, b[table].checksum):
            extra = sorted(set(a[table].canonical) - set(b[table].canonical))
            missing = sorted(set(b[table].canonical) - set(a[table].canonical))
            problems.append(
                f"{table}: {a[table].rows} rows vs {b[table].rows} in the clean run; "
                f"{len(extra)} not in the clean run, e.g. {extra[:1]}; {len(missing)} missing, e.g. {missing[:1]}"
            )
    assert not problems, "the lake differs from a clean run's:\n" + "\n".join(problems)
    return {t: a[t].rows for t in LAKE_TABLES}


def difference(before: Path, after: Path, table: str, ignore: frozenset[str] = CLOCK_COLUMNS) -> tuple[list, list]:
    """The rows of `table` only in `before` (gone or changed) and only in `after` (new or changed),
    as dicts without the ignored columns."""
    old = Counter(_canonical(r, ignore) for r in read_table(before, table))
    new = Counter(_canonical(r, ignore) for r in read_table(after, table))
    return [json.loads(r) for r in (old - new).elements()], [json.loads(r) for r in (new - old).elements()]


def assert_nothing_twice(lake: Path) -> None:
    """No key twice: Silver by its business keys, dead letters by id, reconciliation by file."""
    from placsp_provider.parser.silver_schema import BUSINESS_KEYS

    keys_of = {**BUSINESS_KEYS, "dead_letters": ("dead_letter_id",), "reconciliation": ("dataset", "source_file")}
    doubled = {}
    for table in LAKE_TABLES:
        seen = Counter(tuple(row[k] for k in keys_of[table]) for row in read_table(lake, table))
        twice = [k for k, n in seen.items() if n > 1]
        if twice:
            doubled[table] = twice[:3]
    assert not doubled, f"rows written twice: {doubled}"
