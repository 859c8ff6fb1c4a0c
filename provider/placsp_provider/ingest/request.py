"""What one Silver ingest is asked to do, and which Bronze pages that is."""

from __future__ import annotations

from dataclasses import dataclass

from placsp_provider.bronze.manifest import LandedPage, Manifest
from placsp_provider.datasets import Dataset
from placsp_provider.lake import manifest_files, table_path
from placsp_provider.lake_storage import LakePath


@dataclass(frozen=True)
class IngestRequest:
    dataset: Dataset
    lake: LakePath
    run_id: str
    manifests: tuple[LakePath, ...] = ()  # empty: every manifest of the dataset
    reprocess: bool = False  # ingest files again even if the reconciliation log has them
    only_files: tuple[str, ...] = ()  # restrict to these lake-relative files (replay of whole files)


def manifest_pages(request: IngestRequest) -> dict[str, LandedPage]:
    """Pages named by the request's manifests (every manifest of the dataset if none), once each."""
    manifests = request.manifests or tuple(manifest_files(request.lake, request.dataset.key))
    pages: dict[str, LandedPage] = {}
    for path in manifests:
        for page in Manifest.load(path).pages:
            pages.setdefault(page.file, page)
    if request.only_files:
        pages = {f: p for f, p in pages.items() if f in set(request.only_files)}
    return pages


def pages_to_ingest(request: IngestRequest) -> tuple[list[LandedPage], int]:
    """Pages named by the manifests, once each, minus those already reconciled (unless `reprocess`);
    and how many were left out as done. The reconciliation table is read by delta-rs (metadata and one
    column of one partition: no engine needed); a lake without it has done nothing."""
    from placsp_provider.ingest.tables import has_commit
    from placsp_provider.lake_storage import open_table
    from placsp_provider.table_files import table_files

    pages = manifest_pages(request)
    path = table_path(request.lake.resolve(), "reconciliation")
    if request.reprocess or not pages or not has_commit(path):
        return list(pages.values()), 0
    files = table_files(open_table(path), [("dataset", "=", request.dataset.key)])
    done = set(files.to_table(columns=["source_file"]).column("source_file").to_pylist())
    todo = [p for f, p in pages.items() if f not in done]
    return todo, len(pages) - len(todo)
