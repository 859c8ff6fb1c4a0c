"""The Delta tables of the lake: where they live, their columns, and creating them.

    <lake>/silver/{entries,lots,documents,results,tombstones}   Silver, partitioned by dataset
    <lake>/dead_letters                                          the dead-letter table (docs/dead-letters.md)
    <lake>/reconciliation                                        one row per ingested Bronze file

Columns come from the explicit Arrow schemas of `silver_schema` plus the lineage columns every
row carries. Nothing is ever inferred.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from placsp_provider.lake import LAKE_TABLES, table_path
from placsp_provider.parser.silver_schema import SCHEMAS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

UTC_TS = pa.timestamp("us", tz="UTC")

_LINEAGE = [
    pa.field("_ingest_run_id", pa.string(), nullable=False),
    pa.field("_ingested_at", UTC_TS, nullable=False),
]
_DELETION = [pa.field("deleted_at", UTC_TS), pa.field("deletion_type", pa.string())]

DEAD_LETTER_LIFECYCLE = [
    pa.field("dead_letter_id", pa.string(), nullable=False),
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
# appending them (`delta_rs.table_upgrade`), so a fresh table and an upgraded one have one column order.
ADDED_COLUMNS: dict[str, tuple[str, ...]] = {"dead_letters": ("raw_bytes",)}


def table_schema(table: str) -> pa.Schema:
    if table == "dead_letters":
        record = SCHEMAS["dead_letters"]
        added = ADDED_COLUMNS["dead_letters"]
        first = [f for f in record if f.name not in added]
        return pa.schema([*first, *DEAD_LETTER_LIFECYCLE, *(record.field(name) for name in added)])
    if table == "reconciliation":
        return RECONCILIATION
    base = list(SCHEMAS[table])
    if table == "entries":
        base += _DELETION
    return pa.schema([*base, *_LINEAGE])


def spark_table_schema(table: str) -> StructType:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(table_schema(table), prefer_timestamp_ntz=False)


# A table's `_delta_log` folder without a commit: Delta makes the folder, then writes version 0 into
# it. Younger than this, another process is creating the table right now (wait for its commit);
# older, its creator died in between (SIGKILL, a lost machine) and the folder is removed.
ABANDONED_CREATION_SECONDS = 30.0
CREATE_ATTEMPTS = 6


def ensure_tables(spark: SparkSession, lake: Path) -> None:
    """Create every table that does not exist yet, and add the columns a table of an earlier release
    lacks: idempotent, safe against concurrent creators (two ingests of a fresh lake) and against a
    creation that was killed half-way."""
    from placsp_provider.delta_rs.table_upgrade import add_missing_columns

    for table in LAKE_TABLES:
        _ensure_table(spark, table, table_path(lake, table))
    add_missing_columns(lake)


def has_commit(path: Path) -> bool:
    """The table exists: its log holds a commit (or a checkpoint), not just a folder."""
    try:
        names = os.listdir(path / "_delta_log")
    except FileNotFoundError:
        return False
    return any(_COMMIT_FILE.match(n) for n in names)


_COMMIT_FILE = re.compile(r"^\d{20}\.(json|checkpoint\b.*\.(parquet|json))$")


def _ensure_table(spark: SparkSession, table: str, path: Path) -> None:
    from delta.tables import DeltaTable

    for attempt in range(1, CREATE_ATTEMPTS + 1):
        if has_commit(path) or _wait_for_other_creator(path):
            return
        builder = DeltaTable.createIfNotExists(spark).location(str(path)).partitionedBy("dataset")
        for field in spark_table_schema(table).fields:
            builder = builder.addColumn(field.name, field.dataType, nullable=field.nullable)
        try:
            builder.execute()
            return
        except Exception as err:
            # Another process made the log folder or committed version 0 first: its table is ours.
            if has_commit(path):
                return
            if attempt == CREATE_ATTEMPTS:
                raise
            first_line = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
            log.warning(
                "table %s: creating it failed while another process may be creating it (%s); "
                "trying again (attempt %d of %d)",
                path,
                first_line,
                attempt + 1,
                CREATE_ATTEMPTS,
            )
            time.sleep(0.5 * attempt)


def _wait_for_other_creator(path: Path) -> bool:
    """A log folder without a commit: wait for the creator's commit while the folder is young; remove
    it once it is old enough to have been abandoned. True when the table now exists."""
    log_dir = path / "_delta_log"
    while log_dir.is_dir() and not has_commit(path):
        try:
            age = time.time() - log_dir.stat().st_mtime
        except FileNotFoundError:
            break
        if age >= ABANDONED_CREATION_SECONDS:
            log.warning(
                "table %s: its _delta_log has held no commit for %.0f s: a creation that died half-way; "
                "removing the empty log and creating the table",
                path,
                age,
            )
            shutil.rmtree(log_dir, ignore_errors=True)
            break
        time.sleep(0.2)
    return has_commit(path)


def spark_schema(table: str) -> StructType:
    """The Spark StructType of a table (imports pyspark only when called)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    # prefer_timestamp_ntz=False: UTC-aware Arrow timestamps must become Spark TIMESTAMP (LTZ).
    return from_arrow_schema(SCHEMAS[table], prefer_timestamp_ntz=False)


def spark_ddl(table: str) -> str:
    """The same schema as a Spark DDL string, e.g. for `mapInArrow(..., schema)` or CREATE TABLE.

    Built from the StructType without a SparkSession (`StructType.toDDL` needs one).
    """
    columns = []
    for field in spark_schema(table).fields:
        not_null = "" if field.nullable else " NOT NULL"
        columns.append(f"`{field.name}` {field.dataType.simpleString()}{not_null}")
    return ", ".join(columns)
