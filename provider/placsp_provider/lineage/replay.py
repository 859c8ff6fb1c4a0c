"""Lineage of a dead-letter replay: dead letters in, Silver rows and dead-letter status changes out.

Names and facets are the Silver task's, so a replayed row's table is the same node as the one the
daily ingest writes; run facet `placsp_deadLetters` with scope `replay` (docs/lineage.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from placsp_provider.lake import DEAD_LETTER_TABLE, LAKE_TABLES
from placsp_provider.lake_storage import LakePath
from placsp_provider.lineage.datasets import lake_input, lake_output

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage


def replay_lineage(
    *,
    lake: str | LakePath,
    dataset: str,
    selected: int | None = None,
    rows_written: Mapping[str, int] | None = None,
    dead_letters_updated: int | None = None,
    by_stage: Mapping[str, int] | None = None,
    by_error_type: Mapping[str, int] | None = None,
) -> OperatorLineage:
    """Counts left as None are unknown (e.g. on START); tables absent from `rows_written` are not outputs.

    :param selected: dead letters the run selected for replay (its summary's `selected`).
    :param rows_written: table (`entries`, ..., `reconciliation`) -> rows inserted or updated.
    :param dead_letters_updated: dead-letter rows whose status/attempt columns the run changed.
    :param by_stage, by_error_type: the selected dead letters, for the `placsp_deadLetters` facet
        (its `total` is `selected` when given).
    """
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.generated.input_statistics_input_dataset import InputStatisticsInputDatasetFacet

    from placsp_provider.lineage.facets import FACET_KEY, dead_letters_facet

    stats = {"inputStatistics": InputStatisticsInputDatasetFacet(rowCount=selected)} if selected is not None else {}
    dead_letters = lake_input(lake, DEAD_LETTER_TABLE, stats)
    written = dict(rows_written or {})
    if unknown := sorted(set(written) - set(LAKE_TABLES)):
        raise ValueError(f"rows_written names unknown tables {unknown}; the tables are {', '.join(LAKE_TABLES)}")
    if dead_letters_updated is not None:
        written[DEAD_LETTER_TABLE] = written.get(DEAD_LETTER_TABLE, 0) + dead_letters_updated
    outputs = [lake_output(lake, t, rows=written[t]) for t in LAKE_TABLES if t in written]
    run_facets = {}
    if by_stage is not None or by_error_type is not None:
        run_facets[FACET_KEY] = dead_letters_facet(
            dataset=dataset, scope="replay", total=selected, by_stage=by_stage or {}, by_error_type=by_error_type or {}
        )
    return OperatorLineage(inputs=[dead_letters], outputs=outputs, run_facets=run_facets)  # type: ignore[arg-type]
