"""Dead-letter counts from a real Delta table (written by delta-rs), threshold checks and their message."""

from __future__ import annotations

import json
import re
import shlex
from datetime import timedelta
from pathlib import Path

import pytest

from placsp_provider.dead_letters.stats import (
    MESSAGE_LIMIT,
    DeadLetterCounts,
    DeadLetterQuery,
    DeadLetterTableError,
    RunSummaryError,
    ThresholdCheck,
    count,
    count_dead_letters,
    entries_read,
    evaluate,
    failure_message,
    scope_query,
    validate_thresholds,
)
from placsp_provider.errors import ConfigError, PlacspError
from tests.sensors import WHEN, dead_letter_rows, write_dead_letters, write_summary

pytestmark = pytest.mark.unit

R1 = "scheduled__2025-08-19T00:00:00+00:00"
R2 = "scheduled__2025-08-20T00:00:00+00:00"


@pytest.fixture
def filled(lake: Path) -> Path:
    """Three commits, two datasets, two runs; one row of run R1 already replayed."""
    write_dead_letters(
        lake,
        dead_letter_rows(3, dataset="agregadas", run_id=R1, stage="parse", error_type="xml_syntax")
        + dead_letter_rows(2, dataset="agregadas", run_id=R1, stage="validation", error_type="invalid_amount")
        + dead_letter_rows(1, dataset="agregadas", run_id=R1, stage="parse", error_type="truncated", status="replayed")
        + dead_letter_rows(4, dataset="menores", run_id=R1, stage="parse", error_type="unbound_prefix"),
    )
    write_dead_letters(
        lake,
        dead_letter_rows(
            2,
            dataset="agregadas",
            run_id=R2,
            stage="reconciliation",
            error_type="count_mismatch",
            record_kind="file",
            processing_timestamp=WHEN + timedelta(days=1),
        ),
    )
    return lake


def test_a_lake_without_a_dead_letter_table_has_zero_dead_letters(lake: Path, tmp_path: Path) -> None:
    for root in (lake, tmp_path / "not-created-yet"):
        counts = count_dead_letters(root, dataset="agregadas", run_id=R1)
        assert counts.total == 0 and counts.by_error_type == {} and counts.samples == ()
        assert counts.table_version is None


def test_counts_by_partition_run_stage_type_status_and_time(filled: Path) -> None:
    everything = count_dead_letters(filled)
    assert everything.total == 12
    assert everything.by_dataset == {"agregadas": 8, "menores": 4}
    assert everything.by_status == {"quarantined": 11, "replayed": 1}
    assert everything.table_version == 1

    run = count_dead_letters(filled, dataset="agregadas", run_id=R1)
    assert run.total == 6
    assert run.by_stage == {"parse": 4, "validation": 2}
    assert run.by_error_type == {"xml_syntax": 3, "invalid_amount": 2, "truncated": 1}  # largest first
    assert run.by_dataset == {"agregadas": 6}

    backlog = count_dead_letters(filled, dataset="agregadas", status="quarantined")
    assert backlog.total == 7 and backlog.by_status == {"quarantined": 7}

    assert count_dead_letters(filled, dataset="agregadas", stages=["validation", "reconciliation"]).total == 4
    assert count_dead_letters(filled, error_types=["unbound_prefix"]).by_dataset == {"menores": 4}
    assert count_dead_letters(filled, dataset="agregadas", since=WHEN + timedelta(hours=1)).by_stage == {
        "reconciliation": 2
    }
    assert count_dead_letters(filled, dataset="licitaciones").total == 0
    # a naive `since` is UTC
    assert count_dead_letters(filled, since=(WHEN + timedelta(hours=1)).replace(tzinfo=None)).total == 2


def test_samples_are_at_most_five_rows_of_the_selection(filled: Path) -> None:
    run = count_dead_letters(filled, dataset="agregadas", run_id=R1)
    assert len(run.samples) == 5
    assert all(s.source_file.startswith("bronze/agregadas/") and s.entry_id for s in run.samples)
    files = count_dead_letters(filled, stages=["reconciliation"])
    assert [(s.entry_id, s.record_offset) for s in files.samples] == [(None, 0), (None, 1000)]


def test_the_delta_log_prunes_files_by_partition_and_by_statistics(filled: Path) -> None:
    from deltalake import DeltaTable

    table = DeltaTable(str(filled / "dead_letters"))
    assert len(table.file_uris()) == 3  # commit 1: one file per dataset; commit 2: one file
    for query, files in (
        (DeadLetterQuery(str(filled), dataset="menores"), 1),  # partition
        (DeadLetterQuery(str(filled), dataset="agregadas", run_id=R2), 1),  # run_id statistics
        # stage statistics: min/max parse..validation would also admit 'reconciliation'
        (DeadLetterQuery(str(filled), stages=("validation",)), 1),
        (DeadLetterQuery(str(filled), since=WHEN + timedelta(hours=1)), 1),  # timestamp statistics
        (DeadLetterQuery(str(filled), error_types=("absent_type",)), 0),  # below every file's min
    ):
        assert len(table.file_uris(file_pruning_predicate=query.pruning_filters())) == files, query


def test_a_corrupt_delta_log_raises_an_error_naming_the_table_and_why(filled: Path) -> None:
    log = filled / "dead_letters" / "_delta_log"
    (log / "00000000000000000001.json").write_text('{"add": {"path": ')
    with pytest.raises(DeadLetterTableError) as caught:
        count_dead_letters(filled, dataset="agregadas")
    message = str(caught.value)
    assert isinstance(caught.value, PlacspError)
    assert message.startswith(f"dead-letter table {filled / 'dead_letters'} cannot be read: DeltaError: ")
    assert "\n" not in message and "\x1b" not in message  # no Rust backtrace, no colours


def test_a_missing_data_file_or_an_empty_log_is_an_error_not_zero(filled: Path, tmp_path: Path) -> None:
    (parquet,) = (filled / "dead_letters" / "dataset=menores").glob("*.parquet")
    parquet.unlink()
    with pytest.raises(DeadLetterTableError, match=r"cannot be read: FileNotFoundError: .*dataset=menores"):
        count_dead_letters(filled, dataset="menores")
    assert count_dead_letters(filled, dataset="agregadas", run_id=R2).total == 2  # pruned: never opened
    empty = tmp_path / "empty-lake"
    (empty / "dead_letters" / "_delta_log").mkdir(parents=True)
    with pytest.raises(DeadLetterTableError, match="cannot be read: TableNotFoundError"):
        count_dead_letters(empty)


def test_entries_read_comes_from_the_run_summary(lake: Path) -> None:
    write_summary(lake, "agregadas", R1, entries=95, tombstones=5)
    assert entries_read(lake, "agregadas", R1) == 100
    with pytest.raises(RunSummaryError, match=r"missing: the Silver ingest of dataset agregadas has not finished"):
        entries_read(lake, "agregadas", R2)
    path = write_summary(lake, "menores", R1, entries=1)
    path.write_text(json.dumps({"dataset": "menores"}))
    with pytest.raises(RunSummaryError, match=r"has no read.entries/read.tombstones"):
        entries_read(lake, "menores", R1)
    path.write_text("{")
    with pytest.raises(RunSummaryError, match=r"menores/.*\.json: unreadable"):
        entries_read(lake, "menores", R1)


def test_scope_queries(lake: Path) -> None:
    run = scope_query(lake, dataset="agregadas", scope="run", run_id=R1, stages=["parse"])
    assert (run.run_id, run.status, run.stages) == (R1, None, ("parse",))
    backlog = scope_query(lake, dataset="agregadas", scope="backlog", run_id=R1)
    assert (backlog.run_id, backlog.status) == (None, "quarantined")
    with pytest.raises(ConfigError, match=r"unknown dead-letter stage\(s\) \['pasre'\]"):
        scope_query(lake, dataset="agregadas", scope="run", run_id=R1, stages=["pasre"])
    with pytest.raises(ConfigError, match="snake_case"):
        scope_query(lake, dataset="agregadas", scope="run", run_id=R1, error_types=["XML syntax"])


# -- thresholds -----------------------------------------------------------------------------------
def _counts(total: int, lake: str = "/srv/lake", **kw) -> DeadLetterCounts:
    query = DeadLetterQuery(lake, dataset="agregadas", run_id=R1)
    return DeadLetterCounts(query=query, total=total, by_error_type=kw.get("types", {"xml_syntax": total}))


def test_count_threshold_fails_only_above_the_maximum() -> None:
    (at,) = evaluate(_counts(10), max_count=10, scope="run", dataset="agregadas", run_id=R1)
    (above,) = evaluate(_counts(11), max_count=10, scope="run", dataset="agregadas", run_id=R1, severity="warn")
    assert at.success and not above.success
    assert (above.threshold_kind, above.threshold_value, above.observed_value, above.severity) == (
        "count",
        10,
        11,
        "warn",
    )
    assert above.assertion == "dead_letter_count <= 10"
    assert ThresholdCheck.from_dict(above.to_dict()) == above


def test_ratio_threshold_divides_by_the_entries_read() -> None:
    def ratio(total: int, read: int, max_ratio: float = 0.05) -> ThresholdCheck:
        (check,) = evaluate(_counts(total), max_ratio=max_ratio, read=read, scope="run", dataset="agregadas", run_id=R1)
        return check

    assert ratio(5, 100).success and ratio(5, 100).observed_value == 0.05
    assert not ratio(6, 100).success
    assert ratio(0, 0).success and ratio(0, 0).observed_value == 0.0
    undefined = ratio(1, 0)  # dead letters, nothing read (e.g. a page that is not a feed)
    assert not undefined.success and undefined.observed_value is None
    assert "undefined (1 dead letters, 0 entries read)" in undefined.describe()
    both = evaluate(_counts(3), max_count=5, max_ratio=0.01, read=100, scope="run", dataset="agregadas", run_id=R1)
    assert [(c.threshold_kind, c.success) for c in both] == [("count", True), ("ratio", False)]
    with pytest.raises(ConfigError, match="max_ratio needs the entries the run read"):
        evaluate(_counts(3), max_ratio=0.1, scope="run", dataset="agregadas", run_id=R1)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"max_count": -1}, r"max_count must be >= 0 \(0 allows no dead letter at all\); got -1"),
        ({"max_count": 2.5}, r"max_count must be a whole number of dead letters; got 2.5"),
        ({"max_count": True}, r"max_count must be a whole number"),
        ({"max_ratio": 1.5}, r"max_ratio is dead letters / entries read, between 0 and 1 \(0.01 = 1%\); got 1.5"),
        ({"max_ratio": -0.1}, r"between 0 and 1 .*got -0.1"),
        ({"max_ratio": float("nan")}, r"max_ratio must be a number between 0 and 1; got nan"),
        ({}, r"give max_count, max_ratio or both"),
        ({"max_ratio": 0.1, "scope": "backlog"}, r"max_ratio needs scope 'run'.*use max_count with scope 'backlog'"),
        ({"max_count": 1, "scope": "today"}, r"scope must be 'run' .* or 'backlog' .*; got 'today'"),
        ({"max_count": 1, "severity": "fatal"}, r"severity must be 'error' .* or 'warn' .*; got 'fatal'"),
    ],
)
def test_thresholds_that_cannot_work_are_refused(kwargs: dict, error: str) -> None:
    args = {"scope": "run", "severity": "error", "max_count": None, "max_ratio": None, **kwargs}
    with pytest.raises(ConfigError, match=error):
        validate_thresholds(**args)


def test_failure_message_names_counts_types_samples_command_and_query(filled: Path) -> None:
    counts = count(scope_query(filled, dataset="agregadas", scope="run", run_id=R1))
    checks = evaluate(counts, max_count=2, max_ratio=0.01, read=200, scope="run", dataset="agregadas", run_id=R1)
    text = failure_message(checks, counts)
    lines = text.splitlines()
    assert lines[0] == (
        f"dead letters over threshold: dataset agregadas, scope run (run {R1}): 6 dead letter(s); "
        "count 6 > max_count 2; ratio 0.03 (6 / 200 entries read) > max_ratio 0.01 [severity error]"
    )
    assert lines[1] == "top error types: xml_syntax 3, invalid_amount 2, truncated 1"
    assert lines[2] == "samples (5 of 6):" and all(line.startswith("  - bronze/agregadas/") for line in lines[3:8])
    command = lines[8].removeprefix("details: ")
    assert shlex.split(command) == [
        "placsp", "dead-letters", "stats", "--dataset", "agregadas", "--lake", str(filled), "--run-id", R1,
    ]  # fmt: skip
    assert lines[9] == (
        "list them all (DuckDB): SELECT dataset, run_id, stage, error_type, source_file, record_offset, entry_id, "
        f"error_message FROM delta_scan('{filled}/dead_letters') WHERE dataset = 'agregadas' AND run_id = '{R1}' "
        "ORDER BY source_file, record_offset;"
    )
    assert lines[10].startswith("(Spark SQL: SELECT dataset, run_id,") and f"delta.`{filled}/dead_letters`" in lines[10]


def test_failure_message_is_bounded_and_keeps_the_way_to_the_rows() -> None:
    from placsp_provider.dead_letters.stats import DeadLetterSample

    types = {f"error_type_{i}": 100 - i for i in range(12)}
    query = DeadLetterQuery("/srv/" + "deep/" * 20 + "lake", dataset="agregadas", status="quarantined")
    samples = tuple(
        DeadLetterSample("bronze/agregadas/pages/" + "x" * 900 + f"{i}.atom", f"id-{i}", i) for i in range(5)
    )
    counts = DeadLetterCounts(query=query, total=5000, by_error_type=types, samples=samples)
    (check,) = evaluate(counts, max_count=10, scope="backlog", dataset="agregadas")
    text = failure_message([check], counts)
    assert len(text) <= MESSAGE_LIMIT
    assert "scope backlog (status quarantined, any run)" in text
    assert (
        "error_type_0 100, error_type_1 99, error_type_2 98, error_type_3 97, error_type_4 96 (+7 more types)" in text
    )
    assert "placsp dead-letters stats --dataset agregadas" in text and "delta_scan(" in text
    # fewer samples, each clipped, rather than losing the command or the query
    assert re.search(r"^samples \([1-4] of 5000\):$", text, re.M) and "x" * 300 not in text


def test_sql_and_command_quote_what_they_embed() -> None:
    query = DeadLetterQuery("/srv/it's lake", dataset="agregadas", run_id="manual__o'brien", stages=("parse",))
    assert "run_id = 'manual__o''brien'" in query.duckdb_sql()
    assert "delta_scan('/srv/it''s lake/dead_letters')" in query.duckdb_sql()
    assert shlex.split(query.cli_command())[6:11] == [
        "/srv/it's lake",
        "--run-id",
        "manual__o'brien",
        "--stage",
        "parse",
    ]
    assert DeadLetterQuery.from_dict(json.loads(json.dumps(query.to_dict()))) == query
