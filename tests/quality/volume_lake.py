"""Lakes with a daily history for the volume tests, landed the way extraction lands them.

Each day is one extraction run: a manifest of the interval `[day, day + 1)` whose window starts
`overlap` earlier, listing that day's page (the versions updated that day) and, with `relanded`, a
second page holding again the previous day's last versions in other bytes (the head page as the
next run finds it). Entries are real (tests.pages: a real 1044 entry, id and `updated` changed)
unless `minimal` (id and `updated` only: what the series reads, for histories of many thousands).
"""

from __future__ import annotations

import hashlib
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from placsp_provider.bronze.landing import land_atomically, write_text_atomically
from placsp_provider.bronze.manifest import LandedPage, Manifest
from placsp_provider.datasets import get_dataset
from placsp_provider.feed.page_scan import scan_page
from placsp_provider.feed.timestamps import isoformat
from placsp_provider.lake import incoming_dir, manifest_path, page_file, relative_path
from placsp_provider.lake_storage import LakePath
from tests.pages import ATOM_ROOT, ID_PREFIX, page

Version = tuple[int, datetime]  # (entry number, updated): one published version of an entry


def midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def minimal_page(versions: list[Version]) -> bytes:
    entries = "".join(
        f"<entry><id>{ID_PREFIX}{n}</id><updated>{isoformat(t)}</updated><title>t</title></entry>" for n, t in versions
    )
    head = b'<?xml version="1.0" encoding="UTF-8"?>\n' + ATOM_ROOT + b"<id>test</id><title>t</title>"
    return head + entries.encode() + b"</feed>"


def land_day(
    lake: LakePath,
    day: date,
    versions: list[Version],
    *,
    dataset: str = "agregadas",
    relanded: list[Version] = (),  # type: ignore[assignment]
    overlap: timedelta = timedelta(0),
    minimal: bool = False,
) -> None:
    """One day's extraction run: its page(s) landed and listed by the interval's manifest."""
    ds = get_dataset(dataset)
    start = midnight(day)
    manifest = Manifest(
        ds.key,
        ds.syndication_id,
        f"extract-{day}",
        isoformat(start),
        isoformat(start + timedelta(days=1)),
        isoformat(start - overlap),
        "test",
    )
    render = minimal_page if minimal else (lambda vs: page([(n, isoformat(t)) for n, t in vs]))
    pages = {f"p{day:%Y%m%d}.atom": render(versions)}
    if relanded:
        pages[f"head{day:%Y%m%d}.atom"] = render([*relanded, *versions[:1]])
    for name, body in pages.items():
        sha = hashlib.sha256(body).hexdigest()
        tmp = incoming_dir(lake, ds.key) / f"{name}.tmp"
        tmp.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(body)
        final = page_file(lake, ds.key, name, sha)
        scan = scan_page(tmp)
        new = land_atomically(tmp, final)
        manifest.pages.append(
            LandedPage.from_scan(
                scan,
                url=f"test://{name}",
                file=relative_path(lake, final),
                size=len(body),
                sha256=sha,
                source="feed",
                newly_landed=new,
            )
        )
    write_text_atomically(manifest_path(lake, ds.key, start, start + timedelta(days=1)), manifest.to_json())


def ingest(lake: LakePath, dataset: str = "agregadas", *, reprocess: bool = False) -> None:
    """The real Silver ingest without a JVM (delta-rs) of every manifest not yet ingested."""
    from placsp_provider.ingest.request import IngestRequest
    from placsp_provider.ingest.run import ingest as run_ingest

    run_ingest(IngestRequest(get_dataset(dataset), lake, "test-run", reprocess=reprocess), "delta-rs")


def write_reconciliation(lake: Path, dataset: str = "agregadas") -> None:
    """The reconciliation rows an ingest of every landed page would write (all `reconciled`), in the
    ingest's own schema, for lakes whose Silver tables a test writes itself (tests/quality/test_cli_report)."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from placsp_provider.ingest.tables import table_schema
    from placsp_provider.lake import manifest_files, table_path

    now = datetime.now(UTC)
    rows = [
        {
            "dataset": dataset,
            "source_file": p.file,
            "sha256": p.sha256,
            "run_id": "synthetic",
            "manifest_entries": p.entries,
            "manifest_tombstones": p.tombstones,
            "valid_entries": p.entries,
            "valid_tombstones": p.tombstones,
            "dead_letter_records": 0,
            "status": "reconciled",
            "reason": None,
            "ingested_at": now,
        }
        for path in manifest_files(lake, dataset)
        for p in Manifest.load(path).pages
    ]
    table = pa.Table.from_pylist(rows, schema=table_schema("reconciliation"))
    write_deltalake(str(table_path(lake, "reconciliation")), table, partition_by=["dataset"], mode="append")
