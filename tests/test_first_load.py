"""A first load of a dataset: its pages parsed on worker processes and its rows appended, not MERGEd
(`ingest.local_parse`, `delta_rs.first_load`, decision 0053).

The appends must leave exactly what the MERGEs leave, on a batch that walks the write's rules at once:
an entry in three versions over two pages, a same-`updated` correction from a later page, a tombstone
older than its entry's version and newer ones that delete, a version held twice in one page, dead
letters, a file quarantined whole and a refused page. Real delta-rs, real worker processes, no JVM.
"""

from __future__ import annotations

import contextvars
import logging
import pickle
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from placsp_provider.datasets import get_dataset
from placsp_provider.delta_rs.tables import ensure_tables
from placsp_provider.ingest.request import IngestRequest
from placsp_provider.ingest.run import ingest
from placsp_provider.lake import table_path
from tests.pages import day, page
from tests.reliability.harness import assert_nothing_twice, assert_same_lake
from tests.spark.bronze import land
from tests.spark.test_silver_ingest import _traps, _two_results

pytestmark = pytest.mark.unit

DATASET = "agregadas"


def _pages() -> dict[str, bytes]:
    refused = b'<?xml version="1.0"?>\n<!DOCTYPE feed [<!ENTITY x "y">]>\n' + page([(81, day(5))]).split(b"?>", 1)[1]
    return {
        # 101: its tombstone of the 4th is older than this version: not applied; the 7th's is (c)
        "a.atom": page([(101, day(5)), (102, day(2)), (103, day(3))], tombstones=[(101, day(4, 1))]),
        "b.atom": _two_results(page([(102, day(3)), (103, day(2))])),  # 102 newer, whole; 103 older: loses
        "c.atom": page([], tombstones=[(101, day(7)), (102, day(1)), (109, day(7))]),
        "d.atom": page([(109, day(6)), (105, day(8)), (106, day(8)), (105, day(8))]),  # 109: deleted; 105 twice
        **_traps(),
        "refused.atom": refused,
    }


def _rows(lake: Path, table: str) -> list[dict[str, Any]]:
    return DeltaTable(str(table_path(lake, table))).to_pyarrow_table().to_pylist()


def _operations(lake: Path, table: str) -> list[str]:
    return [h["operation"] for h in reversed(DeltaTable(str(table_path(lake, table))).history())]


def test_a_first_load_appends_exactly_what_the_merges_leave(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from placsp_provider.delta_rs import first_load
    from placsp_provider.ingest import local_parse

    appended, merged = tmp_path / "appended", tmp_path / "merged"
    pages = _pages()
    for lake in (appended, merged):
        land(lake, DATASET, pages, "2022-01-05")
    request = IngestRequest(get_dataset(DATASET), appended, "r1")

    monkeypatch.setattr(local_parse, "POOL_MIN_MB", 0.0)  # the pages are small: parsed on workers anyway
    monkeypatch.setenv(local_parse.WORKERS_ENV, "2")
    with caplog.at_level(logging.INFO, logger="placsp_provider.ingest.local_parse"):
        by_appends = ingest(request, "delta-rs")
    assert f"page 3 of {len(pages)} parsed" in caplog.text and "(2 worker processes)" in caplog.text

    monkeypatch.setenv(local_parse.WORKERS_ENV, "1")  # this process parses; the same dataset MERGEd
    monkeypatch.setattr(first_load, "is_first_load", lambda lake, dataset: False)
    by_merges = ingest(IngestRequest(get_dataset(DATASET), merged, "r1"), "delta-rs")

    counts = assert_same_lake(appended, merged)
    assert by_appends["merge"] == by_merges["merge"] and by_appends["conservation"] == by_merges["conservation"]
    # Both ways really ran: appends ("WRITE") into one lake, MERGEs into the other.
    for table in ("entries", "lots", "documents", "results", "tombstones"):
        if counts[table]:
            assert _operations(appended, table)[1:] == ["WRITE"], table
            assert set(_operations(merged, table)[1:]) == {"MERGE"}, table
    # And the batch reached the rules it is for.
    entries = {r["entry_id"].rsplit("/", 1)[-1]: r for r in _rows(appended, "entries")}
    assert entries["101"]["deleted_at"].day == 7 and entries["109"]["deleted_at"].day == 7
    assert (
        entries["102"]["deleted_at"] is None
        and entries["102"]["result_count"] == 2
        and "/b." in entries["102"]["_source_file"]
    )
    assert entries["103"]["updated"].day == 3 and "/a." in entries["103"]["_source_file"]
    assert by_appends["merge"]["tombstones"]["applied_to_entries"] == 2
    letters = {r["error_type"] for r in _rows(appended, "dead_letters")}
    assert {"count_mismatch", "dtd_refused", "invalid_amount"} <= letters
    assert_nothing_twice(appended)


def test_a_first_load_meets_a_writer_of_its_dataset_that_committed_since_by_merging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer of the dataset commits after this one saw the dataset empty: the appends are
    refused (by the dataset's txn, and by delta-rs's own check of files added to the partition they
    write), and the write done again decides afresh: it MERGEs, and no entry is in Silver twice."""
    from placsp_provider.delta_rs import first_load

    lake = tmp_path / "lake"
    ours = land(lake, DATASET, {"ours.atom": page([(1, day(5)), (2, day(5))])}, "2022-01-05")
    theirs = land(lake, DATASET, {"theirs.atom": page([(2, day(6))])}, "2022-01-06")
    ensure_tables(lake)

    saw_empty = first_load.is_first_load
    calls: list[bool] = []  # what our writer saw, each time it asked
    theirs_running = []

    def meanwhile(lake_: Any, dataset: str) -> bool:
        empty = saw_empty(lake_, dataset)
        if theirs_running:  # the other writer asking: not recorded
            return empty
        if not calls:  # right after our first check, the other writer (its own table objects) commits
            theirs_running.append(True)
            request = IngestRequest(get_dataset(DATASET), lake, "theirs", manifests=(theirs,))
            contextvars.Context().run(ingest, request, "delta-rs")
            theirs_running.clear()
        calls.append(empty)
        return empty

    monkeypatch.setattr(first_load, "is_first_load", meanwhile)
    ingest(IngestRequest(get_dataset(DATASET), lake, "ours", manifests=(ours,)), "delta-rs")
    assert calls == [True, False]  # refused, then decided again from the new snapshot
    assert_nothing_twice(lake)
    rows = _rows(lake, "entries")
    assert {(r["entry_id"][-1], r["updated"].day) for r in rows} == {("1", 5), ("2", 6)}
    assert _operations(lake, "entries")[1:] == ["WRITE", "MERGE"]  # theirs appended, ours MERGEd


def test_a_first_load_goes_to_delta_rs_or_to_the_spark_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from placsp_provider.ingest import engines

    lake = tmp_path / "lake"
    land(lake, DATASET, {"a.atom": page([(1, day(3))])}, "2022-01-03")
    request = IngestRequest(get_dataset(DATASET), lake, "r1")
    for limit in ("512", "0.001"):  # within the write limit and past it (the page is larger than 1 KB)
        monkeypatch.setenv(engines.WRITE_MAX_MB_ENV, limit)
        assert engines.choose_engine(request) == "delta-rs"  # a fresh lake
        assert engines.choose_engine(request, spark_cluster=lambda: True) == "spark+delta-rs"
    ensure_tables(lake)  # the tables exist, without a row of the dataset: a first load still
    assert engines.choose_engine(request, spark_cluster=lambda: True) == "delta-rs"  # a daily batch's size
    monkeypatch.setenv(engines.MAX_MB_ENV, "0")
    assert engines.choose_engine(request) == "delta-rs"
    assert engines.choose_engine(request, spark_cluster=lambda: True) == "spark+delta-rs"
    monkeypatch.delenv(engines.WRITE_MAX_MB_ENV)
    ingest(request, "delta-rs")
    land(lake, DATASET, {"b.atom": page([(2, day(4))])}, "2022-01-04")
    # The dataset is loaded: MERGEs, in Spark's driver by delta-rs, or by Spark past the write limit.
    assert engines.choose_engine(request) == "spark+delta-rs"
    monkeypatch.setenv(engines.WRITE_MAX_MB_ENV, "0.001")
    assert engines.choose_engine(request) == "spark"
    assert engines.choose_engine(request, spark_cluster=lambda: True) == "spark"


def test_a_page_error_raised_in_a_worker_reaches_the_parent_whole() -> None:
    from placsp_provider.errors import BronzePageError

    err = BronzePageError(DATASET, "bronze/x.atom", "cannot stage the page's parsed rows", stage="staging")
    again = pickle.loads(pickle.dumps(err))
    assert (type(again), str(again), again.file, again.reason, again.stage) == (
        BronzePageError,
        str(err),
        "bronze/x.atom",
        err.reason,
        "staging",
    )


def test_a_page_gone_when_its_worker_reads_it_is_a_clear_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a local lake each worker reads its own page: one removed after the run listed it (the run
    checks first, so it is gone in between) is the worker's clear error, raised here whole."""
    from placsp_provider.errors import BronzePageError
    from placsp_provider.ingest import local_parse
    from placsp_provider.ingest.request import manifest_pages

    pages = {"a.atom": page([(101, day(5))]), "b.atom": page([(102, day(5))]), "c.atom": page([(103, day(5))])}
    land(tmp_path, DATASET, pages, "2022-01-05")
    landed = list(manifest_pages(IngestRequest(get_dataset(DATASET), tmp_path, "r1")).values())
    (gone,) = [p for p in landed if "/b." in p.file]
    (tmp_path / gone.file).unlink()
    monkeypatch.setattr(local_parse, "POOL_MIN_MB", 0.0)
    monkeypatch.setenv(local_parse.WORKERS_ENV, "2")
    with pytest.raises(BronzePageError) as raised:
        local_parse.stage_pages_here(get_dataset(DATASET), tmp_path, landed, tmp_path / "staging")
    assert str(raised.value).startswith(f"dataset {DATASET}: {gone.file}: stage parse: "), raised.value
    assert "No such file" in str(raised.value) and "removed after landing" in str(raised.value)


def _children(pid: int) -> list[int]:
    """The live children of `pid`, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_a_worker_killed_from_outside_is_a_clear_error_naming_its_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker killed mid-page (the out-of-memory killer) leaves the pool broken, with no answer: the
    error names the pages that were being parsed, says why, and that nothing was written."""
    import os
    import signal
    import threading
    import time
    from multiprocessing import forkserver

    from placsp_provider.errors import BronzePageError
    from placsp_provider.ingest import local_parse
    from placsp_provider.ingest.request import manifest_pages

    pages = {"a.atom": page([(101, day(5))]), "b.atom": page([(102, day(5))])}
    land(tmp_path, DATASET, pages, "2022-01-05")
    landed = list(manifest_pages(IngestRequest(get_dataset(DATASET), tmp_path, "r1")).values())
    for landed_page in landed:  # each worker blocks reading its page until it is killed
        (tmp_path / landed_page.file).unlink()
        os.mkfifo(tmp_path / landed_page.file)
    monkeypatch.setattr(local_parse, "POOL_MIN_MB", 0.0)
    monkeypatch.setenv(local_parse.WORKERS_ENV, "2")
    raised: list[BaseException] = []

    def run() -> None:
        try:
            local_parse.stage_pages_here(get_dataset(DATASET), tmp_path, landed, tmp_path / "staging")
        except BaseException as err:  # handed to the test's thread
            raised.append(err)

    parsing = threading.Thread(target=run)
    parsing.start()
    workers: list[int] = []
    deadline = time.monotonic() + 60
    while len(workers) < 2 and time.monotonic() < deadline:  # the pool's workers: the forkserver's children
        time.sleep(0.1)
        server = getattr(forkserver._forkserver, "_forkserver_pid", None)
        workers = _children(server) if server else []
    assert len(workers) == 2, workers
    for worker in workers:  # both blocked on their pages; the first kill breaks the pool
        os.kill(worker, signal.SIGKILL)
    parsing.join(60)
    assert not parsing.is_alive()
    (err,) = raised
    assert isinstance(err, BronzePageError), repr(err)
    files = sorted(p.file for p in landed)
    assert str(err).startswith(f"dataset {DATASET}: {files[0]}: stage parse: a parse worker process ended abruptly")
    assert f"or one of {files[1]}" in str(err) and "Nothing of this run was written" in str(err)


def test_the_parse_workers_of_a_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    import multiprocessing

    from placsp_provider.bronze.manifest import LandedPage
    from placsp_provider.errors import ConfigError
    from placsp_provider.ingest import local_parse

    def pages(n: int, mb: float) -> list[LandedPage]:
        size = int(mb * 2**20)
        return [
            LandedPage("u", f"p{i}", size, "", 0, 0, None, None, None, None, True, None, "feed", True) for i in range(n)
        ]

    monkeypatch.setattr(local_parse, "usable_cpus", lambda: 4)
    assert local_parse.parse_workers(pages(3, 1)) == 1  # a daily batch: this process
    assert local_parse.parse_workers(pages(3, 20)) == 3  # never more than the pages
    assert local_parse.parse_workers(pages(8, 20)) == 4
    monkeypatch.setenv(local_parse.WORKERS_ENV, "2")
    assert local_parse.parse_workers(pages(8, 20)) == 2
    monkeypatch.setattr(multiprocessing.current_process(), "daemon", True, raising=False)
    assert local_parse.parse_workers(pages(8, 20)) == 1  # a daemonic process may not start any
    monkeypatch.setenv(local_parse.WORKERS_ENV, "two")
    with pytest.raises(ConfigError, match="PLACSP_PARSE_WORKERS must be a whole number"):
        local_parse.parse_workers(pages(8, 20))
