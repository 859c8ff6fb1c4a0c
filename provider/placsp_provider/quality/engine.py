"""Evaluate contract rules on the lake without a JVM: delta-rs opens, DuckDB computes.

How little is read (docs/data-quality.md: "The check, and what it reads"): delta-rs prunes each
table's Delta log to the checked dataset's partition and Arrow's native local filesystem reads the
files left (as dead_letters/stats.py: no Python filesystem callbacks); DuckDB views that Arrow
dataset and pushes a query's columns and run-id filter into the scan; every rule is one aggregate
query, so only numbers come back to Python.

A table that does not exist yet is an empty table with the code's schema, and its schema rule fails
("no Delta table"): rules on it then say 0 rows rather than crash.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from placsp_provider.errors import ConfigError, PlacspError
from placsp_provider.lake import resolve_lake, table_path
from placsp_provider.lake_storage import LakePath
from placsp_provider.quality.contract import (
    CONTRACT_TABLES,
    FRESHNESS,
    ROW_COUNT_COMPARISON,
    Contract,
    ContractError,
    Rule,
    load_contracts,
)
from placsp_provider.untrusted import printable

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

MESSAGE_LIMIT = 2000
MAX_LISTED_RULES = 10
SCHEMA_RULE_SUFFIX = "_schema"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class QualityTableError(PlacspError):
    """A lake table exists but cannot be read (corrupt log, missing data file, ...)."""

    def __init__(self, path: LakePath, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"quality check: table {path} cannot be read: {reason}")


@dataclass(frozen=True)
class CheckRequest:
    """What to check: one dataset of the lake, the tables' contracts, optionally one run's rows.

    Without `run_id` (the CLI by default) rules of scope `run` check the dataset's whole partition.
    """

    lake: str
    dataset: str
    run_id: str | None = None
    tables: tuple[str, ...] = CONTRACT_TABLES
    contracts_dir: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "lake", str(self.lake))
        object.__setattr__(self, "tables", tuple(self.tables))
        unknown = [t for t in self.tables if t not in CONTRACT_TABLES]
        if unknown:
            raise ConfigError(f"unknown table(s) {unknown}; the tables are {', '.join(CONTRACT_TABLES)}")

    def cli_command(self, *, rule: str | None = None) -> str:
        args = ["placsp", "quality", "check", "--dataset", self.dataset, "--lake", self.lake]
        if self.run_id:
            args += ["--run-id", self.run_id]
        if rule:
            args += ["--rule", rule, "--rows"]
        elif set(self.tables) != set(CONTRACT_TABLES):
            for table in self.tables:
                args += ["--table", table]
        return shlex.join(args)


@dataclass(frozen=True)
class RuleResult:
    """One rule evaluated: a data-quality assertion (XCom, quality_results, OpenLineage)."""

    rule_id: str
    dataset: str
    table: str
    column: str | None
    kind: str  # library | sql | custom (freshness, rowCountComparison) | schema | volume
    metric: str | None
    dimension: str | None
    severity: str
    scope: str  # run | table
    expected: str
    actual: float | None
    success: bool
    rows_checked: int
    message: str
    content: str = ""  # the query run (or the schema/volume description)
    description: str = ""
    # What a named assertion measured besides `actual` (times, files compared): lineage `params`.
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def is_error(self) -> bool:
        return not self.success and self.severity == "error"

    def describe(self) -> str:
        scope = "this run" if self.scope == "run" else "whole table"
        actual = "n/a" if self.actual is None else _num(self.actual)
        return (
            f"{self.rule_id} [{self.severity}] {self.table}: {self.message or self.metric}: expected {self.expected}, "
            f"actual {actual} ({scope}, {self.rows_checked:,} rows)"
        )


@dataclass(frozen=True)
class CheckReport:
    request: CheckRequest
    results: tuple[RuleResult, ...]
    checked_at: datetime
    table_versions: dict[str, int | None] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)  # rows of the dataset's partition per table

    @property
    def errors(self) -> list[RuleResult]:
        return [r for r in self.results if r.is_error]

    @property
    def warnings(self) -> list[RuleResult]:
        return [r for r in self.results if not r.success and r.severity == "warn"]

    @property
    def passed(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.request.dataset,
            "run_id": self.request.run_id,
            "tables": list(self.request.tables),
            "passed": self.passed,
            "rules": len(self.results),
            "failed_error": len(self.errors),
            "failed_warn": len(self.warnings),
            "checked_at": self.checked_at.isoformat(),
            "table_versions": self.table_versions,
            "rows": self.rows,
            "results": [asdict(r) for r in self.results],
        }


# -- the DuckDB session over the lake ---------------------------------------------------------------
class LakeSession:
    """An in-memory DuckDB where each lake table's `dataset` partition is a view by the table's name
    (so a `sql` rule can join tables), and `run_view(table)` its rows of the request's run."""

    def __init__(self, request: CheckRequest, contracts: Iterable[Contract]) -> None:
        import duckdb

        self.lake = resolve_lake(request.lake)
        self.dataset = request.dataset
        self.run_id = request.run_id
        self.run_columns = {c.table: c.run_column for c in contracts}
        self.con: duckdb.DuckDBPyConnection = duckdb.connect()
        self.versions: dict[str, int | None] = {}
        self.delta_schemas: dict[str, list[Any] | None] = {}
        for table in CONTRACT_TABLES:
            self._register(table)

    def __enter__(self) -> LakeSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.con.close()

    def _register(self, table: str) -> None:
        from placsp_provider.ingest.tables import table_schema

        path = table_path(self.lake, table)
        run_column = self.run_columns.get(table) or default_run_column(table)
        opened = _open(path, [("dataset", "=", self.dataset)])
        if opened is None:  # no table yet: no version, no Delta schema
            source = run_source = table_schema(table).empty_table()
        else:
            source, self.versions[table], self.delta_schemas[table] = opened
            run_source = source
            if self.run_id:
                # The run's files only: the Delta log's min/max statistics of the run column prune the
                # others before any is opened (a run writes its own files; a MERGE rewrite may mix runs,
                # which the exact filter of the view then sorts out).
                pruning = [("dataset", "=", self.dataset), (run_column, "=", self.run_id)]
                run_source = _open(path, pruning)[0]  # type: ignore[index]
        where = f"WHERE dataset = {_literal(self.dataset)}"
        in_run = f" AND {ident(run_column)} = {_literal(self.run_id)}" if self.run_id else ""
        self.con.register(f"_delta_{table}", source)
        self.con.register(f"_delta_run_{table}", run_source)
        self.con.execute(f"CREATE VIEW {table} AS SELECT * FROM _delta_{table} {where}")
        self.con.execute(f"CREATE VIEW {run_view(table)} AS SELECT * FROM _delta_run_{table} {where}{in_run}")

    def missing_columns(self, contract: Contract) -> set[str]:
        """Contract columns the Delta table lacks (none when the table does not exist: it is empty)."""
        fields = self.delta_schemas.get(contract.table)
        if fields is None:
            return set()
        present = {f.name for f in fields}
        return {c.name for c in contract.columns if c.name not in present}

    def scalar(self, sql: str) -> tuple[Any, ...]:
        row = self.con.execute(sql).fetchone()
        return tuple(row) if row is not None else ()

    def count(self, table: str) -> int:
        return int(self.scalar(f"SELECT count(*) FROM {table}")[0])

    def is_list(self, table: str, column: str) -> bool:
        rows = self.con.execute(f"DESCRIBE SELECT {ident(column)} FROM {table}").fetchall()
        return bool(rows) and str(rows[0][1]).endswith("[]")


def open_partition(lake: str | LakePath, table: str, dataset: str) -> Any:
    """The `dataset` partition of a lake table as a pruned Arrow dataset, or None if there is no table."""
    opened = _open(table_path(resolve_lake(lake), table), [("dataset", "=", dataset)])
    return opened[0] if opened else None


def _open(path: LakePath, pruning: list[tuple[str, str, Any]]) -> tuple[Any, int, list[Any]] | None:
    """(Arrow dataset of the files `pruning` keeps, Delta version, Delta schema fields), None without a
    table. `pruning`: partition values exactly, other columns by the files' min/max statistics.

    Arrow's own local filesystem, rooted at the table, not deltalake's (`table_files.table_files`)."""
    if not (path / "_delta_log").is_dir():
        return None
    import pyarrow as pa
    from deltalake.exceptions import DeltaError

    from placsp_provider.lake_storage import open_table
    from placsp_provider.table_files import table_files, with_string_views

    try:
        delta = open_table(path)
        files = table_files(delta, pruning)
        # Strings as `string_view`: DuckDB then reads files of both engines (table_files).
        source = table_files(delta, pruning, schema=with_string_views(files.schema))
        return source, delta.version(), list(delta.schema().fields)
    except (DeltaError, pa.ArrowException, OSError) as err:
        raise QualityTableError(path, _reason(err)) from err


def default_run_column(table: str) -> str:
    """The column that says which run wrote a row: `_ingest_run_id` in Silver, `run_id` elsewhere."""
    from placsp_provider.ingest.tables import table_schema

    return "_ingest_run_id" if "_ingest_run_id" in table_schema(table).names else "run_id"


def run_view(table: str) -> str:
    return f"{table}__this_run"


# -- running ----------------------------------------------------------------------------------------
def run_checks(request: CheckRequest) -> CheckReport:
    """Load and validate the contracts, prepare every sql rule, then evaluate every rule."""
    contracts = load_contracts(request.tables, request.contracts_dir)
    checked_at = datetime.now(UTC)
    with LakeSession(request, contracts) as session:
        prepare(contracts, session)
        results: list[RuleResult] = []
        rows: dict[str, int] = {}
        for contract in contracts:
            rows[contract.table] = session.count(contract.table)
            results.append(schema_result(contract, session, request.dataset))
            missing = session.missing_columns(contract)
            for rule in contract.rules:
                lost = [c for c in rule.columns if c in missing]
                if lost:  # the schema rule reports the drift; the rule cannot measure anything
                    reason = f"{rule.what}; column(s) {lost} missing from the table"
                    results.append(_result(rule, request.dataset, actual=None, success=False, message=reason))
                else:
                    results.append(evaluate(rule, session, request.dataset))
        versions = {c.table: session.versions.get(c.table) for c in contracts}
    return CheckReport(request, tuple(results), checked_at, versions, rows)


def prepare(contracts: Iterable[Contract], session: LakeSession) -> None:
    """Plan every rule's query (EXPLAIN, no scan): an unknown column, table or function in a sql rule is
    a ContractError now, before anything is evaluated."""
    import duckdb

    for contract in contracts:
        missing = session.missing_columns(contract)
        for rule in contract.rules:
            if any(c in missing for c in rule.columns):
                continue  # reported as schema drift, not as a broken rule
            sqls = [rule_sql(rule, session)]
            if rule.metric == FRESHNESS:
                from placsp_provider.quality.assertions import NOT_IN_SILVER_SQL

                sqls.append(NOT_IN_SILVER_SQL)
            for sql in sqls:
                try:
                    session.con.execute(f"EXPLAIN {sql}")
                except duckdb.Error as err:
                    raise ContractError(contract.path, f"the query does not run: {_reason(err)}", rule.id) from err


def evaluate(rule: Rule, session: LakeSession, dataset: str) -> RuleResult:
    """One rule: its measure, compared with its threshold."""
    import duckdb

    sql = rule_sql(rule, session)
    try:
        row = session.scalar(sql)
    except duckdb.Error as err:
        raise ContractError(rule.source, f"the query failed: {_reason(err)}", rule.id) from err
    if rule.metric == FRESHNESS:
        return _freshness(rule, session, dataset, row, sql)
    if rule.metric == ROW_COUNT_COMPARISON:
        return _comparison(rule, session, dataset, row, sql)
    if rule.kind == "sql":
        if len(row) != 1 or not (row[0] is None or _is_number(row[0])):
            raise ContractError(rule.source, f"a sql rule must return one number; got {row!r}", rule.id)
        bad, total = row[0], session.count(_view(rule))
    else:
        bad, total = row[0], int(row[1]) if len(row) > 1 else int(row[0])
    actual: float | None
    if bad is None:
        actual, success, note = None, False, "the query returned NULL"
    else:
        actual = float(bad)
        if rule.unit == "percent" and rule.metric != "rowCount":
            actual = 100.0 * actual / total if total else 0.0
        success = rule.threshold.passes(actual)
        note = ""
    if rule.metric == "rowCount" and total == 0:
        note = "the table has no rows for this dataset"
    elif not total and rule.metric != "rowCount":
        note = "no rows to check"  # passes vacuously when 0 meets the threshold
    message = rule.what + (f"; {note}" if note else "")
    return _result(rule, dataset, actual=actual, success=success, rows_checked=int(total), message=message, content=sql)


def _freshness(rule: Rule, session: LakeSession, dataset: str, row: tuple[Any, ...], sql: str) -> RuleResult:
    """Hours from Silver's newest `updated` to the newest entry Bronze landed (quality/assertions.py)."""
    from placsp_provider.feed.timestamps import isoformat
    from placsp_provider.quality.assertions import NOT_IN_SILVER_SQL, newest_landed

    newest_epoch, rows = row[0], int(row[1])
    not_in_silver = [r[0] for r in session.con.execute(NOT_IN_SILVER_SQL).fetchall()]
    landed = newest_landed(session.lake, dataset, not_in_silver)
    silver = datetime.fromtimestamp(float(newest_epoch), UTC) if newest_epoch is not None else None
    details: dict[str, Any] = {
        "silver_newest": isoformat(silver) if silver else None,
        "landed_newest": isoformat(landed.updated) if landed.updated else None,
        "landed_file": landed.file,
        "landed_pages": landed.pages,
        "pages_left_out": landed.left_out,
        "manifests": landed.manifests,
    }
    left_out = f"; {landed.left_out} page(s) left out: none of their entries reached Silver" if landed.left_out else ""
    content = (
        f"{sql}; against max_updated of the {landed.pages} page(s) of {landed.manifests} Bronze manifest(s), "
        f"minus the files of: {NOT_IN_SILVER_SQL}"
    )
    actual: float | None = None
    if landed.updated is None:
        success, note = True, f"no landed page holds an entry that could be in Silver: nothing to compare{left_out}"
    elif silver is None:
        success = False
        note = (
            f"Silver holds no {rule.column} of this dataset, while {printable(landed.file)} landed entries up to "
            f"{isoformat(landed.updated)}{left_out}"
        )
    else:
        actual = round((landed.updated - silver).total_seconds() / 3600, 2)
        success = rule.threshold.passes(actual)
        behind = f"{actual:g} h behind" if actual > 0 else "not behind"
        note = (
            f"Silver's newest {rule.column} {isoformat(silver)} is {behind} the newest landed entry "
            f"{isoformat(landed.updated)} ({printable(landed.file)}){left_out}"
        )
    result = _result(
        rule,
        dataset,
        actual=actual,
        success=success,
        rows_checked=rows,
        message=f"{rule.what}; {note}",
        content=content,
    )
    return replace(result, details=details)


def _comparison(rule: Rule, session: LakeSession, dataset: str, row: tuple[Any, ...], sql: str) -> RuleResult:
    """Per row (per file): the expected counts' sum = the actual counts' sum. Fails when any differs."""
    from placsp_provider.quality.assertions import comparison_rows_sql

    compared, read, stored, differing = (int(v) for v in row)
    per = rule.arguments["per"]
    success = rule.threshold.passes(differing)
    note = f"{differing} of {compared} {per} value(s) differ" if compared else "no rows to check"
    if differing:
        first = session.scalar(f"{comparison_rows_sql(rule, _view(rule))} LIMIT 1")
        note += f"; first: {printable(first[0], 200)}: expected {first[1]}, actual {first[2]}"
    result = _result(
        rule,
        dataset,
        actual=float(stored),
        success=success,
        rows_checked=compared,
        message=f"{rule.what}; {note}",
        content=sql,
    )
    details = {"compared": compared, "differing": differing, "expected_rows": read, "actual_rows": stored}
    # Expected and actual as totals (the facet's strings); the verdict is per row, so the message says
    # how many rows differ even when the totals happen to agree.
    return replace(
        result, expected=f"= {read} ({' + '.join(rule.arguments['expected'])}), {per} by {per}", details=details
    )


def _result(
    rule: Rule,
    dataset: str,
    *,
    actual: float | None,
    success: bool,
    message: str,
    rows_checked: int = 0,
    content: str = "",
) -> RuleResult:
    """A rule's outcome, with the rule's own fields."""
    return RuleResult(
        rule_id=rule.id,
        dataset=dataset,
        table=rule.table,
        column=rule.column,
        kind=rule.kind,
        metric=rule.metric,
        dimension=rule.dimension,
        severity=rule.severity,
        scope=rule.scope,
        expected=rule.expected,
        actual=actual,
        success=success,
        rows_checked=rows_checked,
        message=message,
        content=content,
        description=rule.description,
    )


def _view(rule: Rule) -> str:
    return run_view(rule.table) if rule.scope == "run" else rule.table


def rule_sql(rule: Rule, session: LakeSession) -> str:
    """The aggregate query of a rule: `(bad, total)` for library metrics, one number for sql rules."""
    view = _view(rule)
    if rule.kind == "sql":
        return substitute(rule, view)
    metric, col = rule.metric, ident(rule.column) if rule.column else ""
    if metric == FRESHNESS:
        return f"SELECT epoch(max({col})), count(*) FROM {view}"
    if metric == ROW_COUNT_COMPARISON:
        from placsp_provider.quality.assertions import comparison_sql

        return comparison_sql(rule, view)
    if metric == "rowCount":
        return f"SELECT count(*) FROM {view}"
    if metric == "duplicateValues":
        keys = ", ".join(ident(c) for c in rule.columns)
        not_null = " AND ".join(f"{ident(c)} IS NOT NULL" for c in rule.columns)
        return (
            f"SELECT coalesce(sum(n - 1), 0), (SELECT count(*) FROM {view}) FROM "
            f"(SELECT count(*) AS n FROM {view} WHERE {not_null} GROUP BY {keys} HAVING count(*) > 1)"
        )
    if metric == "nullValues":
        return f"SELECT count(*) FILTER (WHERE {col} IS NULL), count(*) FROM {view}"
    if metric == "missingValues":
        return f"SELECT count(*) FILTER (WHERE {missing_condition(rule, col)}), count(*) FROM {view}"
    if metric == "invalidValues":
        # A list column (CPV codes) is checked value by value; nulls are missing, not invalid.
        is_list = session.is_list(rule.table, rule.column or "")
        source = f"(SELECT unnest({col}) AS v FROM {view})" if is_list else f"(SELECT {col} AS v FROM {view})"
        return f"SELECT count(*) FILTER (WHERE NOT ({valid_condition(rule, 'v')})), count(v) FROM {source}"
    raise ContractError(rule.source, f"unknown metric {metric!r}", rule.id)


def missing_condition(rule: Rule, col: str) -> str:
    missing = [v for v in rule.arguments.get("missingValues", [None, ""]) if v is not None]
    return f"{col} IS NULL" + (f" OR {col} IN ({', '.join(_literal(v) for v in missing)})" if missing else "")


def valid_condition(rule: Rule, value: str) -> str:
    args = rule.arguments
    terms = []
    if "validValues" in args:
        terms.append(f"{value} IN ({', '.join(_literal(v) for v in args['validValues'])})")
    if "pattern" in args:
        terms.append(f"regexp_full_match({value}, {_literal(args['pattern'])})")
    return f"{value} IS NULL OR (" + " AND ".join(terms) + ")"


def substitute(rule: Rule, view: str) -> str:
    """A sql rule's query: `${object}` (or `${table}`) is `view`, `${property}` (or `${column}`) its column."""
    assert rule.query is not None
    out = rule.query.replace("${object}", view).replace("${table}", view)
    if rule.column:
        out = out.replace("${property}", ident(rule.column)).replace("${column}", ident(rule.column))
    return out


def offending_rows_sql(rule: Rule, session: LakeSession) -> str:
    """A query that lists the rows a rule counts as failing (for `placsp quality check --rows`)."""
    view = _view(rule)
    if rule.kind == "sql":
        sql = substitute(rule, view)
        listed = re.sub(r"^\s*SELECT\s+count\(\*\)", "SELECT *", sql, count=1, flags=re.IGNORECASE)
        if listed == sql:
            raise ContractError(rule.source, "only a `SELECT count(*) FROM ...` sql rule can list its rows", rule.id)
        return listed
    col = ident(rule.column) if rule.column else ""
    if rule.metric == ROW_COUNT_COMPARISON:
        from placsp_provider.quality.assertions import comparison_rows_sql

        return comparison_rows_sql(rule, view)
    if rule.metric == FRESHNESS:
        raise ContractError(
            rule.source, "a freshness rule lists no rows: its message names the newest landed page", rule.id
        )
    if rule.metric == "duplicateValues":
        keys = ", ".join(ident(c) for c in rule.columns)
        return f"SELECT {keys}, count(*) AS copies FROM {view} GROUP BY {keys} HAVING count(*) > 1 ORDER BY {keys}"
    if rule.metric == "nullValues":
        return f"SELECT * FROM {view} WHERE {col} IS NULL"
    if rule.metric == "missingValues":
        return f"SELECT * FROM {view} WHERE {missing_condition(rule, col)}"
    if rule.metric == "invalidValues":
        if session.is_list(rule.table, rule.column or ""):
            bad = f"list_filter({col}, v -> NOT ({valid_condition(rule, 'v')}))"
            return f"SELECT *, {bad} AS invalid_values FROM {view} WHERE len({bad}) > 0"
        return f"SELECT * FROM {view} WHERE NOT ({valid_condition(rule, col)})"
    return f"SELECT * FROM {view}"


def list_offending_rows(request: CheckRequest, rule_id: str, limit: int = 50) -> tuple[str, list[str], list[tuple]]:
    """(query, column names, at most `limit` rows) of one rule's failing rows."""
    contracts = load_contracts(request.tables, request.contracts_dir)
    rule = next((r for c in contracts for r in c.rules if r.id == rule_id), None)
    if rule is None:
        raise ConfigError(f"no rule {rule_id!r} in the contracts of {', '.join(request.tables)}")
    with LakeSession(request, contracts) as session:
        sql = offending_rows_sql(rule, session)
        cursor = session.con.execute(f"{sql} LIMIT {int(limit)}")
        names = [d[0] for d in cursor.description or []]
        return sql, names, cursor.fetchall()


# -- the schema rule: the contract vs the Delta table -----------------------------------------------
def schema_result(contract: Contract, session: LakeSession, dataset: str) -> RuleResult:
    fields = session.delta_schemas.get(contract.table)
    path = table_path(session.lake, contract.table)
    if fields is None:
        problems = [f"no Delta table at {path}"]
    else:
        problems = schema_drift(contract, [(f.name, _delta_type(f.type), f.nullable) for f in fields])
    return RuleResult(
        rule_id=f"{contract.table}{SCHEMA_RULE_SUFFIX}",
        dataset=dataset,
        table=contract.table,
        column=None,
        kind="schema",
        metric="schema",
        dimension="conformity",
        severity="error",
        scope="table",
        expected="0 differences",
        actual=float(len(problems)),
        success=not problems,
        rows_checked=0,
        message="schema matches the contract" if not problems else "schema drift: " + "; ".join(problems[:5]),
        content=f"contract {contract.path.name} vs Delta table {path}",
        description="The Delta table's columns, types and nullability are the contract's.",
    )


def schema_drift(contract: Contract, fields: Sequence[tuple[str, str, bool]]) -> list[str]:
    """Differences between the contract's columns and (name, physical type, nullable) of a table."""
    problems = []
    actual = {name: (kind, nullable) for name, kind, nullable in fields}
    declared = {c.name: c for c in contract.columns}
    for column in contract.columns:
        if column.name not in actual:
            problems.append(f"column {column.name} is missing from the table")
            continue
        kind, nullable = actual[column.name]
        if column.physical_type and column.physical_type != kind:
            problems.append(f"column {column.name} is {kind} in the table, {column.physical_type} in the contract")
        if column.required and nullable:
            problems.append(f"column {column.name} is nullable in the table, required in the contract")
        if not column.required and not nullable:
            problems.append(f"column {column.name} is NOT NULL in the table, optional in the contract")
    problems += [f"column {name} is in the table, not in the contract" for name in actual if name not in declared]
    return problems


def arrow_fields(schema: pa.Schema) -> list[tuple[str, str, bool]]:
    """(name, Spark/Delta type name, nullable) of an Arrow schema, e.g. ingest/tables.table_schema(t)."""
    from placsp_provider.ingest.tables import spark_type_name

    return [(f.name, spark_type_name(f.type), f.nullable) for f in schema]


def _delta_type(delta_type: Any) -> str:
    name = getattr(delta_type, "type", None)
    return str(name if name is not None else delta_type)


# -- the bounded failure message --------------------------------------------------------------------
def failure_message(report: CheckReport, *, limit: int = MESSAGE_LIMIT) -> str:
    """What failed (errors first, then warnings; at most 10), expected vs actual, and the commands."""
    request = report.request
    failed = report.errors + report.warnings
    run = f", run {request.run_id}" if request.run_id else ""
    verdict = "failed" if report.errors else "passed with warnings"
    head = (
        f"data contract checks {verdict}: dataset {request.dataset}{run}: {len(report.errors)} error rule(s) and "
        f"{len(report.warnings)} warn rule(s) failed of {len(report.results)}"
    )
    lines = [f"  - {_clip(r.describe(), 300)}" for r in failed[:MAX_LISTED_RULES]]
    if len(failed) > MAX_LISTED_RULES:
        lines.append(f"  (+{len(failed) - MAX_LISTED_RULES} more)")
    first = next((r for r in failed if r.kind in ("library", "sql") or r.metric == ROW_COUNT_COMPARISON), None)
    tail = [f"all results: {request.cli_command()} --json"]
    if first is not None:
        tail.insert(0, f"list the offending rows: {request.cli_command(rule=first.rule_id)}")
    for keep in range(len(lines), -1, -1):
        text = "\n".join([head, *lines[:keep], *tail])
        if len(text) <= limit:
            return text
    return text[: limit - 1] + "…"


# -- helpers ----------------------------------------------------------------------------------------
def ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(value: Any) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.4g}"


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _reason(err: BaseException) -> str:
    lines = [_ANSI.sub("", line).strip() for line in str(err).splitlines()]
    text = next((line for line in lines if line), "") or repr(err)
    return f"{type(err).__name__}: {text}"
