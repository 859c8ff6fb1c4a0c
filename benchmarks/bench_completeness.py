"""Completeness benchmark: `check_month` of a month archive against a lake that misses some pages.

A month of generated pages (`benchmarks.pagegen`, real 1044 entries, ~3 MB each, no corruptions) is
zipped as the site publishes it and served from disk by the loopback site. The lake holds all but 5
of them, landed the way extraction lands them (content-addressed files listed in a manifest). Each
measurement runs in a fresh child interpreter:

1. The check: download the archive, read every member and every Bronze page of the month with the
   streaming parser, recover the 5 missing pages, read them back, write the report. Seconds, MB/s of
   pages read (archive members inflated + Bronze pages), peak RSS.
2. Reference, same run and pages: one plain `lxml.etree.iterparse` pass counting entries over the
   same bytes (members + Bronze pages), from files already on disk. check/reference = what the
   comparison costs beyond reading the XML once.
3. Flat memory: the check on a month of half as many pages; peak RSS should not follow size.

Corpus generation and zipping are never timed.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
import zipfile
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks._common import MB, BenchResult, Table, child_main, f1, f2, peak_rss_mb, run_child

NAME = "completeness"
TITLE = "Completeness check of a month archive against Bronze"
MISSING = 5


def _month_corpus(folder: Path, pages: int, page_bytes: int) -> list[Path]:
    from benchmarks.pagegen import generate_corpus

    # ~1,000 items per 3 MB page; spaced so `pages` pages fill January 2022 (every stamp in the month).
    spacing = timedelta(seconds=max(1, int(29 * 86400 / (pages * page_bytes / 3000))))
    corpus = generate_corpus(
        folder,
        pages=pages,
        seed=7,
        dataset_key="agregadas",
        target_page_bytes=page_bytes,
        newest=datetime(2022, 1, 30, 12, tzinfo=UTC),
        item_spacing=spacing,
    )
    return corpus.files


def _land(lake: Path, files: list[Path]) -> None:
    """Land pages as extraction does: content-addressed files and a manifest counting them."""
    from placsp_provider.bronze.landing import write_text_atomically
    from placsp_provider.bronze.manifest import LandedPage, Manifest
    from placsp_provider.feed.page_scan import scan_page
    from placsp_provider.lake import bronze_dir, page_file

    manifest = Manifest("agregadas", 1044, "bench", "2022-01-01T00:00:00Z", "2022-02-01T00:00:00Z", "", "bench")
    for path in files:
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
        final = page_file(lake, "agregadas", path.name, sha)
        final.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, final)
        page = LandedPage.from_scan(
            scan_page(final),
            url=path.name,
            file=str(final.relative_to(lake)),
            size=final.stat().st_size,
            sha256=sha,
            source="feed",
            newly_landed=True,
        )
        manifest.pages.append(page)
    write_text_atomically(bronze_dir(lake, "agregadas") / "manifests" / "bench.json", manifest.to_json())


def _prepare(work: Path, pages: int, page_bytes: int) -> dict[str, Any]:
    files = _month_corpus(work / "pages", pages, page_bytes)
    site_dir = work / "site" / "sindicacion" / "sindicacion_1044"
    site_dir.mkdir(parents=True)
    archive = site_dir / "PlataformasAgregadasSinMenores_2022.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in files:
            zf.write(path, path.name)
    lake = work / "lake"
    kept = [f for i, f in enumerate(files) if i % (pages // MISSING) != 1][: pages - MISSING]
    _land(lake, kept)
    return {
        "lake": str(lake),
        "archive": str(archive),
        "pages": pages,
        "page_bytes": sum(f.stat().st_size for f in files) / len(files),
        "members_bytes": sum(f.stat().st_size for f in files),
        "bronze_bytes": sum(f.stat().st_size for f in kept),
        "archive_bytes": archive.stat().st_size,
        "files": [str(f) for f in files],
        "kept": [str(f) for f in kept],
    }


# -- children ---------------------------------------------------------------------------------------
def _child_check(payload: dict[str, Any]) -> dict[str, Any]:
    from placsp_provider.bronze.completeness import CompletenessRequest, check_month
    from placsp_provider.datasets import get_dataset
    from placsp_provider.feed.client import ClientConfig, FeedClient

    request = CompletenessRequest(
        get_dataset("agregadas"), date(2022, 1, 1), Path(payload["lake"]), "bench", today=date(2026, 11, 29)
    )
    config = ClientConfig(base_url=payload["base_url"], max_retries=0)
    started = time.perf_counter()
    with FeedClient(config, "agregadas") as client:
        report = check_month(client, request)
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "rss_mb": peak_rss_mb(),
        "published": report.published,
        "recovered": report.recovered,
        "members_recovered": report.members_recovered,
    }


def _child_reference(payload: dict[str, Any]) -> dict[str, Any]:
    from lxml import etree

    atom = "{http://www.w3.org/2005/Atom}entry"
    started = time.perf_counter()
    entries = 0
    for path in payload["files"] + payload["kept"]:
        for _event, elem in etree.iterparse(path, events=("end",), tag=atom):
            entries += 1
            elem.clear()
    return {"seconds": time.perf_counter() - started, "rss_mb": peak_rss_mb(), "entries": entries}


# -- the benchmark ----------------------------------------------------------------------------------
def run(quick: bool = False) -> BenchResult:
    from placsp_provider.demo.loopback_site import LoopbackSite

    started = time.perf_counter()
    sizes = [(10, 200_000), (20, 200_000)] if quick else [(50, 3_000_000), (100, 3_000_000)]
    rows, raw = [], {}
    for pages, page_bytes in sizes:
        with tempfile.TemporaryDirectory(prefix="placsp-bench-completeness-") as tmp:
            work = Path(tmp)
            prepared = _prepare(work, pages, page_bytes)
            routes = {
                "/sindicacion/sindicacion_1044/PlataformasAgregadasSinMenores_2022.zip": Path(prepared["archive"])
            }
            with LoopbackSite(routes) as site:
                check = run_child(__name__, {"task": "check", "lake": prepared["lake"], "base_url": site.base_url})
            reference = run_child(__name__, {"task": "reference", **prepared})
            read_mb = (prepared["members_bytes"] + prepared["bronze_bytes"]) / MB
            raw[pages] = {"prepared": {k: v for k, v in prepared.items() if k not in ("files", "kept")}}
            raw[pages] |= {"check": check, "reference": reference}
            rows.append(
                [
                    f"{pages} pages of {prepared['page_bytes'] / MB:.1f} MB, {MISSING} missing from Bronze",
                    f"{check['published']:,} / {check['recovered']:,}",
                    f2(check["seconds"]),
                    f1(read_mb / check["seconds"]),
                    f2(reference["seconds"]),
                    f2(check["seconds"] / reference["seconds"]),
                    f1(check["rss_mb"]),
                    f1(reference["rss_mb"]),
                ]
            )
    table = Table(
        "check_month vs one plain lxml pass over the same pages",
        [
            "month",
            "items published / recovered",
            "check s",
            "check MB/s (pages read)",
            "lxml pass s",
            "check / lxml",
            "check peak RSS MB",
            "lxml peak RSS MB",
        ],
        rows,
        notes=[
            "pages read = every archive member inflated + every Bronze page of the month; the check also "
            "downloads the archive over loopback HTTP, recovers the missing pages and reads them back",
            "peak RSS is VmHWM of a fresh child per measurement",
        ],
    )
    small, large = raw[sizes[0][0]]["check"], raw[sizes[1][0]]["check"]
    per_record_kb = (large["rss_mb"] - small["rss_mb"]) * 1000 / max(1, large["published"] - small["published"])
    findings = [
        f"Peak RSS {small['rss_mb']:.0f} MB for {sizes[0][0]} pages and {large['rss_mb']:.0f} MB for "
        f"{sizes[1][0]}: pages are read member by member (one inflated page on disk at a time), so memory "
        f"follows the month's number of records (the two key sets compared, about {per_record_kb:.1f} KB "
        "per record), not its bytes.",
    ]
    return BenchResult(
        name=NAME,
        title=TITLE,
        summary=__doc__.split("\n\n", 1)[1].strip() if __doc__ else "",
        tables=[table],
        raw=raw,
        seconds=time.perf_counter() - started,
        findings=findings,
    )


if __name__ == "__main__":
    child_main({"check": _child_check, "reference": _child_reference})
