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

import tempfile
import time
import zipfile
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks._common import MB, BenchResult, Table, child_main, f1, f2, peak_rss_mb, run_child
from benchmarks._lake import land_template

NAME = "completeness"
TITLE = "Completeness check of a month archive against Bronze"
MISSING = 5


def _prepare(work: Path, pages: int, page_bytes: int) -> dict[str, Any]:
    from benchmarks.pagegen import generate_corpus

    # ~1,000 items per 3 MB page; spaced so `pages` pages fill January 2022 (every stamp in the month).
    spacing = timedelta(seconds=max(1, int(29 * 86400 / (pages * page_bytes / 3000))))
    files = generate_corpus(
        work / "pages",
        pages=pages,
        seed=7,
        dataset_key="agregadas",
        target_page_bytes=page_bytes,
        newest=datetime(2022, 1, 30, 12, tzinfo=UTC),
        item_spacing=spacing,
    ).files
    site_dir = work / "site" / "sindicacion" / "sindicacion_1044"
    site_dir.mkdir(parents=True)
    archive = site_dir / "PlataformasAgregadasSinMenores_2022.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in files:
            zf.write(path, path.name)
    lake = work / "lake"
    kept = [f for i, f in enumerate(files) if i % (pages // MISSING) != 1][: pages - MISSING]
    land_template(kept, lake, "agregadas")
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
    out = {"seconds": seconds, "rss_mb": peak_rss_mb()}
    return out | {k: getattr(report, k) for k in ("published", "recovered", "members_recovered")}


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
    raw: dict[int, dict[str, Any]] = {}
    for pages, page_bytes in sizes:
        with tempfile.TemporaryDirectory(prefix="placsp-bench-completeness-") as tmp:
            prepared = _prepare(Path(tmp), pages, page_bytes)
            archive = Path(prepared["archive"])  # served where the site publishes it
            with LoopbackSite({f"/sindicacion/sindicacion_1044/{archive.name}": archive}) as site:
                check = run_child(__name__, {"task": "check", "lake": prepared["lake"], "base_url": site.base_url})
            reference = run_child(__name__, {"task": "reference", **prepared})
            raw[pages] = {"prepared": {k: v for k, v in prepared.items() if k not in ("files", "kept")}}
            raw[pages] |= {"check": check, "reference": reference}
    return report(raw, time.perf_counter() - started)


def report(raw: dict[int, dict[str, Any]], seconds: float) -> BenchResult:
    rows = []
    for pages, m in raw.items():
        check, ref, prepared = m["check"], m["reference"], m["prepared"]
        read_mb = (prepared["members_bytes"] + prepared["bronze_bytes"]) / MB
        check_s, ref_s = check["seconds"], ref["seconds"]
        month = f"{pages} pages of {prepared['page_bytes'] / MB:.1f} MB"
        items = f"{check['published']:,} / {check['recovered']:,}"
        speeds = [f2(check_s), f1(read_mb / check_s), f2(ref_s), f2(check_s / ref_s)]
        rows.append([month, items, *speeds, f1(check["rss_mb"]), f1(ref["rss_mb"])])
    columns = ["month", "items published / recovered", "check s", "check MB/s", "lxml pass s", "check / lxml"]
    table = Table([*columns, "check peak RSS MB", "lxml peak RSS MB"], rows)
    small, large = raw[min(raw)]["check"], raw[max(raw)]["check"]
    per_record_kb = (large["rss_mb"] - small["rss_mb"]) * 1000 / max(1, large["published"] - small["published"])
    return BenchResult(
        NAME,
        TITLE,
        f"A month of generated pages zipped as the site publishes it, served on loopback; the lake lacks {MISSING}. "
        "The check downloads the archive, reads every member and Bronze page of the month, recovers the missing "
        "pages; the reference is one lxml iterparse pass over the same bytes on disk. Fresh child per measurement.",
        [table],
        raw,
        seconds,
        figures=[
            f"Memory follows the month's number of records (the two key sets, ~{per_record_kb:.1f} KB a record), "
            "not its bytes: one inflated member on disk at a time."
        ],
    )


if __name__ == "__main__":
    child_main(globals())
