"""Prove a month complete against the site's own monthly archive, and land what the daily walks missed.

The daily extraction proves that what it landed reaches Silver; this proves that it landed what the
site published. For one dataset and month:

1. the month's archive (the monthly zip, or the yearly one once the year is closed) is downloaded
   and every entry and tombstone of the month is read from it, member by member, with the hardened
   streaming parser;
2. the same keys are read from the Bronze pages the manifests list (never from Spark): well-formed
   pages by the same parser, others by the Silver parser's record split (a record it cannot read is
   missing for this purpose, so a good copy in the archive supersedes it);
3. every archive member holding a key Bronze lacks is landed and listed in a manifest of its own,
   `<month>.completeness.json`, which the next `placsp ingest` picks up like any other;
4. the recovered pages are read back from Bronze and must hold every missing key
   (`IncompleteMonthError` otherwise);
5. the archive must account for every key of the month that Bronze holds (`ArchiveIncompleteError`).

The report (per day: published, landed by the daily runs, recovered, only in Bronze) is written to
`<lake>/completeness/<dataset>/<YYYY-MM>.json` with `status` `confirmed`, `recovered` or
`archive_incomplete`. A second run changes nothing but the report's time stamp.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from lxml import etree

from placsp_provider.bronze.extract import (
    InflateBudget,
    extract_member,
    landing_error,
    members_for_window,
    open_archive,
)
from placsp_provider.bronze.landing import land_atomically, run_folder, write_text_atomically
from placsp_provider.bronze.manifest import LandedPage, Manifest
from placsp_provider.datasets import Dataset
from placsp_provider.errors import ConfigError, PlacspError
from placsp_provider.feed.client import FeedClient, redact
from placsp_provider.feed.page_scan import iter_items, scan_page
from placsp_provider.feed.prolog import dtd_refusal_file
from placsp_provider.feed.timestamps import isoformat
from placsp_provider.lake import (
    completeness_manifest_path,
    completeness_report_path,
    incoming_dir,
    manifest_files,
    page_file,
    relative_path,
)
from placsp_provider.lake_storage import LakePath, local_copy
from placsp_provider.untrusted import printable

log = logging.getLogger(__name__)

Key = tuple[str, str, str]  # (kind, id, UTC timestamp): one published version of an entry or tombstone
Progress = Callable[[str, int], None]

# How far before the month's end the last page of an archive that ends with the month must reach for
# what Bronze holds after it to count as the month's tail rather than as an archive cut short (see
# `_tail_start`). Measured: real pages span up to ~2.5 days around holidays (the 2019 yearly zip's
# first page, stamped 2019-01-03 03:12, holds items from 2018-12-30 23:18 to 2019-01-02 15:18 UTC).
LAST_PAGE_SPAN = timedelta(days=3)


@dataclass(frozen=True)
class CompletenessRequest:
    """One dataset, one closed month. Validated before any network work."""

    dataset: Dataset
    month: date  # the first day of the month
    lake: LakePath
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
    only_in_bronze: int = 0  # in Bronze, not in the archive: unaccounted (an error) unless after_archive
    after_archive: int = 0  # of those, newer than the last page of an archive that ends with the month


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
    after_archive: int = 0  # the month's tail after the archive's last page: published in the next archive
    unaccounted: int = 0  # in Bronze, not in the archive, and not after it: the archive cannot account for them
    bronze_held: int = 0  # distinct keys of the month in Bronze before the check
    archive_reach: str | None = None  # the newest item of the month the archive's pages read hold
    members_in_archive: int = 0  # `.atom` members in the zip
    members_read: int = 0
    members_recovered: int = 0
    bronze_pages_read: int = 0
    manifest: str | None = None  # the recovery manifest (lake-relative), when anything was recovered
    report: str = ""  # where this report is (lake-relative)
    days: dict[str, DayCounts] = field(default_factory=dict)
    failure: str | None = None  # why the month is not confirmed, when the archive cannot account for it

    @property
    def status(self) -> str:
        """`archive_incomplete` (the check fails), else `confirmed` or `recovered`."""
        if self.unaccounted or self.failure:
            return "archive_incomplete"
        return "confirmed" if self.recovered == 0 else "recovered"

    @property
    def confirmed(self) -> bool:
        """The archive confirms the month: it accounts for all Bronze holds, and held nothing Bronze lacked."""
        return self.status == "confirmed"

    def gap_days(self) -> list[str]:
        return [d for d, c in sorted(self.days.items()) if c.recovered]

    def summary(self) -> dict[str, Any]:
        """The compact figure for XCom and the CLI's --json (days with a gap listed, at most 31)."""
        keys = (
            "dataset month status published landed_before recovered only_in_bronze after_archive unaccounted "
            "members_recovered gap_days manifest report archive base_url"
        )
        gaps = {d: self.days[d].recovered for d in self.gap_days()}
        return {key: gaps if key == "gap_days" else getattr(self, key) for key in keys.split()}

    @classmethod
    def from_json(cls, text: str) -> CompletenessReport:
        """A report as `to_json` wrote it (`status` and `confirmed` are derived again, not read); a
        field this release does not know is left out."""
        data = json.loads(text)
        known, day_fields = {f.name for f in fields(cls)}, {f.name for f in fields(DayCounts)}
        days = {
            day: DayCounts(**{k: v for k, v in counts.items() if k in day_fields})
            for day, counts in (data.get("days") or {}).items()
        }
        return cls(**{k: v for k, v in data.items() if k in known and k != "days"}, days=days)

    def to_json(self) -> str:
        out = asdict(self)
        out["confirmed"] = self.confirmed
        out["status"] = self.status
        return json.dumps(out, indent=2, sort_keys=True, ensure_ascii=False)


class IncompleteMonthError(PlacspError):
    """The archive holds entries Bronze still lacks after recovery: the month cannot be repaired."""


class ArchiveIncompleteError(PlacspError):
    """The month's archive cannot account for the month: Bronze holds versions of the month it lacks.

    What is compared: distinct keys, one per published version (`kind`, `id`, UTC time), of the month
    in Bronze that the archive does not hold (`unaccounted`). Every one of them was read from a page
    the site served, so the site published it; an archive without it is cut short, stale, or not
    the month's, and cannot prove that Bronze lacks nothing. Not counts: a count lets versions the
    archive holds and Bronze lacks offset versions Bronze holds and the archive lacks, and counts one
    version twice when two pages carry it. Not ids: an archive that lost one version of a contract
    folder but kept a later one still lost a publication. An archive that holds no entry and no
    tombstone of the month is never a confirmation either, even against an empty Bronze: nothing
    contradicts, but nothing is proven (every daily run may have failed). The month's tail after
    the archive's last page is the one exception (`_tail_start`).

    Raised after the report (status `archive_incomplete`) is written for audit, and after what the
    archive held that Bronze lacked was landed (content-addressed: landing adds records and changes
    none, so nothing is lost by doing it first).
    """


def check_month(
    client: FeedClient, request: CompletenessRequest, progress: Progress | None = None
) -> CompletenessReport:
    """Compare the month's archive with Bronze, land what is missing, and write the report; raise
    `ArchiveIncompleteError` (after writing it) when the archive cannot account for the month."""
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
        published, reach = _archive_keys(client, request, url, zip_path, incoming, report, progress)
        in_bronze = _bronze_keys(request, report)
        missing = {key: member for key, member in published.items() if key not in in_bronze}
        tail = _tail_start(request, ends_with_month=month is not None or request.month.month == 12, reach=reach)
        unaccounted = _count_days(report, published, in_bronze, missing, tail)
        if missing:
            # Landed even when the archive cannot account for the month: they are the site's own pages
            # of the month, landing only adds (content-addressed), and failing first would leave Bronze
            # knowingly short of records in hand.
            _recover(client, request, url, zip_path, incoming, missing, report)
    report.checked_at = isoformat(datetime.now(UTC))
    path = completeness_report_path(lake, ds.key, request.month)
    report.report = relative_path(lake, path)
    if unaccounted:
        report.failure = _unaccounted_message(report, published, in_bronze, unaccounted)
    elif not published:
        report.failure = _empty_archive_message(report)
    write_text_atomically(path, report.to_json())
    if report.failure:
        raise ArchiveIncompleteError(report.failure)
    if report.after_archive:
        log.warning(
            "dataset %s %s: %d records Bronze holds are newer than the archive's last page (%s): the next "
            "archive publishes them, this check does not cover them",
            ds.key,
            report.month,
            report.after_archive,
            report.archive_reach,
        )
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
) -> tuple[dict[Key, str], datetime | None]:
    """Every key of the month in the archive, with the member that holds it, and how far it reaches:
    the newest item of the month in the members read (None: none)."""
    ds = request.dataset
    out: dict[Key, str] = {}
    reach: datetime | None = None
    with open_archive(ds.key, url, zip_path) as archive:
        pages = [m for m in archive.infolist() if m.filename.endswith(".atom")]
        report.members_in_archive = len(pages)
        members = members_for_window(pages, request.start, request.end)
        budget = InflateBudget(client.config.max_archive_inflated_bytes, client.config.max_compression_ratio)
        for n, member in enumerate(members, 1):
            tmp = incoming / f"member-{uuid.uuid4().hex}.atom"
            member_url = f"{url}#{member.filename}"
            got = extract_member(archive, member, tmp, member_url, client.config.max_page_bytes, ds.key, budget)
            try:
                items = list(page_items(tmp, ds, source=member.filename))
            finally:
                tmp.unlink(missing_ok=True)
            in_month = [item for item in items if request.start <= item[2] < request.end]
            for item in in_month:
                out.setdefault(_key(item), member.filename)
                # The month's own items only: one stamped after the month (a bogus future `updated`)
                # must not make the archive look as if it held the month's last hours.
                reach = item[2] if reach is None else max(reach, item[2])
            report.members_read += 1
            message = f"dataset {ds.key} {report.month}: archive member {n} of {len(members)}, {got.bytes / 1e6:.1f} MB"
            log.info("%s: %d items of the month", message, len(in_month))
            if progress:
                progress(message, got.bytes)
    report.published = len(out)
    report.archive_reach = isoformat(reach) if reach else None
    return out, reach


def _bronze_keys(request: CompletenessRequest, report: CompletenessReport) -> set[Key]:
    """Every key of the month in the Bronze pages the manifests list (each file read once)."""
    ds, lake = request.dataset, request.lake
    files: set[str] = set()
    for manifest_file in manifest_files(lake, ds.key):
        try:
            manifest = Manifest.load(manifest_file)
        except (OSError, ValueError, TypeError) as err:
            raise PlacspError(
                f"dataset {ds.key}: manifest {manifest_file} cannot be read ({printable(err, 500)})"
            ) from err
        files.update(p.file for p in manifest.pages if _may_hold(p, request))
    keys: set[Key] = set()
    for relative in sorted(files):
        path = lake / relative
        if not path.is_file():
            # The file name carries the archive member's or the page's name: the server's text.
            raise PlacspError(
                f"dataset {ds.key}: {printable(relative)} is listed in a manifest but missing from Bronze"
            )
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


Item = tuple[str, str, datetime]  # (kind, id, time) of one record of a page


def _key(item: Item) -> Key:
    return (item[0], item[1], isoformat(item[2]))


def _page_keys(path: LakePath, ds: Dataset, request: CompletenessRequest, *, source: str) -> Iterator[Key]:
    """Keys of the month in one page."""
    for item in page_items(path, ds, source=source):
        if request.start <= item[2] < request.end:
            yield _key(item)


def page_items(lake_file: LakePath, ds: Dataset, *, source: str) -> Iterator[Item]:
    """Every timed record of one page: by the streaming parser (one pass), or the Silver parser's
    record split when the page is not well-formed (only the records it can read count as present)."""
    with local_copy(lake_file) as path:
        yield from _file_items(path, ds, source=source)


def _file_items(path: Path, ds: Dataset, *, source: str) -> Iterator[Item]:
    if dtd_refusal_file(path) is None:
        try:
            items = list(iter_items(path))
        except etree.XMLSyntaxError:
            pass
        else:
            yield from ((kind, item_id, stamp) for kind, item_id, stamp in items if stamp is not None)
            return
    from placsp_provider.parser.page_parser import parse_page  # plain Python, no Spark

    parsed = parse_page(path.read_bytes(), dataset=ds, source_file=source)
    for kind, rows, column in (("entry", parsed.entries, "updated"), ("tombstone", parsed.tombstones, "deleted_at")):
        for row in rows:
            stamp = row.get(column)
            if isinstance(stamp, datetime):
                yield (kind, str(row["entry_id"]), stamp)


def _tail_start(request: CompletenessRequest, *, ends_with_month: bool, reach: datetime | None) -> datetime | None:
    """From when on the month's keys are not this archive's to hold (None: the archive must hold all).

    Archives group pages by the stamp in their names, and a page stamped T holds what was published
    before T: the month's last hours are on the first page stamped in the next month, so an archive
    that ends with the month (a monthly zip, or a yearly one for December) cannot hold them. What
    Bronze holds after the newest item of such an archive is the month's tail (`after_archive`):
    reported and logged, not checked here (it never was). Only when the archive reaches into the
    month's last `LAST_PAGE_SPAN`: one that stops earlier is cut short, and everything Bronze holds
    after it is unaccounted. A yearly archive of any other month must hold the month whole.
    """
    return reach if ends_with_month and reach is not None and reach >= request.end - LAST_PAGE_SPAN else None


def _count_days(
    report: CompletenessReport,
    published: dict[Key, str],
    in_bronze: set[Key],
    missing: dict[Key, str],
    tail: datetime | None,
) -> set[Key]:
    """Fill the per-day counts; return the keys Bronze holds that the archive cannot account for."""
    days: dict[str, DayCounts] = {}
    for key in published:
        day = days.setdefault(key[2][:10], DayCounts())
        day.published += 1
        if key in missing:
            day.recovered += 1
        else:
            day.landed += 1
    unaccounted: set[Key] = set()
    for key in in_bronze:
        if key in published:
            continue
        day = days.setdefault(key[2][:10], DayCounts())
        day.only_in_bronze += 1
        if tail is not None and datetime.fromisoformat(key[2]) >= tail:
            day.after_archive += 1
        else:
            unaccounted.add(key)
    report.days = dict(sorted(days.items()))
    report.landed_before = report.published - len(missing)
    report.bronze_held = len(in_bronze)
    report.only_in_bronze = sum(d.only_in_bronze for d in days.values())
    report.after_archive = sum(d.after_archive for d in days.values())
    report.unaccounted = len(unaccounted)
    return unaccounted


def _unaccounted_message(
    report: CompletenessReport, published: dict[Key, str], in_bronze: set[Key], unaccounted: set[Key]
) -> str:
    """One line: the dataset and month, the archive read and what it held, what Bronze holds, what to do."""
    held, bronze = Counter(k[0] for k in published), Counter(k[0] for k in in_bronze)
    by_day = sorted(Counter(k[2][:10] for k in unaccounted).items())
    more = f" and {len(by_day) - 10} more days" if len(by_day) > 10 else ""
    days = ", ".join(f"{d}: {n}" for d, n in by_day[:10]) + more
    recovered = (
        f"; what the archive held that Bronze lacked was landed first ({_n(report.recovered, 'record')}, "
        f"{_n(report.members_recovered, 'page')}, listed in {report.manifest}: `placsp ingest --dataset "
        f"{report.dataset}` brings them to Silver)"
        if report.recovered
        else ""
    )
    return (
        f"{_not_confirmed(report)} {_n(held['entry'], 'entry')} and {_n(held['tombstone'], 'tombstone')} of "
        f"the month ({_days_covered(published)}), while Bronze held "
        f"{_n(bronze['entry'], 'entry')} and {_n(bronze['tombstone'], 'tombstone')} of it "
        f"({_n(report.bronze_pages_read, 'page')} read), {len(unaccounted)} of them not in the archive (by day: "
        f"{days}){recovered}. Nothing was removed from Bronze. Rerun the check in a few days (the site rebuilds "
        f"its archives); if the archive stays short, report it to the site and keep {report.report} "
        f"(status archive_incomplete)"
    )


def _empty_archive_message(report: CompletenessReport) -> str:
    """The archive holds no entry and no tombstone of the month, and Bronze none either."""
    return (
        f"{_not_confirmed(report)} no entry and no tombstone of the month, and Bronze holds none either "
        f"({_n(report.bronze_pages_read, 'page')} read): nothing proves the month complete. Check that the daily "
        "DAG ran that month and that the site publishes the archive; rerun the check in a few days (the site "
        f"rebuilds its archives) and keep {report.report} (status archive_incomplete)"
    )


def _not_confirmed(report: CompletenessReport) -> str:
    """How both failures start: the dataset and month, the archive, and what of it was read."""
    return (
        f"dataset {report.dataset} {report.month}: the archive {printable(report.archive)} cannot account for the "
        f"month, which is NOT confirmed: read {report.members_read} of its {_n(report.members_in_archive, 'page')} "
        f"(those that may hold {report.month}) and found"
    )


def _n(count: int, noun: str) -> str:
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{count} {noun if count == 1 else plural}"


def _days_covered(published: dict[Key, str]) -> str:
    """`days covered: 1-3, 5, 7-31` (days of the month with a key in the archive), or `no day ...`."""
    days = sorted({int(key[2][8:10]) for key in published})
    if not days:
        return "no day of the month covered"
    spans: list[list[int]] = []
    for d in days:
        if spans and d == spans[-1][1] + 1:
            spans[-1][1] = d
        else:
            spans.append([d, d])
    return "days covered: " + ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


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
    with open_archive(ds.key, url, zip_path) as archive:
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
                raise landing_error(ds.key, member_url, final, err) from err
            rel = relative_path(lake, final)
            # Read back from Bronze, as the next check would: the landed file must hold its keys.
            recovered_keys.update(_page_keys(final, ds, request, source=rel))
            if rel not in listed:
                manifest.pages.append(
                    LandedPage.from_scan(
                        scan,
                        url=redact(member_url),
                        file=rel,
                        size=got.bytes,
                        sha256=got.sha256,
                        source="archive",
                        newly_landed=new,
                    )
                )
                listed.add(rel)
            report.members_recovered += 1
            log.warning(
                "dataset %s %s: recovered %s from the archive (%d items the daily runs missed)",
                ds.key,
                report.month,
                printable(name),
                sum(1 for m in missing.values() if m == name),
            )
    manifest.stop_reason = f"completeness check of {report.month}: pages holding items the daily runs missed"
    manifest.extracted_at = isoformat(datetime.now(UTC))
    write_text_atomically(manifest_file, manifest.to_json())
    report.manifest = relative_path(lake, manifest_file)
    report.recovered = len(missing)
    still = Counter(key[2][:10] for key in missing if key not in recovered_keys)
    if still:
        days = ", ".join(f"{d}: {n}" for d, n in sorted(still.items())[:10])
        raise IncompleteMonthError(
            f"dataset {ds.key} {report.month}: {sum(still.values())} items of the archive are still missing from "
            f"Bronze after recovering {len(wanted)} pages (by day: {days}); see {report.report or 'the report'}"
        )


def _recovery_manifest(
    path: LakePath, request: CompletenessRequest, run_id: str, client: FeedClient, url: str
) -> Manifest:
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
