"""Delta commit conflicts are retried, other errors are not, and retrying gives up in the end.

The rule is pinned down with Delta's own exception classes raised by a stand-in write; then two
real writers collide on one partition. (test_replay.py races a whole ingest against a replay and
checks the end state; whether those two collide depends on timing.)
"""

from __future__ import annotations

import pytest
from delta.exceptions import ConcurrentAppendException

from placsp_provider.spark.silver_merge import is_commit_conflict, retry_on_conflict


def flaky(failures: list[Exception]):
    calls = []

    def write() -> str:
        calls.append(1)
        if failures:
            raise failures.pop(0)
        return "written"

    return write, calls


@pytest.mark.unit
def test_a_conflict_is_written_again_until_it_succeeds() -> None:
    write, calls = flaky([ConcurrentAppendException("Files were added to partition [dataset=agregadas]")] * 2)
    slept: list[float] = []
    assert retry_on_conflict(write, what="test", sleep=slept.append) == "written"
    assert len(calls) == 3 and slept == [0.5, 1.0]


@pytest.mark.unit
def test_other_errors_are_not_retried() -> None:
    write, calls = flaky([ValueError("a bug")])
    with pytest.raises(ValueError, match="a bug"):
        retry_on_conflict(write, what="test", sleep=lambda _: None)
    assert len(calls) == 1


@pytest.mark.unit
def test_gives_up_after_the_last_attempt() -> None:
    write, calls = flaky([ConcurrentAppendException("again")] * 10)
    with pytest.raises(ConcurrentAppendException):
        retry_on_conflict(write, what="test", attempts=3, sleep=lambda _: None)
    assert len(calls) == 3


@pytest.mark.unit
def test_conflicts_are_recognised_by_class_or_by_delta_error_class() -> None:
    assert is_commit_conflict(ConcurrentAppendException("x"))
    assert is_commit_conflict(RuntimeError("[DELTA_CONCURRENT_APPEND.WITHOUT_HINT] Files were added"))
    assert not is_commit_conflict(RuntimeError("[DELTA_MISSING_COLUMN] no such column"))


@pytest.mark.spark
def test_two_writers_on_one_partition_collide_for_real_and_lose_nothing(spark, tmp_path, caplog) -> None:
    """Real Delta, real threads: two writers insert dead letters into the same partition at once.

    Delta refuses some commits (ConcurrentAppendException); each is written again and every row
    lands once. Rounds repeat (at most 3) until at least one collision was seen, so the retry path
    is proven to have run, not just the happy path.
    """
    import logging
    import threading
    from datetime import UTC, datetime

    from placsp_provider.lake import table_path
    from placsp_provider.parser.version import PARSER_VERSION
    from placsp_provider.spark.silver_merge import insert_only
    from placsp_provider.spark.tables import ensure_tables, spark_table_schema

    lake = tmp_path / "lake"
    ensure_tables(spark, lake)
    schema = spark_table_schema("dead_letters")

    def letter(n: int) -> list:
        row = {
            "dataset": "agregadas",
            "source_file": "bronze/agregadas/pages/p.atom",
            "stage": "parse",
            "error_type": "xml_syntax",
            "error_message": "m",
            "raw_record": f"<entry>{n}",
            "namespace_context": "",
            "record_kind": "entry",
            "entry_id": None,
            "record_offset": n,
            "dead_letter_id": f"{n:064d}",
            "run_id": "race",
            "processing_timestamp": datetime.now(UTC),
            "status": "quarantined",
            "attempts": 0,
            "last_attempt_at": None,
            "replayed_at": None,
            "replay_run_id": None,
            "raw_bytes": f"<entry>{n}".encode(),
            "parser_version": PARSER_VERSION,
        }
        return [row[f.name] for f in schema.fields]

    def writer(base: int, errors: list) -> None:
        try:
            for n in range(base, base + 4):
                df = spark.createDataFrame([letter(n)], schema)
                retry_on_conflict(
                    lambda df=df: insert_only(spark, lake, "dead_letters", "agregadas", df, ("dead_letter_id",)),
                    what=f"writer {base}",
                )
        except BaseException as err:  # surfaced below
            errors.append(err)

    caplog.set_level(logging.WARNING, logger="placsp_provider.spark.silver_merge")
    written = 0
    for round_ in range(3):
        errors: list = []
        threads = [threading.Thread(target=writer, args=(1000 * round_ + 100 * k, errors)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        written += 8
        if any("concurrent writer committed first" in r.getMessage() for r in caplog.records):
            break
    else:
        pytest.fail("no commit conflict in 3 rounds of concurrent writers: the retry path was not exercised")
    stored = spark.read.format("delta").load(str(table_path(lake, "dead_letters")))
    assert stored.count() == written and stored.select("dead_letter_id").distinct().count() == written


# -- writes to different tables at once (`run_together`) ------------------------------------------
@pytest.mark.spark
def test_independent_writes_run_at_once_with_the_callers_job_group(spark) -> None:
    import threading

    from placsp_provider.spark.silver_merge import run_together

    both_started = threading.Barrier(2, timeout=30)  # only passes if the two steps run at the same time

    def step(n: int):
        def run() -> tuple[int, str | None, int]:
            both_started.wait()
            group = spark.sparkContext.getLocalProperty("spark.jobGroup.id")
            return n, group, spark.range(n).count()  # a real Spark job from the thread

        return run

    spark.sparkContext.setJobGroup("placsp-test-together", "run_together")
    try:
        assert run_together(spark, {"a": step(3), "b": step(5)}) == {
            "a": (3, "placsp-test-together", 3),
            "b": (5, "placsp-test-together", 5),
        }
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)


@pytest.mark.spark
def test_a_failed_write_waits_for_the_others_and_a_bug_outranks_a_conflict(spark) -> None:
    import threading

    from placsp_provider.spark.silver_merge import run_together

    finished: list[str] = []
    release = threading.Event()

    def conflict() -> None:
        raise ConcurrentAppendException("Files were added to partition [dataset=agregadas]")

    def bug() -> None:
        release.wait(5)
        raise ValueError("a bug in one write")

    def slow() -> str:
        release.set()
        threading.Event().wait(0.5)
        finished.append("slow")
        return "written"

    with pytest.raises(ValueError, match="a bug in one write"):
        run_together(spark, {"conflict": conflict, "bug": bug, "slow": slow})
    assert finished == ["slow"]  # not left running behind the error: a retry redoes the whole write
    with pytest.raises(ConcurrentAppendException):  # only conflicts: the conflict, so it is retried
        run_together(spark, {"conflict": conflict, "slow": slow})


# -- one writer of a dataset at a time, across engines (ingest/writer_txn, decision 0052) -----------
@pytest.mark.spark
def test_a_spark_ingest_refuses_a_stale_delta_rs_writer_of_its_dataset(spark, tmp_path) -> None:
    """Spark's MERGEs carry the dataset's txn as delta-rs's do: a delta-rs writer that read `entries`
    before a Spark ingest of its dataset committed is refused, though its bound reads none of its files."""
    import contextvars

    import pyarrow as pa
    from deltalake.exceptions import CommitFailedError

    from placsp_provider.delta_rs import silver_write
    from tests.test_one_writer_per_dataset import LATER, MINE, _pages
    from tests.test_one_writer_per_dataset import _ingest as ingest_with_delta_rs

    lake = tmp_path / "lake"
    ingest_with_delta_rs(lake, MINE, "first", {"a.atom": _pages(MINE, [(1, _day(5))])}, "2022-01-05")
    with silver_write._one_write():
        stale = silver_write._open(lake, "entries")
        row = stale.to_pyarrow_table().slice(0, 1)
        row = row.set_column(row.schema.get_field_index("updated"), "updated", pa.array([LATER], row["updated"].type))
        pages = {"b.atom": _pages(MINE, [(7, _day(6))])}
        contextvars.Context().run(_ingest_with_spark, spark, lake, pages)
        merge = silver_write._merge(lake, "entries", row, ("dataset", "entry_id"), MINE, LATER)
        with pytest.raises(CommitFailedError, match=r"[Cc]oncurrent"):
            merge.when_matched_update_all().when_not_matched_insert_all().execute()


@pytest.mark.spark
def test_a_spark_merge_skipped_for_a_txn_committed_since_is_a_conflict_and_written_again(spark, tmp_path) -> None:
    """Delta skips a MERGE whose txn version is not above the recorded one. A writer of the dataset
    that commits between the table's read and the MERGE makes it so: raised as a conflict, not lost."""
    from pyspark.sql import functions as F

    from placsp_provider.ingest.writer_txn import ConcurrentDatasetWriteError
    from placsp_provider.lake import table_path
    from placsp_provider.spark import silver_merge
    from tests.test_one_writer_per_dataset import MINE, _pages
    from tests.test_one_writer_per_dataset import _ingest as ingest_with_delta_rs

    lake = tmp_path / "lake"
    ingest_with_delta_rs(lake, MINE, "first", {"a.atom": _pages(MINE, [(1, _day(5))])}, "2022-01-05")
    attempts: list[int] = []

    def write() -> dict[str, int]:
        target = silver_merge._delta(spark, lake, "entries", MINE)  # reads the recorded txn version
        if not attempts:  # the first time, another writer of the dataset commits meanwhile
            ingest_with_delta_rs(lake, MINE, "meanwhile", {"b.atom": _pages(MINE, [(7, _day(6))])}, "2022-01-06")
        attempts.append(1)
        source = target.toDF().where(F.col("entry_id").endswith("/1")).withColumn("deletion_type", F.lit("test"))
        merge = silver_merge._merge(target, source, ("dataset", "entry_id"), MINE)
        return silver_merge._execute(merge.whenMatchedUpdateAll())

    with pytest.raises(ConcurrentDatasetWriteError):
        write()
    assert silver_merge.is_commit_conflict(ConcurrentDatasetWriteError("x"))
    assert retry_on_conflict(write, what="test", sleep=lambda _: None)["updated"] == 1
    assert len(attempts) == 2
    rows = spark.read.format("delta").load(str(table_path(lake, "entries"))).collect()
    assert sorted((r.entry_id[-1], r.deletion_type) for r in rows) == [("1", "test"), ("7", None)]


def _day(d: int) -> str:
    from tests.pages import day

    return day(d)


def _ingest_with_spark(spark, lake, pages: dict[str, bytes]) -> None:
    from placsp_provider.datasets import get_dataset
    from placsp_provider.ingest.request import IngestRequest
    from placsp_provider.ingest.run import ingest
    from tests.spark.bronze import land
    from tests.test_one_writer_per_dataset import MINE

    manifest = land(lake, MINE, pages, interval="2022-01-06")
    ingest(IngestRequest(get_dataset(MINE), lake, "by-spark", manifests=(manifest,)), "spark", spark=spark)
