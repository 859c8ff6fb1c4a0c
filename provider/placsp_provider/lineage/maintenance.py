"""Lineage of table maintenance: each maintained lake table is read and rewritten (its own input and
output). The rows do not change, so outputs carry no row count; `outputStatistics.fileCount` is the
files compaction wrote, once the job's summary exists."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from placsp_provider.lake import resolve_lake
from placsp_provider.lake_storage import LakePath
from placsp_provider.lineage.datasets import lake_input, lake_output
from placsp_provider.lineage.guard import never_fails

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage


def maintenance_lineage(
    lake: str | LakePath | None, tables: Sequence[str], done: Mapping[str, Mapping[str, int]] | None
) -> OperatorLineage:
    """`lake` as the operator got it (None: `$PLACSP_LAKE`), resolved inside the guard like the rest."""

    def build() -> OperatorLineage:
        from airflow.providers.openlineage.extractors import OperatorLineage

        root, written = resolve_lake(lake), {t: int(d["files_written"]) for t, d in (done or {}).items()}
        return OperatorLineage(
            inputs=[lake_input(root, t) for t in tables],  # type: ignore[arg-type]
            outputs=[lake_output(root, t, files=written.get(t)) for t in tables],  # type: ignore[arg-type]
        )

    return never_fails("maintenance", build)
