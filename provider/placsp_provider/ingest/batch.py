"""A batch parsed and staged, decided and not yet written: what a writer is given, and the parts of
it every writer writes the same way (the dead letters, with their lifecycle, and the reconciliation
rows: few rows, built here once as Arrow).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa

from placsp_provider.ingest.tables import RECONCILIATION, staged_schema, table_schema
from placsp_provider.ingest.tally import (
    SOURCE_COLUMN,
    WHOLE_FILE_PARSE_ERRORS,
    BatchPlan,
    FileTally,
    new_dead_letter_lifecycle,
    reconciliation_dead_letter_rows,
    reconciliation_rows,
)
from placsp_provider.lake import DEAD_LETTER_TABLE
from placsp_provider.lake_storage import LakePath, uri


@dataclass(frozen=True)
class StagedBatch:
    lake: LakePath
    dataset: str
    folder: LakePath  # the run's staging folder: <table>/*.parquet or *.arrow in `tables.staged_schema`
    tallies: Mapping[str, FileTally]
    plan: BatchPlan
    run_id: str
    started: datetime

    @property
    def quarantined(self) -> set[str]:
        return set(self.plan.quarantined)

    def staged_path(self, table: str) -> LakePath | None:
        """The folder of a table's staged files; None when no page staged a row of it."""
        return self.folder / table if self.plan.staged[table] else None

    def read_staged(self, table: str) -> pa.Table:
        """A table's staged rows (`tables.staged_schema`), quarantined files included."""
        from placsp_provider.ingest.staging import read_staged_file, staged_files

        path = self.staged_path(table)
        parts = [] if path is None else [read_staged_file(f, table) for f in staged_files(uri(path))]
        return pa.concat_tables(parts) if parts else staged_schema(table).empty_table()

    def kept(self, table: str, rows: pa.Table) -> pa.Table:
        """`rows` without those of quarantined files."""
        if not self.plan.quarantined:
            return rows
        sources = rows.column(SOURCE_COLUMN.get(table, "_source_file")).to_pylist()
        quarantined = self.quarantined
        return rows.filter(pa.array([s not in quarantined for s in sources], pa.bool_()))

    def dead_letters(self) -> pa.Table:
        """Every dead letter the batch inserts, in the table's columns: the kept files', the page-level
        one that stands for a file it quarantined, one reconciliation dead letter per other quarantined
        file; all with the lifecycle of a fresh dead letter."""
        staged = self.read_staged(DEAD_LETTER_TABLE)
        dead = self.kept(DEAD_LETTER_TABLE, staged)
        if self.plan.quarantined:
            quarantined = self.quarantined
            page_level = [
                source in quarantined and error in WHOLE_FILE_PARSE_ERRORS
                for source, error in zip(
                    staged["source_file"].to_pylist(), staged["error_type"].to_pylist(), strict=True
                )
            ]
            letters = reconciliation_dead_letter_rows(self.dataset, self.tallies, self.plan.quarantined)
            reconciliation = pa.Table.from_pylist(letters, schema=staged_schema(DEAD_LETTER_TABLE))
            dead = pa.concat_tables([dead, staged.filter(pa.array(page_level, pa.bool_())), reconciliation])
        lifecycle = new_dead_letter_lifecycle(self.run_id, self.started)
        schema = table_schema(DEAD_LETTER_TABLE)
        for name, value in lifecycle.items():
            field = schema.field(name)
            dead = dead.append_column(field, pa.array([value] * dead.num_rows, field.type))
        if dead.num_rows != self.plan.sizes[DEAD_LETTER_TABLE]:  # counted from the tallies: never silent
            raise RuntimeError(
                f"dataset {self.dataset}: {dead.num_rows} dead letters read back, "
                f"{self.plan.sizes[DEAD_LETTER_TABLE]} tallied"
            )
        return dead.select(schema.names)

    def reconciliation(self) -> pa.Table:
        """One row per file of the batch: reconciled or quarantined, and why."""
        rows = reconciliation_rows(self.dataset, self.run_id, self.tallies, self.plan.quarantined, self.started)
        return pa.Table.from_pylist(rows, schema=RECONCILIATION)
