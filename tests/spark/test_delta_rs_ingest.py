"""The ingest without a JVM (delta-rs), and Spark's parse written by delta-rs, against the Spark ingest:
the same batches into copies of one lake must leave every table equal, row for row, after every batch.

The batches walk the write's rules: newer and older versions, a tombstone before and after its
entry, a revived entry, a same-`updated` correction that loses, a page of tombstones only, a version
held twice in one page, the Spark XML traps (dead letters, a page-level failure, a file that does not
add up and is quarantined whole), and a forced rerun of everything. After each batch the rules'
outcomes are checked on the tables (newest wins, a tombstone applies only when not older, a revived
entry, a same-`updated` version from a later page wins whole: decision 0036) and the run is conserved
against lxml's reading of its pages. Spark and delta-rs (real, local) read the lakes; nothing is mocked.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from deltalake import DeltaTable

from placsp_provider.datasets import get_dataset
from placsp_provider.ingest import engines
from placsp_provider.ingest.request import IngestRequest
from placsp_provider.ingest.run import ingest as run_ingest
from placsp_provider.lake import LAKE_TABLES, table_path
from tests.conservation import assert_conserved, assert_conserved_with_delta_rs
from tests.pages import day, page
from tests.spark.bronze import land
from tests.spark.test_silver_ingest import _traps, _two_results, listed

pytestmark = pytest.mark.spark

# Clock columns differ between any two runs, whatever engine wrote them.
_CLOCKS = {"_ingested_at", "ingested_at", "processing_timestamp"}


def _contents(lake: Path) -> dict[str, list[str]]:
    """Every table's rows, clocks aside, sorted (read with delta-rs: 126 reads, a third of Spark's time)."""
    out = {}
    for name in LAKE_TABLES:
        rows = _read(lake, name)
        out[name] = sorted(repr(sorted((k, v) for k, v in r.items() if k not in _CLOCKS)) for r in rows)
    return out


def _read(lake: Path, name: str) -> list[dict]:
    from deltalake import DeltaTable

    return DeltaTable(str(table_path(lake, name))).to_pyarrow_table().to_pylist()


def _rules_hold(lake: Path, step: int) -> None:
    """What each batch of `_batches()` must have done to the tables, whichever engine wrote them."""
    entries = {r["entry_id"].rsplit("/", 1)[-1]: r for r in _read(lake, "entries")}
    day_of = lambda when: None if when is None else when.strftime("%m-%d")  # noqa: E731
    if step == 2:  # 1: newer wins and its older tombstone does not apply; 2: an older copy loses;
        # 3: updated before the tombstone that came first: deleted
        assert (day_of(entries["1"]["updated"]), entries["1"]["deleted_at"]) == ("01-05", None)
        assert day_of(entries["2"]["updated"]) == "01-03" and day_of(entries["3"]["deleted_at"]) == "01-04"
    if step == 3:  # 3 comes back newer than its tombstone: revived
        assert (day_of(entries["3"]["updated"]), entries["3"]["deleted_at"]) == ("01-06", None)
        assert len(_read(lake, "tombstones")) == 2
    if step == 4:  # 2 again at the same `updated`, one more result, from a later page: it wins, whole
        assert "/p4." in entries["2"]["_source_file"] and entries["2"]["result_count"] == 2
        results = [r for r in _read(lake, "results") if r["entry_id"] == entries["2"]["entry_id"]]
        assert [r["_source_file"].split("/")[-1][:3] for r in results] == ["p4.", "p4."]
    if step == 5:  # tombstones only: the one newer than entry 1 applies, the one older than 2 does not
        assert day_of(entries["1"]["deleted_at"]) == "01-07" and entries["2"]["deleted_at"] is None


def _batches() -> list[tuple[str, dict[str, bytes]]]:
    ok = lambda n: (n, day(5, 10))  # noqa: E731
    refused = b'<?xml version="1.0"?>\n<!DOCTYPE feed [<!ENTITY x "y">]>\n' + page([ok(81)]).split(b"?>", 1)[1]
    return [
        ("2022-01-05", {"p2.atom": page([(1, day(5)), (2, day(2)), (3, day(3))], tombstones=[(1, day(4, 1))])}),
        ("2022-01-06", {"p3.atom": _two_results(page([(3, day(6)), (4, day(6))]))}),
        ("2022-01-07", {"p4.atom": _two_results(page([(2, day(3))]))}),  # same `updated`, a later page: wins
        ("2022-01-08", {"p5.atom": page([], tombstones=[(1, day(7)), (2, day(1)), (9, day(7))])}),
        ("2022-01-09", {"p6.atom": page([(9, day(6)), (5, day(8)), (6, day(8)), (5, day(8))])}),  # 9: deleted
        ("2022-01-10", {**_traps(), "refused.atom": refused}),
    ]


def test_delta_rs_leaves_every_table_as_spark_does(spark, tmp_path: Path) -> None:
    """Three lakes: Spark parses and writes; delta-rs does both in this process (from the second batch:
    a fresh lake's tables come from Spark); Spark parses and delta-rs writes (from the first batch)."""
    ds = get_dataset("agregadas")
    spark_lake, rs_lake, mixed_lake = tmp_path / "spark", tmp_path / "delta-rs", tmp_path / "spark+delta-rs"
    first = {"p1.atom": page([(1, day(3)), (2, day(3))], tombstones=[(3, day(4))])}
    land(spark_lake, "agregadas", first, "2022-01-03")
    shutil.copytree(spark_lake, mixed_lake)
    run_ingest(IngestRequest(ds, spark_lake, "r1"), "spark", spark=spark)  # the lake's tables come from Spark
    shutil.copytree(spark_lake, rs_lake)
    run_ingest(IngestRequest(ds, mixed_lake, "r1"), "spark+delta-rs", spark=spark)
    assert _contents(mixed_lake) == _contents(spark_lake), "after the fresh lake's first batch"
    assert assert_conserved_with_delta_rs(mixed_lake, "agregadas", "r1", listed(first)).silver_rows_of_run == 3
    # Landed once, copied: the Bronze files, manifests and their names are the same in every lake.
    for step, (interval, pages) in enumerate(_batches(), start=2):
        land(spark_lake, "agregadas", pages, interval)
        for other in (rs_lake, mixed_lake):
            shutil.rmtree(other / "bronze")
            shutil.copytree(spark_lake / "bronze", other / "bronze")
        run_id = f"r{step}"
        by_spark = run_ingest(IngestRequest(ds, spark_lake, run_id), "spark", spark=spark)
        by_rs = run_ingest(IngestRequest(ds, rs_lake, run_id), "delta-rs")
        by_mixed = run_ingest(IngestRequest(ds, mixed_lake, run_id), "spark+delta-rs", spark=spark)
        expected = _contents(spark_lake)
        assert _contents(rs_lake) == expected, f"after batch {step} ({interval})"
        assert _contents(mixed_lake) == expected, f"after batch {step} ({interval}), Spark parsing"
        _rules_hold(rs_lake, step)
        if step < 7:  # the traps' batch is conserved in test_silver_ingest, with the records it breaks
            accounted = assert_conserved_with_delta_rs(rs_lake, "agregadas", run_id, listed(pages))
            assert accounted.silver_rows_of_run == {2: 3, 3: 2, 4: 1, 5: 3, 6: 3}[step], f"batch {step}"
        for by in (by_rs, by_mixed):
            assert by["merge"] == by_spark["merge"], f"batch {step}"
            assert by["conservation"] == by_spark["conservation"]
    # The batches did reach every rule: a tombstone applied, a whole file quarantined, one refused.
    deleted = spark.read.format("delta").load(str(table_path(rs_lake, "entries"))).where("deleted_at IS NOT NULL")
    assert {r.entry_id.rsplit("/", 1)[-1] for r in deleted.collect()} >= {"1", "9"}
    letters = spark.read.format("delta").load(str(table_path(rs_lake, "dead_letters")))
    assert {"count_mismatch", "dtd_refused", "invalid_amount"} <= {r.error_type for r in letters.collect()}
    _readers_answer_alike(spark_lake, rs_lake, last_run=f"r{len(_batches()) + 1}")
    for lake in (spark_lake, rs_lake, mixed_lake):
        _replay_selects_as_spark_sql_would(spark, lake)
    p6 = _batches()[4][1]  # entry 5 twice: counted once, through Spark's reading too
    assert assert_conserved(spark, rs_lake, "agregadas", "r6", listed(p6)).silver_rows_of_run == 3

    before = _contents(rs_lake)
    again = run_ingest(IngestRequest(ds, rs_lake, "r-again", reprocess=True), "delta-rs")
    changed = {t: m for t, m in again["merge"].items() if any(m.get(k) for k in ("inserted", "updated", "deleted"))}
    assert changed == {} and again["files"]["ingested"] == 1 + sum(len(p) for _, p in _batches())
    assert _contents(rs_lake) == before


def _readers_answer_alike(spark_lake: Path, rs_lake: Path, last_run: str) -> None:
    """The readers without a JVM (the dead-letter gate's counts, the data contracts) give the same
    answers on the lake delta-rs wrote as on Spark's. Its files hold `string_view` strings, which
    pyarrow would not compare with `string` ones (placsp_provider/table_files.py)."""
    from placsp_provider.dead_letters.stats import DeadLetterQuery, count
    from placsp_provider.quality.engine import CheckRequest, run_checks

    queries = [
        {},
        {"run_id": last_run},
        {
            "run_id": last_run,
            "status": "quarantined",
            "stages": ("parse", "validation", "reconciliation"),
            "error_types": ("invalid_amount", "count_mismatch", "dtd_refused", "xml_syntax"),
        },
    ]
    for query in queries:
        got = [count(DeadLetterQuery(str(lake), dataset="agregadas", **query)) for lake in (spark_lake, rs_lake)]
        assert got[0].total > 0, query  # the comparison below cannot pass on empty answers
        # Samples are the first rows a scan meets: which ones depends on the files, not their number.
        answers = [(c.total, c.by_stage, c.by_error_type, c.by_status, len(c.samples)) for c in got]
        assert answers[1] == answers[0], query
    reports = [run_checks(CheckRequest(str(lake), "agregadas", run_id=last_run)) for lake in (spark_lake, rs_lake)]
    results = [sorted((r.rule_id, r.actual, r.success) for r in report.results) for report in reports]
    assert len(results[0]) > 20 and results[1] == results[0]


def _replay_selects_as_spark_sql_would(spark, lake: Path) -> None:
    """The replay's selection (delta-rs in the driver) against the same filters, order and limit in
    Spark SQL, on the dead letters of each writer (string and string_view files)."""
    from datetime import UTC, datetime, timedelta

    from pyspark.sql import functions as F

    from placsp_provider.dead_letters.selection import select_dead_letters

    letters = spark.read.format("delta").load(str(table_path(lake, "dead_letters")))
    ids = sorted(r.dead_letter_id for r in letters.collect())
    today = datetime.now(UTC).date()
    cases = [
        ({}, None),
        ({"stages": ("parse", "reconciliation")}, F.col("stage").isin("parse", "reconciliation")),
        ({"error_types": ("invalid_amount",)}, F.col("error_type") == "invalid_amount"),
        ({"dead_letter_ids": tuple(ids[::2])}, F.col("dead_letter_id").isin(ids[::2])),
        ({"since": today, "until": today}, F.to_date("processing_timestamp") == F.lit(today)),
        ({"until": today - timedelta(days=1)}, F.lit(False)),
    ]
    for filters, condition in cases:
        for limit in (2, 100):
            got = select_dead_letters(
                lake, "agregadas", ("dead_letter_id", "attempts", "raw_record"), max_records=limit, **filters
            )
            chosen = letters.where(F.col("status").isin("quarantined", "fixed"))
            if condition is not None:
                chosen = chosen.where(condition)
            want = chosen.orderBy("processing_timestamp", "dead_letter_id").limit(limit)
            assert got.column("dead_letter_id").to_pylist() == [r.dead_letter_id for r in want.collect()], filters
    assert len(ids) > 2 and datetime.now(UTC).date() == today  # the cases above had rows to choose from


def test_the_engine_is_delta_rs_only_for_a_small_batch_into_existing_tables(spark, tmp_path: Path, monkeypatch) -> None:
    ds = get_dataset("agregadas")
    lake = tmp_path / "lake"
    land(lake, "agregadas", {"a.atom": page([(1, day(3))])}, "2022-01-03")
    request = IngestRequest(ds, lake, "r1")
    # No tables yet: a first load, which delta-rs appends, parsed here, or on the Spark cluster, which
    # then creates the tables (tests/test_first_load.py).
    assert engines.choose_engine(request) == "delta-rs"
    assert engines.choose_engine(request, spark_cluster=lambda: True) == "spark+delta-rs"
    monkeypatch.setenv(engines.WRITE_MAX_MB_ENV, "0.001")  # the page is larger than 1 KB
    assert engines.choose_engine(request) == "delta-rs"
    assert engines.choose_engine(request, spark_cluster=lambda: True) == "spark+delta-rs"
    # delta-rs creates a fresh lake's tables itself (an S3 lake, an install without Spark): the same
    # columns, types, nullability and partitioning as the tables Spark creates.
    fresh = tmp_path / "fresh"
    shutil.copytree(lake, fresh)
    run_ingest(IngestRequest(ds, fresh, "r1"), "delta-rs")
    run_ingest(request, "spark", spark=spark)
    for table in LAKE_TABLES:
        by_spark, by_delta_rs = DeltaTable(str(table_path(lake, table))), DeltaTable(str(table_path(fresh, table)))
        assert by_delta_rs.schema() == by_spark.schema(), table
        assert by_delta_rs.metadata().partition_columns == by_spark.metadata().partition_columns == ["dataset"]
    land(lake, "agregadas", {"b.atom": page([(2, day(4))])}, "2022-01-04")
    assert engines.choose_engine(request) == "delta-rs"
    assert engines.choose_engine(request, spark_cluster=lambda: True) == "delta-rs"  # a daily batch: no Spark
    monkeypatch.setenv(engines.MAX_MB_ENV, "0.001")
    assert engines.choose_engine(request) == "spark"  # the dataset is loaded: Spark's MERGEs past the limit
    assert engines.ENGINE_PARTS[engines.choose_engine(request)][1] == "spark"
    monkeypatch.delenv(engines.WRITE_MAX_MB_ENV)
    assert engines.choose_engine(request) == "spark+delta-rs"
    assert engines.choose_engine(request, "delta-rs") == "delta-rs"
    monkeypatch.setenv(engines.ENGINE_ENV, "spark")
    monkeypatch.delenv(engines.MAX_MB_ENV)
    assert engines.choose_engine(request) == "spark"
    with pytest.raises(ValueError, match="unknown ingest engine 'duckdb'"):
        engines.choose_engine(request, "duckdb")
    monkeypatch.setenv(engines.MAX_MB_ENV, "lots")
    with pytest.raises(ValueError, match="PLACSP_DELTA_RS_MAX_MB must be a number of MB, not 'lots'"):
        engines.choose_engine(request, "auto")


def test_the_silver_operator_ingests_a_daily_batch_in_the_task_without_spark_submit(
    spark, tmp_path: Path, monkeypatch
) -> None:
    """The operator's engine choice, run for real on a lake Spark created; spark-submit is replaced by
    a failure (the one stand-in here) to prove the task never starts a JVM for this batch."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    from placsp_provider.operators.silver import PlacspSilverOperator

    lake = tmp_path / "lake"
    land(lake, "agregadas", {"p1.atom": page([(1, day(3))])}, "2022-01-03")
    run_ingest(IngestRequest(get_dataset("agregadas"), lake, "r1"), "spark", spark=spark)
    p2 = {"p2.atom": page([(1, day(4)), (2, day(4))], tombstones=[(3, day(4))])}
    manifest = land(lake, "agregadas", p2, "2022-01-04")

    def no_spark(*args, **kwargs):
        raise AssertionError("spark-submit started for a daily batch")

    monkeypatch.setattr(SparkSubmitHook, "submit", no_spark)
    op = PlacspSilverOperator(task_id="silver", dataset="agregadas", lake=str(lake), manifest=str(manifest))
    summary = op.execute({"run_id": "scheduled__2022-01-04"})  # type: ignore[arg-type]
    assert summary["files"]["ingested"] == 1
    accounted = assert_conserved(spark, lake, "agregadas", "scheduled__2022-01-04", listed(p2))
    assert accounted.silver_rows_of_run == 3  # two entries and the tombstone, counted in the tables
