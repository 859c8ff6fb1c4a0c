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
