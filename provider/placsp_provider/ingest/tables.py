"""The lake's Delta tables as the ingest writes them: their columns, whether they exist, and the
columns a table of an earlier release lacks. Engine-neutral: pyarrow schemas, and delta-rs only to
read a table's metadata and append a missing column (never to write rows: that is each writer's).

    <lake>/silver/{entries,lots,documents,results,tombstones}   Silver, partitioned by dataset
    <lake>/dead_letters                                          the dead-letter table (docs/dead-letters.md)
    <lake>/reconciliation                                        one row per ingested Bronze file

Columns come from the parser's explicit Arrow schemas (`parser.silver_schema`) plus the lineage
columns every row carries. Nothing is ever inferred.
"""

from __future__ import annotations

import logging
import re
from functools import partial
from typing import Any

import pyarrow as pa

from placsp_provider.ingest.retry import CONFLICT_ATTEMPTS
from placsp_provider.lake import LAKE_TABLES, SILVER_TABLES, table_path
from placsp_provider.lake_storage import LakePath, open_table, side_by_side
from placsp_provider.parser.silver_schema import RECORD_DIGEST, SCHEMAS
from placsp_provider.table_files import table_files

log = logging.getLogger(__name__)

UTC_TS = pa.timestamp("us", tz="UTC")

_LINEAGE = [pa.field("_ingest_run_id", pa.string(), nullable=False), pa.field("_ingested_at", UTC_TS, nullable=False)]
_DELETION = [pa.field("deleted_at", UTC_TS), pa.field("deletion_type", pa.string())]

DEAD_LETTER_ID = pa.field("dead_letter_id", pa.string(), nullable=False)
DEAD_LETTER_LIFECYCLE = [
    DEAD_LETTER_ID,
    pa.field("run_id", pa.string(), nullable=False),
    pa.field("processing_timestamp", UTC_TS, nullable=False),
    pa.field("status", pa.string(), nullable=False),  # quarantined | fixed | replayed | abandoned
    pa.field("attempts", pa.int32(), nullable=False),
    pa.field("last_attempt_at", UTC_TS),
    pa.field("replayed_at", UTC_TS),
    pa.field("replay_run_id", pa.string()),
]

RECONCILIATION = pa.schema(
    [
        pa.field("dataset", pa.string(), nullable=False),
        pa.field("source_file", pa.string(), nullable=False),
        pa.field("sha256", pa.string(), nullable=False),
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("manifest_entries", pa.int64(), nullable=False),
        pa.field("manifest_tombstones", pa.int64(), nullable=False),
        pa.field("valid_entries", pa.int64(), nullable=False),
        pa.field("valid_tombstones", pa.int64(), nullable=False),
        pa.field("dead_letter_records", pa.int64(), nullable=False),
        pa.field("status", pa.string(), nullable=False),  # reconciled | quarantined
        pa.field("reason", pa.string()),
        pa.field("ingested_at", UTC_TS, nullable=False),
    ]
)

# Columns added after a table's first release, last in its schema: existing tables are upgraded by
# appending them (`add_missing_columns`), so a fresh table and an upgraded one have one column order.
ADDED_COLUMNS: dict[str, tuple[str, ...]] = {"dead_letters": ("raw_bytes", "parser_version")}


def table_schema(table: str) -> pa.Schema:
    """The columns of a lake table, in order."""
    if table == "dead_letters":
        record = SCHEMAS["dead_letters"]
        added = ADDED_COLUMNS["dead_letters"]
        first = [f for f in record if f.name not in added]
        return pa.schema([*first, *DEAD_LETTER_LIFECYCLE, *(record.field(name) for name in added)])
    if table == "reconciliation":
        return RECONCILIATION
    base = [f for f in SCHEMAS[table] if f.name != RECORD_DIGEST.name]
    if table == "entries":
        base += _DELETION
    return pa.schema([*base, *_LINEAGE])


def staged_schema(table: str) -> pa.Schema:
    """The columns of a table's rows as staged between the parse and the write: the parser's (with
    each record's digest, which decides ties: `ingest.rules`), dead letters with their id."""
    if table == "dead_letters":
        return SCHEMAS["dead_letters"].append(DEAD_LETTER_ID)
    return SCHEMAS[table]


def has_commit(path: LakePath) -> bool:
    """The table exists: its log holds a commit (or a checkpoint), not just a folder."""
    try:
        names = [p.name for p in (path / "_delta_log").iterdir()]
    except (FileNotFoundError, NotADirectoryError):
        return False
    return any(_COMMIT_FILE.match(n) for n in names)


_COMMIT_FILE = re.compile(r"^\d{20}\.(json|checkpoint\b.*\.(parquet|json))$")


def tables_exist(lake: LakePath) -> bool:
    """Every table of the lake exists (one listing each, side by side: a request each on S3)."""
    root = lake.resolve()
    return all(side_by_side({t: partial(has_commit, table_path(root, t)) for t in LAKE_TABLES}).values())


def holds_dataset(table: Any, dataset: str) -> bool:
    """A `deltalake.DeltaTable` (as of the snapshot it holds) has a file in the dataset's partition."""
    return bool(table_files(table, [("dataset", "=", dataset)]).files)


def dataset_in_silver(lake: LakePath, dataset: str) -> bool:
    """Any Silver table of the lake holds a row of the dataset (its tables exist: `tables_exist`)."""
    root = lake.resolve()
    found = side_by_side({t: partial(_holds, table_path(root, t), dataset) for t in SILVER_TABLES})
    return any(found.values())


def _holds(path: LakePath, dataset: str) -> bool:
    return holds_dataset(open_table(path), dataset)


def add_missing_columns(lake: LakePath) -> list[str]:
    """Append every column of `ADDED_COLUMNS` that an existing table lacks (null on its older rows;
    what that null means is the column's own documentation, e.g. `raw_bytes`: docs/runbook.md, "Dead
    letters written before raw_bytes"); `table.column` of each one added. Safe to run concurrently:
    a writer that added it first is fine."""
    added = []
    for table, columns in ADDED_COLUMNS.items():
        path = table_path(lake, table)
        if has_commit(path):
            added += [f"{table}.{c}" for c in _add_to_table(path, table, columns)]
    return added


def _add_to_table(path: LakePath, table: str, columns: tuple[str, ...]) -> list[str]:
    from deltalake.exceptions import CommitFailedError, DeltaError
    from deltalake.schema import Field

    schema = table_schema(table)
    for attempt in range(1, CONFLICT_ATTEMPTS + 1):
        delta = open_table(path)
        present = {f.name for f in delta.schema().fields}
        missing = [c for c in columns if c not in present]
        if not missing:
            return []
        try:
            delta.alter.add_columns([Field.from_arrow(schema.field(c)) for c in missing])
        except (CommitFailedError, DeltaError) as err:
            # Another process upgraded (or wrote) the table first: read it again and decide afresh.
            if attempt == CONFLICT_ATTEMPTS:
                raise
            log.info("table %s: adding %s raced another writer (%s); trying again", path, missing, err)
            continue
        log.warning(
            "table %s: added column(s) %s (a table of an earlier release; its older rows hold null there)",
            path,
            ", ".join(missing),
        )
        return missing
    return []


def spark_type_name(arrow_type: pa.DataType) -> str:
    """Spark's (and Delta's) simple type name for an Arrow type, as the OpenLineage Spark listener reports
    it and the data contracts name physical types."""
    t = pa.types
    if t.is_list(arrow_type) or t.is_large_list(arrow_type):
        return "array"
    if t.is_struct(arrow_type):
        return "struct"
    if t.is_map(arrow_type):
        return "map"
    if t.is_decimal(arrow_type):
        return f"decimal({arrow_type.precision},{arrow_type.scale})"
    if t.is_timestamp(arrow_type):
        return "timestamp" if arrow_type.tz else "timestamp_ntz"
    simple = {
        pa.string(): "string",
        pa.large_string(): "string",
        pa.int64(): "long",
        pa.int32(): "integer",
        pa.int16(): "short",
        pa.int8(): "byte",
        pa.bool_(): "boolean",
        pa.float64(): "double",
        pa.float32(): "float",
        pa.date32(): "date",
        pa.binary(): "binary",
        pa.large_binary(): "binary",
    }
    return simple.get(arrow_type, str(arrow_type))
