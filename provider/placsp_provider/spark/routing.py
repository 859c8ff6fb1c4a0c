"""Parse-and-route on Spark: page paths in (a `binaryFile` listing), each page's rows staged as
Parquet by the Python worker that parsed it, and each page's tally back to the driver (mapInArrow).

Each Python worker reads its pages from the lake and runs the plain `parse_page` on them, so a broken
entry, or a page that is not well-formed as a whole, costs only itself and every failure carries
lxml's exact message. The driver reads the staged rows of each table back as a Parquet frame.

The replay routes a few dead letters instead, through Spark itself: one wide Arrow batch per table,
a `kind` column and one struct column per table, only the struct of its own kind filled.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pyarrow.parquet as pq

from placsp_provider.datasets import Dataset
from placsp_provider.errors import BronzePageError
from placsp_provider.lake import DEAD_LETTER_TABLE, SILVER_TABLES
from placsp_provider.parser.page_parser import PageParseResult, parse_dead_letter, parse_page_in_parts
from placsp_provider.parser.silver_schema import SCHEMAS, record_batch

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

TABLES = (*SILVER_TABLES, DEAD_LETTER_TABLE)


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
# Python dicts was the peak of a worker's memory (~300 MB; docs/benchmarks.md, speed log): its Arrow
# batches are a fraction of that.
RECORDS_PER_BATCH = 50


def _table_batches(result: PageParseResult, source_file: str | None) -> list[pa.RecordBatch]:
    """One wide batch per non-empty table; `source_file` None: each row's own (replayed records)."""
    out: list[pa.RecordBatch] = []
    for table, batch in table_batches(result):
        if source_file is not None:
            files: str | list[str] = source_file
        else:
            files = batch.column("source_file" if table == DEAD_LETTER_TABLE else "_source_file").to_pylist()
        out.append(_widen(table, batch, files))
    return out


def table_batches(result: PageParseResult) -> Iterator[tuple[str, pa.RecordBatch]]:
    """One batch per non-empty table of `result`, in its table's schema (dead letters with their id)."""
    for table in TABLES:
        rows: list[dict[str, Any]] = getattr(result, table)
        if not rows:
            continue
        if table == DEAD_LETTER_TABLE:
            rows = [
                {
                    **r,
                    "dead_letter_id": dead_letter_id(
                        r["dataset"], r["stage"], r["source_file"], r["record_offset"], r["raw_record"]
                    ),
                }
                for r in rows
            ]
            yield table, pa.RecordBatch.from_pylist(rows, schema=dead_letter_arrow_schema())
        else:
            yield table, record_batch(table, rows)


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


# -- ingest: pages -> rows staged as Parquet, tallies back to the driver ---------------------------
# Each worker writes the rows it parses to Parquet files of its own, one per page and table, in the
# run's staging folder, and sends back only a page's tally. Sending the rows themselves through
# Spark (Arrow into the JVM, then its in-memory cache) cost the JVM 2 CPU s and the workers 0.6 per
# 20 pages (471 MB) of a 2-core machine's ~12, the largest part of the ingest's per-page cost that
# was not the parse (docs/benchmarks.md, speed log); the MERGEs read the staged files instead.
TALLY = pa.schema(
    [
        pa.field("source_file", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),  # a table, or "file_stats"
        pa.field("record_kind", pa.string()),  # dead letters: entry, tombstone, page
        pa.field("stage", pa.string()),
        pa.field("error_type", pa.string()),
        pa.field("count", pa.int64(), nullable=False),
        # kind file_stats (one row per page): valid entry records that repeat the (entry_id, updated) of
        # an earlier one in the page; only then can a version's child rows repeat their keys, and need
        # Spark's (sorting) dedup.
        pa.field("repeated_versions", pa.int64(), nullable=False),
    ]
)


def staged_file(staging: str, table: str, source_file: str) -> str:
    """Where the rows of `table` from one page are staged: a name of the page's own, so a task that
    Spark runs again replaces its files instead of adding to them."""
    key = hashlib.sha256(source_file.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{staging}/{table}/{key}.parquet"


def stage_page(
    data: bytes,
    *,
    dataset: Dataset,
    source_file: str,
    staging: str,
    records_per_batch: int | None = RECORDS_PER_BATCH,
) -> pa.RecordBatch:
    """One page parsed; its rows written to the staging folder (one Parquet file per table, each in
    place whole or not at all); returns the page's tally (TALLY). Pure Python.

    A page's rows go into one Parquet row group per table: the MERGEs read every staged file, and a
    row group per `records_per_batch` records cost them ~1 s per 10 pages (docs/benchmarks.md).
    """
    counts: Counter[tuple[str, str | None, str | None, str | None]] = Counter()
    batches: dict[str, list[pa.RecordBatch]] = {}
    versions: set[tuple[str, Any]] = set()
    repeated = 0
    for result in parse_page_in_parts(
        data, dataset=dataset, source_file=source_file, records_per_part=records_per_batch
    ):
        for entry in result.entries:
            version = (entry["entry_id"], entry["entry_updated"])
            repeated += version in versions
            versions.add(version)
        for d in result.dead_letters:
            counts[DEAD_LETTER_TABLE, d["record_kind"], d["stage"], d["error_type"]] += 1
        for table, batch in table_batches(result):
            if table != DEAD_LETTER_TABLE:
                counts[table, None, None, None] += batch.num_rows
            batches.setdefault(table, []).append(batch)
    for table, parts in batches.items():
        _write_staged(pa.Table.from_batches(parts), staged_file(staging, table, source_file), dataset, source_file)
    rows = [
        {"kind": kind, "record_kind": rk, "stage": st, "error_type": et, "count": n, "repeated_versions": 0}
        for (kind, rk, st, et), n in counts.items()
    ]
    page = {"kind": "file_stats", "record_kind": None, "stage": None, "error_type": None, "count": 1}
    rows.append({**page, "repeated_versions": repeated})
    return pa.RecordBatch.from_pylist([{"source_file": source_file, **r} for r in rows], schema=TALLY)


def _write_staged(rows: pa.Table, final: str, dataset: Dataset, source_file: str) -> None:
    """`rows` as the Parquet file `final`, whole or not at all (a full disk leaves no half file)."""
    folder = os.path.dirname(final)
    # Spark skips names that start with a dot: a half-written file is never read.
    tmp = f"{folder}/.{uuid.uuid4().hex}.tmp"
    try:
        os.makedirs(folder, exist_ok=True)
        pq.write_table(rows, tmp, row_group_size=max(1, rows.num_rows))
        os.replace(tmp, final)
    except OSError as err:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        reason = (
            f"cannot stage the page's parsed rows in {folder} ({err.strerror or err}); every Spark executor "
            "must be able to write under the lake's _staging folder (and the disk must have room)"
        )
        raise BronzePageError(dataset.key, source_file, reason, stage="staging") from err


def make_stager(
    dataset: Dataset, lake: str, staging: str
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function handed to `mapInArrow` over a page listing (column `path`, Spark's spelling)."""

    def stage(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for path in batch.column("path").to_pylist():
                data = read_page(path, dataset=dataset, lake=lake)
                yield stage_page(data, dataset=dataset, source_file=lake_relative(path, lake), staging=staging)

    return stage


def stage_pages(spark: SparkSession, dataset: Dataset, lake: str, files: list[str], staging: str) -> DataFrame:
    """Every page of `files` (absolute paths in the lake) parsed on Spark, its rows staged under
    `staging` (a folder every executor sees: in the lake); the frame of the pages' tallies (TALLY).

    Spark lists the files (a missing one fails here, before any work) and splits them into tasks by
    size; each worker reads its pages itself (shipping their bytes through the JVM cost as much CPU
    as a third of the parse: docs/benchmarks.md, speed log).
    """
    from pyspark.sql.pandas.types import from_arrow_schema

    listing = spark.read.format("binaryFile").load(files).select("path")
    schema = from_arrow_schema(TALLY, prefer_timestamp_ntz=False)
    return listing.mapInArrow(make_stager(dataset, lake, staging), schema)


def table_spark_schema(table: str) -> StructType:
    """The Spark schema of a table's staged rows (dead letters: with their id)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    arrow = dead_letter_arrow_schema() if table == DEAD_LETTER_TABLE else SCHEMAS[table]
    return from_arrow_schema(arrow, prefer_timestamp_ntz=False)


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
