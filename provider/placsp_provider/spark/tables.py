"""The lake's Delta tables created by Spark (a fresh lake's first ingest), and their Spark schemas.
The columns themselves are `ingest.tables`'.
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from placsp_provider.ingest.tables import add_missing_columns, has_commit, table_schema
from placsp_provider.lake import LAKE_TABLES, table_path
from placsp_provider.lake_storage import LakePath, local_lake
from placsp_provider.spark.routing import spark_schema

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)


def spark_table_schema(table: str) -> StructType:
    """A lake table's columns as a Spark StructType."""
    return spark_schema(table_schema(table))


# A table's `_delta_log` folder without a commit: Delta makes the folder, then writes version 0 into
# it. Younger than this, another process is creating the table right now (wait for its commit);
# older, its creator died in between (SIGKILL, a lost machine) and the folder is removed.
ABANDONED_CREATION_SECONDS = 30.0
CREATE_ATTEMPTS = 6


def ensure_tables(spark: SparkSession, lake: LakePath) -> None:
    """Create every table that does not exist yet, and add the columns a table of an earlier release
    lacks: idempotent, safe against concurrent creators (two ingests of a fresh lake) and against a
    creation that was killed half-way."""
    local = local_lake(lake, "creating tables with Spark")
    for table in LAKE_TABLES:
        _ensure_table(spark, table, local_lake(table_path(local, table), "creating tables with Spark"))
    add_missing_columns(lake)


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
