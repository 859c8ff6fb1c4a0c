"""Bronze extraction benchmark: the real `extract_interval` over real HTTP on 127.0.0.1.

Generated pages (`benchmarks.pagegen`, real entries) are served from disk by
`placsp_provider.demo.loopback_site.LoopbackSite` in this (parent) process. Every measurement runs
in a fresh child interpreter, so its peak RSS (VmHWM, see benchmarks/_common.py for why not
`ru_maxrss`) is the high-water mark of that measurement only:

1. Throughput: 200 pages of 500 items (1044 entries, ~3 MB each, one corruption of every kind),
   walked from the head feed through `rel="next"` to the first page older than the window (201
   pages visited), landed and counted (the manifest's counts must equal the generator's). Repeated;
   the median is reported.
2. Reference, same run and same pages: a plain `requests` streaming download to disk, no
   hashing, no scanning, no fsync. extraction/reference = the cost of scanning and landing.
3. Parts, same run and same pages, in a child of their own: the three public calls extraction is
   made of (`FeedClient.download`, `scan_page`, `land_atomically`), each timed around its call, page
   after page. The rest = extraction minus their sum. No provider function is wrapped or replaced:
   the split is of a separate run of the same calls, not of the extraction runs themselves.
4. Page scan (issue 15's goal: >= 150 MB/s): `scan_page` over well-formed pages, page cache warm,
   against the plain lxml passes that still see every record.
5. Flat memory: peak RSS (and Python heap via tracemalloc, in a separate run) for 1, 4 and 16 MB
   pages of 643 entries, clean and with one page that is not well-formed.

Corpus generation is never timed.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks._common import (
    MB,
    BenchResult,
    Goal,
    Table,
    child_main,
    corpus_facts,
    cpu_seconds,
    f1,
    f2,
    med,
    peak_rss_mb,
    run_child,
)
from benchmarks.pagegen import CORRUPTION_KINDS, UNCLOSED_TAG, Corpus, chain_routes, generate_corpus
from placsp_provider.demo.loopback_site import LoopbackSite

NAME = "extract"
TITLE = "Bronze extraction (extract_interval over loopback HTTP)"
SEED = 20251128


@dataclass(frozen=True)
class Config:
    pages: int = 200  # landed; one more (older than the window) is visited and stops the walk
    items_per_page: int = 500
    dataset: str = "agregadas"
    repeats: int = 3
    scaling_dataset: str = "licitaciones"
    scaling: tuple[tuple[int, int], ...] = ((1 << 20, 24), (4 << 20, 12), (16 << 20, 6))  # bytes, pages
    scan_sample_pages: int = 20


FULL = Config()
QUICK = Config(pages=5, items_per_page=50, repeats=1, scaling=((128 << 10, 2), (512 << 10, 2)), scan_sample_pages=2)
SCAN_GOAL_MB_S = 150.0


# -- parent ---------------------------------------------------------------------------------------
def run(quick: bool = False) -> BenchResult:
    cfg = QUICK if quick else FULL
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="placsp-bench-") as tmp_name:
        tmp = Path(tmp_name)
        t = time.perf_counter()
        kinds = len(CORRUPTION_KINDS)
        corpus = _chain(tmp / "main", cfg.pages, cfg.dataset, items_per_page=cfg.items_per_page, corruption_count=kinds)
        generation_s = time.perf_counter() - t
        with LoopbackSite(chain_routes(corpus)) as site:
            main = _main_series(cfg, corpus, site, tmp)
        clean = [str(f) for f, p in zip(corpus.files, corpus.pages, strict=True) if p.well_formed]
        scan_cost = run_child(__name__, {"task": "scan_cost", "files": clean[: cfg.scan_sample_pages]})
        shutil.rmtree(tmp / "main", ignore_errors=True)
        scaling = [_scaling_point(cfg, target, pages, tmp) for target, pages in cfg.scaling]
    facts = corpus_facts(corpus) | {"generation_seconds": generation_s}
    raw = {"config": cfg.__dict__ | {"scaling": [list(s) for s in cfg.scaling]}, "quick": quick, "corpus": facts}
    raw |= {"main": main, "scan_cost": scan_cost, "scaling": scaling}
    return report(raw, time.perf_counter() - started)


def _chain(folder: Path, pages: int, dataset: str, **options: Any) -> Corpus:
    """`pages` pages served from the head feed, then one older page, clean, that stops the walk."""
    return generate_corpus(folder, pages=pages + 1, seed=SEED, dataset_key=dataset, head=True, clean_tail=1, **options)


def _extract(corpus: Corpus, base_url: str, tmp: Path, pages: int, trace: bool = False) -> dict[str, Any]:
    """One extraction child over an interval holding exactly the newest `pages` pages; page `pages`
    (clean, older than the window) stops the walk."""
    inside, outside, landed = corpus.pages[pages - 1], corpus.pages[pages], corpus.pages[:pages]
    start = outside.newest + (inside.oldest - outside.newest) / 2
    payload = {
        "task": "extract",
        "base_url": base_url,
        "dataset": corpus.spec.dataset_key,
        "start": start.isoformat(),
        "end": (corpus.pages[0].newest + timedelta(hours=1)).isoformat(),
        "max_pages": pages + 10,
        "tracemalloc": trace,
        "expect": {
            "pages": len(landed),
            "entries": sum(p.entries for p in landed),
            "tombstones": sum(p.tombstones for p in landed),
            "not_well_formed": sum(not p.well_formed for p in landed),
        },
    }
    result = _child_in_tmp(tmp, payload)
    result["bytes_downloaded"] = sum(p.bytes for p in corpus.pages[: result["pages_visited"]])
    return result


def _child_in_tmp(tmp: Path, payload: dict[str, Any]) -> dict[str, Any]:
    """A child writing into a folder of its own (`payload["out"]`), removed once it is done."""
    out = Path(tempfile.mkdtemp(prefix=f"{payload['task']}-", dir=tmp))
    try:
        return run_child(__name__, payload | {"out": str(out)})
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _main_series(cfg: Config, corpus: Corpus, site: LoopbackSite, tmp: Path) -> dict[str, Any]:
    """Extraction, its parts and the reference, interleaved repeat by repeat (drift hits all alike)."""
    visited = cfg.pages + 1  # the walk stops at the first page older than the window (checked below)
    urls = [site.url(path) for path in chain_routes(corpus)][:visited]
    runs: dict[str, list[dict[str, Any]]] = {"extract": [], "parts": [], "reference": []}
    for _ in range(cfg.repeats):
        runs["extract"].append(_extract(corpus, site.base_url, tmp, cfg.pages))
        last = runs["extract"][-1]
        if last["pages_visited"] != visited or not last["counts_ok"]:
            raise RuntimeError(f"the walk visited {last['pages_visited']} pages (not {visited}): {last['checks']}")
        for task in ("parts", "reference"):
            payload = {"task": task, "urls": urls, "base_url": site.base_url, "dataset": corpus.spec.dataset_key}
            runs[task].append(_child_in_tmp(tmp, payload | {"land": cfg.pages}))
    return runs


def _scaling_point(cfg: Config, target: int, pages: int, tmp: Path) -> dict[str, Any]:
    point: dict[str, Any] = {"target_bytes": target, "pages": pages}
    broken: dict[str, Any] = {"corruption_count": 1, "mix": {UNCLOSED_TAG: 1}}
    for variant, extra in (("clean", {}), ("not_well_formed", broken)):
        folder = tmp / f"scale-{target}-{variant}"
        corpus = _chain(folder, pages, cfg.scaling_dataset, target_page_bytes=target, **extra)
        with LoopbackSite(chain_routes(corpus)) as site:
            timed = _extract(corpus, site.base_url, tmp, pages)
            traced = _extract(corpus, site.base_url, tmp, pages, trace=True)
        landed = corpus.pages[:pages]
        mean = sum(p.bytes for p in landed) / len(landed)
        point[variant] = {"mean_page_bytes": mean, "items_per_page": landed[0].items, "run": timed, "trace": traced}
        shutil.rmtree(folder, ignore_errors=True)
    return point


# -- report ---------------------------------------------------------------------------------------
_PARTS = {"download": "download", "scan": "`scan_page`", "land": "`land_atomically`"}  # the parts child's timers
_SCANS = ("scan_page", "iterparse_end_tag", "iterparse_end_tag_no_blanks")  # the scan_cost child's passes


def report(raw: dict[str, Any], seconds: float) -> BenchResult:
    cfg, main, sc, scaling = raw["config"], raw["main"], raw["scan_cost"], raw["scaling"]
    ext, ref = main["extract"], main["reference"]
    first, landed = ext[0], ext[0]["landed"]

    def row(label: str, runs: list[dict[str, Any]]) -> list[str]:
        peak = max(r["peak_rss_mb"] for r in runs)
        mb_s = runs[0]["bytes_downloaded"] / MB / med(runs)
        return [label, f2(med(runs)), f1(mb_s), f2(med(runs, "cpu_s")), f1(peak), f1(peak - med(runs, "baseline_mb"))]

    parts = {label: statistics.median(r["timers"][k] for r in main["parts"]) for k, label in _PARTS.items()}
    parts["the rest"] = med(ext) - sum(parts.values())
    split = ", ".join(f"{label} {f2(sec)} s ({sec / med(ext):.0%})" for label, sec in parts.items())
    scan = {k: f1(sc["bytes"] / MB / sc[f"{k}_s"]) for k in _SCANS}
    scan_mb_s = sc["bytes"] / MB / sc["scan_page_s"]

    def memory(variant: str) -> str:
        rss = " / ".join(f1(pt[variant]["run"]["peak_rss_mb"]) for pt in scaling)
        return f"{rss} MB (Python heap {' / '.join(f2(pt[variant]['trace']['traced_peak_mb']) for pt in scaling)})"

    summary = (
        f"`extract_interval` walks {first['pages_visited']} generated pages ({first['bytes_downloaded'] / MB:,.1f} MB, "
        f"`{cfg['dataset']}`) on 127.0.0.1 and lands {landed['pages']}: {landed['entries']:,} entries, "
        f"{landed['tombstones']:,} tombstones, one corruption of each of the {len(CORRUPTION_KINDS)} kinds "
        f"({landed['not_well_formed']} pages not well-formed), counts checked. Fresh process per measurement, medians "
        f"of {cfg['repeats']}; peak RSS is `VmHWM`."
    )
    table = Table(
        ["run", "seconds", "MB/s", "CPU s", "peak RSS MB", "over baseline MB"],
        [
            row("`extract_interval` (download, sha256, scan, land, manifest)", ext),
            row("reference: `requests` stream to disk, nothing else", ref),
        ],
    )
    what = f"page scan, `scan_page` over {sc['pages']} well-formed pages"
    goal = Goal(what, f">= {SCAN_GOAL_MB_S:.0f} MB/s", f"{scan['scan_page']} MB/s", scan_mb_s >= SCAN_GOAL_MB_S)
    cpu = med(ext, "cpu_s") / med(ref, "cpu_s")
    sizes = " / ".join(f"{pt['target_bytes'] / (1 << 20):g}" for pt in scaling)
    figures = [
        f"Extraction takes {med(ext) / med(ref):.2f}x the reference's time ({cpu:.2f}x its CPU): {split}.",
        f"Page scan ({sc['bytes'] / MB:,.1f} MB, cache warm, best of {SCAN_ROUNDS}): lxml iterparse of record end "
        f"events {scan['iterparse_end_tag']} MB/s, without blank text "
        f"{scan['iterparse_end_tag_no_blanks']} MB/s ([0003](decisions/0003-page-scan-end-events-only.md)).",
        f"Memory does not follow page size: peak RSS for pages of {sizes} MiB "
        f"{memory('clean')}; with one page not well-formed {memory('not_well_formed')}.",
    ]
    return BenchResult(NAME, TITLE, summary, [table], raw, seconds, [goal], figures)


# -- children -------------------------------------------------------------------------------------
def _process_facts(t0: float, cpu0: float, baseline: float) -> dict[str, float]:
    """Wall and CPU seconds since `t0`/`cpu0`, and this process's memory marks (see `_common`)."""
    seconds, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    return {"seconds": seconds, "cpu_s": cpu, "peak_rss_mb": peak_rss_mb(), "baseline_mb": baseline}


def _child_extract(p: dict[str, Any]) -> dict[str, Any]:
    import tracemalloc

    import placsp_provider.bronze.extract as ex
    from placsp_provider.datasets import DATASETS
    from placsp_provider.feed.client import ClientConfig, FeedClient

    baseline = peak_rss_mb()
    if p["tracemalloc"]:
        tracemalloc.start()
    request = ex.ExtractRequest(
        dataset=DATASETS[p["dataset"]],
        start=datetime.fromisoformat(p["start"]),
        end=datetime.fromisoformat(p["end"]),
        lake=Path(p["out"]),
        run_id="bench",
        overlap=timedelta(0),
        max_pages=p["max_pages"],
        today=date(2025, 12, 1),
    )
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    config = ClientConfig(base_url=p["base_url"], max_retries=1, backoff_base=0.1)
    with FeedClient(config, request.dataset.key) as client:
        manifest = ex.extract_interval(client, request)
    facts = _process_facts(t0, cpu0, baseline)
    traced = tracemalloc.get_traced_memory()[1] / MB if p["tracemalloc"] else None
    landed = {"pages": len(manifest.pages), "entries": manifest.entries, "tombstones": manifest.tombstones}
    landed["not_well_formed"] = sum(not pg.well_formed for pg in manifest.pages)
    checks = {k: f"{landed[k]:,} of {v:,}" + ("" if landed[k] == v else " MISMATCH") for k, v in p["expect"].items()}
    run = {"traced_peak_mb": traced, "pages_visited": manifest.pages_visited, "stop_reason": manifest.stop_reason}
    checked = {"landed": landed, "counts_ok": landed == p["expect"], "checks": checks}
    return facts | run | checked | {"finished_at": datetime.now(UTC).isoformat()}


SCAN_ROUNDS = 5


def _child_scan_cost(p: dict[str, Any]) -> dict[str, Any]:
    """scan_page against the cheapest lxml passes that still see every entry (evidence, not rivals):
    wall and CPU seconds, each the best of `SCAN_ROUNDS` rounds (CPU time moves less when other work
    loads the machine)."""
    from placsp_provider.feed.page_scan import scan_page
    from placsp_provider.feed.xml import DELETED_ENTRY_TAG, ENTRY_TAG, iterparse

    files = [Path(f) for f in p["files"]]

    def floor(path: Path, **options: Any) -> None:
        for _, elem in iterparse(str(path), events=("end",), tag=(ENTRY_TAG, DELETED_ENTRY_TAG), **options):
            elem.clear()
            parent = elem.getparent()
            while elem.getprevious() is not None:
                del parent[0]

    for f in files:  # warm the page cache
        f.read_bytes()
    out: dict[str, Any] = {"pages": len(files), "bytes": sum(f.stat().st_size for f in files)}
    passes: dict[str, Callable[[Path], Any]] = {
        "scan_page": scan_page,
        "iterparse_end_tag": floor,
        "iterparse_end_tag_no_blanks": lambda f: floor(f, remove_blank_text=True),
    }
    walls: dict[str, list[float]] = {key: [] for key in passes}
    cpus: dict[str, list[float]] = {key: [] for key in passes}
    # Round-robin, so no pass is favoured by running first or last (a warming CPU, a noisy neighbour).
    for _ in range(SCAN_ROUNDS):
        for key, fn in passes.items():
            c, t = cpu_seconds(), time.perf_counter()
            for f in files:
                fn(f)
            walls[key].append(time.perf_counter() - t)
            cpus[key].append(cpu_seconds() - c)
    for key in passes:
        out[f"{key}_s"], out[f"{key}_cpu_s"] = min(walls[key]), min(cpus[key])
        out[f"{key}_runs_s"] = walls[key]
    return out


def _child_parts(p: dict[str, Any]) -> dict[str, Any]:
    """Extraction's three public calls for each page, each timed around its own call: download, scan,
    land (the first `land` pages; the last one stops the walk and is not landed)."""
    from placsp_provider.bronze.landing import land_atomically
    from placsp_provider.feed.client import ClientConfig, FeedClient
    from placsp_provider.feed.page_scan import scan_page
    from placsp_provider.lake import page_file

    out, timers = Path(p["out"]), dict.fromkeys(_PARTS, 0.0)
    config = ClientConfig(base_url=p["base_url"], max_retries=1, backoff_base=0.1)
    t0 = time.perf_counter()
    with FeedClient(config, p["dataset"]) as client:
        for n, url in enumerate(p["urls"]):
            t = time.perf_counter()
            download = client.download(url, out / f"page-{n:05d}.tmp", what="page")
            t1 = time.perf_counter()
            scan_page(download.path)
            t2 = time.perf_counter()
            if n < p["land"]:
                land_atomically(download.path, page_file(out, p["dataset"], url, download.sha256))
            timers["download"] += t1 - t
            timers["scan"] += t2 - t1
            timers["land"] += time.perf_counter() - t2
    return {"seconds": time.perf_counter() - t0, "timers": timers, "pages_visited": len(p["urls"])}


def _child_reference(p: dict[str, Any]) -> dict[str, Any]:
    import requests

    out = Path(p["out"])
    baseline = peak_rss_mb()
    sizes = []
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    with requests.Session() as session:
        for n, url in enumerate(p["urls"]):
            size = 0
            with session.get(url, stream=True, timeout=(10, 60)) as response:
                response.raise_for_status()
                with (out / f"{n:05d}.atom").open("wb") as fh:
                    for chunk in response.iter_content(1 << 16):
                        size += len(chunk)
                        fh.write(chunk)
            sizes.append(size)
    return _process_facts(t0, cpu0, baseline) | {"pages_visited": len(sizes), "bytes_downloaded": sum(sizes)}


if __name__ == "__main__":
    child_main(globals())
