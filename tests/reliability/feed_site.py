"""A three-page agregadas chain on a loopback site, for extractions that die or run out of disk.

head (Jan 6) -> big (Jan 5, 40 entries, ~240 KB: several 64 KB writes) -> old (Jan 3, ends the walk)

The window 2022-01-05..07 takes the head and the big page; the old page is dropped. `big` can be
served stalled half-way, so an extraction can be caught with a partial download on disk.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

from placsp_provider.datasets import DATASETS
from placsp_provider.demo.loopback_site import LoopbackSite, Reply
from placsp_provider.lake import manifests_dir, pages_dir
from tests.pages import day, page

AGR = DATASETS["agregadas"]
FOLDER = f"/sindicacion/{AGR.folder}/"
BIG = "PlataformasAgregadasSinMenores_20220106_030000.atom"
OLD = "PlataformasAgregadasSinMenores_20220104_030000.atom"
SINCE, UNTIL = "2022-01-05", "2022-01-07"

PAGES = {
    AGR.head_file: page([(101, day(6, 20)), (102, day(6, 8))], tombstones=[(103, day(6, 9))], next_href=BIG),
    BIG: page([(200 + i, day(5, 1 + i % 20)) for i in range(40)], next_href=OLD, self_href=BIG),
    OLD: page([(301, day(3))], self_href=OLD),
}
LANDED = (AGR.head_file, BIG)  # what a complete extraction of the window lands


def interval() -> tuple[datetime, datetime]:
    return tuple(datetime.fromisoformat(d).replace(tzinfo=UTC) for d in (SINCE, UNTIL))  # type: ignore[return-value]


def sha256(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def serve(site: LoopbackSite, *, stall_big_at: int | None = None, stall: float = 30.0) -> None:
    for name, body in PAGES.items():
        site.routes[FOLDER + name] = body
    if stall_big_at is not None:
        site.routes[FOLDER + BIG] = Reply(PAGES[BIG], stall_at=stall_big_at, stall=stall)


def extract_args(lake: Path, site: LoopbackSite) -> list[str]:
    interval = ["--since", SINCE, "--until", UNTIL]
    return ["extract", "--dataset", AGR.key, *interval, "--lake", str(lake), "--base-url", site.base_url, "--json"]


def assert_only_whole_pages(lake: Path) -> set[str]:
    """Every file in the pages folder is a whole page the site served, under its content hash.
    Returns the page names found."""
    served = {hashlib.sha256(body).hexdigest(): name for name, body in PAGES.items()}
    found = set()
    folder = pages_dir(lake, AGR.key)
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        assert digest in served, f"{path.name} ({path.stat().st_size} bytes) is not a whole page the site served"
        assert path.name.endswith(f".{digest[:16]}.atom"), f"{path.name} does not carry its content's hash"
        found.add(served[digest])
    return found


def listed_files(lake: Path) -> set[str]:
    """Lake-relative files that some manifest of the dataset lists."""
    folder = manifests_dir(lake, AGR.key)
    files = set()
    for path in folder.glob("*.json") if folder.is_dir() else []:
        files |= {p["file"] for p in json.loads(path.read_text())["pages"]}
    return files


def stray_files(lake: Path) -> list[str]:
    """Files in Bronze that are neither a page nor a manifest: temp files a run left behind."""
    bronze = lake / "bronze" / AGR.key
    keep = {pages_dir(lake, AGR.key), manifests_dir(lake, AGR.key)}
    strays = []
    for path in bronze.rglob("*") if bronze.is_dir() else []:
        if path.is_file() and not (path.parent in keep and path.suffix in (".atom", ".json")):
            strays.append(str(path.relative_to(lake)))
    return sorted(strays)
