"""Table maintenance by delta-rs, for a lake on S3: there only delta-rs commits (conditional PUTs;
decision 0038), so compaction and VACUUM, which commit too, are delta-rs's `optimize.compact` and
`vacuum` rather than Spark's (`spark.maintenance`, for a local lake). The same steps, retention
(the table's `delta.deletedFileRetentionDuration`, else 7 days) and report, table by table.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from placsp_provider.ingest.tables import has_commit
from placsp_provider.lake import LAKE_TABLES, table_path
from placsp_provider.lake_storage import LakePath, open_table
from placsp_provider.maintenance import commit_conflict, ordered_by, table_done
from placsp_provider.settings import maintenance_file_bytes
from placsp_provider.table_files import data_files

log = logging.getLogger(__name__)


def maintain_tables(
    lake: LakePath, tables: Sequence[str] = LAKE_TABLES, file_bytes: int | None = None
) -> dict[str, dict[str, int]]:
    """Compaction (Silver's tables in the order of their versions' time, files of about `file_bytes`:
    `maintenance.ordered_by`) then VACUUM of each table; per table, what changed in storage (the
    keys of `spark.maintenance.maintain_tables`). The rows readers see stay the same."""
    from deltalake.exceptions import CommitFailedError

    size = file_bytes or maintenance_file_bytes()
    done: dict[str, dict[str, int]] = {}
    for n, table in enumerate(tables, 1):
        path = table_path(lake, table)
        if not has_commit(path):
            log.info("table %s (%d of %d): not created yet, nothing to do", table, n, len(tables))
            continue
        delta, step = open_table(path), "OPTIMIZE"
        try:
            # Silver: one column's Z-order is a global sort, cut into files as delta-rs counts `size`.
            files = delta.get_add_actions(flatten=True).column("size_bytes").to_pylist()
            column = ordered_by(table, len(files), sum(files), size)
            metrics = delta.optimize.compact() if column is None else delta.optimize.z_order([column], target_size=size)
            before = data_files(path)
            step = "VACUUM"
            delta.vacuum(dry_run=False)
            # The ingest's MERGEs leave expired log files (`silver_write._merge`); a checkpoint first,
            # so the log entries older than the table's log retention (30 days) can go.
            step = "checkpoint"
            delta.create_checkpoint()
            delta.cleanup_metadata()
        except CommitFailedError as err:
            raise commit_conflict(table, step, err) from err
        done[table] = table_done(
            table,
            n,
            len(tables),
            compacted=int(metrics.get("numFilesRemoved", 0)),
            written=int(metrics.get("numFilesAdded", 0)),
            before=before,
            left=data_files(path),
        )
    return done
