"""Staging: one Bronze page parsed and its rows written, per table, in the run's staging folder
(Parquet from Spark's tasks, Arrow IPC from this machine's parser); the page's tally back. Plain
Python and pyarrow, whoever runs it: a Spark task (`spark.routing.make_stager`) or this process (the
in-process parser of `ingest.engines`).

Each worker parses its pages itself with the plain `parse_page`, so a broken entry, or a page that
is not well-formed as a whole, costs only itself and every failure carries lxml's exact message. A
writer then reads the staged rows of each table back, whoever parsed them.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pyarrow.parquet as pq

from placsp_provider.datasets import Dataset
from placsp_provider.errors import BronzePageError
from placsp_provider.ingest.tables import staged_schema
from placsp_provider.ingest.tally import dead_letter_id
from placsp_provider.lake import DEAD_LETTER_TABLE, SILVER_TABLES
from placsp_provider.lake_storage import LakePath, arrow_location, is_local, read_object, remove_tree
from placsp_provider.parser.page_parser import PageParseResult, parse_page_in_parts
from placsp_provider.parser.silver_schema import record_batch

TABLES = (*SILVER_TABLES, DEAD_LETTER_TABLE)

# Record bytes parsed and turned into Arrow at a time. A whole heavy page (24 MB, 500 entries,
# ~10,000 rows) held as Python dicts was the peak of a worker's memory (~300 MB; decision 0007): its
# Arrow batches are a fraction of that. 2 MiB is ~40 of those records, or ~320 of a real-shaped
# page's (~6.5 KB each): a part per 50 records cost such a page 9.3 ms of Arrow conversions, against
# 5.1 for two parts (of its ~95 ms of staging).
BYTES_PER_PART = 2 * 1024 * 1024


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
            yield table, pa.RecordBatch.from_pylist(rows, schema=staged_schema(DEAD_LETTER_TABLE))
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
    """The bytes of one landed page, read where the worker runs: a POSIX path that the driver and
    every executor see at the same place, or an object of an S3 lake (docs/architecture.md)."""
    path = _local_path(spark_path)
    try:
        if path is None:
            if not spark_path.startswith("s3://"):
                reason = "the lake must be a POSIX path (a local disk or a shared mount) or s3://"
                raise BronzePageError(dataset.key, spark_path, reason)
            return read_object(spark_path)
        with open(path, "rb") as page:
            return page.read()
    except OSError as err:
        reason = f"cannot read the landed page ({err.strerror or err}); was it moved or removed after landing?"
        raise BronzePageError(dataset.key, lake_relative(spark_path, lake), reason) from err


# -- ingest: pages -> rows staged as Parquet, tallies back to the driver ---------------------------
# Each worker writes the rows it parses to Parquet files of its own, one per page and table, in the
# run's staging folder, and sends back only a page's tally: rows sent through Spark (Arrow into the
# JVM, then its cache) were the largest per-page cost besides the parse (decision 0024).
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


# The format of a staged file, by its suffix. Spark's tasks stage Parquet (Spark's MERGEs read it);
# this machine's parser stages Arrow IPC, read only by delta-rs's writer: no encoding to write, none
# to decode (a real-shaped page's rows: 0.6 + 0.4 ms against 4.4 + 4.9 for Parquet; decision 0054).
PARQUET, ARROW = ".parquet", ".arrow"
STAGED_SUFFIXES = (PARQUET, ARROW)


def staged_file(staging: str, table: str, source_file: str, suffix: str = PARQUET) -> str:
    """Where the rows of `table` from one page are staged: a name of the page's own, so a task that
    Spark runs again replaces its files instead of adding to them."""
    key = hashlib.sha256(source_file.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{staging}/{table}/{key}{suffix}"


def staged_files(folder: str) -> list[str]:
    """The staged files of one table's folder (a local path or s3://), in name order; a file being
    written (a dot name) is none of them. A folder that is gone is an error, not an empty table: the
    tallies say its rows were staged."""
    import pyarrow.fs as pafs

    filesystem, location = arrow_location(folder)
    found = filesystem.get_file_info(pafs.FileSelector(location))
    scheme = "s3://" if folder.startswith("s3://") else ""
    return sorted(
        scheme + i.path for i in found if i.path.endswith(STAGED_SUFFIXES) and not i.base_name.startswith(".")
    )


def read_staged_file(location: str, table: str, columns: Sequence[str] | None = None) -> pa.Table:
    """One staged file's rows of `table` (`columns` of them), in `tables.staged_schema`. `location`
    as `staged_files` gives it."""
    schema = staged_schema(table)
    filesystem, path = arrow_location(location)
    if location.endswith(ARROW):
        # A local file is mapped, not copied: the rows are read where they lie (the first load reads
        # each page's entries twice, keys then rows: 0.9 -> 0.25 ms a real-shaped page's file).
        opened = filesystem.open_input_file(path) if location.startswith("s3://") else pa.memory_map(path)
        with opened as source:
            rows = pa.ipc.open_file(source).read_all()
        if not rows.schema.equals(schema):
            rows = rows.cast(schema)
        return rows.select(list(columns)) if columns else rows
    return pq.read_table(path, columns=list(columns) if columns else None, schema=schema, filesystem=filesystem)


def stage_page(
    data: bytes,
    *,
    dataset: Dataset,
    source_file: str,
    staging: str,
    bytes_per_part: int | None = BYTES_PER_PART,
    suffix: str = PARQUET,
) -> pa.RecordBatch:
    """One page parsed; its rows written to the staging folder (one file per table, Parquet or Arrow
    IPC by `suffix`, each in place whole or not at all); returns the page's tally (TALLY). Pure Python.

    A page's rows of a table go into one file (Parquet: one row group): the MERGEs read every staged
    file, and a row group per part cost them ~1 s per 10 pages (decision 0024).
    """
    with _cycles_not_collected():
        return _stage_page(data, dataset, source_file, staging, bytes_per_part, suffix)


@contextlib.contextmanager
def _cycles_not_collected() -> Iterator[None]:
    """Python's cycle collector paused: parsing a page makes ~100,000 objects (rows, their lists) and
    no reference cycle, so its passes over them, ~10 a page, are work that frees nothing (1.7 ms of
    a real-shaped page's ~75). A page is bounded, and what it leaves is collected after, as before."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _stage_page(
    data: bytes, dataset: Dataset, source_file: str, staging: str, bytes_per_part: int | None, suffix: str
) -> pa.RecordBatch:
    counts: Counter[tuple[str, str | None, str | None, str | None]] = Counter()
    batches: dict[str, list[pa.RecordBatch]] = {}
    versions: set[tuple[str, Any]] = set()
    repeated = 0
    for result in parse_page_in_parts(data, dataset=dataset, source_file=source_file, bytes_per_part=bytes_per_part):
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
        _write_staged(
            pa.Table.from_batches(parts), staged_file(staging, table, source_file, suffix), dataset, source_file
        )
    rows = [
        {"kind": kind, "record_kind": rk, "stage": st, "error_type": et, "count": n, "repeated_versions": 0}
        for (kind, rk, st, et), n in counts.items()
    ]
    page = {"kind": "file_stats", "record_kind": None, "stage": None, "error_type": None, "count": 1}
    rows.append({**page, "repeated_versions": repeated})
    return pa.RecordBatch.from_pylist([{"source_file": source_file, **r} for r in rows], schema=TALLY)


def _write_file(rows: pa.Table, location: str, filesystem: Any, arrow: bool) -> None:
    """`rows` as one staged file: Arrow IPC, or Parquet in one row group without column statistics
    (every reader reads every row of it; writing them cost ~0.7 ms of a real-shaped page's ~5 ms)."""
    if arrow:
        import pyarrow.fs as pafs

        filesystem = filesystem or pafs.LocalFileSystem()
        with filesystem.open_output_stream(location) as sink, pa.ipc.new_file(sink, rows.schema) as writer:
            writer.write_table(rows)
        return
    pq.write_table(rows, location, filesystem=filesystem, row_group_size=max(1, rows.num_rows), write_statistics=False)


def _write_staged(rows: pa.Table, final: str, dataset: Dataset, source_file: str) -> None:
    """`rows` as the staged file `final` (its suffix says the format), whole or not at all (a full disk
    leaves no half file)."""
    folder = os.path.dirname(final)
    # Spark skips names that start with a dot: a half-written file is never read.
    tmp = f"{folder}/.{uuid.uuid4().hex}.tmp"
    try:
        if final.startswith("s3://"):  # one upload, completed on close: whole or absent, no rename
            filesystem, location = arrow_location(final)
            _write_file(rows, location, filesystem, final.endswith(ARROW))
            return
        os.makedirs(folder, exist_ok=True)
        _write_file(rows, tmp, None, final.endswith(ARROW))
        os.replace(tmp, final)
    except OSError as err:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        reason = (
            f"cannot stage the page's parsed rows in {folder} ({err.strerror or err}); whatever parses (this "
            "process, or every Spark executor) must be able to write under the lake's _staging folder (and the "
            "disk must have room)"
        )
        raise BronzePageError(dataset.key, source_file, reason, stage="staging") from err


@contextlib.contextmanager
def run_staging(lake: LakePath, dataset: str, *, shared: bool) -> Iterator[LakePath]:
    """The staging folder of one run, removed at the end (or by a later run, if this one dies).

    In the lake when it is local (`lake.staging_dir`). On an S3 lake a local scratch folder when this
    process parses; when Spark's executors do (`shared`), which see no disk of this machine, the
    prefix `_staging/<dataset>/<run folder>` of the lake, named after the local folder that holds
    this run's lock (`bronze.landing.run_folder`).
    """
    from placsp_provider.bronze.landing import run_folder
    from placsp_provider.lake import staging_dir

    with run_folder(staging_dir(lake, dataset)) as local:
        if is_local(lake) or not shared:
            yield local
            return
        folder = lake / "_staging" / dataset / local.name
        try:
            yield folder
        finally:
            remove_tree(folder)
