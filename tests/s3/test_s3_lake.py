"""The lake on S3: a real SeaweedFS server on loopback (conftest.py), real `placsp` processes, real HTTP.

- The same extraction, ingest, quality check and completeness check on an `s3://` lake and on a local
  one give the same Bronze objects and the same tables (every column but the clocks).
- `kill -9` of an extraction in the middle of a page leaves no partial page object in the bucket, and
  the rerun lands the interval whole.
- Two ingests started at once on an S3 lake both end, and write everything once.
- The secret key reaches nothing the runs wrote: objects, scratch files, output.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from placsp_provider.demo.loopback_site import LoopbackSite
from placsp_provider.demo.samples import demo_routes
from placsp_provider.lake import LAKE_TABLES, QUALITY_RESULTS_TABLE, incoming_dir, resolve_lake, table_path
from placsp_provider.table_files import read_table
from tests.reliability import feed_site, harness
from tests.reliability.feed_site import AGR, LANDED
from tests.s3.conftest import S3Lake

pytestmark = [pytest.mark.s3, pytest.mark.http, pytest.mark.timeout(1200)]

# The bundled real pages (make demo's site): 643's head page, and the real January 2022 archive of
# 1044, which the completeness check of that month lands.
CLOCKS = harness.CLOCK_COLUMNS | {"checked_at"}


def placsp(args: list[str], workdir: Path, name: str) -> harness.Outcome:
    return harness.run(args, workdir=workdir, name=name)


def daily_run(lake: str, site: LoopbackSite, workdir: Path) -> list[harness.Outcome]:
    """Extract, check a month's completeness, ingest (delta-rs: no JVM), check the contracts."""
    url = ["--base-url", site.base_url, "--json"]
    extract = ["extract", "--dataset", "licitaciones", "--since", "2025-08-18", "--until", "2025-08-19"]
    outcomes = [placsp([*extract, "--lake", lake, "--run-id", "day", *url], workdir, "extract").ok()]
    month = ["completeness", "--dataset", "agregadas", "--month", "2022-01", "--lake", lake, "--run-id", "month"]
    # The bundled archive holds two days of the month: the check lands them and reports the archive
    # incomplete (exit 2); the verdict is compared between the lakes, not asserted here.
    outcomes.append(placsp([*month, *url], workdir, "month"))
    for dataset in ("licitaciones", "agregadas"):
        lake_args = ["--dataset", dataset, "--lake", lake]
        ingest = ["ingest", *lake_args, "--run-id", "day", "--engine", "delta-rs", "--json"]
        outcomes.append(placsp(ingest, workdir, f"ingest-{dataset}").ok())
        # Exit 1 when an error rule fails: compared too.
        outcomes.append(placsp(["quality", "check", *lake_args, "--record", "--json"], workdir, f"quality-{dataset}"))
    return outcomes


def objects(lake: str) -> dict[str, str]:
    """Every file or object of the lake but the Delta tables' own files: relative name -> sha256."""
    root = resolve_lake(lake)
    found = {}
    for path in root.rglob("*"):
        name = str(path)[len(str(root)) + 1 :]
        if path.is_file() and not name.startswith(("silver/", "dead_letters/", "reconciliation/", "quality_results/")):
            found[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def rows(lake: str, table: str) -> list[str]:
    root = resolve_lake(lake)
    return _canonical(root / table if table == QUALITY_RESULTS_TABLE else table_path(root, table), CLOCKS)


def without_clocks(text: str) -> Any:
    data = json.loads(text)
    if isinstance(data, dict):
        for key in ("extracted_at", "checked_at", "finished_at", "started_at", "seconds"):
            data.pop(key, None)
    return data


def test_a_daily_run_on_s3_writes_what_it_writes_on_local_disk(s3_lake: S3Lake, tmp_path: Path) -> None:
    local = str(tmp_path / "lake")
    with LoopbackSite(demo_routes()) as site:
        on_disk = daily_run(local, site, tmp_path / "local")
        on_s3 = daily_run(s3_lake.uri, site, tmp_path / "s3")

    for a, b in zip(on_disk, on_s3, strict=True):
        assert a.returncode == b.returncode, f"{b.args}: exit {b.returncode} on S3, {a.returncode} on disk\n{b.stderr}"
    local_objects, s3_objects = objects(local), objects(s3_lake.uri)
    assert {n for n in local_objects if "/pages/" in n}, "no page landed: the comparison would prove nothing"
    assert s3_objects.keys() == local_objects.keys()
    for name in s3_objects:
        if "/pages/" in name:  # pages byte for byte; manifests and reports but for their clocks
            assert s3_objects[name] == local_objects[name], name
        else:
            a = (resolve_lake(s3_lake.uri) / name).read_text()
            b = (Path(local) / name).read_text()
            assert without_clocks(a) == without_clocks(b), name
    for table in (*LAKE_TABLES, QUALITY_RESULTS_TABLE):
        assert rows(s3_lake.uri, table) == rows(local, table), table
    assert len(rows(s3_lake.uri, "entries")) > 900  # the archive's real entries reached Silver
    assert rows(s3_lake.uri, "dead_letters"), "the real broken 643 fragment is a dead letter on both"

    # The secret reached no object, no output and no scratch file.
    leaks = [n for n in s3_objects if s3_lake.secret.encode() in (resolve_lake(s3_lake.uri) / n).read_bytes()]
    leaks += [" ".join(o.args) for o in on_s3 if s3_lake.secret in o.stdout + o.stderr]
    leaks += [str(p) for p in (tmp_path / "s3").rglob("*") if p.is_file() and s3_lake.secret.encode() in p.read_bytes()]
    assert s3_lake.scratch.is_dir(), "the runs kept no scratch folder here: its grep would prove nothing"
    leaks += [str(p) for p in s3_lake.scratch.rglob("*") if p.is_file() and s3_lake.secret.encode() in p.read_bytes()]
    assert not leaks, f"the secret key is in {leaks}"


def test_an_extraction_killed_mid_page_leaves_no_partial_object_and_the_rerun_completes(
    s3_lake: S3Lake, tmp_path: Path
) -> None:
    lake = resolve_lake(s3_lake.uri)
    incoming = incoming_dir(lake, AGR.key)  # local scratch: a download never goes to the bucket part by part
    with LoopbackSite() as site:
        feed_site.serve(site, stall_big_at=150_000)
        killed = harness.run(
            feed_site.extract_args(lake, site), trigger=_partial_download(incoming), workdir=tmp_path, name="kill"
        )
        assert killed.killed, f"the extraction ended before the download was caught: {killed.stderr[-2000:]}"
        assert feed_site.assert_only_whole_pages(lake) == {AGR.head_file}

        feed_site.serve(site)
        rerun = harness.run(feed_site.extract_args(lake, site), workdir=tmp_path, name="rerun").ok()

    assert feed_site.assert_only_whole_pages(lake) == set(LANDED)
    manifest = json.loads(resolve_lake(rerun.json()["manifest"]).read_text())
    assert manifest["complete"] is True
    assert {p["file"] for p in manifest["pages"]} == feed_site.listed_files(lake)
    assert sum(p["entries"] for p in manifest["pages"]) == 42


def test_two_ingests_at_once_on_s3_write_everything_once(s3_lake: S3Lake, tmp_path: Path) -> None:
    lake = resolve_lake(s3_lake.uri)
    reference = resolve_lake(s3_lake.uri + "-reference")
    with LoopbackSite() as site:
        feed_site.serve(site)
        for root in (lake, reference):
            harness.run(feed_site.extract_args(root, site), workdir=tmp_path, name="extract").ok()
    ingest = ["ingest", "--dataset", AGR.key, "--engine", "delta-rs", "--json", "--lake"]
    harness.run([*ingest, str(reference), "--run-id", "clean"], workdir=tmp_path, name="clean").ok()

    harness.run_at_once(
        {run_id: [*ingest, str(lake), "--run-id", run_id] for run_id in ("one", "two")}, workdir=tmp_path
    )
    ignore = CLOCKS | harness.RUN_ID_COLUMNS
    for table in LAKE_TABLES:
        got = [r for r in read_table(table_path(lake, table)).to_pylist()]
        want = [r for r in read_table(table_path(reference, table)).to_pylist()]
        canonical = [
            sorted(json.dumps({k: v for k, v in r.items() if k not in ignore}, default=str) for r in t)
            for t in (got, want)
        ]
        assert canonical[0] == canonical[1], f"{table}: {len(got)} rows after two ingests, {len(want)} after one"
    assert len(read_table(table_path(lake, "entries"))) == 42


def _canonical(path: Any, ignore: frozenset[str]) -> list[str]:
    table = read_table(path).to_pylist()
    return sorted(
        json.dumps({k: v for k, v in r.items() if k not in ignore}, sort_keys=True, default=str) for r in table
    )


def _partial_download(incoming: Path) -> harness.Trigger:
    def check() -> str | None:
        for path in incoming.rglob("*") if incoming.is_dir() else []:
            try:
                if path.is_file() and path.stat().st_size >= 1 << 16:
                    return f"mid-download: {path.name}"
            except FileNotFoundError:
                continue
        return None

    return check


# An Airflow process as it starts a task: the provider's plugin (the PLACSP view) imported, no S3
# used, then a fork that reads the lake (LocalExecutor and the task supervisor fork their tasks).
_FORK_OF_A_FRESH_PROCESS = """
import os, signal, sys
import placsp_provider.ui.plugin  # what the scheduler and the API server load at start
from placsp_provider.lake_storage import put_new, read_object
from placsp_provider.lake import resolve_lake
path = resolve_lake(sys.argv[1]) / "runs" / "fresh-fork.json"
child = os.fork()
if child == 0:
    signal.alarm(20)
    try:
        assert put_new(path, b"{}") and read_object(str(path)) == b"{}"
        os._exit(0)
    except BaseException as err:
        print(repr(err), file=sys.stderr)
        os._exit(1)
_, status = os.waitpid(child, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_a_fork_of_a_process_that_never_used_s3_reads_the_lake(s3_lake: S3Lake) -> None:
    """The refusal below is for forks of a process whose S3 client exists, not for every fork: the
    system test's tasks failed so when the plugin made Airflow's processes import the lake code."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _FORK_OF_A_FRESH_PROCESS, s3_lake.uri],
        env=s3_lake.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def test_in_a_forked_child_the_lake_fails_at_once_instead_of_hanging(s3_lake: S3Lake) -> None:
    """Airflow's OpenLineage listener runs its hooks in a fork of the task, where obstore's client
    cannot work (a new one waits forever on the parent's runtime): a read there must fail at once, and
    the operators read the lake for their lineage before the fork (tests/s3/test_s3_lineage... the
    system test checks the events)."""
    import os
    import signal

    from placsp_provider.lake_storage import put_new, read_object

    path = resolve_lake(s3_lake.uri) / "runs" / "fork.json"
    assert put_new(path, b"{}")
    assert read_object(str(path)) == b"{}"  # the parent's client is made and used
    for read in (lambda: read_object(str(path)), lambda: resolve_lake(s3_lake.uri + "-other").joinpath("x").is_dir()):
        child = os.fork()
        if child == 0:  # pragma: no cover - the child reports by its exit status only
            signal.alarm(20)  # a hang ends as SIGALRM, not as a hung test
            try:
                read()
                os._exit(1)
            except RuntimeError:
                os._exit(0)
            except BaseException:
                os._exit(2)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0, f"in a fork the read gave {os.waitstatus_to_exitcode(status)}"
