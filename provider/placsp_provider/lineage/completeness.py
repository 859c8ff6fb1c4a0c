"""Lineage of a completeness check: the month's archive in, the recovered Bronze pages out.

Inputs: the dataset's feed, named as the extraction names it, with one `dataQualityAssertions`
assertion `completeness` (expected: the entries and tombstones the archive published for the month;
actual: those Bronze held before the check), and the archive itself. Outputs: the recovered pages and
the recovery manifest (as the extraction reports them), and the report.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from placsp_provider.bronze.manifest import Manifest
from placsp_provider.datasets import get_dataset
from placsp_provider.lake import resolve_lake
from placsp_provider.lake_storage import lake_path
from placsp_provider.lineage.datasets import input_dataset, output_dataset
from placsp_provider.lineage.extract import bronze_outputs, connection_base_url
from placsp_provider.lineage.guard import never_fails
from placsp_provider.lineage.naming import DatasetName, placsp_feed, storage_path

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

    from placsp_provider.operators.completeness import PlacspCompletenessOperator


def completeness_lineage(*, dataset: str, base_url: str | None, summary: Mapping[str, Any] | None) -> OperatorLineage:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.facet_v2 import data_quality_assertions_dataset as dq

    ds = get_dataset(dataset)
    inputs, outputs = [], []
    archive = summary.get("archive") if summary else None
    base = base_url or (summary.get("base_url") if summary else None)
    if base:
        feed = placsp_feed(base, ds.folder)
        facets = {}
        if summary:
            expected, actual = int(summary["published"]), int(summary["landed_before"])
            facets["dataQualityAssertions"] = dq.DataQualityAssertionsDatasetFacet(
                assertions=[
                    dq.Assertion(
                        assertion="completeness",
                        success=expected == actual,
                        column=None,
                        severity="error",
                        name=f"completeness {summary['month']}",
                        description=(
                            f"{actual} of the {expected} entries and tombstones the archive published for "
                            f"{summary['month']} were in Bronze before the check; {summary['recovered']} recovered"
                        ),
                        expected=str(expected),
                        actual=str(actual),
                    )
                ]
            )
        inputs.append(input_dataset(feed, input_facets=facets))
        if archive:
            inputs.append(input_dataset(DatasetName(feed.namespace, urlsplit(archive).path)))
    if summary and summary.get("lake"):
        lake = resolve_lake(summary["lake"])
        manifest_path = summary.get("manifest_path")
        if manifest_path and lake_path(manifest_path).is_file():
            outputs += bronze_outputs(lake, Manifest.load(lake_path(manifest_path)), lake_path(manifest_path))
        report = lake / summary["report"] if summary.get("report") else None
        if report is not None and report.is_file():
            outputs.append(output_dataset(storage_path(report), rows=len(summary.get("gap_days") or {}), files=1))
    return OperatorLineage(inputs=inputs, outputs=outputs)  # type: ignore[arg-type]


def on_start(op: PlacspCompletenessOperator) -> OperatorLineage:
    return never_fails(
        "completeness", lambda: completeness_lineage(dataset=op.dataset, base_url=connection_base_url(op), summary=None)
    )


def on_complete(op: PlacspCompletenessOperator, summary: Mapping[str, Any] | None) -> OperatorLineage:
    return never_fails("completeness", lambda: completeness_lineage(dataset=op.dataset, base_url=None, summary=summary))
