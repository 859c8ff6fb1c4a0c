"""Dead-letter counts and threshold checks, read with delta-rs (`deltalake`): no Spark, no JVM, no Airflow.

A count reads little on purpose: the Delta log prunes files before any is opened (the `dataset`
partition exactly; `run_id`, `status`, `stage`, `error_type` and `processing_timestamp` by each file's
min/max statistics: one run's dead letters live in that run's files, so a run check opens only those);
the same conditions filter rows inside the Parquet scan; only the short columns counted are read, and
the samples stop at the first few matching rows.

A lake with no dead-letter table yet has no dead letters: zero, not an error. A table that exists but
cannot be read raises `DeadLetterTableError`, naming the path and the reason.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from placsp_provider.dead_letters.lifecycle import QUARANTINED, STAGES
from placsp_provider.errors import ConfigError, PlacspError
from placsp_provider.lake import DEAD_LETTER_TABLE, resolve_lake, run_summary_path, table_path
from placsp_provider.lake_storage import LakePath
from placsp_provider.table_files import table_files, text_equals, text_in
from placsp_provider.untrusted import printable

if TYPE_CHECKING:
    import pyarrow.dataset as pads

SCOPES = ("run", "backlog")
SEVERITIES = ("error", "warn")
SAMPLE_LIMIT = 5
TOP_ERROR_TYPES = 5
MESSAGE_LIMIT = 2000
SAMPLE_CHARS = 300  # one sample line of the failure message, before its control characters are escaped

_COUNT_COLUMNS = ("dataset", "stage", "error_type", "status")
_SAMPLE_COLUMNS = ("source_file", "entry_id", "record_offset")
_LIST_COLUMNS = "dataset, run_id, stage, error_type, source_file, record_offset, entry_id, error_message"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ERROR_TYPE = re.compile(r"[a-z][a-z0-9_]*")


class DeadLetterTableError(PlacspError):
    """The dead-letter Delta table exists but cannot be read (corrupt log, missing data file, ...)."""

    def __init__(self, path: LakePath, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"dead-letter table {path} cannot be read: {reason}")


class RunSummaryError(PlacspError):
    """A Silver run summary (`<lake>/runs/<dataset>/<run_id>.json`) is missing or unreadable."""

    def __init__(self, path: LakePath, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"run summary {path}: {reason}")


# -- what to count --------------------------------------------------------------------------------
@dataclass(frozen=True)
class DeadLetterQuery:
    """Which dead letters: every condition given is ANDed; `stages`/`error_types` match any listed."""

    lake: str
    dataset: str | None = None
    run_id: str | None = None
    status: str | None = None
    stages: tuple[str, ...] = ()
    error_types: tuple[str, ...] = ()
    since: datetime | None = None  # processing_timestamp >= since (UTC when naive)

    def __post_init__(self) -> None:
        object.__setattr__(self, "lake", str(self.lake))
        object.__setattr__(self, "stages", _names("stages", self.stages))
        object.__setattr__(self, "error_types", _names("error_types", self.error_types))
        if self.since is not None and self.since.tzinfo is None:
            object.__setattr__(self, "since", self.since.replace(tzinfo=UTC))

    @property
    def table_path(self) -> LakePath:
        return table_path(resolve_lake(self.lake), DEAD_LETTER_TABLE)

    def pruning_filters(self) -> list[tuple[str, str, Any]]:
        """Tuple filters for the Delta log: partition values exactly, other columns by file statistics."""
        out: list[tuple[str, str, Any]] = []
        for column, value in (("dataset", self.dataset), ("run_id", self.run_id), ("status", self.status)):
            if value is not None:
                out.append((column, "=", value))
        if self.stages:
            out.append(("stage", "in", list(self.stages)))
        if self.error_types:
            out.append(("error_type", "in", list(self.error_types)))
        if self.since is not None:
            out.append(("processing_timestamp", ">=", self.since))
        return out

    def row_filter(self) -> Any:
        """The same conditions as an Arrow expression (exact rows; applied in the Parquet scan)."""
        import pyarrow as pa
        import pyarrow.dataset as pads

        expr = None
        for column, op, value in self.pruning_filters():
            # Strings compared as `string`: delta-rs writes some files with `string_view` (table_files).
            if op == "=":
                term = text_equals(column, value)
            elif op == "in":
                term = text_in(column, value)
            else:
                term = pads.field(column) >= pa.scalar(value, type=pa.timestamp("us", tz="UTC"))
            expr = term if expr is None else expr & term
        return expr

    def where_sql(self) -> str:
        terms = []
        for column, op, value in self.pruning_filters():
            if op == "=":
                terms.append(f"{column} = {_sql_literal(value)}")
            elif op == "in":
                terms.append(f"{column} IN ({', '.join(_sql_literal(v) for v in value)})")
            else:
                terms.append(f"{column} >= TIMESTAMP '{value.astimezone(UTC):%Y-%m-%d %H:%M:%S}'")
        return " AND ".join(terms) or "TRUE"

    def duckdb_sql(self) -> str:
        """A DuckDB query that lists every dead letter counted (needs the `delta` extension)."""
        source = f"delta_scan({_sql_literal(str(self.table_path))})"
        return f"SELECT {_LIST_COLUMNS} FROM {source} WHERE {self.where_sql()} ORDER BY source_file, record_offset;"

    def spark_sql(self) -> str:
        """The same listing in Spark SQL (any SparkSession with Delta)."""
        source = "delta.`" + str(self.table_path).replace("`", "``") + "`"
        return f"SELECT {_LIST_COLUMNS} FROM {source} WHERE {self.where_sql()} ORDER BY source_file, record_offset"

    def cli_command(self) -> str:
        """`placsp dead-letters stats ...` with the same selection."""
        options = [
            ("--dataset", self.dataset),
            ("--lake", self.lake),
            ("--run-id", self.run_id),
            ("--status", self.status),
            *(("--stage", stage) for stage in self.stages),
            *(("--error-type", error_type) for error_type in self.error_types),
            ("--since", self.since.isoformat() if self.since else None),
        ]
        args = ["placsp", "dead-letters", "stats"]
        for flag, value in options:
            if value is not None:
                args += [flag, value]
        return shlex.join(args)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["stages"], data["error_types"] = list(self.stages), list(self.error_types)
        data["since"] = self.since.isoformat() if self.since else None
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DeadLetterQuery:
        since = data.get("since")
        return cls(**{**data, "since": datetime.fromisoformat(since) if since else None})


@dataclass(frozen=True)
class DeadLetterSample:
    source_file: str
    entry_id: str | None  # null for page- and file-level rows
    record_offset: int


@dataclass(frozen=True)
class DeadLetterCounts:
    """What `count` found. Breakdowns (one by each of `_COUNT_COLUMNS`) are ordered by count, largest first."""

    query: DeadLetterQuery
    total: int = 0
    by_dataset: dict[str, int] = field(default_factory=dict)
    by_stage: dict[str, int] = field(default_factory=dict)
    by_error_type: dict[str, int] = field(default_factory=dict)
    by_status: dict[str, int] = field(default_factory=dict)
    samples: tuple[DeadLetterSample, ...] = ()
    table_version: int | None = None  # None: the lake has no dead-letter table yet

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["query"] = self.query.to_dict()
        data["samples"] = [asdict(s) for s in self.samples]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DeadLetterCounts:
        samples = tuple(DeadLetterSample(**s) for s in data["samples"])
        return cls(**{**data, "query": DeadLetterQuery.from_dict(data["query"]), "samples": samples})


def scope_query(
    lake: str | LakePath,
    *,
    dataset: str,
    scope: str,
    run_id: str | None = None,
    stages: Iterable[str] = (),
    error_types: Iterable[str] = (),
) -> DeadLetterQuery:
    """The selection a threshold check counts.

    Scope `run`: the rows this run inserted (`run_id`, any status). Scope `backlog`: every row still
    `quarantined`, whatever run inserted it. Unknown stages and malformed error types are refused: a
    typo would count nothing and pass.
    """
    check_scope(scope)
    if scope == "run" and not run_id:
        raise ConfigError(f"dataset {dataset}: scope 'run' needs the run id")
    stages, error_types = _names("stages", stages), _names("error_types", error_types)
    if unknown := [s for s in stages if s not in STAGES]:
        raise ConfigError(f"unknown dead-letter stage(s) {unknown}; the stages are {', '.join(STAGES)}")
    if malformed := [e for e in error_types if not _ERROR_TYPE.fullmatch(e)]:
        raise ConfigError(f"error types are snake_case names such as xml_syntax or invalid_amount; got {malformed}")
    return DeadLetterQuery(
        lake=str(lake),
        dataset=dataset,
        run_id=run_id if scope == "run" else None,
        status=QUARANTINED if scope == "backlog" else None,
        stages=stages,
        error_types=error_types,
    )


# -- reading --------------------------------------------------------------------------------------
def count_dead_letters(
    lake: str | LakePath,
    *,
    dataset: str | None = None,
    run_id: str | None = None,
    status: str | None = None,
    stages: Iterable[str] | None = None,
    error_types: Iterable[str] | None = None,
    since: datetime | None = None,
) -> DeadLetterCounts:
    """Count the dead letters matching every condition given (see `DeadLetterQuery`)."""
    return count(
        DeadLetterQuery(str(lake), dataset, run_id, status, tuple(stages or ()), tuple(error_types or ()), since)
    )


def count(query: DeadLetterQuery) -> DeadLetterCounts:
    path = query.table_path
    if not (path / "_delta_log").is_dir():
        return DeadLetterCounts(query=query)  # no ingest has created the table yet: nothing dead-lettered
    import pyarrow as pa
    from deltalake.exceptions import DeltaError

    from placsp_provider.lake_storage import open_table

    try:
        table = open_table(path)
        files = table_files(table, query.pruning_filters())  # not deltalake's filesystem: see there
        expr = query.row_filter()
        rows = files.to_table(columns=list(_COUNT_COLUMNS), filter=expr)
        samples = _samples(files, expr) if rows.num_rows else ()
        version = table.version()
    except (DeltaError, pa.ArrowException, OSError) as err:
        raise DeadLetterTableError(path, _reason(err)) from err
    groups = rows.group_by(list(_COUNT_COLUMNS)).aggregate([([], "count_all")]).to_pylist()
    tallies: dict[str, Counter[str]] = {column: Counter() for column in _COUNT_COLUMNS}
    for group in groups:
        for column in _COUNT_COLUMNS:
            tallies[column][group[column]] += group["count_all"]
    return DeadLetterCounts(
        query=query,
        total=rows.num_rows,
        **{f"by_{column}": _ordered(tally) for column, tally in tallies.items()},
        samples=samples,
        table_version=version,
    )


def _samples(files: pads.Dataset, expr: Any) -> tuple[DeadLetterSample, ...]:
    head = files.head(SAMPLE_LIMIT, columns=list(_SAMPLE_COLUMNS), filter=expr).to_pylist()
    found = [DeadLetterSample(r["source_file"], r["entry_id"], r["record_offset"]) for r in head]
    return tuple(sorted(found, key=lambda s: (s.source_file, s.record_offset)))


def look(query: DeadLetterQuery) -> tuple[DeadLetterCounts, int | None] | None:
    """What a threshold check judges: the counts and, for scope `run` (a `scope_query` with a run id),
    the entries the run read. None while that run's summary is missing: until the ingest has written
    it, after its last commit, the run's dead letters may not all be visible."""
    if query.run_id is None:
        return count(query), None
    assert query.dataset is not None
    if not run_summary_path(resolve_lake(query.lake), query.dataset, query.run_id).is_file():
        return None
    read = entries_read(query.lake, query.dataset, query.run_id)
    return count(query), read


def entries_read(lake: str | LakePath, dataset: str, run_id: str) -> int:
    """Entries plus tombstones the run's Silver ingest read (its summary's `read`): the ratio's denominator."""
    path = run_summary_path(resolve_lake(lake), dataset, run_id)  # the Silver ingest writes it after its last commit
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise RunSummaryError(
            path, f"missing: the Silver ingest of dataset {dataset} has not finished run {run_id}"
        ) from err
    except (OSError, ValueError) as err:
        raise RunSummaryError(path, f"unreadable: {err}") from err
    try:
        read = summary["read"]
        return int(read["entries"]) + int(read["tombstones"])
    except (KeyError, TypeError, ValueError) as err:
        raise RunSummaryError(path, f"has no read.entries/read.tombstones counts ({err!r})") from err


# -- thresholds -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ThresholdCheck:
    """One threshold evaluated on one selection of dead letters: a data-quality assertion.

    `observed_value` is None for a ratio when dead letters exist but the run read nothing (undefined,
    and a failure).
    """

    dataset: str
    scope: str  # run | backlog
    run_id: str | None  # scope run only
    threshold_kind: str  # count | ratio
    threshold_value: float
    observed_value: float | None
    success: bool
    severity: str  # error | warn
    dead_letters: int
    entries_read: int | None

    @property
    def assertion(self) -> str:
        """The assertion's name, e.g. `dead_letter_count <= 10`."""
        return f"dead_letter_{self.threshold_kind} <= {number_text(self.threshold_value)}"

    def describe(self) -> str:
        if self.threshold_kind == "count":
            observed = number_text(self.observed_value)
        elif self.observed_value is None:
            observed = f"undefined ({self.dead_letters} dead letters, 0 entries read)"
        else:
            observed = f"{self.observed_value:.4g} ({self.dead_letters} / {self.entries_read} entries read)"
        verdict = "<=" if self.success else ">"
        return (
            f"{self.threshold_kind} {observed} {verdict} max_{self.threshold_kind} {number_text(self.threshold_value)}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "assertion": self.assertion}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ThresholdCheck:
        return cls(**{k: v for k, v in data.items() if k != "assertion"})


def check_scope(scope: str) -> None:
    """The one place a scope is checked (through `scope_query` and `validate_thresholds`)."""
    if scope not in SCOPES:
        raise ConfigError(
            f"scope must be 'run' (this run's dead letters) or 'backlog' (all quarantined); got {scope!r}"
        )


def validate_thresholds(*, scope: str, severity: str, max_count: Any, max_ratio: Any) -> None:
    """Refuse thresholds that cannot work, with a sentence that says why (ConfigError)."""
    check_scope(scope)
    if severity not in SEVERITIES:
        raise ConfigError(f"severity must be 'error' (fail the task) or 'warn' (log and succeed); got {severity!r}")
    if max_count is None and max_ratio is None:
        raise ConfigError("give max_count, max_ratio or both: with neither there is nothing to check")
    if max_count is not None:
        if isinstance(max_count, bool) or not isinstance(max_count, int):
            raise ConfigError(f"max_count must be a whole number of dead letters; got {max_count!r}")
        if max_count < 0:
            raise ConfigError(f"max_count must be >= 0 (0 allows no dead letter at all); got {max_count}")
    if max_ratio is not None:
        if isinstance(max_ratio, bool) or not isinstance(max_ratio, int | float) or math.isnan(max_ratio):
            raise ConfigError(f"max_ratio must be a number between 0 and 1; got {max_ratio!r}")
        if not 0 <= max_ratio <= 1:
            raise ConfigError(f"max_ratio is dead letters / entries read, between 0 and 1 (0.01 = 1%); got {max_ratio}")
        if scope == "backlog":
            raise ConfigError(
                "max_ratio needs scope 'run': the ratio divides by the entries one run read (its Silver "
                "summary), and a backlog spans many runs; use max_count with scope 'backlog'"
            )


def evaluate(
    counts: DeadLetterCounts,
    *,
    max_count: int | None = None,
    max_ratio: float | None = None,
    read: int | None = None,
    severity: str = "error",
    scope: str,
    dataset: str,
    run_id: str | None = None,
) -> tuple[ThresholdCheck, ...]:
    """One check per threshold given (count first, then ratio). A check fails when observed > max."""
    validate_thresholds(scope=scope, severity=severity, max_count=max_count, max_ratio=max_ratio)
    common: dict[str, Any] = {
        "dataset": dataset,
        "scope": scope,
        "run_id": run_id if scope == "run" else None,
        "severity": severity,
        "dead_letters": counts.total,
        "entries_read": read,
    }
    observed: list[tuple[str, float, float | None]] = []  # (kind, max, observed)
    if max_count is not None:
        observed.append(("count", max_count, counts.total))
    if max_ratio is not None:
        if read is None:
            raise ConfigError(f"dataset {dataset}: max_ratio needs the entries the run read (its Silver summary)")
        observed.append(("ratio", max_ratio, counts.total / read if read else (0.0 if counts.total == 0 else None)))
    return tuple(
        ThresholdCheck(
            threshold_kind=kind,
            threshold_value=limit,
            observed_value=value,
            success=value is not None and value <= limit,
            **common,
        )
        for kind, limit, value in observed
    )


def failure_message(checks: Iterable[ThresholdCheck], counts: DeadLetterCounts, *, limit: int = MESSAGE_LIMIT) -> str:
    """What failed, the top error types, a few samples, and how to list every row; <= `limit` chars.
    `checks` are one selection's (`evaluate`), at least one."""
    checks = list(checks)
    failed = [c for c in checks if not c.success] or checks
    first, query = failed[0], counts.query
    where = f"scope run (run {first.run_id})" if first.scope == "run" else "scope backlog (status quarantined, any run)"
    extra = "".join(
        f", {name} in ({', '.join(values)})"
        for name, values in (("stage", query.stages), ("error_type", query.error_types))
        if values
    )
    verdict = "over threshold" if any(not c.success for c in checks) else "within thresholds"
    head = [
        f"dead letters {verdict}: dataset {first.dataset}, {where}{extra}: {counts.total} dead letter(s); "
        + "; ".join(c.describe() for c in failed)
        + f" [severity {first.severity}]"
    ]
    if counts.by_error_type:
        top = list(counts.by_error_type.items())
        more = f" (+{len(top) - TOP_ERROR_TYPES} more types)" if len(top) > TOP_ERROR_TYPES else ""
        head.append("top error types: " + ", ".join(f"{k} {v}" for k, v in top[:TOP_ERROR_TYPES]) + more)
    # Source files, entry ids (and error types, datasets) are shown as the table holds them, which is
    # as the records had them: each line is made printable on its own, before the lines are joined, so
    # the only line breaks of the message are its own (it is a `multiline` PlacspError).
    samples = [
        printable(f"  - {s.source_file} @ {s.record_offset}, entry {s.entry_id or '(none)'}", SAMPLE_CHARS)
        for s in counts.samples
    ]
    tail = [
        f"details: {query.cli_command()}",
        f"list them all (DuckDB): {query.duckdb_sql()}",
        f"(Spark SQL: {query.spark_sql()})",
    ]
    head, tail = [printable(line) for line in head], [printable(line) for line in tail]
    for keep in range(len(samples), -1, -1):
        block = [f"samples ({keep} of {counts.total}):", *samples[:keep]] if keep else []
        text = "\n".join([*head, *block, *tail])
        if len(text) <= limit:
            return text
    return text[: limit - 1] + "…"


# -- helpers --------------------------------------------------------------------------------------
def _names(what: str, values: Iterable[str]) -> tuple[str, ...]:
    if isinstance(values, str):
        values = [values]
    out = tuple(str(v).strip() for v in values)
    if any(not v for v in out):
        raise ConfigError(f"{what}: empty name in {list(values)!r}")
    return out


def _ordered(counter: Counter[str]) -> dict[str, int]:
    return dict(sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))


def _sql_literal(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def number_text(value: float | None) -> str:
    """A number as messages and data-quality facets show it: `3`, not `3.0`; `undefined` for a 0/0 ratio."""
    if value is None:
        return "undefined"
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _reason(err: BaseException) -> str:
    """delta-rs messages carry a Rust backtrace and ANSI colours: keep the first meaningful line."""
    lines = [_ANSI.sub("", line).strip() for line in str(err).splitlines()]
    text = next((line for line in lines if line), "") or repr(err)
    return f"{type(err).__name__}: {text}"
