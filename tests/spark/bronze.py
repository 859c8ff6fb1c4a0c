"""Put pages into a test lake the way extraction does (same layout, same manifest, same counts).

Extraction itself is tested over real HTTP in tests/bronze; here the Silver side is under test,
so pages are landed directly with the extraction's own building blocks.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

from placsp_provider.bronze.landing import land_atomically, write_text_atomically
from placsp_provider.bronze.manifest import LandedPage, Manifest
from placsp_provider.datasets import get_dataset
from placsp_provider.feed.page_scan import scan_page
from placsp_provider.feed.timestamps import isoformat
from placsp_provider.lake import bronze_dir, incoming_dir, page_file


def land(lake: Path, dataset: str, pages: dict[str, bytes], interval: str = "2022-01-05") -> Path:
    """Land `name -> bytes` pages for one interval; return the manifest path."""
    ds = get_dataset(dataset)
    start = datetime.fromisoformat(interval).replace(tzinfo=UTC)
    manifest = Manifest(
        ds.key, ds.syndication_id, f"test-{interval}", isoformat(start), isoformat(start), isoformat(start), "test"
    )
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
                file=str(final.relative_to(lake)),
                size=len(body),
                sha256=sha,
                source="feed",
                newly_landed=new,
            )
        )
    path = bronze_dir(lake, ds.key) / "manifests" / f"{interval}.json"
    write_text_atomically(path, manifest.to_json())
    return path
