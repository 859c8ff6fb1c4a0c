"""What the named assertions measure (`type: custom`, `engine: placsp`; docs/data-quality.md).

`freshness`: how far Silver's newest `updated` is behind the newest entry Bronze landed. A landed
page's time is the manifest's `max_updated`, the newest Atom `<updated>` among its entries: the same
clock as Silver's `updated` (the entry's own `<updated>`), so a lake where every landed entry reached
Silver measures 0. The feed's page-level `<updated>` (a page's publication stamp) is later than any
entry it holds, by up to a page's span (about 3 days around holidays: bronze/completeness.py), and
would report that span as lag. Pages none of whose entries reached Silver for a reason the pipeline
recorded (the file quarantined, or every entry a dead letter: its reconciliation row says so) are
left out: the dead-letter gate and the reconciliation rules speak for them.

`rowCountComparison`: per row of a table (per file of `reconciliation`), the sum of the `expected`
count columns against the sum of the `actual` ones; SQL built here, run by the engine's DuckDB.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

from placsp_provider.errors import PlacspError
from placsp_provider.lake import manifest_files
from placsp_provider.lake_storage import LakePath
from placsp_provider.quality.contract import Rule
from placsp_provider.quality.engine import ident
from placsp_provider.untrusted import printable

# Manifests are read a few at a time: on an S3 lake each is one GET, and a dataset has one per day.
MANIFEST_READERS = 8

# Files whose entries never reached Silver, as the reconciliation table records it (the view of the
# checked dataset's partition): quarantined, or every entry a dead letter.
NOT_IN_SILVER_SQL = (
    "SELECT source_file FROM reconciliation "
    "WHERE status = 'quarantined' OR (valid_entries = 0 AND manifest_entries > 0)"
)


@dataclass(frozen=True)
class LandedNewest:
    """The newest entry time Bronze landed for a dataset, and where."""

    updated: datetime | None  # None: no landed page holds an entry that could be in Silver
    file: str | None  # the page (lake-relative) that holds it
    manifests: int  # manifests read
    pages: int  # pages they list (each file once)
    left_out: int  # pages left out: none of their entries reached Silver (reconciliation says why)


def newest_landed(lake: LakePath, dataset: str, not_in_silver: Iterable[str]) -> LandedNewest:
    """Every manifest of `dataset` (as ingest and completeness read them, through `lake_storage`, so
    an s3:// lake works), each page once; the newest `max_updated` of the pages not in `not_in_silver`."""
    from placsp_provider.bronze.manifest import Manifest
    from placsp_provider.feed.timestamps import parse_rfc3339

    paths = manifest_files(lake, dataset)

    def load(path: LakePath) -> Manifest:
        try:
            return Manifest.load(path)
        except (OSError, ValueError, TypeError) as err:
            raise PlacspError(
                f"quality check: dataset {dataset}: manifest {path} cannot be read ({printable(err, 300)})"
            ) from err

    with ThreadPoolExecutor(MANIFEST_READERS) as pool:
        manifests = list(pool.map(load, paths))
    pages = {p.file: p for m in manifests for p in m.pages}
    skip = set(not_in_silver)
    best: tuple[datetime, str] | None = None
    left_out = 0
    for file, page in sorted(pages.items()):
        if file in skip:
            left_out += 1
            continue
        if page.max_updated is None:  # tombstones only, or nothing readable
            continue
        stamp = parse_rfc3339(page.max_updated)
        if best is None or stamp > best[0]:
            best = (stamp, file)
    return LandedNewest(
        updated=best[0] if best else None,
        file=best[1] if best else None,
        manifests=len(paths),
        pages=len(pages),
        left_out=left_out,
    )


def comparison_sql(rule: Rule, view: str) -> str:
    """One row: (rows compared, expected total, actual total, rows that differ)."""
    read, stored, where = _comparison_parts(rule, view)
    return (
        f"SELECT count(*), coalesce(sum({read}), 0), coalesce(sum({stored}), 0), "
        f"count(*) FILTER (WHERE {read} <> {stored}) FROM {view}{where}"
    )


def comparison_rows_sql(rule: Rule, view: str) -> str:
    """The rows whose two sums differ, with both sums, in key order."""
    read, stored, where = _comparison_parts(rule, view)
    per = ident(rule.arguments["per"])
    cond = f"{where} AND" if where else " WHERE"
    return (
        f"SELECT {per}, {read} AS expected_rows, {stored} AS actual_rows, * FROM {view}{cond} "
        f"{read} <> {stored} ORDER BY {per}"
    )


def _comparison_parts(rule: Rule, view: str) -> tuple[str, str, str]:
    args = rule.arguments
    read = "(" + " + ".join(ident(c) for c in args["expected"]) + ")"
    stored = "(" + " + ".join(ident(c) for c in args["actual"]) + ")"
    where = f" WHERE ({args['filter']})" if args.get("filter") else ""
    return read, stored, where
