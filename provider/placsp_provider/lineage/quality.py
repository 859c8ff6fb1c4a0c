"""Lineage of a data-contract check: each checked table in, with its assertions; quality_results out.

Inputs: every checked lake table (named as the Silver job's Spark events name it, with its `schema`)
and, once the check ran:

- `dataQualityAssertions`: one assertion per rule of that table: `assertion` its classification
  (`not_null` for nullValues/missingValues, `unique` for duplicateValues, `row_count` for rowCount and
  the volume check, `accepted_values` for invalidValues, `custom_sql` for sql rules, `schema` for the
  contract-vs-table schema rule), `name` the rule id, `column` (none: the whole table), `success`,
  `severity`, `expected` and `actual` as strings, `content` the query run;
- `dataQualityMetrics`: the rows of the dataset's partition, and the null count of every column a
  null rule measured (over the rows it checked).

Output: `quality_results` with the rows appended. On FAIL the same facets go out (the failing
assertions are why the task failed).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from placsp_provider.lineage.guard import never_fails

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.facet_v2 import InputDatasetFacet

    from placsp_provider.operators.quality import DataContractCheckOperator
    from placsp_provider.quality.engine import RuleResult
    from placsp_provider.quality.run import DatasetCheck

CLASSIFICATION = {
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


def quality_lineage(*, lake: str | Path, tables: Sequence[str], check: DatasetCheck | None = None) -> OperatorLineage:
    from airflow.providers.openlineage.extractors import OperatorLineage

    from placsp_provider.lineage.datasets import input_dataset, output_dataset, table_schema_facet
    from placsp_provider.lineage.naming import lake_table, local_path
    from placsp_provider.quality.results import table_path

    inputs = []
    for table in tables:
        input_facets: dict[str, InputDatasetFacet] = {}
        if check is not None:
            results = [r for r in check.report.results if r.table == table]
            input_facets["dataQualityAssertions"] = assertions_facet(results)
            input_facets["dataQualityMetrics"] = metrics_facet(results, check.report.rows.get(table))
        inputs.append(
            input_dataset(
                lake_table(lake, table), facets={"schema": table_schema_facet(table)}, input_facets=input_facets
            )
        )
    outputs = [output_dataset(local_path(table_path(lake)), rows=check.recorded if check else None)]
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
                actual="n/a" if r.actual is None else _text(r.actual),
                content=r.content,
                contentType="sql" if r.kind in ("library", "sql") else "text",
                params={"scope": r.scope, "dimension": r.dimension, "rows_checked": r.rows_checked},
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


def _text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def on_event(op: DataContractCheckOperator, check: DatasetCheck | None) -> OperatorLineage:
    """START (no check yet), COMPLETE or FAIL (what the check concluded, if it got that far)."""
    return never_fails("data contract check", lambda: _lineage(op, check))


def _lineage(op: DataContractCheckOperator, check: DatasetCheck | None) -> OperatorLineage:
    from placsp_provider.lake import resolve_lake
    from placsp_provider.quality.contract import CONTRACT_TABLES

    lake = resolve_lake(op.lake)
    tables = check.report.request.tables if check else tuple(op.tables or CONTRACT_TABLES)
    return quality_lineage(lake=lake, tables=tables, check=check)
