"""What the PLACSP view reads from the lake: the `dead_letters` Delta table, aggregated by DuckDB.

The table's files come from the Delta log (`table_files`: delta-rs, pruned to the dataset's partition),
as a pyarrow dataset that DuckDB scans with the filters and the columns pushed down; counts and
GROUP BYs run in DuckDB, and a page of the browser is a LIMIT/OFFSET: no read loads the table into
Python, and the view keeps nothing between requests (no cache outside the lake). No JVM.

A state the view cannot show numbers for raises `view_state.ViewStateError` with the sentence to
show instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, TypeVar

from placsp_provider.dead_letters.lifecycle import ABANDONED, FIXED, QUARANTINED, REPLAYED
from placsp_provider.lake import DEAD_LETTER_TABLE, table_path
from placsp_provider.lake_storage import LakePath
from placsp_provider.ui.view_state import read_twice, require_table

STATUSES = (QUARANTINED, FIXED, REPLAYED, ABANDONED)  # the backlog's columns, in lifecycle order
# The day of a dead letter: the UTC day its run started (`processing_timestamp`, the run that first
# inserted it; docs/dead-letters.md).
DAY_COLUMN = "processing_timestamp"
PAGE_COLUMNS = (
    "dead_letter_id",
    "dataset",
    "stage",
    "error_type",
    "status",
    "error_message",
    "source_file",
    "entry_id",
    "attempts",
    "run_id",
    "replay_run_id",
    DAY_COLUMN,
)
MAX_PAGE_SIZE = 500

T = TypeVar("T")


@dataclass(frozen=True)
class DeadLetterFilter:
    """Which dead letters of one dataset; every condition given is ANDed, a tuple matches any listed.
    `since`/`until` are UTC days, both inclusive, of `DAY_COLUMN`."""

    dataset: str
    stages: tuple[str, ...] = ()
    error_types: tuple[str, ...] = ()
    status: str | None = None
    since: date | None = None
    until: date | None = None
    dead_letter_ids: tuple[str, ...] = ()

    @property
    def narrowed(self) -> bool:
        """Anything more than the dataset."""
        return bool(self.stages or self.error_types or self.status or self.since or self.until or self.dead_letter_ids)

    def where(self) -> tuple[str, list[Any]]:
        """The SQL condition, with `?` parameters (never the values in the text: they come from a URL)."""
        terms, params = ["dataset = ?"], list[Any]([self.dataset])
        for column, values in (
            ("stage", self.stages),
            ("error_type", self.error_types),
            ("dead_letter_id", self.dead_letter_ids),
        ):
            if values:
                terms.append(f"{column} IN ({', '.join('?' for _ in values)})")
                params += list(values)
        if self.status:
            terms.append("status = ?")
            params.append(self.status)
        if self.since:
            terms.append(f"{DAY_COLUMN} >= ?")
            params.append(day_start(self.since))
        if self.until:
            terms.append(f"{DAY_COLUMN} < ?")
            params.append(day_start(self.until + timedelta(days=1)))
        return " AND ".join(terms), params


def day_start(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


# -- opening the table ----------------------------------------------------------------------------
def dead_letter_table(lake: LakePath) -> LakePath:
    return table_path(lake, DEAD_LETTER_TABLE)


@contextmanager
def _dead_letters(lake: LakePath, dataset: str | None) -> Iterator[Any]:
    """A DuckDB connection where `dl` is the dead letters of `dataset` (None: all datasets)."""
    import duckdb

    from placsp_provider.lake_storage import open_table
    from placsp_provider.table_files import table_files, with_string_views

    path = dead_letter_table(lake)
    require_table(lake, path, DEAD_LETTER_TABLE, "no Silver ingest has run, so nothing was dead-lettered.")
    table = open_table(path)
    pruning = [("dataset", "=", dataset)] if dataset else None
    files = table_files(table, pruning)
    # Strings as `string_view`: DuckDB then reads the files of both engines (table_files).
    source = table_files(table, pruning, schema=with_string_views(files.schema))
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")  # a day is a UTC day
        con.register("dl", source)
        yield con


def _read(lake: LakePath, dataset: str | None, query: Callable[[Any], T]) -> T:
    """`query(con)` over the dead letters, read once more if a commit got in the way (view_state)."""

    def read() -> T:
        with _dead_letters(lake, dataset) as con:
            return query(con)

    return read_twice(read, what=f"The {DEAD_LETTER_TABLE} table of {lake}")


# -- what the pages show --------------------------------------------------------------------------
@dataclass(frozen=True)
class DatasetSummary:
    dataset: str
    backlog: dict[str, int]  # status -> dead letters, every status of STATUSES (0 included)
    daily: list[dict[str, Any]]  # {"day": "YYYY-MM-DD", "error_type", "count"}, count > 0, by day then type
    since: date

    @property
    def total(self) -> int:
        return sum(self.backlog.values())


def summaries(lake: LakePath, datasets: list[str], days: int, today: date | None = None) -> dict[str, DatasetSummary]:
    """Per dataset: the backlog by status (all time) and the dead letters per UTC day and error type
    of the last `days` days (today included): two GROUP BYs in DuckDB, over one read of the table."""
    since = (today or datetime.now(UTC).date()) - timedelta(days=days - 1)
    keys = ", ".join("?" for _ in datasets)

    def query(con: Any) -> dict[str, DatasetSummary]:
        by_status = con.execute(
            f"SELECT dataset, status, count(*) FROM dl WHERE dataset IN ({keys}) GROUP BY ALL", datasets
        ).fetchall()
        by_day = con.execute(
            f"SELECT dataset, strftime(CAST({DAY_COLUMN} AS DATE), '%Y-%m-%d') AS day, error_type, count(*) FROM dl "
            f"WHERE dataset IN ({keys}) AND {DAY_COLUMN} >= ? GROUP BY ALL ORDER BY dataset, day, error_type",
            [*datasets, day_start(since)],
        ).fetchall()
        out = {d: DatasetSummary(d, dict.fromkeys(STATUSES, 0), [], since) for d in datasets}
        for dataset, status, n in by_status:
            if status in out[dataset].backlog:
                out[dataset].backlog[status] = int(n)
        for dataset, day, error_type, n in by_day:
            out[dataset].daily.append({"day": day, "error_type": error_type, "count": int(n)})
        return out

    # One dataset: its partition only; several: every file, read once.
    return _read(lake, datasets[0] if len(datasets) == 1 else None, query)


@dataclass(frozen=True)
class DeadLetterPage:
    matching: int  # every dead letter the filter selects
    rows: list[dict[str, Any]]  # this page's
    page: int
    page_size: int

    @property
    def has_next(self) -> bool:
        return self.page * self.page_size < self.matching


def browse(lake: LakePath, selection: DeadLetterFilter, page: int, page_size: int) -> DeadLetterPage:
    """The count of what the filter selects (a COUNT in DuckDB) and one page of rows, newest first."""
    where, params = selection.where()

    def query(con: Any) -> DeadLetterPage:
        (matching,) = con.execute(f"SELECT count(*) FROM dl WHERE {where}", params).fetchone()
        cursor = con.execute(
            f"SELECT {', '.join(PAGE_COLUMNS)} FROM dl WHERE {where} "
            f"ORDER BY {DAY_COLUMN} DESC, dead_letter_id LIMIT ? OFFSET ?",
            [*params, page_size, (page - 1) * page_size],
        )
        names = [d[0] for d in cursor.description]
        rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        return DeadLetterPage(int(matching), rows, page, page_size)

    return _read(lake, selection.dataset, query)


def raw_record(lake: LakePath, dead_letter_id: str, dataset: str | None = None) -> dict[str, Any] | None:
    """One dead letter's raw record and message; None when no row has this id (in `dataset`, if given)."""

    def query(con: Any) -> dict[str, Any] | None:
        cursor = con.execute(
            "SELECT dead_letter_id, dataset, stage, error_type, status, error_message, source_file, entry_id, "
            "raw_record FROM dl WHERE dead_letter_id = ? LIMIT 1",
            [dead_letter_id],
        )
        row = cursor.fetchone()
        return dict(zip([d[0] for d in cursor.description], row, strict=True)) if row else None

    return _read(lake, dataset, query)
