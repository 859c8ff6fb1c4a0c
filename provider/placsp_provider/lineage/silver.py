"""Lineage of a Silver ingest: Bronze pages and manifests in, the lake's Delta tables out.

Outputs are every lake table, named as the OpenLineage Spark listener names them, with `schema`;
once the run summary exists, `outputStatistics.rowCount` (`rows_written`) and the `placsp_deadLetters`
run facet with the dead letters the run produced (docs/lineage.md: "What each task reports").

Spark's own events for the same job (the listener, see `lineage.spark`) see the MERGEs but not
through the parse step, so the Bronze -> Silver edge comes from here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from placsp_provider.bronze.manifest import Manifest
from placsp_provider.datasets import get_dataset
from placsp_provider.lake import (
    LAKE_TABLES,
    RECONCILIATION_TABLE,
    SILVER_TABLES,
    manifest_files,
    pages_dir,
    resolve_lake,
    run_summary_path,
)
from placsp_provider.lake_storage import LakePath, lake_path
from placsp_provider.lineage.datasets import input_dataset, lake_output
from placsp_provider.lineage.extract import MAX_PAGE_DATASETS
from placsp_provider.lineage.guard import never_fails
from placsp_provider.lineage.naming import bronze_file, storage_path

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import InputDataset, OutputDataset

    from placsp_provider.lineage.facets import PlacspDeadLettersRunFacet
    from placsp_provider.operators.silver import PlacspSilverOperator


def silver_lineage(
    *, dataset: str, lake: str | LakePath, manifests: Iterable[LakePath], summary: Mapping[str, Any] | None
) -> OperatorLineage:
    from airflow.providers.openlineage.extractors import OperatorLineage

    from placsp_provider.lineage.facets import FACET_KEY

    run_facets = {FACET_KEY: run_dead_letters_facet(summary)} if summary else {}
    return OperatorLineage(
        inputs=bronze_inputs(lake, manifests),  # type: ignore[arg-type]
        outputs=lake_outputs(lake, summary),  # type: ignore[arg-type]
        run_facets=run_facets,  # type: ignore[arg-type]
    )


def bronze_inputs(lake: str | LakePath, manifests: Iterable[LakePath]) -> list[InputDataset]:
    """Each manifest and each page it names (once), as the extract task reported them."""
    inputs: list[InputDataset] = []
    pages: dict[str, str] = {}  # lake-relative file -> dataset key
    for path in manifests:
        if not path.is_file():
            continue
        manifest = Manifest.load(path)
        inputs.append(input_dataset(storage_path(path)))
        for page in manifest.pages:
            pages.setdefault(page.file, manifest.dataset)
    if len(pages) <= MAX_PAGE_DATASETS:
        inputs += [input_dataset(bronze_file(lake, f)) for f in pages]
    else:  # the same folder the extract task reports for so many pages
        inputs += [
            input_dataset(storage_path(pages_dir(resolve_lake(lake), key))) for key in sorted(set(pages.values()))
        ]
    return inputs


def lake_outputs(lake: str | LakePath, summary: Mapping[str, Any] | None) -> list[OutputDataset]:
    rows = rows_written(summary) if summary else {}
    return [lake_output(lake, t, rows=rows.get(t)) for t in LAKE_TABLES]


def rows_written(summary: Mapping[str, Any]) -> dict[str, int]:
    """Rows each table received from the run, from the summary's MERGE metrics."""
    merge = summary.get("merge") or {}
    out = {
        t: int(merge.get(t, {}).get("inserted", 0)) + int(merge.get(t, {}).get("updated", 0))
        for t in (*SILVER_TABLES, "dead_letters")
    }
    out["entries"] += int(merge.get("tombstones", {}).get("applied_to_entries", 0))
    out[RECONCILIATION_TABLE] = int((summary.get("files") or {}).get("ingested", 0))
    return out


def run_dead_letters_facet(summary: Mapping[str, Any]) -> PlacspDeadLettersRunFacet:
    from placsp_provider.lineage.facets import dead_letters_facet

    dead = summary.get("dead_letters") or {}
    return dead_letters_facet(
        dataset=str(summary["dataset"]),
        scope="run",
        total=dead.get("total"),
        by_stage=dead.get("by_stage") or {},
        by_error_type=dead.get("by_error_type") or {},
        inserted=((summary.get("merge") or {}).get("dead_letters") or {}).get("inserted"),
        quarantined_files=(summary.get("files") or {}).get("quarantined"),
    )


# -- the operator's three events --------------------------------------------------------------
def on_start(op: PlacspSilverOperator) -> OperatorLineage:
    return never_fails("Silver", lambda: _lineage(op, None))


def on_complete(op: PlacspSilverOperator, result: Mapping[str, Any] | None, run_id: str | None) -> OperatorLineage:
    """`result` is what `execute` returned; without it, the run summary file of `run_id` is read."""
    return never_fails("Silver", lambda: _lineage(op, result or _summary_file(op, run_id)))


def on_failure(op: PlacspSilverOperator, run_id: str | None) -> OperatorLineage:
    # A job that died before its summary leaves no counts; one that wrote it and then failed its
    # conservation check leaves them, and they say what went wrong.
    return never_fails("Silver", lambda: _lineage(op, _summary_file(op, run_id)))


def _lineage(op: PlacspSilverOperator, summary: Mapping[str, Any] | None) -> OperatorLineage:
    ds = get_dataset(op.dataset)
    lake = resolve_lake(op.lake)
    return silver_lineage(dataset=ds.key, lake=lake, manifests=_manifests(op, lake, ds.key), summary=summary)


def _manifests(op: PlacspSilverOperator, lake: LakePath, dataset: str) -> list[LakePath]:
    """The manifest the task ingests or, without one, every manifest of the dataset (what the job reads)."""
    if op.manifest:
        return [lake_path(str(op.manifest))]
    return manifest_files(lake, dataset)


def _summary_file(op: PlacspSilverOperator, run_id: str | None) -> dict[str, Any] | None:
    if not run_id:
        return None
    path = run_summary_path(resolve_lake(op.lake), get_dataset(op.dataset).key, run_id)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
