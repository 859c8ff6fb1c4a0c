"""What table maintenance does, reports and says, whichever engine runs it: Spark on a local lake
(`spark.maintenance`), delta-rs on an S3 lake (`delta_rs.maintenance`; decision 0038).

Silver's tables are compacted in the order of their versions' time, into files of about
`PLACSP_MAINTENANCE_FILE_MB` (decision 0051): a daily MERGE then rewrites the few files that hold
the versions it replaces, not the whole table, so its cost stops growing with the lake's history.
"""

from __future__ import annotations

import logging

from placsp_provider.errors import PlacspError
from placsp_provider.lake import VERSION_TIME
from placsp_provider.lake_storage import LakePath, is_local

log = logging.getLogger(__name__)


def ordered_by(table: str, files: int, table_bytes: int, size: int) -> str | None:
    """The column a table's files are compacted in the order of; None: plain compaction (not a Silver
    table, or one file no larger than `size`: already one span, nothing to rewrite)."""
    return VERSION_TIME.get(table) if files > 1 or table_bytes > size else None


def runs_on_spark(lake: LakePath) -> bool:
    """Spark's OPTIMIZE and VACUUM on a local lake; delta-rs's on S3, where only delta-rs commits."""
    return is_local(lake)


def table_done(table: str, n: int, of: int, *, compacted: int, written: int, before: int, left: int) -> dict[str, int]:
    """One table's report (files compacted, written, deleted by VACUUM, left), logged."""
    done = {"files_compacted": compacted, "files_written": written, "files_deleted": before - left, "files_left": left}
    log.info(
        "table %s (%d of %d): %d small files compacted into %d; VACUUM deleted %d files, %d left",
        table,
        n,
        of,
        compacted,
        written,
        before - left,
        left,
    )
    return done


def commit_conflict(table: str, step: str, err: Exception) -> PlacspError:
    """The one-line error of a step that met another writer's commit."""
    first = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
    return PlacspError(
        f"table {table}: step {step}: another writer committed meanwhile ({first}); nothing was lost and "
        "the tables done before it stay done: run it again when no ingest or replay runs"
    )
