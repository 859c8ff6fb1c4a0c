"""Parse-and-route on Spark: page paths in (a `binaryFile` listing), typed rows of every table out
(mapInArrow).

Each Python worker reads its pages from the lake and runs the plain `parse_page` on them, so a broken
entry, or a page that is not well-formed as a whole, costs only itself and every failure carries
lxml's exact message. The output is one wide Arrow batch per table: a `kind` column and one struct
column per table, only the struct of its own kind filled. The driver then selects `<kind>.*` for each
table.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import pyarrow as pa

from placsp_provider.datasets import Dataset
from placsp_provider.errors import BronzePageError
from placsp_provider.lake import DEAD_LETTER_TABLE, SILVER_TABLES
from placsp_provider.parser.page_parser import PageParseResult, parse_dead_letter, parse_page_in_parts
from placsp_provider.parser.silver_schema import SCHEMAS, record_batch

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

TABLES = (*SILVER_TABLES, DEAD_LETTER_TABLE)
FILE_STATS = pa.schema(
    [
        pa.field("entries_seen", pa.int64(), nullable=False),
        pa.field("tombstones_seen", pa.int64(), nullable=False),
        pa.field("page_dead_letters", pa.int64(), nullable=False),
        # Valid entry records that repeat the (entry_id, updated) of an earlier one in the page: only
        # then can a version's child rows repeat their keys, and need Spark's (sorting) dedup.
        pa.field("repeated_versions", pa.int64(), nullable=False),
    ]
)


def dead_letter_id(dataset: str, stage: str, source_file: str, record_offset: int, raw_record: str) -> str:
    """Deterministic id: a rerun of the same input yields the same id, so MERGE inserts nothing twice.

    The record's offset is part of it: two byte-identical broken records in one page are two
    dead letters, not one.
    """
    digest = hashlib.sha256()
    for part in (dataset, stage, source_file, str(record_offset), raw_record):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\x1f")
    return digest.hexdigest()


def dead_letter_arrow_schema() -> pa.Schema:
    """Dead letters as routed: the parser's columns plus their deterministic id."""
    return SCHEMAS["dead_letters"].append(pa.field("dead_letter_id", pa.string(), nullable=False))


@functools.cache
def _struct_types() -> dict[str, pa.StructType]:  # cached: built for every batch otherwise; callers only read it
    types = {t: pa.struct(list(SCHEMAS[t])) for t in TABLES if t != DEAD_LETTER_TABLE}
    types["dead_letters"] = pa.struct(list(dead_letter_arrow_schema()))
    types["file_stats"] = pa.struct(list(FILE_STATS))
    return types


@functools.cache
def routed_schema() -> pa.Schema:
    fields = [pa.field("kind", pa.string(), nullable=False), pa.field("source_file", pa.string(), nullable=False)]
    fields += [pa.field(name, type_, nullable=True) for name, type_ in _struct_types().items()]
    return pa.schema(fields)


def routed_spark_schema() -> StructType:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(routed_schema(), prefer_timestamp_ntz=False)


# Records parsed and turned into Arrow at a time. A whole page (500 entries, ~10,000 rows) held as
# Python dicts, then as Arrow in the worker, then as Arrow in the JVM was the peak of a run's memory:
# ~300 MB per Python worker and a JVM that grew ~1 GB while routing (docs/benchmarks.md, speed log).
RECORDS_PER_BATCH = 50


def route_page(
    data: bytes, *, dataset: Dataset, source_file: str, records_per_batch: int | None = RECORDS_PER_BATCH
) -> Iterator[pa.RecordBatch]:
    """One page -> wide batches (one per non-empty table of each `records_per_batch` records, then one
    file_stats row for the page). Pure Python."""
    page_level = repeated = 0
    versions: set[tuple[str, Any]] = set()
    result = None
    for result in parse_page_in_parts(
        data, dataset=dataset, source_file=source_file, records_per_part=records_per_batch
    ):
        page_level += sum(1 for d in result.dead_letters if d["record_kind"] == "page")
        for entry in result.entries:
            version = (entry["entry_id"], entry["entry_updated"])
            repeated += version in versions
            versions.add(version)
        yield from _table_batches(result, source_file)
    assert result is not None  # parse_page_in_parts yields at least one part
    stats = pa.RecordBatch.from_pylist(
        [
            {
                "entries_seen": result.entries_seen,
                "tombstones_seen": result.tombstones_seen,
                "page_dead_letters": page_level,
                "repeated_versions": repeated,
            }
        ],
        schema=FILE_STATS,
    )
    yield _widen("file_stats", stats, source_file)


def _table_batches(result: PageParseResult, source_file: str | None) -> list[pa.RecordBatch]:
    """One wide batch per non-empty table; `source_file` None: each row's own (replayed records)."""
    out: list[pa.RecordBatch] = []
    for table in TABLES:
        rows: list[dict[str, Any]] = getattr(result, table)
        if not rows:
            continue
        if table == "dead_letters":
            rows = [
                {
                    **r,
                    "dead_letter_id": dead_letter_id(
                        r["dataset"], r["stage"], r["source_file"], r["record_offset"], r["raw_record"]
                    ),
                }
                for r in rows
            ]
            batch = pa.RecordBatch.from_pylist(rows, schema=dead_letter_arrow_schema())
        else:
            batch = record_batch(table, rows)
        files = source_file if source_file is not None else [r.get("source_file") or r["_source_file"] for r in rows]
        out.append(_widen(table, batch, files))
    return out


def _widen(kind: str, batch: pa.RecordBatch, source_file: str | list[str]) -> pa.RecordBatch:
    schema = routed_schema()
    n = batch.num_rows
    files = [source_file] * n if isinstance(source_file, str) else source_file
    columns: list[pa.Array] = [pa.array([kind] * n, pa.string()), pa.array(files, pa.string())]
    for name, type_ in _struct_types().items():
        if name == kind:
            columns.append(pa.StructArray.from_arrays(batch.columns, fields=list(batch.schema)))
        else:
            columns.append(pa.nulls(n, type_))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def lake_relative(spark_path: str, lake: str) -> str:
    """`file:/lake/bronze/x.atom` or `file:///lake/...` (Spark's spellings) -> `bronze/x.atom`, the
    way the extraction manifest names files. Paths outside the lake are returned whole."""
    path = _local_path(spark_path) or spark_path
    root = lake.rstrip("/") + "/"
    return path[len(root) :] if path.startswith(root) else path


def _local_path(spark_path: str) -> str | None:
    """The POSIX path of a `file:` (or scheme-less) path as Spark spells it; None for any other scheme."""
    parts = urlsplit(spark_path)
    return unquote(parts.path) if parts.scheme in ("file", "") else None


def read_page(spark_path: str, *, dataset: Dataset, lake: str) -> bytes:
    """The bytes of one landed page, read where the worker runs (the lake is a POSIX path that the
    driver and every executor see at the same place: docs/architecture.md)."""
    path = _local_path(spark_path)
    if path is None:
        raise BronzePageError(dataset.key, spark_path, "the lake must be a POSIX path (a local disk or a shared mount)")
    try:
        with open(path, "rb") as page:
            return page.read()
    except OSError as err:
        reason = f"cannot read the landed page ({err.strerror or err}); was it moved or removed after landing?"
        raise BronzePageError(dataset.key, lake_relative(spark_path, lake), reason) from err


def make_router(dataset: Dataset, lake: str) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function handed to `mapInArrow` over a page listing (column `path`, Spark's spelling)."""

    def route(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for path in batch.column("path").to_pylist():
                data = read_page(path, dataset=dataset, lake=lake)
                yield from route_page(data, dataset=dataset, source_file=lake_relative(path, lake))

    return route


def route_pages(spark: SparkSession, dataset: Dataset, lake: str, files: list[str]) -> DataFrame:
    """Every page of `files` (absolute paths in the lake) parsed and routed: the wide frame above.

    Spark lists the files (a missing one fails here, before any work) and splits them into tasks by
    size; each worker reads its pages itself. Shipping the bytes through the JVM (`binaryFile`'s
    `content`) cost as much CPU as a third of the parse (docs/benchmarks.md, speed log), and the
    content column is never read when only `path` is selected.
    """
    listing = spark.read.format("binaryFile").load(files).select("path")
    return listing.mapInArrow(make_router(dataset, lake), routed_spark_schema())


# -- replay ------------------------------------------------------------------------------------------
# A replayed dead letter goes through the same parse as a page's record; its output rows carry the
# id of the dead letter they came from, so the job knows what became of each one.
REPLAYED_ID = "replayed_dead_letter_id"
REPLAY_INPUT_COLUMNS = (
    "dead_letter_id",
    "source_file",
    "record_kind",
    "raw_record",
    "namespace_context",
    "record_offset",
)


def replay_routed_schema() -> pa.Schema:
    return routed_schema().append(pa.field(REPLAYED_ID, pa.string(), nullable=False))


def replay_routed_spark_schema() -> StructType:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(replay_routed_schema(), prefer_timestamp_ntz=False)


def route_dead_letters(dead_letters: list[dict[str, Any]], *, dataset: Dataset) -> list[pa.RecordBatch]:
    """Record-level dead letters (entries or tombstones) -> wide batches, each row tagged with the id
    of the dead letter it came from. Pure Python.

    Exactly one entry or tombstone row, or exactly one (new) dead letter, comes out of each. The
    rows of all of them are gathered first: one Arrow batch per table, not one per record.
    """
    gathered: dict[str, list[dict[str, Any]]] = {t: [] for t in TABLES}
    origins: dict[str, list[str]] = {t: [] for t in TABLES}
    for dead_letter in dead_letters:
        result = parse_dead_letter(dead_letter, dataset=dataset)
        for table in TABLES:
            rows = getattr(result, table)
            gathered[table].extend(rows)
            origins[table].extend([dead_letter["dead_letter_id"]] * len(rows))
    schema = replay_routed_schema()
    out: list[pa.RecordBatch] = []
    for table in TABLES:
        if not gathered[table]:
            continue
        (batch,) = _table_batches(_only(table, gathered[table]), source_file=None)
        out.append(pa.RecordBatch.from_arrays([*batch.columns, pa.array(origins[table], pa.string())], schema=schema))
    return out


def _only(table: str, rows: list[dict[str, Any]]) -> PageParseResult:
    empty: dict[str, list[dict[str, Any]]] = {t: [] for t in TABLES}
    empty[table] = rows
    return PageParseResult(**empty, records_seen=0, entries_seen=0, tombstones_seen=0)


def make_replayer(dataset: Dataset) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function handed to `mapInArrow` over selected dead letters (REPLAY_INPUT_COLUMNS)."""

    def replay(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield from route_dead_letters(batch.to_pylist(), dataset=dataset)

    return replay
