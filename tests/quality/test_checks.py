"""The check engine on real Delta tables written by the real Silver job (tests/quality/conftest.py).

Every rule passes on the bundled real pages; each rule then fails on a copy of that lake broken in one
way (a null id, a duplicate id, a negative amount, an orphan lot, a schema drift), with its message.
Broken rows are written with delta-rs as a buggy writer would; expected counts come from what the test
wrote, never from the engine.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from placsp_provider.lake import table_path
from placsp_provider.quality.contract import ContractError, default_contracts_dir
from placsp_provider.quality.engine import CheckRequest, failure_message, list_offending_rows, run_checks
from tests.quality.conftest import DATASETS, RUN_ID

pytestmark = pytest.mark.spark

BROKEN_RUN = "run-broken"


def _failed(report) -> dict[str, float | None]:
    return {r.rule_id: r.actual for r in report.results if not r.success}


def _rows(lake: Path, table: str, dataset: str):
    from deltalake import DeltaTable

    return DeltaTable(str(table_path(lake, table))).to_pyarrow_table(filters=[("dataset", "=", dataset)])


def _append(lake: Path, table: str, rows) -> None:
    from deltalake import write_deltalake

    write_deltalake(str(table_path(lake, table)), rows, mode="append")


def _with(row, **values):
    """One row (a 1-row Arrow table) with some columns replaced and this test's run id."""
    import pyarrow as pa

    values.setdefault("_ingest_run_id", BROKEN_RUN)
    for name, value in values.items():
        index = row.schema.get_field_index(name)
        row = row.set_column(index, row.schema.field(index), pa.array([value], row.schema.field(index).type))
    return row


def _tombstones_without_entry(lake: Path, dataset: str) -> int:
    """Counted with pyarrow sets, independently of the engine's SQL."""
    entries = set(_rows(lake, "entries", dataset).column("entry_id").to_pylist())
    return sum(1 for e in _rows(lake, "tombstones", dataset).column("entry_id").to_pylist() if e not in entries)


@pytest.mark.parametrize("dataset", DATASETS)
def test_every_error_rule_passes_on_the_real_pages(real_lake: Path, dataset: str) -> None:
    report = run_checks(CheckRequest(real_lake, dataset, run_id=RUN_ID))
    assert report.passed, failure_message(report)
    assert len(report.results) == 47  # 40 contract rules + 7 schema rules
    assert report.rows["entries"] == len(_rows(real_lake, "entries", dataset)) > 0
    # The one rule that does not pass is a warning, and true: the 2022-01 archive's 49 tombstones
    # delete entries published before that month, which this lake does not hold.
    expected = {"tombstones_for_known_entries": 49.0} if dataset == "agregadas" else {}
    assert _failed(report) == expected
    assert _tombstones_without_entry(real_lake, dataset) == (49 if dataset == "agregadas" else 0)
    assert all(r.severity == "warn" for r in report.results if not r.success)


def test_a_duplicate_entry_id_fails_the_uniqueness_rule_with_the_exact_message(broken_copy: Path) -> None:
    row = _rows(broken_copy, "entries", "agregadas").slice(0, 1)
    _append(broken_copy, "entries", _with(row))
    report = run_checks(CheckRequest(broken_copy, "agregadas", run_id=BROKEN_RUN, tables=("entries",)))
    assert _failed(report) == {"entries_key_unique": 1.0}
    assert failure_message(report) == (
        f"data contract checks failed: dataset agregadas, run {BROKEN_RUN}: 1 error rule(s) and 0 warn rule(s) "
        "failed of 11\n"
        "  - entries_key_unique [error] entries: duplicateValues(dataset, entry_id): expected = 0, actual 1 "
        "(whole table, 928 rows)\n"
        f"list the offending rows: placsp quality check --dataset agregadas --lake {broken_copy} --run-id {BROKEN_RUN} "
        "--rule entries_key_unique --rows\n"
        f"all results: placsp quality check --dataset agregadas --lake {broken_copy} --run-id {BROKEN_RUN} "
        "--table entries --json"
    )
    _, names, rows = list_offending_rows(
        CheckRequest(broken_copy, "agregadas", run_id=BROKEN_RUN), "entries_key_unique"
    )
    assert rows == [("agregadas", row.column("entry_id")[0].as_py(), 2)] and names[-1] == "copies"


def test_a_negative_amount_a_bad_cpv_and_an_orphan_lot_fail_their_rules(broken_copy: Path) -> None:
    from decimal import Decimal

    lot = _rows(broken_copy, "lots", "licitaciones").slice(0, 1)
    _append(
        broken_copy,
        "lots",
        _with(lot, lot_id="negative", total_amount=Decimal("-1.50"), cpv_codes=["45000000", "4500000-7"]),
    )
    _append(broken_copy, "lots", _with(lot, lot_id="orphan", entry_id="https://example.invalid/sindicacion/x/1"))
    report = run_checks(CheckRequest(broken_copy, "licitaciones", run_id=BROKEN_RUN, tables=("entries", "lots")))
    assert _failed(report) == {
        "lots_total_amount_in_range": 1.0,  # rows of this run with an amount out of range
        "lots_cpv_codes_eight_digits": 1.0,  # CPV values (one of the two codes) that are not 8 digits
        "lots_belong_to_an_entry": 1.0,  # the orphan
    }
    by_id = {r.rule_id: r for r in report.results}
    assert by_id["lots_total_amount_in_range"].rows_checked == 2  # the run's rows only
    assert by_id["lots_belong_to_an_entry"].rows_checked == 3 + 2  # the whole partition
    _, _, orphans = list_offending_rows(CheckRequest(broken_copy, "licitaciones"), "lots_belong_to_an_entry")
    assert [r[1] for r in orphans] == ["https://example.invalid/sindicacion/x/1"]


def test_a_null_id_and_a_nullable_column_are_caught(broken_copy: Path) -> None:
    """A writer that lost the NOT NULL constraint: the table's schema drifts, then a null id lands."""
    import pyarrow as pa
    from deltalake import write_deltalake

    rows = _rows(broken_copy, "entries", "licitaciones")
    fields = [pa.field(f.name, f.type, True) if f.name == "entry_id" else f for f in rows.schema]
    rows = rows.cast(pa.schema(fields))
    write_deltalake(
        str(table_path(broken_copy, "entries")),
        pa.concat_tables([rows, _with(rows.slice(0, 1), entry_id=None)]),
        mode="overwrite",
        schema_mode="overwrite",
        partition_by=["dataset"],
    )
    report = run_checks(CheckRequest(broken_copy, "licitaciones", run_id=BROKEN_RUN, tables=("entries",)))
    assert _failed(report) == {"entries_entry_id_not_null": 1.0, "entries_schema": 1.0}
    schema = next(r for r in report.results if r.rule_id == "entries_schema")
    assert schema.message == "schema drift: column entry_id is nullable in the table, required in the contract"


def test_an_empty_dataset_says_so_and_other_rules_pass_vacuously(real_lake: Path) -> None:
    report = run_checks(CheckRequest(real_lake, "encargos", run_id=RUN_ID))  # nothing ingested for it
    assert _failed(report) == {"entries_not_empty": 0.0}
    empty = next(r for r in report.results if r.rule_id == "entries_not_empty")
    assert empty.severity == "warn" and empty.message == "rowCount; the table has no rows for this dataset"
    assert report.passed


def test_a_sql_rule_that_does_not_run_is_refused_before_any_rule_is_evaluated(real_lake: Path, tmp_path: Path) -> None:
    contracts = tmp_path / "contracts"
    shutil.copytree(default_contracts_dir(), contracts)
    path = contracts / "lots.odcs.yaml"
    path.write_text(path.read_text().replace("e.dataset = c.dataset", "e.entry_key = c.dataset"))
    with pytest.raises(ContractError) as err:
        run_checks(CheckRequest(real_lake, "agregadas", contracts_dir=str(contracts)))
    assert err.value.rule_id == "lots_belong_to_an_entry" and err.value.path == path
    assert str(err.value) == (
        f"data contract {path}: rule lots_belong_to_an_entry: the query does not run: BinderException: "
        'Binder Error: Referenced table "e" not found!'
    )


def test_a_missing_table_fails_its_schema_rule(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    lake.mkdir()
    report = run_checks(CheckRequest(lake, "agregadas", tables=("reconciliation",)))
    assert _failed(report) == {"reconciliation_schema": 1.0}
    assert report.results[0].message == f"schema drift: no Delta table at {lake / 'reconciliation'}"
