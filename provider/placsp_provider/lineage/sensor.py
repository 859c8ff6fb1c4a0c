"""Lineage of a dead-letter threshold check: data quality on the dead-letter table, next to lineage.

Input: the dead-letter table with its `schema` and, once the check ran, `dataQualityAssertions` (one
per threshold) and `dataQualityMetrics`; run facet `placsp_deadLetters` with the counts by stage and
error type (docs/lineage.md: "Facet reference"). A failed check (severity `error`) reports the same
facets on the FAIL event, where the listener adds `errorMessage` with the bounded failure message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from placsp_provider.datasets import get_dataset
from placsp_provider.dead_letters.stats import number_text
from placsp_provider.lake import DEAD_LETTER_TABLE, resolve_lake
from placsp_provider.lake_storage import LakePath
from placsp_provider.lineage.datasets import lake_input
from placsp_provider.lineage.guard import never_fails

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.facet_v2 import InputDatasetFacet

    from placsp_provider.dead_letters.stats import DeadLetterCounts, ThresholdCheck
    from placsp_provider.sensors.dead_letters import DeadLetterThresholdSensor


def threshold_lineage(
    *,
    lake: str | LakePath,
    dataset: str,
    scope: str,
    checks: Sequence[ThresholdCheck] = (),
    counts: DeadLetterCounts | None = None,
) -> OperatorLineage:
    from airflow.providers.openlineage.extractors import OperatorLineage

    from placsp_provider.lineage.facets import FACET_KEY, dead_letters_facet

    input_facets: dict[str, InputDatasetFacet] = {}
    if checks:
        input_facets["dataQualityAssertions"] = assertions_facet(checks)
    if counts is not None:
        input_facets["dataQualityMetrics"] = metrics_facet(counts)
    table = lake_input(lake, DEAD_LETTER_TABLE, input_facets)
    run_facets = {}
    if counts is not None:
        run_facets[FACET_KEY] = dead_letters_facet(
            dataset=dataset,
            scope=scope,
            total=counts.total,
            by_stage=counts.by_stage,
            by_error_type=counts.by_error_type,
        )
    return OperatorLineage(inputs=[table], run_facets=run_facets)  # type: ignore[arg-type]


def assertions_facet(checks: Sequence[ThresholdCheck]) -> InputDatasetFacet:
    from openlineage.client.facet_v2 import data_quality_assertions_dataset as dq

    return dq.DataQualityAssertionsDatasetFacet(
        assertions=[
            dq.Assertion(
                assertion=f"dead_letter_{c.threshold_kind}",
                success=c.success,
                column=None,  # the whole selection of the table, not one column
                severity=c.severity,
                name=c.assertion,
                description=c.describe(),
                expected=number_text(c.threshold_value),
                actual=number_text(c.observed_value),  # `undefined` for a 0/0 ratio
                content=c.assertion,
                contentType="expression",
                params={
                    "dataset": c.dataset,
                    "scope": c.scope,
                    "run_id": c.run_id,
                    "dead_letters": c.dead_letters,
                    "entries_read": c.entries_read,
                },
            )
            for c in checks
        ]
    )


def metrics_facet(counts: DeadLetterCounts) -> InputDatasetFacet:
    from openlineage.client.facet_v2 import data_quality_metrics_input_dataset as dqm

    # The three columns are NOT NULL: no null to count.
    distinct = {"stage": counts.by_stage, "error_type": counts.by_error_type, "status": counts.by_status}
    return dqm.DataQualityMetricsInputDatasetFacet(
        rowCount=counts.total,
        columnMetrics={
            column: dqm.ColumnMetrics(nullCount=0, distinctCount=len(values), count=float(counts.total))
            for column, values in distinct.items()
        },
    )


# -- the sensor's three events ----------------------------------------------------------------
def on_start(op: DeadLetterThresholdSensor) -> OperatorLineage:
    return on_complete(op, (), None)


def on_complete(
    op: DeadLetterThresholdSensor, checks: Sequence[ThresholdCheck], counts: DeadLetterCounts | None
) -> OperatorLineage:
    """`checks` and `counts` are what the check concluded (empty if it never got that far)."""

    def build() -> OperatorLineage:
        dataset = get_dataset(op.dataset).key
        return threshold_lineage(
            lake=resolve_lake(op.lake), dataset=dataset, scope=op.scope, checks=checks, counts=counts
        )

    return never_fails("dead-letter check", build)
