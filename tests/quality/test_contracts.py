"""The contracts in placsp_provider/quality/contracts: valid ODCS, equal to the code's table schemas, and refused with a
named error (file, rule id, reason) when they are not usable."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft201909Validator

from placsp_provider.ingest.tables import table_schema
from placsp_provider.quality.contract import CONTRACT_TABLES, ContractError, contract_path, load_contract
from placsp_provider.quality.engine import arrow_fields, schema_drift
from tests.conftest import REPO

pytestmark = pytest.mark.unit

ODCS_SCHEMA = REPO / "schemas" / "odcs" / "odcs-json-schema-v3.2.0.json"
CONTRACTS = REPO / "provider" / "placsp_provider" / "quality" / "contracts"


def test_there_is_one_contract_per_lake_table_and_nothing_else() -> None:
    assert sorted(p.name for p in CONTRACTS.glob("*.odcs.yaml")) == sorted(f"{t}.odcs.yaml" for t in CONTRACT_TABLES)


@pytest.mark.parametrize("table", CONTRACT_TABLES)
def test_contract_validates_against_the_odcs_json_schema(table: str) -> None:
    validator = Draft201909Validator(json.loads(ODCS_SCHEMA.read_text()))
    document = yaml.safe_load(contract_path(table).read_text())
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(document)]
    assert errors == []
    assert document["apiVersion"] == "v3.2.0" and document["kind"] == "DataContract"


def test_the_schema_copy_is_the_one_the_runtime_validates_with() -> None:
    from importlib.resources import files

    shipped = files("open_data_contract_standard").joinpath("schema.json").read_bytes()
    assert hashlib.sha256(shipped).hexdigest() == hashlib.sha256(ODCS_SCHEMA.read_bytes()).hexdigest()
    assert hashlib.sha256(ODCS_SCHEMA.read_bytes()).hexdigest() in (REPO / "schemas/odcs/SOURCES.txt").read_text()


@pytest.mark.parametrize("table", CONTRACT_TABLES)
def test_contract_schema_is_the_code_table_schema(table: str) -> None:
    contract = load_contract(contract_path(table))
    # same columns in the same order, same Spark/Delta types, required == NOT NULL
    assert [c.name for c in contract.columns] == table_schema(table).names
    assert schema_drift(contract, arrow_fields(table_schema(table))) == []


def test_a_drift_between_code_and_contract_is_reported_column_by_column() -> None:
    import pyarrow as pa

    contract = load_contract(contract_path("lots"))
    drifted = [f for f in table_schema("lots") if f.name != "lot_position"]  # a column dropped by the code
    drifted = [pa.field(f.name, pa.float64(), True) if f.name == "total_amount" else f for f in drifted]
    drifted.append(pa.field("lot_budget", pa.string()))
    assert schema_drift(contract, arrow_fields(pa.schema(drifted))) == [
        "column lot_position is missing from the table",
        "column total_amount is double in the table, decimal(38,6) in the contract",
        "column lot_budget is in the table, not in the contract",
    ]


def test_the_issue_rules_are_in_the_contracts() -> None:
    rules = {r.id: r for t in CONTRACT_TABLES for r in load_contract(contract_path(t)).rules}
    key = rules["entries_key_unique"]
    assert (key.metric, key.columns, key.scope, key.severity) == (
        "duplicateValues",
        ("dataset", "entry_id"),
        "table",
        "error",
    )
    assert (rules["entries_entry_id_not_null"].metric, rules["entries_entry_id_not_null"].scope) == (
        "nullValues",
        "run",
    )
    assert rules["entries_updated_not_in_future"].kind == "sql"
    assert rules["entries_cpv_codes_eight_digits"].arguments == {"pattern": "^[0-9]{8}$"}
    assert {"lots_belong_to_an_entry", "results_belong_to_an_entry", "reconciliation_balanced"} <= set(rules)
    assert rules["tombstones_for_known_entries"].severity == "warn"
    amounts = [r for r in rules.values() if r.id.endswith("_amount_in_range")]
    assert len(amounts) == 10 and {r.table for r in amounts} == {"entries", "lots", "results"}


# -- bad contracts: a named error --------------------------------------------------------------------
def _write(tmp_path: Path, table: str, edit) -> Path:
    document = yaml.safe_load(contract_path(table).read_text())
    edit(document)
    path = tmp_path / f"{table}.odcs.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _rule(document: dict, rule_id: str) -> dict:
    obj = document["schema"][0]
    for item in [*obj.get("quality", []), *(q for p in obj["properties"] for q in p.get("quality", []))]:
        if item["id"] == rule_id:
            return item
    raise KeyError(rule_id)


def test_an_unknown_metric_is_not_valid_odcs_and_names_the_rule(tmp_path: Path) -> None:
    path = _write(tmp_path, "entries", lambda d: _rule(d, "entries_entry_id_not_null").update(metric="nullCount"))
    with pytest.raises(ContractError) as err:
        load_contract(path)
    assert err.value.rule_id == "entries_entry_id_not_null" and err.value.path == path
    assert str(err.value).startswith(f"data contract {path}: rule entries_entry_id_not_null: not valid ODCS at ")
    assert "'nullCount' is not one of" in str(err.value)


def test_two_thresholds_on_one_rule_are_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "lots", lambda d: _rule(d, "lots_key_unique").update(mustBeLessThan=3))
    with pytest.raises(ContractError, match=r"rule lots_key_unique: not valid ODCS") as err:
        load_contract(path)
    assert err.value.rule_id == "lots_key_unique"


def test_a_rule_on_an_unknown_column_is_refused(tmp_path: Path) -> None:
    path = _write(
        tmp_path, "lots", lambda d: _rule(d, "lots_key_unique")["arguments"].update(properties=["dataset", "lot_nr"])
    )
    with pytest.raises(ContractError) as err:
        load_contract(path)
    assert str(err.value) == (
        f"data contract {path}: rule lots_key_unique: unknown column(s) ['lot_nr']: not properties of table lots"
    )


def test_a_rule_without_id_or_with_an_unknown_severity_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "results", lambda d: _rule(d, "results_key_unique").update(severity="fatal"))
    with pytest.raises(ContractError, match="rule results_key_unique: severity must be error or warn; got 'fatal'"):
        load_contract(path)
    path = _write(tmp_path, "results", lambda d: _rule(d, "results_key_unique").pop("id"))
    with pytest.raises(ContractError, match="every rule needs an `id`"):
        load_contract(path)


def test_a_file_that_is_not_odcs_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "entries.odcs.yaml"
    path.write_text("apiVersion: v3.2.0\nkind: Contract\n")
    with pytest.raises(ContractError, match=r"not valid ODCS at kind: 'Contract' is not one of \['DataContract'\]"):
        load_contract(path)
    path.write_text("schema: [unclosed\n")
    with pytest.raises(ContractError, match="not readable YAML"):
        load_contract(path)
