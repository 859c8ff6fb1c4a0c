"""The lake's Delta tables created by delta-rs: a fresh lake's first ingest without Spark (the
`delta-rs` engine, and every ingest on an S3 lake). The same columns and partitioning as Spark's
creation (`spark.tables`): both take them from `ingest.tables`.

Safe against concurrent creators: version 0 of a table is written with a conditional put (a local
create-if-absent, or S3's `If-None-Match`), so one creator wins and the others find its table.
"""

from __future__ import annotations

import logging

from placsp_provider.ingest.tables import has_commit, table_schema
from placsp_provider.lake import LAKE_TABLES, table_path
from placsp_provider.lake_storage import LakePath, delta_options, uri

log = logging.getLogger(__name__)


def ensure_tables(lake: LakePath) -> list[str]:
    """Create every lake table that does not exist yet; the tables this call created."""
    created = []
    for table in LAKE_TABLES:
        path = table_path(lake, table)
        if not has_commit(path) and _create(path, table):
            created.append(table)
    if created:
        log.info("lake %s: created the table(s) %s with delta-rs", uri(lake), ", ".join(created))
    return created


def _create(path: LakePath, table: str) -> bool:
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError

    try:
        DeltaTable.create(
            uri(path),
            schema=table_schema(table),
            partition_by=["dataset"],
            mode="error",
            storage_options=delta_options(path) or None,
        )
    except DeltaError:
        if has_commit(path):  # another creator committed version 0 first: its table is ours
            return False
        raise
    return True
