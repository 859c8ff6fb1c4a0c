"""Parse-and-route on Spark: page paths in (a `binaryFile` listing), each page's rows staged as
Parquet by the Python worker that parsed it, and each page's tally back to the driver (mapInArrow).

Each Python worker reads its pages from the lake and runs the plain `parse_page` on them, so a broken
entry, or a page that is not well-formed as a whole, costs only itself and every failure carries
lxml's exact message. The driver reads the staged rows of each table back as a Parquet frame.

The replay stages the rows of the dead letters it re-parses the same way, and gets back one outcome
per dead letter instead of a page's tally.
"""

from __future__ import annotations

import contextlib
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


# Records parsed and turned into Arrow at a time. A whole page (500 entries, ~10,000 rows) held as
# Python dicts was the peak of a worker's memory (~300 MB; docs/benchmarks.md, speed log): its Arrow
# batches are a fraction of that.
RECORDS_PER_BATCH = 50


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


# -- replay: selected dead letters -> rows staged as Parquet, one outcome per dead letter back -------
# The replay's parse is the ingest's (`parse_dead_letter`), and its rows are staged the same way: a
# worker writes them as Parquet and sends back only what became of each dead letter. Routing the
# rows through Spark and checkpointing them cost the replay ~1 s per 1,900 records against an ingest
# of the same records (docs/benchmarks.md, replay section).
RECORD_KINDS = ("entry", "tombstone")  # what the replay re-parses; any other record kind stands for a file
SELECTED_COLUMNS = ("dead_letter_id", "stage", "error_type", "record_kind", "source_file", "entry_id", "status")
REPLAY_INPUT_COLUMNS = (
    *SELECTED_COLUMNS,
    "attempts",
    "raw_record",
    "raw_bytes",
    "namespace_context",
    "record_offset",
)
REPLAY_OUTCOME = pa.schema(
    [
        *(pa.field(c, pa.string(), nullable=c in ("entry_id",)) for c in SELECTED_COLUMNS),
        pa.field("attempts", pa.int32(), nullable=False),
        # entries, tombstones or dead_letters (it failed again); null: a file-level dead letter, which
        # is not re-parsed here but reprocessed with its Bronze file.
        pa.field("became", pa.string()),
        pa.field("new_error_type", pa.string()),
        pa.field("new_error_message", pa.string()),
        pa.field("entry_version", pa.string()),  # a recovered entry's id and `updated`: repeats need a dedup
        pa.field("staged_key", pa.string()),  # the name of its task's staged files; null: nothing staged
        pa.field("rows", pa.map_(pa.string(), pa.int64())),  # rows staged per Silver table
    ]
)


class _TaskStage:
    """The Parquet files one Spark task stages, one per table, opened when the table first has rows.

    Named after the task attempt (a uuid), not the records: only files named by the outcomes Spark
    returns, those of attempts that succeeded, are read; the replay removes any other (a failed
    attempt's) first. Each file is written under a dot-name and renamed when the task has parsed all
    its records, so a half-written file is never read.
    """

    def __init__(self, staging: str, dataset: Dataset) -> None:
        self.staging, self.dataset, self.key = staging, dataset, uuid.uuid4().hex
        self._writers: dict[str, tuple[pq.ParquetWriter, str]] = {}

    def write(self, table: str, batch: pa.RecordBatch) -> None:
        try:
            if table not in self._writers:
                folder = f"{self.staging}/{table}"
                os.makedirs(folder, exist_ok=True)
                tmp = f"{folder}/.{self.key}.tmp"
                self._writers[table] = (pq.ParquetWriter(tmp, batch.schema), tmp)
            self._writers[table][0].write_batch(batch)
        except OSError as err:
            self.abort()
            raise self._error(err) from err

    def finish(self) -> None:
        try:
            for table, (writer, tmp) in self._writers.items():
                writer.close()
                os.replace(tmp, staged_file_of(self.staging, table, self.key))
        except OSError as err:
            self.abort()
            raise self._error(err) from err

    def abort(self) -> None:
        for writer, tmp in self._writers.values():
            with contextlib.suppress(Exception):
                writer.close()
            with contextlib.suppress(OSError):
                os.unlink(tmp)

    def _error(self, err: OSError) -> BronzePageError:
        reason = (
            f"cannot stage the replayed rows in {self.staging} ({err.strerror or err}); every Spark executor "
            "must be able to write under the lake's _staging folder (and the disk must have room)"
        )
        return BronzePageError(self.dataset.key, "dead letters", reason, stage="staging")


def staged_file_of(staging: str, table: str, key: str) -> str:
    """A replay task's staged rows of `table` (`staged_key` of its outcomes)."""
    return f"{staging}/{table}/{key}.parquet"


def replay_dead_letters(letters: list[dict[str, Any]], *, dataset: Dataset, stage: _TaskStage | None) -> pa.RecordBatch:
    """Dead letters (REPLAY_INPUT_COLUMNS) re-parsed; their rows staged (`stage` None: a dry run,
    nothing written); one outcome each (REPLAY_OUTCOME). Pure Python.

    Each record gives exactly one entry, one tombstone or one new dead letter; a new dead letter is
    not staged: it is the dead letter's new error, recorded on it by the status update.
    """
    outcomes = []
    gathered: dict[str, list[dict[str, Any]]] = {t: [] for t in SILVER_TABLES}
    for letter in letters:
        outcome = {c: letter[c] for c in (*SELECTED_COLUMNS, "attempts")}
        outcomes.append(outcome)
        if letter["record_kind"] not in RECORD_KINDS:
            continue
        result = parse_dead_letter(letter, dataset=dataset)
        became = [t for t in ("entries", "tombstones", "dead_letters") if getattr(result, t)]
        outcome["became"] = ",".join(became)  # one of them, else the caller stops: never silent
        if result.dead_letters:
            failed = result.dead_letters[0]
            outcome["new_error_type"], outcome["new_error_message"] = failed["error_type"], failed["error_message"]
            continue
        for entry in result.entries:
            outcome["entry_version"] = f"{entry['entry_id']}\x1f{entry['updated'].isoformat()}"
        rows = {t: len(getattr(result, t)) for t in SILVER_TABLES if getattr(result, t)}
        if stage is not None:
            outcome["staged_key"] = stage.key
        outcome["rows"] = list(rows.items())
        for table in rows:
            gathered[table].extend(getattr(result, table))
    if stage is not None:
        for table, rows_of_table in gathered.items():
            if rows_of_table:
                stage.write(table, record_batch(table, rows_of_table))
    return pa.RecordBatch.from_pylist(outcomes, schema=REPLAY_OUTCOME)


def make_replay_stager(
    dataset: Dataset, staging: str | None
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function handed to `mapInArrow` over selected dead letters; `staging` None: a dry run."""

    def replay(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        stage = None if staging is None else _TaskStage(staging, dataset)
        try:
            for batch in batches:
                yield replay_dead_letters(batch.to_pylist(), dataset=dataset, stage=stage)
            if stage is not None:
                stage.finish()  # before the task ends: its outcomes count only if it succeeds
        except BaseException:
            if stage is not None:
                stage.abort()
            raise

    return replay


def replay_outcome_spark_schema() -> StructType:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(REPLAY_OUTCOME, prefer_timestamp_ntz=False)
