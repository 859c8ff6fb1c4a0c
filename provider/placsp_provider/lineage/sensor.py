"""Lineage of a dead-letter threshold check: data quality on the dead-letter table, next to lineage.

Input: the dead-letter table (`file` + `<lake>/dead_letters`, as the Silver job's Spark events name
it) with its `schema`, and, once the check ran:

- `dataQualityAssertions`: one assertion per threshold (`ThresholdCheck`): `assertion` is the kind
  (`dead_letter_count`, `dead_letter_ratio`), `name` the rule (`dead_letter_ratio <= 0.05`), `success`,
  `severity`, `expected` (the threshold) and `actual` (the observed value), no `column` (the whole
  selected table), `params` the scope, run id, dead letters and entries read;
- `dataQualityMetrics`: rows in the selection and, for `stage`, `error_type` and `status`, the
  number of distinct values (and zero nulls: the columns are NOT NULL).

The run carries the `placsp_deadLetters` facet with the counts by stage and error type. A failed
check (severity `error`) reports the same facets on the FAIL event, where the listener adds the
`errorMessage` facet with the bounded failure message.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from placsp_provider.lake import resolve_lake
from placsp_provider.lineage.guard import never_fails

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.facet_v2 import InputDatasetFacet

    from placsp_provider.dead_letters.stats import DeadLetterCounts, ThresholdCheck
    from placsp_provider.sensors.dead_letters import DeadLetterThresholdSensor

_METRIC_COLUMNS = ("stage", "error_type", "status")


def threshold_lineage(
    *,
    lake: str | Path,
    dataset: str,
    scope: str,
    checks: Sequence[ThresholdCheck] = (),
    counts: DeadLetterCounts | None = None,
) -> OperatorLineage:
    from airflow.providers.openlineage.extractors import OperatorLineage

    from placsp_provider.lake import DEAD_LETTER_TABLE
    from placsp_provider.lineage.datasets import input_dataset, table_schema_facet
    from placsp_provider.lineage.facets import FACET_KEY, dead_letters_facet
    from placsp_provider.lineage.naming import lake_table

    input_facets: dict[str, InputDatasetFacet] = {}
    if checks:
        input_facets["dataQualityAssertions"] = assertions_facet(checks)
    if counts is not None:
        input_facets["dataQualityMetrics"] = metrics_facet(counts)
    table = input_dataset(
        lake_table(lake, DEAD_LETTER_TABLE),
        facets={"schema": table_schema_facet(DEAD_LETTER_TABLE)},
        input_facets=input_facets,
    )
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
                expected=_text(c.threshold_value),
                actual=_text(c.observed_value),
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

    distinct = {"stage": counts.by_stage, "error_type": counts.by_error_type, "status": counts.by_status}
    return dqm.DataQualityMetricsInputDatasetFacet(
        rowCount=counts.total,
        columnMetrics={
            column: dqm.ColumnMetrics(nullCount=0, distinctCount=len(distinct[column]), count=float(counts.total))
            for column in _METRIC_COLUMNS
        },
    )


def _text(value: float | None) -> str:
    """Thresholds and observations as the spec wants them: strings (`undefined` for a 0/0 ratio)."""
    if value is None:
        return "undefined"
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


# -- the sensor's three events ----------------------------------------------------------------
def on_start(op: DeadLetterThresholdSensor) -> OperatorLineage:
    return never_fails("dead-letter check", lambda: _lineage(op, (), None))


def on_complete(
    op: DeadLetterThresholdSensor, checks: Sequence[ThresholdCheck], counts: DeadLetterCounts | None
) -> OperatorLineage:
    """`checks` and `counts` are what the check concluded (empty if it never got that far)."""
    return never_fails("dead-letter check", lambda: _lineage(op, checks, counts))


def _lineage(
    op: DeadLetterThresholdSensor, checks: Sequence[ThresholdCheck], counts: DeadLetterCounts | None
) -> OperatorLineage:
    from placsp_provider.datasets import get_dataset

    lake = resolve_lake(op.lake)
    return threshold_lineage(
        lake=lake, dataset=get_dataset(op.dataset).key, scope=op.scope, checks=checks, counts=counts
    )
