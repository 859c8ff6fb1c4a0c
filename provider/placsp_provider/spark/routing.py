"""Parse-and-route on Spark: page paths in (a `binaryFile` listing), each page staged by the
Python worker that parsed it (`ingest.staging.stage_page`, the same code the in-process parser
runs), and each page's tally back to the driver (mapInArrow).

The replay stages the rows of the dead letters it re-parses the same way, and gets back one outcome
per dead letter instead of a page's tally.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from placsp_provider.datasets import Dataset
from placsp_provider.dead_letters.record_bytes import parse_dead_letter
from placsp_provider.errors import BronzePageError
from placsp_provider.ingest.staging import TALLY, lake_relative, read_page, stage_page
from placsp_provider.ingest.tables import staged_schema
from placsp_provider.lake import SILVER_TABLES
from placsp_provider.lake_storage import arrow_location
from placsp_provider.parser.silver_schema import record_batch

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


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
    size; each worker reads its pages itself, not through the JVM (decision 0011).
    """
    listing = spark.read.format("binaryFile").load(files).select("path")
    return listing.mapInArrow(make_stager(dataset, lake, staging), spark_schema(TALLY))


def spark_schema(schema: pa.Schema) -> StructType:
    """An Arrow schema as Spark's (UTC-aware Arrow timestamps: Spark TIMESTAMP)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema, prefer_timestamp_ntz=False)


def table_spark_schema(table: str) -> StructType:
    """The Spark schema of a table's staged rows (`ingest.tables.staged_schema`)."""
    return spark_schema(staged_schema(table))


# -- replay: selected dead letters -> rows staged as Parquet, one outcome per dead letter back -------
# The replay's parse is the ingest's (`parse_dead_letter`), and its rows are staged the same way: a
# worker writes them as Parquet and sends back only what became of each dead letter (decision 0025).
RECORD_KINDS = ("entry", "tombstone")  # what the replay re-parses; any other record kind stands for a file
SELECTED_COLUMNS = ("dead_letter_id", "stage", "error_type", "record_kind", "source_file", "entry_id", "status")
REPLAY_INPUT_COLUMNS = (*SELECTED_COLUMNS, "attempts", "raw_record", "raw_bytes", "namespace_context", "record_offset")
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
        # On S3 each file is written at its final name: its upload completes on close, so it is
        # whole or absent (a failed attempt's complete file is an orphan the replay removes).
        self._filesystem, self._root = arrow_location(staging)
        self._in_place = staging.startswith("s3://")

    def write(self, table: str, batch: pa.RecordBatch) -> None:
        try:
            if table not in self._writers:
                folder = f"{self._root}/{table}"
                if self._in_place:
                    target = f"{folder}/{self.key}.parquet"
                else:
                    os.makedirs(folder, exist_ok=True)
                    target = f"{folder}/.{self.key}.tmp"
                writer = pq.ParquetWriter(target, batch.schema, filesystem=self._filesystem)
                self._writers[table] = (writer, target)
            self._writers[table][0].write_batch(batch)
        except OSError as err:
            self.abort()
            raise self._error(err) from err

    def finish(self) -> None:
        try:
            for table, (writer, target) in self._writers.items():
                writer.close()
                if not self._in_place:
                    os.replace(target, f"{self._root}/{table}/{self.key}.parquet")
        except OSError as err:
            self.abort()
            raise self._error(err) from err

    def abort(self) -> None:
        for writer, target in self._writers.values():
            with contextlib.suppress(Exception):
                writer.close()
            with contextlib.suppress(OSError):
                self._filesystem.delete_file(target)

    def _error(self, err: OSError) -> BronzePageError:
        reason = (
            f"cannot stage the replayed rows in {self.staging} ({err.strerror or err}); every Spark executor "
            "must be able to write under the lake's _staging folder (and the disk must have room)"
        )
        return BronzePageError(self.dataset.key, "dead letters", reason, stage="staging")


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
