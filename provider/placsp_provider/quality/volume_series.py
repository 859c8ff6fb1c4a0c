"""The volume check's daily series: entry versions by UTC day of `updated`, as published and landed.

Silver keeps only each entry's newest version, so counting it by day of `updated` loses, on every
past day, the entries updated again later (PLACSP updates most tenders several times), while the
newest day is complete: a history too low, and a normal day that looks like a spike. This series
counts instead every version (entry id, `updated`) the lake ever landed and ingested:

- which pages: the reconciliation table (one row per Bronze file the Silver ingest took in, kept
  once however often a file is ingested again), files with status `reconciled` (a quarantined file's
  entries are dead letters until it reconciles; it is read then);
- what they hold: each page read once with the hardened streaming parser (`bronze.completeness`'s
  reader: the Silver parser's record split for a page that is not well-formed), each version counted
  once however many pages hold it (a changed head page, the overlap of the next run, a month's
  archive land versions again). An entry updated on day 1 and day 5 counts on both days, and a past
  day's count never shrinks when a later version lands;
- which days: only the days an ingest covered whole, i.e. inside `[window_start, interval_end)` of a
  complete manifest whose pages all reconciled and were read. A day no ingest covered is missing
  (Prophet fits around it), never a zero; a covered day without any version is a real 0.

Pages are immutable (content-addressed), so each is read once: the versions seen and the files read
are cached beside the model (`lake.volume_versions_paths`), the parquet first, then the index, so a
run that dies between the two re-reads some pages and counts nothing twice. Deleting both rebuilds
the series from Bronze. Everything is read through `lake_storage`, so an S3 lake works the same.
"""

from __future__ import annotations

import io
import json
import logging
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from placsp_provider.bronze.landing import write_bytes_atomically
from placsp_provider.bronze.manifest import Manifest
from placsp_provider.datasets import get_dataset
from placsp_provider.feed.timestamps import parse_rfc3339
from placsp_provider.lake import manifest_files, relative_path, resolve_lake, volume_versions_paths
from placsp_provider.lake_storage import LakePath, read_parquet
from placsp_provider.quality.engine import open_partition
from placsp_provider.untrusted import printable

SERIES = "entry versions by day of updated, covered days only"  # in the model's settings: a change refits
INDEX_FORMAT = 1
PROGRESS_EVERY = 50  # pages between two progress lines: real pages (~3 MB) read at ~50 MB/s, one every ~3 s
RECONCILED = "reconciled"
log = logging.getLogger(__name__)


@dataclass
class Series:
    """Counts of the covered days, and what building them took (for logs and the benchmark)."""

    counts: dict[date, int]
    versions: int = 0  # distinct entry versions the cache holds
    pages_read: int = 0  # pages read by this call (0: everything came from the cache)
    unreadable: dict[str, str] = field(default_factory=dict)  # file -> reason (read again next time)


def daily_counts(lake: str | LakePath, dataset: str) -> dict[date, int]:
    """Entry versions of `dataset` by UTC day of `updated`, for the days an ingest covered whole."""
    return read_series(lake, dataset).counts


def read_series(lake: str | LakePath, dataset: str) -> Series:
    """The series, reading only the pages ingested since the last call (then updating the cache)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    root = resolve_lake(lake)
    versions_path, index_path = volume_versions_paths(root, dataset)
    files_read, covered = _load_index(index_path, dataset)
    versions = _load_versions(versions_path, dataset)
    if versions is None:  # the versions are gone: every page is read again (the windows stay known)
        versions, files_read = _schema().empty_table(), set()
    known = set(covered)
    ingested = _ingested_files(root, dataset)
    todo = sorted(f for f, status in ingested.items() if status == RECONCILED and f not in files_read)
    ids: list[str] = []
    stamps: list[datetime] = []
    unreadable: dict[str, str] = {}
    for n, file in enumerate(todo, 1):
        if n % PROGRESS_EVERY == 0:  # a first build reads every page ingested so far: minutes on a big lake
            log.info("dataset %s: volume series: page %d of %d read", dataset, n, len(todo))
        try:
            page = [(i, t) for kind, i, t in _page_items(root, file, dataset) if kind == "entry"]
        except Exception as err:  # one page that cannot be read must not stop the series
            unreadable[file] = printable(f"{type(err).__name__}: {err}", 300)
            log.warning(
                "dataset %s: volume series: Bronze file %s unreadable (%s); the days of its manifest stay uncovered",
                dataset,
                file,
                unreadable[file],
            )
            continue
        files_read.add(file)
        ids += [i for i, _ in page]
        stamps += [t for _, t in page]
    if ids:
        new = pa.table({"entry_id": pa.array(ids, pa.string()), "updated": pa.array(stamps, _stamp())})
        versions = pa.concat_tables([versions, new]).group_by(["entry_id", "updated"]).aggregate([])
        versions = versions.select(["entry_id", "updated"]).cast(_schema())
        _write_parquet(versions_path, versions)
    reconciled_and_read = {f for f in files_read if ingested.get(f) == RECONCILED}
    covered |= _newly_covered(root, dataset, known, reconciled_and_read)
    if len(todo) > len(unreadable) or set(covered) != known:
        index = {"format": INDEX_FORMAT, "dataset": dataset, "files": sorted(files_read), "covered": covered}
        write_bytes_atomically(index_path, json.dumps(index, sort_keys=True).encode("utf-8"))
    by_day = pc.value_counts(pc.cast(pc.cast(versions.column("updated"), pa.timestamp("us")), pa.date32()))
    counted = {v["values"].as_py(): int(v["counts"].as_py()) for v in by_day if v["values"].is_valid}
    counts = {d: counted.get(d, 0) for d in sorted(_covered_days(covered.values()))}
    if todo:
        log.info(
            "dataset %s: volume series: %d page(s) read, %d entry versions, %d covered day(s)",
            dataset,
            len(todo) - len(unreadable),
            versions.num_rows,
            len(counts),
        )
    return Series(counts, versions.num_rows, len(todo) - len(unreadable), unreadable)


def _ingested_files(root: LakePath, dataset: str) -> dict[str, str]:
    """Bronze file -> status in the reconciliation table ({} before the first ingest)."""
    source = open_partition(root, "reconciliation", dataset)
    if source is None:
        return {}
    table = source.to_table(columns=["source_file", "status"])
    return dict(zip(table.column("source_file").to_pylist(), table.column("status").to_pylist(), strict=True))


def _page_items(root: LakePath, file: str, dataset: str) -> Any:
    """(kind, id, updated) of a page's records: the completeness check's reader, so one rule decides
    what a page holds (imported here: it loads lxml)."""
    from placsp_provider.bronze.completeness import page_items

    return page_items(root / file, get_dataset(dataset), source=file)


def _newly_covered(root: LakePath, dataset: str, known: set[str], read: set[str]) -> dict[str, list[str]]:
    """Manifests not yet known to cover their window that do now: complete, every page read."""
    out = {}
    for path in manifest_files(root, dataset):
        name = relative_path(root, path)
        if name in known:
            continue  # a covered window stays covered: a later rerun of it only adds pages
        try:
            manifest = Manifest.load(path)
        except (OSError, ValueError, TypeError) as err:
            log.warning(
                "dataset %s: volume series: manifest %s unreadable (%s): its window stays uncovered",
                dataset,
                name,
                printable(err, 300),
            )
            continue
        if manifest.complete and all(p.file in read for p in manifest.pages):
            out[name] = [manifest.window_start, manifest.interval_end]
    return out


def _covered_days(windows: Any) -> set[date]:
    """The UTC days wholly inside the union of the windows."""
    spans = sorted((parse_rfc3339(a), parse_rfc3339(b)) for a, b in windows)
    merged: list[list[datetime]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    days: set[date] = set()
    for start, end in merged:
        first = start.date() if start.time() == datetime.min.time() else start.date() + timedelta(days=1)
        days |= {first + timedelta(days=i) for i in range(max(0, (end.date() - first).days))}
    return days


# -- the cache -------------------------------------------------------------------------------------
def _stamp() -> Any:
    import pyarrow as pa

    return pa.timestamp("us", tz="UTC")


def _schema() -> Any:
    import pyarrow as pa

    return pa.schema([pa.field("entry_id", pa.string()), pa.field("updated", _stamp())])


def _load_index(path: LakePath, dataset: str) -> tuple[set[str], dict[str, list[str]]]:
    if not path.is_file():
        return set(), {}
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if raw.get("format") != INDEX_FORMAT:
            raise ValueError(f"format {raw.get('format')!r}, not {INDEX_FORMAT}")
        return set(raw["files"]), {str(k): [str(a), str(b)] for k, (a, b) in raw["covered"].items()}
    except (OSError, ValueError, KeyError, TypeError) as err:
        log.warning("dataset %s: volume series index %s unreadable (%s): rebuilt from Bronze", dataset, path, err)
        return set(), {}


def _load_versions(path: LakePath, dataset: str) -> Any:
    """The cached versions; None when there are none (never written, or unreadable: rebuilt)."""
    import pyarrow as pa

    if not path.is_file():
        return None
    try:
        return read_parquet(path, _schema())
    except (OSError, pa.ArrowException) as err:
        log.warning("dataset %s: volume series versions %s unreadable (%s): rebuilt from Bronze", dataset, path, err)
        return None


def _write_parquet(path: LakePath, table: Any) -> None:
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd")
    write_bytes_atomically(path, buffer.getvalue())
