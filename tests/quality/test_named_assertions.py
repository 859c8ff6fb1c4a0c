"""The named assertions (freshness, the per-file row-count comparison) and the contracts' `servers` block.

A small lake of real 1044 entries (tests/pages.py) is landed the way extraction lands pages and
ingested by the real delta-rs Silver job (no JVM: about a second). Expected lags and totals come
from what the test wrote and from the Delta tables read with deltalake, never from the engine.
Nothing is mocked; datacontract-cli is run when it is installed (it does not resolve inside the
project's constraints: docs/runbook.md, "Contracts in datacontract-cli").
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from placsp_provider.lake import LAKE_TABLES, table_path
from placsp_provider.quality.contract import ContractError, contract_path, load_contract
from placsp_provider.quality.engine import CheckRequest, list_offending_rows, run_checks
from tests.pages import day, page
from tests.spark.bronze import land

pytestmark = pytest.mark.unit

DATASET = "agregadas"
RUN = "run-named"
# An amount the parser refuses: the page's one entry becomes a dead letter (reconciled, valid_entries 0).
_BAD_AMOUNT = (b"</cbc:EstimatedOverallContractAmount>", b"x</cbc:EstimatedOverallContractAmount>")


def _ingest(lake: Path, run_id: str = RUN) -> None:
    from placsp_provider.datasets import get_dataset
    from placsp_provider.ingest.request import IngestRequest
    from placsp_provider.ingest.run import ingest

    ingest(IngestRequest(get_dataset(DATASET), lake, run_id), "delta-rs")


@pytest.fixture(scope="module")
def small_lake(tmp_path_factory) -> Path:
    """Two entries on 2022-01-05 in Silver; a newer page (2022-01-08) whose only entry is a dead letter."""
    lake = tmp_path_factory.mktemp("named") / "lake"
    land(lake, DATASET, {"a.atom": page([(1, day(5, 10)), (2, day(5, 12))])}, interval="2022-01-05")
    land(lake, DATASET, {"c.atom": page([(4, day(8, 12))]).replace(*_BAD_AMOUNT)}, interval="2022-01-08")
    _ingest(lake)
    return lake


@pytest.fixture
def lake_copy(small_lake: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "lake"
    shutil.copytree(small_lake, copy)
    return copy


def _check(lake: Path, table: str, run_id: str | None = RUN):
    report = run_checks(CheckRequest(str(lake), DATASET, run_id=run_id, tables=(table,)))
    return {r.rule_id: r for r in report.results}


def _silver_newest(lake: Path) -> datetime:
    from deltalake import DeltaTable

    values = DeltaTable(str(table_path(lake, "entries"))).to_pyarrow_table(columns=["updated"]).column("updated")
    return max(values.to_pylist())


def _hours(later: str, earlier: datetime) -> float:
    return round((datetime.fromisoformat(later).astimezone(UTC) - earlier).total_seconds() / 3600, 2)


# -- freshness --------------------------------------------------------------------------------------
def test_freshness_passes_when_silver_holds_the_newest_page_and_leaves_out_a_dead_lettered_one(
    small_lake: Path,
) -> None:
    fresh = _check(small_lake, "entries")["entries_fresh"]
    assert _silver_newest(small_lake) == datetime.fromisoformat(day(5, 12))  # the dead letter's 8 Jan is not there
    assert (fresh.success, fresh.actual, fresh.kind, fresh.expected) == (True, 0.0, "custom", "<= 26 hours")
    assert (fresh.details["pages_left_out"], fresh.details["landed_pages"], fresh.details["manifests"]) == (1, 2, 2)
    assert "1 page(s) left out: none of their entries reached Silver" in fresh.message


def test_freshness_fails_when_a_newer_page_landed_and_never_reached_silver(lake_copy: Path) -> None:
    land(lake_copy, DATASET, {"b.atom": page([(3, day(7, 9))])}, interval="2022-01-07")  # landed, not ingested
    fresh = _check(lake_copy, "entries")["entries_fresh"]
    assert fresh.actual == _hours(day(7, 9), _silver_newest(lake_copy)) == 45.0
    assert not fresh.success and fresh.is_error
    assert "is 45 h behind the newest landed entry 2022-01-07T09:00:00Z (bronze/agregadas/pages/b." in fresh.message
    _ingest(lake_copy, "run-catch-up")  # the page reaches Silver: fresh again
    fresh = _check(lake_copy, "entries", None)["entries_fresh"]
    assert (fresh.success, fresh.actual) == (True, 0.0)


def test_freshness_threshold_is_the_contracts(lake_copy: Path, tmp_path: Path) -> None:
    land(lake_copy, DATASET, {"b.atom": page([(3, day(7, 9))])}, interval="2022-01-07")
    folder = tmp_path / "contracts"
    shutil.copytree(contract_path("entries").parent, folder)
    text = (folder / "entries.odcs.yaml").read_text()
    (folder / "entries.odcs.yaml").write_text(text.replace("mustBeLessOrEqualTo: 26", "mustBeLessOrEqualTo: 48", 1))
    report = run_checks(CheckRequest(str(lake_copy), DATASET, tables=("entries",), contracts_dir=str(folder)))
    fresh = next(r for r in report.results if r.rule_id == "entries_fresh")
    assert (fresh.success, fresh.actual, fresh.expected) == (True, 45.0, "<= 48 hours")


# -- the per-file row-count comparison -----------------------------------------------------------------
_OLD_SQL = (  # the rule as it was written before it became a named assertion (issue 34)
    "SELECT count(*) FROM reconciliation__this_run WHERE status = 'reconciled' AND manifest_entries + "
    "manifest_tombstones <> valid_entries + valid_tombstones + dead_letter_records"
)


def _old_verdict(lake: Path) -> bool:
    from placsp_provider.quality.contract import load_contracts
    from placsp_provider.quality.engine import LakeSession

    request = CheckRequest(str(lake), DATASET, run_id=RUN, tables=("reconciliation",))
    with LakeSession(request, load_contracts(("reconciliation",))) as session:
        return session.scalar(_OLD_SQL)[0] == 0


def _reconciliation(lake: Path) -> list[dict]:
    from deltalake import DeltaTable

    return DeltaTable(str(table_path(lake, "reconciliation"))).to_pyarrow_table().to_pylist()


def test_the_comparison_carries_expected_and_actual_and_keeps_the_old_verdict(small_lake: Path, lake_copy) -> None:
    rows = _reconciliation(small_lake)
    read = sum(r["manifest_entries"] + r["manifest_tombstones"] for r in rows)
    stored = sum(r["valid_entries"] + r["valid_tombstones"] + r["dead_letter_records"] for r in rows)
    balanced = _check(small_lake, "reconciliation")["reconciliation_balanced"]
    assert (
        (balanced.success, balanced.actual, balanced.rows_checked) == (True, float(stored), len(rows)) == (True, 3, 2)
    )
    assert balanced.expected == f"= {read} (manifest_entries + manifest_tombstones), source_file by source_file"
    assert balanced.details == {"compared": 2, "differing": 0, "expected_rows": 3, "actual_rows": 3}
    assert _old_verdict(small_lake) is True

    # A buggy writer records one more valid entry than the file held.
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    path = str(table_path(lake_copy, "reconciliation"))
    broken = DeltaTable(path).to_pyarrow_table()
    first = broken.column("source_file")[0].as_py()
    index = broken.schema.get_field_index("valid_entries")
    files, valid = broken["source_file"].to_pylist(), broken["valid_entries"].to_pylist()
    bumped = pa.array([v + 1 if f == first else v for v, f in zip(valid, files, strict=True)], pa.int64())
    write_deltalake(path, broken.set_column(index, broken.schema.field(index), bumped), mode="overwrite")
    balanced = _check(lake_copy, "reconciliation")["reconciliation_balanced"]
    assert (balanced.success, balanced.actual, balanced.details["differing"]) == (False, 4.0, 1)
    assert f"1 of 2 source_file value(s) differ; first: {first}: expected 2, actual 3" in balanced.message
    assert _old_verdict(lake_copy) is False
    _sql, names, listed = list_offending_rows(CheckRequest(str(lake_copy), DATASET), "reconciliation_balanced")
    assert [(row[0], row[1], row[2]) for row in listed] == [(first, 2, 3)] and names[:3] == [
        "source_file",
        "expected_rows",
        "actual_rows",
    ]


# -- lineage: the facet, validated against the OpenLineage schema copy ---------------------------------
def test_the_named_assertions_go_to_openlineage_with_classification_expected_and_actual(small_lake: Path) -> None:
    from openlineage.client.serde import Serde

    from placsp_provider.lineage.quality import assertions_facet
    from tests.lineage.ol_schema import validate_facet

    results = [*_check(small_lake, "entries").values(), *_check(small_lake, "reconciliation").values()]
    facet = json.loads(Serde.to_json(assertions_facet(results)))
    validate_facet(facet)
    named = {a["name"]: a for a in facet["assertions"]}
    fresh, balanced = named["entries_fresh"], named["reconciliation_balanced"]
    assert (fresh["assertion"], fresh["success"], fresh["column"], fresh["expected"], fresh["actual"]) == (
        "freshness",
        True,
        "updated",
        "<= 26 hours",
        "0",
    )
    assert fresh["params"]["landed_newest"] == "2022-01-05T12:00:00Z" and fresh["params"]["pages_left_out"] == 1
    assert (balanced["assertion"], balanced["actual"], balanced["params"]["differing"]) == ("row_count", "3", 0)
    assert balanced["expected"].startswith("= 3 (manifest_entries + manifest_tombstones)")


# -- contracts: the named rules' validation, the servers block, datacontract-cli ------------------------
def _edited(tmp_path: Path, table: str, rule_id: str, edit) -> Path:
    document = yaml.safe_load(contract_path(table).read_text())
    obj = document["schema"][0]
    for item in [*obj.get("quality", []), *(q for p in obj["properties"] for q in p.get("quality", []))]:
        if item["id"] == rule_id:
            edit(item)
    path = tmp_path / f"{table}.odcs.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


@pytest.mark.parametrize(
    ("table", "rule_id", "edit", "reason"),
    [
        ("entries", "entries_fresh", lambda r: r.update(engine="soda"), "runs here only with engine 'placsp'"),
        ("entries", "entries_fresh", lambda r: r["implementation"].pop("mustBeLessOrEqualTo"), "exactly one threshold"),
        ("entries", "entries_fresh", lambda r: r.update(unit="rows"), "a freshness rule measures hours"),
        ("entries", "entries_fresh", lambda r: r["implementation"].update(assertion="fresh"), "one of freshness"),
        ("reconciliation", "reconciliation_balanced", lambda r: r["implementation"].pop("per"), "implementation.per"),
        (
            "reconciliation",
            "reconciliation_balanced",
            lambda r: r["implementation"]["actual"].append("valid_lots"),
            "unknown column(s) ['valid_lots']",
        ),
    ],
)
def test_a_named_assertion_that_cannot_run_is_refused_by_name(tmp_path, table, rule_id, edit, reason) -> None:
    path = _edited(tmp_path, table, rule_id, edit)
    with pytest.raises(ContractError, match=f"rule {rule_id}: .*{re.escape(reason)}"):
        load_contract(path)


@pytest.mark.parametrize("table", LAKE_TABLES)
def test_every_contract_names_its_table_in_the_lake_for_each_server(table: str, tmp_path: Path) -> None:
    from placsp_provider.quality.contract import validate_odcs

    path = contract_path(table)
    document = yaml.safe_load(path.read_text())
    validate_odcs(path, document)  # the ODCS JSON Schema accepts the block
    relative = table_path(tmp_path, table).relative_to(tmp_path).as_posix()
    servers = {s["server"]: s for s in document["servers"]}
    assert servers["local"]["path"] == f"${{PLACSP_LAKE:-./lake}}/{relative}"
    assert (
        servers["s3"]["location"]
        == servers["s3-compatible"]["location"]
        == f"${{PLACSP_LAKE:-s3://placsp-lake}}/{relative}"
    )
    assert {s["format"] for s in servers.values()} == {"delta"}


def _datacontract() -> str | None:
    return os.environ.get("PLACSP_DATACONTRACT") or shutil.which("datacontract")


@pytest.mark.skipif(
    _datacontract() is None,
    reason="datacontract-cli is not installed: it does not resolve inside requirements/constraints.txt (typer); "
    "set PLACSP_DATACONTRACT to a `datacontract` installed on its own (docs/runbook.md)",
)
def test_the_contracts_lint_with_datacontract_cli(tmp_path: Path) -> None:
    tool = _datacontract()
    assert tool is not None
    for table in LAKE_TABLES:  # one process per contract (`lint` takes one), about 2 s each
        ok = subprocess.run([tool, "lint", str(contract_path(table))], capture_output=True, text=True, timeout=120)
        assert ok.returncode == 0, f"{table}: {ok.stdout}{ok.stderr}"
    broken = _edited(tmp_path, "lots", "lots_key_unique", lambda r: r.update(metric="nullCount"))
    bad = subprocess.run([tool, "lint", str(broken)], capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0  # the tool does refuse a contract: the passes above mean something
