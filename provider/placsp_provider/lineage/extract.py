"""Lineage of an extraction: the PLACSP feed in, the Bronze pages and the manifest out.

Each page is its own output, named as Spark names it when the Silver job reads it, so the graph runs
feed -> extract -> page -> silver; the manifest is an output too (the Silver task reads it). A run
that lands more than `MAX_PAGE_DATASETS` pages (an archive backfill) reports the pages folder as one
dataset with the totals instead, to keep events small.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from placsp_provider.bronze.manifest import Manifest
from placsp_provider.datasets import get_dataset
from placsp_provider.lake import pages_dir, resolve_lake
from placsp_provider.lake_storage import LakePath, lake_path
from placsp_provider.lineage.datasets import input_dataset, output_dataset
from placsp_provider.lineage.guard import never_fails
from placsp_provider.lineage.naming import bronze_file, placsp_feed, storage_path

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import OutputDataset

    from placsp_provider.bronze.manifest import Manifest
    from placsp_provider.operators.completeness import PlacspCompletenessOperator
    from placsp_provider.operators.extract import PlacspExtractOperator

MAX_PAGE_DATASETS = 1000


def extract_lineage(
    *, dataset: str, base_url: str | None, lake: str | LakePath, manifest: LakePath | None
) -> OperatorLineage:
    """Inputs: the dataset's feed (when the base URL is known). Outputs: the manifest's pages and the manifest."""
    from airflow.providers.openlineage.extractors import OperatorLineage

    ds = get_dataset(dataset)
    loaded = Manifest.load(manifest) if manifest is not None and manifest.is_file() else None
    base = loaded.base_url if loaded is not None and loaded.base_url else base_url
    inputs = [input_dataset(placsp_feed(base, ds.folder))] if base else []
    outputs = bronze_outputs(lake, loaded, manifest) if loaded is not None and manifest is not None else []
    return OperatorLineage(inputs=inputs, outputs=outputs)  # type: ignore[arg-type]


def bronze_outputs(lake: str | LakePath, manifest: Manifest, manifest_file: LakePath) -> list[OutputDataset]:
    """The manifest's pages (records and bytes each) and the manifest itself (pages listed, bytes)."""
    pages = manifest.pages
    if len(pages) <= MAX_PAGE_DATASETS:
        outputs = [
            output_dataset(bronze_file(lake, p.file), rows=p.entries + p.tombstones, size=p.bytes, files=1)
            for p in pages
        ]
    else:
        outputs = [
            output_dataset(
                storage_path(pages_dir(resolve_lake(lake), manifest.dataset)),
                rows=sum(p.entries + p.tombstones for p in pages),
                size=sum(p.bytes for p in pages),
                files=len(pages),
            )
        ]
    outputs.append(
        output_dataset(storage_path(manifest_file), rows=len(pages), size=manifest_file.stat().st_size, files=1)
    )
    return outputs


# -- the operator's three events --------------------------------------------------------------
def on_start(op: PlacspExtractOperator) -> OperatorLineage:
    return never_fails(
        "extract",
        lambda: extract_lineage(
            dataset=op.dataset, base_url=connection_base_url(op), lake=resolve_lake(op.lake), manifest=None
        ),
    )


def on_complete(op: PlacspExtractOperator, result: Mapping[str, Any] | None) -> OperatorLineage:
    """`result` is what `execute` returned (the summary with `manifest` and `lake`)."""

    def build() -> OperatorLineage:
        manifest = lake_path(result["manifest"]) if result and result.get("manifest") else None
        lake = result.get("lake") if result else None
        # The manifest records the base URL it was extracted from: no connection lookup then.
        base = None if manifest is not None and manifest.is_file() else connection_base_url(op)
        return extract_lineage(dataset=op.dataset, base_url=base, lake=lake or resolve_lake(op.lake), manifest=manifest)

    return never_fails("extract", build)


def connection_base_url(op: PlacspExtractOperator | PlacspCompletenessOperator) -> str | None:
    """The base URL of the operator's PLACSP connection (a manifest's own, when there is one, wins)."""
    from placsp_provider.hooks.placsp import PlacspHook

    try:
        return PlacspHook(op.placsp_conn_id).client_config().base_url
    except Exception:  # no connection: the feed input is left out rather than guessed
        return None
