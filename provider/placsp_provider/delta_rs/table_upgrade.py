"""Existing tables brought up to the code's schema: a column a later release added is appended, empty
(null) on the rows written before it. By delta-rs, so the daily run (no JVM), the Spark jobs
(`spark.tables.ensure_tables`) and the dead-letter tools upgrade a lake the same way.

Only additive changes are made here (`spark.tables.ADDED_COLUMNS`: nullable columns, appended), and
only to tables that exist; what a column's null means on old rows is the column's own documentation
(e.g. `raw_bytes`: docs/runbook.md, "Dead letters written before raw_bytes").
"""

from __future__ import annotations

import logging
from pathlib import Path

from placsp_provider.lake import table_path
from placsp_provider.spark.tables import ADDED_COLUMNS, has_commit, table_schema

log = logging.getLogger(__name__)

ATTEMPTS = 5


def add_missing_columns(lake: Path) -> list[str]:
    """Append every column of `ADDED_COLUMNS` that an existing table lacks; `table.column` of each
    one added. Safe to run concurrently: a writer that added it first is fine."""
    added = []
    for table, columns in ADDED_COLUMNS.items():
        path = table_path(lake, table)
        if has_commit(path):
            added += [f"{table}.{c}" for c in _add_to_table(path, table, columns)]
    return added


def _add_to_table(path: Path, table: str, columns: tuple[str, ...]) -> list[str]:
    from deltalake import DeltaTable
    from deltalake.exceptions import CommitFailedError, DeltaError
    from deltalake.schema import Field

    schema = table_schema(table)
    for attempt in range(1, ATTEMPTS + 1):
        delta = DeltaTable(str(path))
        present = {f.name for f in delta.schema().fields}
        missing = [c for c in columns if c not in present]
        if not missing:
            return []
        fields = [Field.from_arrow(schema.field(c)) for c in missing]
        try:
            delta.alter.add_columns(fields)
        except (CommitFailedError, DeltaError) as err:
            # Another process upgraded (or wrote) the table first: read it again and decide afresh.
            if attempt == ATTEMPTS:
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
