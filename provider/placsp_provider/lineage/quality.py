"""Lineage of a data-contract check: each checked table in, with its assertions; quality_results out.

Each checked lake table (with its `schema`) carries, once the check ran, `dataQualityAssertions` (one
per rule, classified by `CLASSIFICATION`) and `dataQualityMetrics` (the partition's rows, the null
counts a null rule measured): docs/data-quality.md ("Lineage"). On FAIL the same facets go out: the
failing assertions are why the task failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from placsp_provider.dead_letters.stats import number_text
from placsp_provider.lake import quality_results_path, resolve_lake
from placsp_provider.lake_storage import LakePath
from placsp_provider.lineage.datasets import lake_input, output_dataset
from placsp_provider.lineage.guard import never_fails
from placsp_provider.lineage.naming import storage_path

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.facet_v2 import InputDatasetFacet

    from placsp_provider.operators.quality import DataContractCheckOperator
    from placsp_provider.quality.engine import RuleResult
    from placsp_provider.quality.run import DatasetCheck

CLASSIFICATION = {
    # The named assertions (`type: custom`): the facet's own vocabulary, the rule id says which one.
    "freshness": "freshness",
    "rowCountComparison": "row_count",
    "nullValues": "not_null",
    "missingValues": "not_null",
    "duplicateValues": "unique",
    "rowCount": "row_count",
    "invalidValues": "accepted_values",
    "schema": "schema",
}


def classification(result: RuleResult) -> str:
    if result.kind == "sql":
        return "custom_sql"
    return CLASSIFICATION.get(result.metric or "", result.kind)


def quality_lineage(
    *, lake: str | LakePath, tables: Sequence[str], check: DatasetCheck | None = None
) -> OperatorLineage:
    from airflow.providers.openlineage.extractors import OperatorLineage

    inputs = []
    for table in tables:
        input_facets: dict[str, InputDatasetFacet] = {}
        if check is not None:
            results = [r for r in check.report.results if r.table == table]
            input_facets["dataQualityAssertions"] = assertions_facet(results)
            input_facets["dataQualityMetrics"] = metrics_facet(results, check.report.rows.get(table))
        inputs.append(lake_input(lake, table, input_facets))
    outputs = [
        output_dataset(storage_path(quality_results_path(resolve_lake(lake))), rows=check.recorded if check else None)
    ]
    return OperatorLineage(inputs=inputs, outputs=outputs)  # type: ignore[arg-type]


def assertions_facet(results: Sequence[RuleResult]) -> InputDatasetFacet:
    from openlineage.client.facet_v2 import data_quality_assertions_dataset as dq

    return dq.DataQualityAssertionsDatasetFacet(
        assertions=[
            dq.Assertion(
                assertion=classification(r),
                success=r.success,
                column=r.column,
                severity=r.severity,
                name=r.rule_id,
                description=r.description or r.message,
                expected=r.expected,
                actual="n/a" if r.actual is None else number_text(r.actual),
                content=r.content,
                contentType="sql" if r.kind in ("library", "sql") or r.metric == "rowCountComparison" else "text",
                # A named assertion's measures (freshness: both times, the page; comparison: files that differ).
                params={"scope": r.scope, "dimension": r.dimension, "rows_checked": r.rows_checked, **r.details},
            )
            for r in results
        ]
    )


def metrics_facet(results: Sequence[RuleResult], rows: int | None) -> InputDatasetFacet:
    from openlineage.client.facet_v2 import data_quality_metrics_input_dataset as dqm

    columns = {
        r.column: dqm.ColumnMetrics(nullCount=int(r.actual), count=float(r.rows_checked))
        for r in results
        if r.metric == "nullValues" and r.column and r.actual is not None
    }
    return dqm.DataQualityMetricsInputDatasetFacet(rowCount=rows, columnMetrics=columns)


def on_event(op: DataContractCheckOperator, check: DatasetCheck | None) -> OperatorLineage:
    """START (no check yet), COMPLETE or FAIL (what the check concluded, if it got that far)."""

    def build() -> OperatorLineage:
        from placsp_provider.quality.contract import CONTRACT_TABLES

        tables = check.report.request.tables if check else tuple(op.tables or CONTRACT_TABLES)
        return quality_lineage(lake=resolve_lake(op.lake), tables=tables, check=check)

    return never_fails("data contract check", build)
