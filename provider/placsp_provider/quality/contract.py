"""ODCS data contracts: load, validate, and turn into typed rules (docs/data-quality.md).

A contract is one YAML file per lake table, `quality/contracts/<table>.odcs.yaml`, in the Open Data
Contract Standard (ODCS) 3.x. It is checked in three steps, each failing with a `ContractError` that
names the file, the rule (when there is one) and the reason:

1. the ODCS JSON Schema shipped with the `open-data-contract-standard` package (unknown metrics,
   two thresholds on one rule, a misspelt key: refused here);
2. what this engine needs on top: a stable `id` on every rule (unique in the contract), severity
   `error` or `warn`, unit `rows` or `percent`, scope `run` or `table`, columns the contract declares,
   `arguments` the metric understands, and for a named assertion (`type: custom`, `engine: placsp`:
   `freshness`, `rowCountComparison`) the `implementation` it needs;
3. (in `engine.prepare`) every `sql` rule is planned by DuckDB against the real tables before anything
   runs: a query that does not compile is refused at the task's start, never a silent pass.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from placsp_provider.errors import ConfigError, PlacspError
from placsp_provider.lake import LAKE_TABLES

CONTRACT_SUFFIX = ".odcs.yaml"
# The tables a contract may describe: Silver, dead letters, reconciliation (ingest/tables.py).
CONTRACT_TABLES = LAKE_TABLES
METRICS = ("nullValues", "missingValues", "invalidValues", "duplicateValues", "rowCount")
# The one-value thresholds: symbol and comparison. The two `between`s take [low, high], bounds included.
_COMPARISONS = {
    "mustBe": ("=", operator.eq),
    "mustNotBe": ("!=", operator.ne),
    "mustBeGreaterThan": (">", operator.gt),
    "mustBeGreaterOrEqualTo": (">=", operator.ge),
    "mustBeLessThan": ("<", operator.lt),
    "mustBeLessOrEqualTo": ("<=", operator.le),
}
THRESHOLDS = (*_COMPARISONS, "mustBeBetween", "mustNotBeBetween")
SEVERITIES = ("error", "warn")
UNITS = ("rows", "percent")
SCOPES = ("run", "table")
_COLUMN_METRICS = ("nullValues", "missingValues", "invalidValues")  # on one column; scope `run` by default
# The named assertions (`type: custom`, `engine: placsp`, `implementation.assertion`): ODCS's library
# has no freshness metric and no comparison of two counts, and a custom rule may carry no top-level
# threshold (the schema refuses it), so a freshness rule's threshold sits in its `implementation`.
ENGINE = "placsp"
FRESHNESS, ROW_COUNT_COMPARISON = "freshness", "rowCountComparison"
ASSERTIONS = (FRESHNESS, ROW_COUNT_COMPARISON)
_IMPLEMENTATION_KEYS = {
    FRESHNESS: {"assertion", *THRESHOLDS},
    ROW_COUNT_COMPARISON: {"assertion", "per", "expected", "actual", "filter"},
}
_ARGUMENTS = {
    "nullValues": set(),
    "rowCount": set(),
    "missingValues": {"missingValues"},
    "invalidValues": {"validValues", "pattern"},
    "duplicateValues": {"properties"},
}


class ContractError(PlacspError):
    """A contract that cannot be used: not valid ODCS, an unknown column or metric, a sql rule that fails."""

    def __init__(self, path: Path | str, reason: str, rule_id: str | None = None) -> None:
        self.path = Path(path)
        self.rule_id = rule_id
        self.reason = reason
        where = f"{self.path}" + (f": rule {rule_id}" if rule_id else "")
        super().__init__(f"data contract {where}: {reason}")


@dataclass(frozen=True)
class Threshold:
    """One ODCS threshold: `mustBe`, `mustBeBetween`, ... and its value(s)."""

    operator: str
    value: Any

    def passes(self, actual: float) -> bool:
        v = self.value
        if self.operator == "mustBeBetween":
            return bool(v[0] <= actual <= v[1])
        if self.operator == "mustNotBeBetween":
            return bool(actual < v[0] or actual > v[1])
        return bool(_COMPARISONS[self.operator][1](actual, v))

    def describe(self) -> str:
        """`= 0`, `> 0`, `between 1 and 10`, ..."""
        v = self.value
        if self.operator == "mustBeBetween":
            return f"between {_num(v[0])} and {_num(v[1])}"
        if self.operator == "mustNotBeBetween":
            return f"not between {_num(v[0])} and {_num(v[1])}"
        return f"{_COMPARISONS[self.operator][0]} {_num(v)}"


@dataclass(frozen=True)
class Rule:
    """One executable quality rule of a contract (`text` rules are documentation and never become one)."""

    id: str
    table: str
    kind: str  # library | sql | custom (a named assertion: `metric` is its name, `arguments` its implementation)
    severity: str  # error | warn
    scope: str  # run | table
    threshold: Threshold
    column: str | None = None  # the property the rule sits on; None: the whole table
    metric: str | None = None  # library rules
    query: str | None = None  # sql rules
    unit: str = "rows"
    dimension: str | None = None
    description: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    source: str = ""  # the contract file

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns the rule reads: `arguments.properties` of a duplicate rule, the counts and key of
        a comparison, else its property."""
        props = self.arguments.get("properties")
        if props:
            return tuple(props)
        if self.metric == ROW_COUNT_COMPARISON:
            args = self.arguments
            return (args["per"], *args["expected"], *args["actual"])
        return (self.column,) if self.column else ()

    @property
    def expected(self) -> str:
        if self.metric == ROW_COUNT_COMPARISON:
            return f"read = stored in every {self.arguments['per']}"
        unit = {"percent": " %", "hours": " hours"}.get(self.unit, "")
        return f"{self.threshold.describe()}{unit}"

    @property
    def what(self) -> str:
        """`duplicateValues(dataset, entry_id)`, `sql`: what is measured."""
        if self.kind == "sql":
            return "sql" + (f"({self.column})" if self.column else "")
        if self.metric == FRESHNESS:
            return f"freshness({self.column} vs the newest landed page)"
        if self.metric == ROW_COUNT_COMPARISON:
            args = self.arguments
            read, stored = " + ".join(args["expected"]), " + ".join(args["actual"])
            return f"rowCountComparison({read} = {stored} per {args['per']})"
        return f"{self.metric}({', '.join(self.columns)})" if self.columns else f"{self.metric}"


@dataclass(frozen=True)
class Column:
    name: str
    physical_type: str
    required: bool


@dataclass(frozen=True)
class Contract:
    """A contract's table, its declared columns (in order) and its executable rules."""

    path: Path
    table: str
    run_column: str
    columns: tuple[Column, ...]
    rules: tuple[Rule, ...]


# -- where contracts live ---------------------------------------------------------------------------
def default_contracts_dir() -> Path:
    """The contracts shipped inside the package (`placsp_provider/quality/contracts`, package data of
    the wheel): found through the installed package, never a checkout path."""
    return Path(__file__).resolve().parent / "contracts"


def contract_path(table: str, directory: Path | str | None = None) -> Path:
    if table not in CONTRACT_TABLES:
        raise ConfigError(f"no contract for table {table!r}; the tables are {', '.join(CONTRACT_TABLES)}")
    folder = Path(directory) if directory else default_contracts_dir()
    return folder / f"{table}{CONTRACT_SUFFIX}"


def load_contracts(tables: Sequence[str] = CONTRACT_TABLES, directory: Path | str | None = None) -> list[Contract]:
    return [load_contract(contract_path(t, directory)) for t in tables]


# -- loading and validation -------------------------------------------------------------------------
def load_contract(path: Path | str) -> Contract:
    """Read, validate against ODCS, and parse a contract file (ContractError on any problem)."""
    import yaml

    path = Path(path)
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise ContractError(path, "no such file") from err
    except (OSError, yaml.YAMLError) as err:
        raise ContractError(path, f"not readable YAML: {_first_line(err)}") from err
    if not isinstance(document, dict):
        raise ContractError(path, "not an ODCS document (expected a mapping at the top)")
    validate_odcs(path, document)
    return _parse(path, document)


def validate_odcs(path: Path, document: dict[str, Any]) -> None:
    """The ODCS JSON Schema; the first error (the deepest, most precise one) names its rule if in one."""
    errors = list(_validator().iter_errors(document))
    if not errors:
        return
    error = _most_precise(errors)
    where = "/".join(str(p) for p in error.absolute_path) or "(top)"
    raise ContractError(path, f"not valid ODCS at {where}: {_first_line(error.message)}", _rule_at(document, error))


@cache
def _validator() -> Any:
    """The validator of the ODCS JSON Schema in `open-data-contract-standard` (a copy: schemas/odcs/)."""
    from importlib.resources import files

    from jsonschema import Draft201909Validator

    return Draft201909Validator(json.loads(files("open_data_contract_standard").joinpath("schema.json").read_text()))


def _most_precise(errors: list[Any]) -> Any:
    """The deepest leaf error; "unevaluated properties" only when nothing says more (an unknown metric
    fails the `enum` inside the library branch and, as a consequence, leaves its keys unevaluated)."""
    leaves: list[Any] = []
    stack = list(errors)
    while stack:
        error = stack.pop()
        if error.context:
            stack.extend(error.context)
        leaves.append(error)
    vague = ("unevaluatedProperties", "additionalProperties", "oneOf", "anyOf", "allOf", "if")
    return min(leaves, key=lambda e: (e.validator in vague, -len(e.absolute_path), str(e.message)))


def _rule_at(document: dict[str, Any], error: Any) -> str | None:
    """The `id` of the quality rule an error sits in, if any (so the message can name it)."""
    node: Any = document
    rule_id = None
    for part in error.absolute_path:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            break
        if isinstance(node, dict) and "id" in node and ("metric" in node or "query" in node or "type" in node):
            rule_id = str(node["id"])
    return rule_id


def _parse(path: Path, document: dict[str, Any]) -> Contract:
    objects = document.get("schema") or []
    if len(objects) != 1:
        raise ContractError(path, f"expected exactly one schema object (the table); found {len(objects)}")
    obj = objects[0]
    table = obj["name"]
    if table not in CONTRACT_TABLES:
        raise ContractError(path, f"schema object {table!r} is not a lake table ({', '.join(CONTRACT_TABLES)})")
    custom = {p.get("property"): p.get("value") for p in document.get("customProperties") or []}
    columns = tuple(
        Column(p["name"], str(p.get("physicalType", "")), bool(p.get("required", False)))
        for p in obj.get("properties") or []
    )
    names = {c.name for c in columns}
    run_column = str(custom.get("runColumn", "_ingest_run_id"))
    if run_column not in names:
        raise ContractError(path, f"customProperties runColumn {run_column!r} is not a column of the contract")
    rules: list[Rule] = []
    for prop in obj.get("properties") or []:
        for item in prop.get("quality") or []:
            _collect(path, table, item, prop["name"], names, rules)
    for item in obj.get("quality") or []:
        _collect(path, table, item, None, names, rules)
    seen: set[str] = set()
    for rule in rules:
        if rule.id in seen:
            raise ContractError(path, "rule id used twice in the contract", rule.id)
        seen.add(rule.id)
    return Contract(path=path, table=table, run_column=run_column, columns=columns, rules=tuple(rules))


def _collect(
    path: Path, table: str, item: dict[str, Any], column: str | None, names: set[str], rules: list[Rule]
) -> None:
    kind = item.get("type") or ("library" if "metric" in item else None)
    rule_id = item.get("id")
    if kind == "text":  # documentation, never run
        return
    if kind not in ("library", "sql", "custom"):
        raise ContractError(path, f"rule type {kind!r} cannot run here (library and sql can; text documents)", rule_id)
    if kind == "custom" and item.get("engine") != ENGINE:
        raise ContractError(
            path, f"a custom rule runs here only with engine {ENGINE!r}; got {item.get('engine')!r}", rule_id
        )
    if not rule_id:
        raise ContractError(path, f"every rule needs an `id` (a stable name for results and alerts): {item}")
    severity = item.get("severity", "error")
    if severity not in SEVERITIES:
        raise ContractError(path, f"severity must be error or warn; got {severity!r}", rule_id)
    implementation = item.get("implementation") if kind == "custom" else None
    metric = _assertion(path, rule_id, implementation) if kind == "custom" else item.get("metric")
    unit = item.get("unit", "hours" if metric == FRESHNESS else "rows")
    if metric == FRESHNESS and unit != "hours":
        raise ContractError(path, f"a freshness rule measures hours; got unit {unit!r}", rule_id)
    if metric != FRESHNESS and unit not in UNITS:
        raise ContractError(path, f"unit must be rows or percent; got {unit!r}", rule_id)
    custom = {p.get("property"): p.get("value") for p in item.get("customProperties") or []}
    if kind == "library" and metric not in METRICS:
        raise ContractError(path, f"unknown metric {metric!r}; the metrics are {', '.join(METRICS)}", rule_id)
    default_scope = "run" if metric in _COLUMN_METRICS else "table"
    scope = custom.get("scope", default_scope)
    if scope not in SCOPES:
        raise ContractError(path, f"scope must be run or table; got {scope!r}", rule_id)
    if metric == ROW_COUNT_COMPARISON:
        # Read and stored must be equal in every file: the measure is the number of files that differ.
        threshold = Threshold("mustBe", 0)
    else:
        holder = implementation if metric == FRESHNESS else item
        assert holder is not None
        given = [op for op in THRESHOLDS if op in holder]
        if len(given) != 1:
            raise ContractError(
                path, f"give exactly one threshold ({', '.join(THRESHOLDS)}); got {given or 'none'}", rule_id
            )
        threshold = Threshold(given[0], holder[given[0]])
    if not _numeric(threshold.value):
        raise ContractError(
            path, f"{threshold.operator} needs a number (two for between); got {threshold.value!r}", rule_id
        )
    arguments = dict(item.get("arguments") or {})
    if kind == "custom":
        assert implementation is not None and metric is not None
        arguments = _implementation(path, rule_id, metric, implementation, column)
    elif kind == "library":
        assert metric is not None
        unknown_args = set(arguments) - _ARGUMENTS[metric]
        if unknown_args:
            raise ContractError(path, f"metric {metric} takes no argument(s) {sorted(unknown_args)}", rule_id)
        if metric in _COLUMN_METRICS and column is None:
            raise ContractError(path, f"metric {metric} belongs on a property (a column)", rule_id)
        if metric == "invalidValues" and not ("validValues" in arguments or "pattern" in arguments):
            raise ContractError(path, "invalidValues needs arguments.validValues or arguments.pattern", rule_id)
        if metric == "duplicateValues" and column is None and not arguments.get("properties"):
            raise ContractError(path, "a table-level duplicateValues rule needs arguments.properties", rule_id)
        if "pattern" in arguments:
            try:
                re.compile(str(arguments["pattern"]))
            except re.error as err:
                raise ContractError(path, f"arguments.pattern is not a regular expression: {err}", rule_id) from err
    elif not str(item.get("query") or "").strip():
        raise ContractError(path, "a sql rule needs a query", rule_id)
    rule = Rule(
        id=str(rule_id),
        table=table,
        kind=kind,
        severity=severity,
        scope=scope,
        threshold=threshold,
        column=column,
        metric=metric,
        query=item.get("query"),
        unit=unit,
        dimension=item.get("dimension"),
        description=str(item.get("description", "")),
        arguments=arguments,
        source=str(path),
    )
    unknown = [c for c in rule.columns if c not in names]
    if unknown:
        raise ContractError(path, f"unknown column(s) {unknown}: not properties of table {table}", rule.id)
    rules.append(rule)


def _assertion(path: Path, rule_id: Any, implementation: Any) -> str:
    """The named assertion of a custom rule (`implementation.assertion`)."""
    name = implementation.get("assertion") if isinstance(implementation, dict) else None
    if name not in ASSERTIONS:
        raise ContractError(
            path,
            f"a custom rule needs implementation.assertion, one of {', '.join(ASSERTIONS)}; got {name!r}",
            rule_id,
        )
    return str(name)


def _implementation(
    path: Path, rule_id: Any, assertion: str, implementation: dict[str, Any], column: str | None
) -> dict[str, Any]:
    """A named assertion's settings, checked: no unknown key, the columns and key a comparison needs."""
    unknown = set(implementation) - _IMPLEMENTATION_KEYS[assertion]
    if unknown:
        raise ContractError(path, f"{assertion} takes no implementation key(s) {sorted(unknown)}", rule_id)
    if assertion == FRESHNESS:
        if column is None:
            raise ContractError(path, "a freshness rule belongs on a timestamp property (a column)", rule_id)
        return {}
    for key in ("expected", "actual"):
        value = implementation.get(key)
        if not (isinstance(value, list) and value and all(isinstance(v, str) for v in value)):
            raise ContractError(path, f"implementation.{key} must be a list of count columns", rule_id)
    if not isinstance(implementation.get("per"), str):
        raise ContractError(path, "implementation.per must name the column compared row by row", rule_id)
    if "filter" in implementation and not str(implementation["filter"]).strip():
        raise ContractError(path, "implementation.filter, when given, is a SQL condition", rule_id)
    return {k: implementation[k] for k in ("per", "expected", "actual", "filter") if k in implementation}


def _numeric(value: Any) -> bool:
    if isinstance(value, list):
        return len(value) == 2 and all(_numeric(v) for v in value) and value[0] <= value[1]
    return isinstance(value, int | float) and not isinstance(value, bool)


def _num(value: Any) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _first_line(err: Any) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else repr(err)
