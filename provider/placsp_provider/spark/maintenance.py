"""Table maintenance: each lake table's small files compacted, then the files no recent version uses removed.

Every ingest MERGE rewrites the data files it touches and adds a new one; the replaced files stay on
disk (for time travel and for readers that started earlier) until a `VACUUM`, so a lake nobody
maintains grows by about the size of every touched table each day (docs/runbook.md, "Table
maintenance"). Run it when no ingest or replay writes: a commit in between makes one of the two fail
(an ingest or replay writes again by itself; this is simply run again). Never imports Airflow.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from placsp_provider.bronze.landing import write_text_atomically
from placsp_provider.errors import PlacspError
from placsp_provider.ingest.tables import has_commit
from placsp_provider.lake import LAKE_TABLES, maintenance_summary_path, table_path
from placsp_provider.lake_storage import LakePath, local_lake
from placsp_provider.maintenance import commit_conflict, ordered_by, table_done
from placsp_provider.settings import maintenance_file_bytes
from placsp_provider.spark.session import session_conf
from placsp_provider.spark.silver_merge import is_commit_conflict
from placsp_provider.table_files import data_files

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# `VACUUM` lists a table with Spark jobs of this many tasks: Spark's default (10,000) took ten times
# as long on a small table (decision 0017).
VACUUM_LISTING_TASKS = 8
_LISTING_TASKS_CONF = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
_MAX_FILE_SIZE_CONF = "spark.databricks.delta.optimize.maxFileSize"
# Z-order adds random noise to each row's range id against skew (Delta's default); off, a file's span
# of time ends where the next one's starts.
_NOISE_CONF = "spark.databricks.io.skipping.mdc.addNoise"


def maintain_tables(
    spark: SparkSession, lake: LakePath, tables: Sequence[str] = LAKE_TABLES, file_bytes: int | None = None
) -> dict[str, dict[str, int]]:
    """`OPTIMIZE` (compaction; Silver's tables in the order of their versions' time, files of about
    `file_bytes`: `maintenance.ordered_by`) then `VACUUM` (Delta's retention: 7 days unless the
    table says otherwise) of each table; per table, what changed on disk. The rows readers see stay the same."""
    from delta.tables import DeltaTable

    size = file_bytes or maintenance_file_bytes()
    done: dict[str, dict[str, int]] = {}
    for n, table in enumerate(tables, 1):
        # On S3 the tables are maintained by delta-rs (`delta_rs.maintenance`: decision 0038).
        path = local_lake(table_path(lake, table), "table maintenance (Spark)")
        if not has_commit(path):
            log.info("table %s (%d of %d): not created yet, nothing to do", table, n, len(tables))
            continue
        delta = DeltaTable.forPath(spark, str(path))
        step = "OPTIMIZE"
        try:
            optimized = _optimize(spark, delta, table, size).first()  # one row: the path and its metrics
            metrics = optimized["metrics"] if optimized is not None else None
            before = data_files(path)
            step = "VACUUM"
            with session_conf(spark, _LISTING_TASKS_CONF, str(VACUUM_LISTING_TASKS)):
                delta.vacuum()
        except Exception as err:
            if not is_commit_conflict(err):
                raise
            raise commit_conflict(table, step, err) from err
        done[table] = table_done(
            table,
            n,
            len(tables),
            compacted=int(metrics["numFilesRemoved"]) if metrics else 0,
            written=int(metrics["numFilesAdded"]) if metrics else 0,
            before=before,
            left=data_files(path),
        )
    return done


def _optimize(spark: SparkSession, delta: Any, table: str, size: int) -> Any:
    """Compaction, or for a Silver table Z-order by its version time: on one column, a split into
    ranges of time, one file each, as many as the table's bytes hold `size` (Delta's estimate)."""
    detail = delta.detail().first()
    column = ordered_by(table, detail["numFiles"], detail["sizeInBytes"], size)
    if column is None:
        return delta.optimize().executeCompaction()
    with session_conf(spark, _MAX_FILE_SIZE_CONF, str(size)), session_conf(spark, _NOISE_CONF, "false"):
        return delta.optimize().executeZOrderBy(column)


def main(argv: list[str] | None = None) -> int:
    """spark-submit entry (this file, from PlacspMaintainOperator): maintain the
    tables, then write what was done where the operator reads it (`--run-id`)."""
    parser = argparse.ArgumentParser(description="PLACSP table maintenance (Spark job): OPTIMIZE, then VACUUM")
    parser.add_argument("--lake", required=True, type=Path)
    parser.add_argument("--table", action="append", choices=LAKE_TABLES, default=[])
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--file-bytes", type=int, help="Silver's file size (default: PLACSP_MAINTENANCE_FILE_MB)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s %(message)s")
    from placsp_provider.spark.session import get_session

    spark = get_session("placsp-maintain")
    try:
        done = maintain_tables(spark, args.lake, tuple(args.table) or LAKE_TABLES, args.file_bytes)
    except PlacspError as err:  # a commit conflict: one line for the task log, no stack
        print(f"ERROR {err}", file=sys.stderr)
        return 1
    path = local_lake(maintenance_summary_path(args.lake, args.run_id), "table maintenance (Spark)")
    write_text_atomically(path, json.dumps(done, indent=2, sort_keys=True))  # never half a summary
    return 0


if __name__ == "__main__":
    from placsp_provider.spark.session import run_job

    sys.exit(run_job(main))
