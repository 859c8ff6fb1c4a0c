"""Prove a month complete against the site's own monthly archive, and land what the daily walks missed.

The daily extraction proves that what it landed reaches Silver; this proves that it landed what the
site published. For one dataset and month:

1. the month's archive (the monthly zip, or the yearly one once the year is closed) is downloaded
   and every entry and tombstone of the month (`id`, `updated` / `ref`, `when`) is read from it with
   the hardened streaming parser, member by member (one inflated page on disk at a time);
2. the same keys are read from what Bronze holds, through the manifests (never from Spark):
   well-formed pages by the same streaming parser, others by the Silver parser's own record split
   (a record it cannot read is missing for this purpose, so a good copy in the archive supersedes it);
3. every archive member holding a key Bronze lacks is landed (content-addressed: the same bytes are
   never landed twice) and listed in a manifest of its own, `<month>.completeness.json`, which the
   next `placsp ingest` (or the DAG's Silver task) picks up like any extraction manifest;
4. the recovered pages are read back from Bronze and must hold every missing key: if not, the month
   cannot be repaired and the check fails, naming the days and counts.

The report (per day: published, landed by the daily runs, recovered, only in Bronze) is written to
`<lake>/completeness/<dataset>/<YYYY-MM>.json`. A second run finds nothing missing and changes nothing
but the report's time stamp.
"""

from __future__ import annotations

import json
import logging
import uuid
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from lxml import etree

from placsp_provider.bronze.extract import InflateBudget, extract_member, members_for_window
from placsp_provider.bronze.landing import land_atomically, run_folder, write_text_atomically
from placsp_provider.bronze.manifest import LandedPage, Manifest
from placsp_provider.datasets import Dataset
from placsp_provider.errors import ConfigError, FeedError, PlacspError
from placsp_provider.feed.client import FeedClient, redact
from placsp_provider.feed.page_scan import iter_items, scan_page
from placsp_provider.feed.prolog import dtd_refusal_file
from placsp_provider.feed.timestamps import isoformat
from placsp_provider.lake import (
    bronze_dir,
    completeness_manifest_path,
    completeness_report_path,
    incoming_dir,
    page_file,
)

log = logging.getLogger(__name__)

Key = tuple[str, str, str]  # (kind, id, UTC timestamp): one published version of an entry or tombstone
Progress = Callable[[str, int], None]


@dataclass(frozen=True)
class CompletenessRequest:
    """One dataset, one closed month. Validated before any network work."""

    dataset: Dataset
    month: date  # the first day of the month
    lake: Path
    run_id: str = ""
    today: date | None = None  # which archive holds the month depends on it; tests pin it

    def __post_init__(self) -> None:
        if self.month.day != 1:
            raise ConfigError(f"month must be the first day of a month, got {self.month}")
        today = self.today or datetime.now(UTC).date()
        if (self.month.year, self.month.month) >= (today.year, today.month):
            raise ConfigError(
                f"month {self.month:%Y-%m} has not ended (today is {today}): its archive is not complete yet"
            )
        if self.month.year < self.dataset.first_year:
            raise ConfigError(
                f"dataset {self.dataset.key} starts in {self.dataset.first_year}; there is no archive for "
                f"{self.month:%Y-%m}"
            )

    @property
    def start(self) -> datetime:
        return datetime(self.month.year, self.month.month, 1, tzinfo=UTC)

    @property
    def end(self) -> datetime:
        year, month = (self.month.year + 1, 1) if self.month.month == 12 else (self.month.year, self.month.month + 1)
        return datetime(year, month, 1, tzinfo=UTC)


def parse_month(text: str) -> date:
    """`YYYY-MM` as the first day of that month; a ConfigError naming the value otherwise."""
    try:
        return datetime.strptime(str(text).strip(), "%Y-%m").date()
    except ValueError:
        raise ConfigError(f"month must be YYYY-MM, got {text!r}") from None


@dataclass
class DayCounts:
    published: int = 0  # entries + tombstones of the day in the archive
    landed: int = 0  # of those, already in Bronze before this check
    recovered: int = 0  # of those, landed now from the archive
    only_in_bronze: int = 0  # in Bronze, not in the archive (reported, not an error)


@dataclass
class CompletenessReport:
    dataset: str
    month: str
    run_id: str
    archive: str  # redacted URL
    base_url: str = ""  # the site, redacted
    checked_at: str = ""
    published: int = 0
    landed_before: int = 0
    recovered: int = 0
    only_in_bronze: int = 0
    members_read: int = 0
    members_recovered: int = 0
    bronze_pages_read: int = 0
    manifest: str | None = None  # the recovery manifest (lake-relative), when anything was recovered
    report: str = ""  # where this report is (lake-relative)
    days: dict[str, DayCounts] = field(default_factory=dict)

    @property
    def confirmed(self) -> bool:
        """The archive confirms the month: nothing it published was missing from Bronze."""
        return self.recovered == 0

    def gap_days(self) -> list[str]:
        return [d for d, c in sorted(self.days.items()) if c.recovered]

    def summary(self) -> dict[str, Any]:
        """The compact figure for XCom and the CLI's --json (days with a gap listed, at most 31)."""
        return {
            "dataset": self.dataset,
            "month": self.month,
            "status": "confirmed" if self.confirmed else "recovered",
            "published": self.published,
            "landed_before": self.landed_before,
            "recovered": self.recovered,
            "only_in_bronze": self.only_in_bronze,
            "members_recovered": self.members_recovered,
            "gap_days": {d: self.days[d].recovered for d in self.gap_days()},
            "manifest": self.manifest,
            "report": self.report,
            "archive": self.archive,
            "base_url": self.base_url,
        }

    def to_json(self) -> str:
        out = asdict(self)
        out["confirmed"] = self.confirmed
        return json.dumps(out, indent=2, sort_keys=True, ensure_ascii=False)


class IncompleteMonthError(PlacspError):
    """The archive holds entries Bronze still lacks after recovery: the month cannot be repaired."""


def check_month(
    client: FeedClient, request: CompletenessRequest, progress: Progress | None = None
) -> CompletenessReport:
    """Compare the month's archive with Bronze, land what is missing, and write the report."""
    ds, lake = request.dataset, request.lake
    year, month = ds.archive_for(request.month.year, request.month.month, request.today or datetime.now(UTC).date())
    url = ds.archive_url(client.config.base_url, year, month)
    report = CompletenessReport(
        dataset=ds.key,
        month=f"{request.month:%Y-%m}",
        run_id=request.run_id or f"completeness__{uuid.uuid4().hex[:12]}",
        archive=redact(url),
        base_url=redact(client.config.base_url),
    )
    with run_folder(incoming_dir(lake, ds.key), prefix="completeness-") as incoming:
        zip_path = incoming / "archive.zip"
        log.info("dataset %s: reading archive %s for %s", ds.key, redact(url), report.month)
        client.download(url, zip_path, limit=client.config.max_archive_bytes, what="archive")
        published = _archive_keys(client, request, url, zip_path, incoming, report, progress)
        in_bronze = _bronze_keys(request, report)
        missing = {key: member for key, member in published.items() if key not in in_bronze}
        _count_days(report, published, in_bronze, missing)
        if missing:
            _recover(client, request, url, zip_path, incoming, missing, report)
    report.checked_at = isoformat(datetime.now(UTC))
    path = completeness_report_path(lake, ds.key, request.month)
    report.report = str(path.relative_to(lake))
    write_text_atomically(path, report.to_json())
    log.info(
        "dataset %s %s: %d published, %d already in Bronze, %d recovered from the archive (%d pages)%s",
        ds.key,
        report.month,
        report.published,
        report.landed_before,
        report.recovered,
        report.members_recovered,
        f"; gaps on {', '.join(report.gap_days()[:10])}" if report.recovered else "",
    )
    return report


# -- reading ------------------------------------------------------------------------------------
def _archive_keys(
    client: FeedClient,
    request: CompletenessRequest,
    url: str,
    zip_path: Path,
    incoming: Path,
    report: CompletenessReport,
    progress: Progress | None,
) -> dict[Key, str]:
    """Every key of the month in the archive, with the member that holds it."""
    ds = request.dataset
    out: dict[Key, str] = {}
    with _open_zip(ds, url, zip_path) as archive:
        members = members_for_window(
            [m for m in archive.infolist() if m.filename.endswith(".atom")], request.start, request.end
        )
        budget = InflateBudget(client.config.max_archive_inflated_bytes, client.config.max_compression_ratio)
        for n, member in enumerate(members, 1):
            tmp = incoming / f"member-{uuid.uuid4().hex}.atom"
            member_url = f"{url}#{member.filename}"
            got = extract_member(archive, member, tmp, member_url, client.config.max_page_bytes, ds.key, budget)
            try:
                keys = list(_page_keys(tmp, ds, request, source=member.filename))
            finally:
                tmp.unlink(missing_ok=True)
            for key in keys:
                out.setdefault(key, member.filename)
            report.members_read += 1
            message = f"dataset {ds.key} {report.month}: archive member {n} of {len(members)}, {got.bytes / 1e6:.1f} MB"
            log.info("%s: %d items of the month", message, len(keys))
            if progress:
                progress(message, got.bytes)
    report.published = len(out)
    return out


def _bronze_keys(request: CompletenessRequest, report: CompletenessReport) -> set[Key]:
    """Every key of the month in the Bronze pages the manifests list (each file read once)."""
    ds, lake = request.dataset, request.lake
    files: set[str] = set()
    for manifest_file in sorted((bronze_dir(lake, ds.key) / "manifests").glob("*.json")):
        try:
            manifest = Manifest.load(manifest_file)
        except (OSError, ValueError, TypeError) as err:
            raise PlacspError(f"dataset {ds.key}: manifest {manifest_file} cannot be read ({err})") from err
        files.update(p.file for p in manifest.pages if _may_hold(p, request))
    keys: set[Key] = set()
    for relative in sorted(files):
        path = lake / relative
        if not path.is_file():
            raise PlacspError(f"dataset {ds.key}: {relative} is listed in a manifest but missing from Bronze")
        keys.update(_page_keys(path, ds, request, source=relative))
        report.bronze_pages_read += 1
    return keys


def _may_hold(page: LandedPage, request: CompletenessRequest) -> bool:
    if not page.well_formed:
        return True
    stamps = [s for s in (page.min_updated, page.min_deleted, page.max_updated, page.max_deleted) if s]
    if not stamps:
        return False
    lo, hi = isoformat(request.start), isoformat(request.end)
    return min(stamps) < hi and max(stamps) >= lo


def _page_keys(path: Path, ds: Dataset, request: CompletenessRequest, *, source: str) -> Iterator[Key]:
    """Keys of the month in one page: by the streaming parser (one pass), or the Silver parser's
    record split when the page is not well-formed (only the records it can read count as present)."""
    lo, hi = request.start, request.end
    if dtd_refusal_file(path) is None:
        try:
            items = list(iter_items(path))
        except etree.XMLSyntaxError:
            items = None
        if items is not None:
            for kind, item_id, stamp in items:
                if stamp is not None and lo <= stamp < hi:
                    yield (kind, item_id, isoformat(stamp))
            return
    from placsp_provider.parser.page_parser import parse_page  # plain Python, no Spark

    parsed = parse_page(path.read_bytes(), dataset=ds, source_file=source)
    for kind, rows, column in (("entry", parsed.entries, "updated"), ("tombstone", parsed.tombstones, "deleted_at")):
        for row in rows:
            stamp = row.get(column)
            if isinstance(stamp, datetime) and lo <= stamp < hi:
                yield (kind, str(row["entry_id"]), isoformat(stamp))


def _count_days(
    report: CompletenessReport,
    published: dict[Key, str],
    in_bronze: set[Key],
    missing: dict[Key, str],
) -> None:
    days: dict[str, DayCounts] = {}
    for key in published:
        day = days.setdefault(key[2][:10], DayCounts())
        day.published += 1
        if key in missing:
            day.recovered += 1
        else:
            day.landed += 1
    extra = Counter(key[2][:10] for key in in_bronze if key not in published)
    for day_text, n in extra.items():
        days.setdefault(day_text, DayCounts()).only_in_bronze += n
    report.days = dict(sorted(days.items()))
    report.landed_before = report.published - len(missing)
    report.only_in_bronze = sum(extra.values())


# -- repairing ----------------------------------------------------------------------------------
def _recover(
    client: FeedClient,
    request: CompletenessRequest,
    url: str,
    zip_path: Path,
    incoming: Path,
    missing: dict[Key, str],
    report: CompletenessReport,
) -> None:
    """Land every member holding a missing key, list them in the month's recovery manifest, and read
    them back: each missing key must now be in Bronze."""
    ds, lake = request.dataset, request.lake
    wanted = sorted(set(missing.values()))
    manifest_file = completeness_manifest_path(lake, ds.key, request.month)
    manifest = _recovery_manifest(manifest_file, request, report.run_id, client, url)
    listed = {p.file for p in manifest.pages}
    recovered_keys: set[Key] = set()
    budget = InflateBudget(client.config.max_archive_inflated_bytes, client.config.max_compression_ratio)
    with _open_zip(ds, url, zip_path) as archive:
        for name in wanted:
            member = archive.getinfo(name)
            member_url = f"{url}#{name}"
            tmp = incoming / f"recover-{uuid.uuid4().hex}.atom"
            got = extract_member(archive, member, tmp, member_url, client.config.max_page_bytes, ds.key, budget)
            scan = scan_page(tmp)
            final = page_file(lake, ds.key, name, got.sha256)
            try:
                new = land_atomically(tmp, final)
            except OSError as err:
                tmp.unlink(missing_ok=True)
                raise PlacspError(
                    f"dataset {ds.key}: {redact(member_url)}: could not land the page into {final.parent}: "
                    f"{err.strerror or err}"
                ) from err
            relative = str(final.relative_to(lake))
            # Read back from Bronze, as the next check would: the landed file must hold its keys.
            recovered_keys.update(_page_keys(final, ds, request, source=relative))
            if relative not in listed:
                manifest.pages.append(
                    LandedPage.from_scan(
                        scan,
                        url=redact(member_url),
                        file=relative,
                        size=got.bytes,
                        sha256=got.sha256,
                        source="archive",
                        newly_landed=new,
                    )
                )
                listed.add(relative)
            report.members_recovered += 1
            log.warning(
                "dataset %s %s: recovered %s from the archive (%d items the daily runs missed)",
                ds.key,
                report.month,
                name,
                sum(1 for m in missing.values() if m == name),
            )
    manifest.stop_reason = f"completeness check of {report.month}: pages holding items the daily runs missed"
    manifest.extracted_at = isoformat(datetime.now(UTC))
    write_text_atomically(manifest_file, manifest.to_json())
    report.manifest = str(manifest_file.relative_to(lake))
    report.recovered = len(missing)
    still = Counter(key[2][:10] for key in missing if key not in recovered_keys)
    if still:
        days = ", ".join(f"{d}: {n}" for d, n in sorted(still.items())[:10])
        raise IncompleteMonthError(
            f"dataset {ds.key} {report.month}: {sum(still.values())} items of the archive are still missing from "
            f"Bronze after recovering {len(wanted)} pages (by day: {days}); see {report.report or 'the report'}"
        )


def _recovery_manifest(path: Path, request: CompletenessRequest, run_id: str, client: FeedClient, url: str) -> Manifest:
    if path.is_file():
        return Manifest.load(path)
    ds = request.dataset
    return Manifest(
        dataset=ds.key,
        syndication_id=ds.syndication_id,
        run_id=run_id,
        interval_start=isoformat(request.start),
        interval_end=isoformat(request.end),
        window_start=isoformat(request.start),
        base_url=redact(client.config.base_url),
        archives=[redact(url)],
    )


def _open_zip(ds: Dataset, url: str, path: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as err:
        raise FeedError(ds.key, redact(url), f"is not a readable zip archive ({err})") from err
