"""Land every feed page that may hold entries updated in [start - overlap, end) into Bronze.

The live chain is walked from the head feed through `rel="next"` (towards older pages) until
`stop_after_old_pages` consecutive pages whose items are all older than the window: one
out-of-order page (a backdated entry) does not end the walk, and is landed when newer pages follow
it. Every link is checked against the site's URL policy before it is fetched. Whatever part of the
window the chain cannot reach (chain ended, or the page cap was hit) is served from the
monthly/yearly archives, inflated member by member under a total size cap and a ratio cap.
Used by the Airflow operator and the CLI alike.

Bronze never holds a page no manifest lists, however the run ends: the manifest is rewritten after
every landed page (`complete: false`, `stop_reason` saying the run did not finish), so a run killed
outright leaves the list of what it landed; a run that fails writes it with the reason; a run that
ends writes it `complete: true`. A rerun of the interval rewrites it.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from urllib.parse import urljoin

from placsp_provider import settings
from placsp_provider.bronze.landing import land_atomically, run_folder, write_text_atomically
from placsp_provider.bronze.manifest import LandedPage, Manifest
from placsp_provider.datasets import Dataset
from placsp_provider.errors import ConfigError, FeedError, PageGoneError, PageTooLargeError, PlacspError
from placsp_provider.feed.client import Download, FeedClient, redact
from placsp_provider.feed.page_scan import PageScan, scan_page
from placsp_provider.feed.timestamps import isoformat
from placsp_provider.lake import incoming_dir, manifest_path, page_file

log = logging.getLogger(__name__)

_MEMBER_STAMP = re.compile(r"_(\d{8})_(\d{6})(?:_\d+)?\.atom$")


@dataclass(frozen=True)
class ExtractRequest:
    """One dataset, one interval. Validated before any network work."""

    dataset: Dataset
    start: datetime
    end: datetime
    lake: Path
    run_id: str = ""
    overlap: timedelta = timedelta(hours=settings.DEFAULT_OVERLAP_HOURS)
    max_pages: int = settings.DEFAULT_MAX_PAGES
    # Stop the walk only after this many consecutive pages entirely older than the window: the
    # chain is ordered by publication, and one backdated page must not hide the pages after it.
    stop_after_old_pages: int = settings.DEFAULT_STOP_AFTER_OLD_PAGES
    today: date | None = None  # which archives exist depends on it; tests pin it
    source: str = "auto"  # "auto": live chain, then archives for what it cannot reach; "archives"

    def __post_init__(self) -> None:
        for name in ("start", "end"):
            if getattr(self, name).tzinfo is None:
                raise ConfigError(f"{name} must be timezone-aware, got {getattr(self, name)!r}")
        if self.end <= self.start:
            raise ConfigError(f"interval end {self.end} is not after its start {self.start}")
        if self.overlap < timedelta(0):
            raise ConfigError(f"overlap must not be negative, got {self.overlap}")
        if self.source not in ("auto", "archives"):
            raise ConfigError(f"source must be 'auto' or 'archives', got {self.source!r}")
        if self.max_pages < 1:
            raise ConfigError(f"max_pages must be at least 1, got {self.max_pages}")
        if self.stop_after_old_pages < 1:
            raise ConfigError(f"stop_after_old_pages must be at least 1, got {self.stop_after_old_pages}")

    @property
    def window_start(self) -> datetime:
        return self.start - self.overlap


Progress = Callable[[str, int], None]  # (message, bytes of this page) after each page


def extract_interval(client: FeedClient, request: ExtractRequest, progress: Progress | None = None) -> Manifest:
    """Land the pages for one interval and write its manifest; return the manifest."""
    ds = request.dataset
    manifest = Manifest(
        dataset=ds.key,
        syndication_id=ds.syndication_id,
        run_id=request.run_id or f"manual__{uuid.uuid4().hex[:12]}",
        interval_start=isoformat(request.start),
        interval_end=isoformat(request.end),
        window_start=isoformat(request.window_start),
        base_url=redact(client.config.base_url),
    )
    path = manifest_path(request.lake, ds.key, request.start, request.end)
    try:
        with run_folder(incoming_dir(request.lake, ds.key)) as incoming:
            run = _Run(client, request, manifest, progress, incoming, _Checkpoint(path, manifest))
            use_chain = ds.has_live_feed and request.source == "auto"
            reached = run.walk_chain() if use_chain else None
            if not use_chain:
                manifest.stop_reason = "archives requested" if ds.has_live_feed else "archive-only dataset"
                run.from_archives(request.window_start, request.end)
            elif reached is not None and reached > request.window_start:
                # The whole window, not just the uncovered part: a page already landed from the
                # chain has the same bytes in the archive and is recorded once (same file).
                run.from_archives(request.window_start, request.end)
    except BaseException as err:
        # What was landed stays listed: Bronze never holds a page that no manifest names.
        manifest.complete = False
        manifest.stop_reason = f"interrupted: {err}"[:500]
        manifest.extracted_at = isoformat(datetime.now(UTC))
        _keep_listed(manifest, path)
        try:
            _write_manifest(path, manifest.to_json(), ds.key)
        except PlacspError as write_err:  # the disk that failed the run may refuse the manifest too
            if isinstance(err, KeyboardInterrupt | SystemExit):
                raise err from write_err
            first = err if isinstance(err, PlacspError) else _unexpected(ds.key, err)
            cause = write_err.__cause__
            reason = getattr(cause, "strerror", None) or cause or write_err
            raise PlacspError(
                f"{first}; the manifest {path} could not be written either ({reason}): the pages landed "
                "so far are listed by no manifest until the interval is extracted again"
            ) from err
        if isinstance(err, PlacspError | KeyboardInterrupt | SystemExit):
            raise
        raise _unexpected(ds.key, err) from err
    manifest.extracted_at = isoformat(datetime.now(UTC))
    _write_manifest(path, manifest.to_json(), ds.key)
    log.info(
        "dataset %s: landed %d pages (%d new), %d entries, %d tombstones; manifest %s",
        ds.key,
        len(manifest.pages),
        sum(p.newly_landed for p in manifest.pages),
        manifest.entries,
        manifest.tombstones,
        path,
    )
    return manifest


def _unexpected(dataset: str, err: BaseException) -> PlacspError:
    return PlacspError(f"dataset {dataset}: extraction failed unexpectedly: {type(err).__name__}: {err}")


def _write_manifest(path: Path, text: str, dataset: str) -> None:
    """Write the interval's manifest whole or not at all; a disk that refuses it is a named error."""
    try:
        write_text_atomically(path, text)
    except OSError as err:
        raise PlacspError(
            f"dataset {dataset}: stage landing: could not write the manifest {path}: {err.strerror or err}"
        ) from err


def _keep_listed(manifest: Manifest, path: Path) -> None:
    """A failed rerun must not unlist what an earlier run of the interval listed: keep those pages."""
    listed = {p.file for p in manifest.pages}
    manifest.pages.extend(p for p in _listed_before(path) if p.file not in listed)


def _listed_before(path: Path) -> list[LandedPage]:
    """The pages the interval's manifest lists now (none when there is none, or it is unreadable:
    the list of this run is still better than none)."""
    if not path.is_file():
        return []
    try:
        return Manifest.load(path).pages
    except (OSError, ValueError, TypeError):
        return []


class _Checkpoint:
    """The manifest so far, written after every landed page, for a run that dies without a word.

    `complete: false` and a `stop_reason` that says so; the pages an earlier run of the interval
    listed stay listed. Each page is serialised once, so a checkpoint costs one file write of the
    list, not a rebuild of it.
    """

    def __init__(self, path: Path, manifest: Manifest) -> None:
        self.path = path
        self.manifest = manifest
        self.pages: dict[str, str] = {}  # file -> its JSON, this run's pages first, then earlier ones
        self.earlier = {p.file: _page_json(p) for p in _listed_before(path)}

    def add(self, page: LandedPage) -> None:
        self.pages.setdefault(page.file, _page_json(page))
        head = replace(
            self.manifest,
            pages=[],
            complete=False,
            stop_reason=(
                f"interrupted: run {self.manifest.run_id} did not finish (killed, or its machine stopped); "
                f"the pages listed were landed, others of the interval may be missing"
            ),
            extracted_at=isoformat(datetime.now(UTC)),
        )
        listed = [*self.pages.values(), *(j for f, j in self.earlier.items() if f not in self.pages)]
        fields = asdict(head)
        del fields["pages"]
        text = json.dumps(fields, sort_keys=True, ensure_ascii=False)
        _write_manifest(self.path, f'{text[:-1]}, "pages": [{", ".join(listed)}]}}', self.manifest.dataset)


def _page_json(page: LandedPage) -> str:
    return json.dumps(asdict(page), sort_keys=True, ensure_ascii=False)


class _Run:
    def __init__(
        self,
        client: FeedClient,
        request: ExtractRequest,
        manifest: Manifest,
        progress: Progress | None,
        incoming: Path,
        checkpoint: _Checkpoint,
    ):
        self.client = client
        self.req = request
        self.manifest = manifest
        self.progress = progress
        self.bytes_so_far = 0
        # A folder per run: concurrent runs of one dataset never touch each other's temp files.
        self.incoming = incoming
        self.checkpoint = checkpoint

    # -- the live chain ---------------------------------------------------------------------
    def walk_chain(self) -> datetime | None:
        """Walk from the head; return the oldest time the chain reached when it did not cover
        the window (so archives must serve the rest), or None when it did."""
        ds, req = self.req.dataset, self.req
        url: str | None = ds.head_url(self.client.config.base_url)
        seen: set[str] = set()
        oldest_seen: datetime | None = None
        # Pages entirely older than the window, held back until we know whether newer pages follow
        # (then they were out of order and are landed) or the walk ends on them (then they are not).
        held: list[tuple[Download, PageScan, str]] = []
        while url is not None:
            if url in seen:
                raise FeedError(
                    ds.key,
                    redact(url),
                    f'rel="next" loops back to a page already visited in this run '
                    f"(after {len(seen)} pages); the feed chain is broken upstream",
                )
            if len(seen) >= req.max_pages:
                self.manifest.stop_reason = f"page cap of {req.max_pages} reached; rest from archives"
                log.warning("dataset %s: %s", ds.key, self.manifest.stop_reason)
                self._drop(held)
                return oldest_seen or req.end
            seen.add(url)
            try:
                download, scan = self._fetch_page(url)
            except PageGoneError as err:
                if not held:
                    raise
                # The walk is already past the window (the last page was entirely older): the page
                # after it is gone upstream (rotated). Nothing of the window can be there in order;
                # the month's completeness check would still catch it. Said, never silent.
                self._drop(held)
                self.manifest.stop_reason = f"a page entirely older than the window, then the next page is gone ({err})"
                log.warning("dataset %s: %s", ds.key, self.manifest.stop_reason)
                return None
            self.manifest.pages_visited += 1
            if scan.well_formed and not scan.is_feed:
                download.path.unlink(missing_ok=True)
                raise FeedError(ds.key, redact(url), "is well-formed XML but not an Atom <feed>")
            oldest = scan.oldest()
            if oldest is not None:
                oldest_seen = oldest if oldest_seen is None else min(oldest_seen, oldest)
            decision = _decide(scan, req.window_start, req.end)
            if decision == "older":
                held.append((download, scan, url))
                if len(held) >= req.stop_after_old_pages:
                    self._drop(held)
                    self.manifest.stop_reason = (
                        f"{req.stop_after_old_pages} consecutive pages entirely older than the window start "
                        f"{isoformat(req.window_start)}"
                    )
                    return None
            else:
                for old_download, old_scan, old_url in held:
                    log.warning(
                        "dataset %s: %s holds only items older than the window but newer pages follow it "
                        "(out of order, e.g. a backdated entry): landed",
                        ds.key,
                        redact(old_url),
                    )
                    self._land(old_download, old_scan, source="feed", url=old_url)
                held.clear()
                if decision == "land":
                    self._land(download, scan, source="feed", url=url)
                else:
                    download.path.unlink(missing_ok=True)
            href = scan.links.get("next")
            next_url = urljoin(download.final_url, href) if href else None
            if next_url is not None:
                self.client.check_link(next_url, linked_from=url, via='rel="next" link')
            url = next_url
        self._drop(held)
        self.manifest.stop_reason = "end of the live chain"
        return oldest_seen or req.end

    def _fetch_page(self, url: str) -> tuple[Download, PageScan]:
        """Download and scan a page; one that ends early (cut without a Content-Length to tell) is
        downloaded again, up to `max_truncated_retries` times, before it is landed for quarantine."""
        retries = self.client.config.max_truncated_retries
        for attempt in range(retries + 1):
            download = self._fetch(url)
            scan = scan_page(download.path)
            if scan.well_formed or not scan.cut_short or attempt == retries:
                if not scan.well_formed and scan.cut_short and retries:
                    log.warning(
                        "dataset %s: %s still ends early after %d downloads; landed for quarantine",
                        self.req.dataset.key,
                        redact(url),
                        retries + 1,
                    )
                return download, scan
            log.warning(
                "dataset %s: %s ends early (%s); downloading it again (%d of %d)",
                self.req.dataset.key,
                redact(url),
                scan.error,
                attempt + 1,
                retries,
            )
            download.path.unlink(missing_ok=True)
        raise AssertionError("unreachable")

    @staticmethod
    def _drop(held: list[tuple[Download, PageScan, str]]) -> None:
        for download, _scan, _url in held:
            download.path.unlink(missing_ok=True)
        held.clear()

    # -- archives ---------------------------------------------------------------------------
    def from_archives(self, lo: datetime, hi: datetime) -> None:
        ds = self.req.dataset
        today = self.req.today or datetime.now(UTC).date()
        for year, month in _archives_covering(ds, lo, hi, today):
            url = ds.archive_url(self.client.config.base_url, year, month)
            self.manifest.archives.append(redact(url))
            log.info("dataset %s: reading archive %s for %s..%s", ds.key, redact(url), isoformat(lo), isoformat(hi))
            tmp = self.incoming / f"archive-{uuid.uuid4().hex}.zip"
            self.client.download(url, tmp, limit=self.client.config.max_archive_bytes, what="archive")
            try:
                self._land_members(url, tmp, lo, hi)
            finally:
                tmp.unlink(missing_ok=True)

    def _land_members(self, archive_url: str, zip_path: Path, lo: datetime, hi: datetime) -> None:
        ds, config = self.req.dataset, self.client.config
        try:
            archive = zipfile.ZipFile(zip_path)
        except (zipfile.BadZipFile, OSError) as err:
            raise FeedError(ds.key, redact(archive_url), f"is not a readable zip archive ({err})") from err
        budget = InflateBudget(config.max_archive_inflated_bytes, config.max_compression_ratio)
        with archive:
            members = [m for m in archive.infolist() if m.filename.endswith(".atom")]
            wanted = members_for_window(members, lo, hi)
            for n, member in enumerate(wanted, 1):
                url = f"{archive_url}#{member.filename}"
                if member.file_size > config.max_page_bytes:
                    raise PageTooLargeError(
                        ds.key,
                        redact(url),
                        f"archive member is {member.file_size:,} bytes, over max_page_bytes; not landed",
                    )
                tmp = self.incoming / f"member-{uuid.uuid4().hex}.atom"
                download = extract_member(archive, member, tmp, url, config.max_page_bytes, ds.key, budget)
                scan = scan_page(tmp)
                self.manifest.pages_visited += 1
                if _decide(scan, lo, hi) == "land":
                    self._land(download, scan, source="archive", url=url, counter=f"member {n} of {len(wanted)}")
                else:
                    tmp.unlink(missing_ok=True)

    # -- common -----------------------------------------------------------------------------
    def _fetch(self, url: str) -> Download:
        tmp = self.incoming / f"page-{uuid.uuid4().hex}.atom"
        return self.client.download(url, tmp, what="page")

    def _land(self, download: Download, scan: PageScan, *, source: str, url: str, counter: str = "") -> None:
        ds, lake = self.req.dataset, self.req.lake
        name = url.rsplit("#", 1)[-1].rsplit("/", 1)[-1]
        final = page_file(lake, ds.key, name, download.sha256)
        try:
            new = land_atomically(download.path, final)
        except OSError as err:  # a full disk, permissions: the page is not landed, say where and why
            download.path.unlink(missing_ok=True)
            raise PlacspError(
                f"dataset {ds.key}: {redact(url)}: stage landing: could not land the page into {final.parent}: "
                f"{err.strerror or err}; nothing partial was left in Bronze"
            ) from err
        relative = str(final.relative_to(lake))
        if any(p.file == relative for p in self.manifest.pages):
            return  # the same bytes reached twice (live chain and archive): count them once
        page = LandedPage.from_scan(
            scan,
            url=redact(url),
            file=relative,
            size=download.bytes,
            sha256=download.sha256,
            source=source,
            newly_landed=new,
        )
        self.manifest.pages.append(page)
        self.checkpoint.add(page)
        self.bytes_so_far += download.bytes
        where = counter or f"page {len(self.manifest.pages)}"
        message = (
            f"dataset {ds.key}: {where}, {download.bytes / 1e6:.1f} MB "
            f"({self.bytes_so_far / 1e6:.1f} MB so far): {scan.entries} entries, {scan.tombstones} tombstones"
            f"{'' if new else ', already in Bronze'}"
        )
        if not scan.well_formed:
            log.warning("%s; NOT WELL-FORMED, landed for quarantine: %s", message, scan.error)
        else:
            log.info("%s", message)
        if self.progress:
            self.progress(message, download.bytes)


def _decide(scan: PageScan, lo: datetime, hi: datetime) -> str:
    """`land` a page that may hold items in [lo, hi), `skip` one entirely newer, `older` for one
    entirely older. A page that is not well-formed is always landed: we cannot tell."""
    if not scan.well_formed:
        return "land"
    newest, oldest = scan.newest(), scan.oldest()
    if newest is None or oldest is None:
        # No datable items. A page with items but no valid timestamps is landed so Silver can
        # dead-letter them; an empty page holds nothing to land.
        return "land" if scan.items else "skip"
    if newest < lo:
        return "older"
    if oldest >= hi:
        return "skip"
    return "land"


def _archives_covering(ds: Dataset, lo: datetime, hi: datetime, today: date) -> list[tuple[int, int | None]]:
    out: list[tuple[int, int | None]] = []
    year, month = lo.year, lo.month
    last = (hi - timedelta(microseconds=1)).astimezone(UTC)
    while (year, month) <= (last.year, last.month):
        if year >= ds.first_year:
            key = ds.archive_for(year, month, today)
            if key not in out:
                out.append(key)
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return out


def member_stamp(member: zipfile.ZipInfo) -> datetime | None:
    """The publication stamp in an archive member's name (`..._YYYYMMDD_HHMMSS[_n].atom`), or None
    when the name has none, or one that is no real date (such a member is decided on its content)."""
    match = _MEMBER_STAMP.search(member.filename)
    if not match:
        return None
    try:
        # Stamps are the producer's local time (Europe/Madrid, +01/+02): callers widen by a day
        # instead of guessing the offset.
        return datetime.strptime(match.group(1) + match.group(2), "%Y%m%d%H%M%S").replace(tzinfo=UTC)
    except ValueError:
        log.warning("archive member %r: the date in its name is impossible; decided on its content", member.filename)
        return None


def members_for_window(members: list[zipfile.ZipInfo], lo: datetime, hi: datetime) -> list[zipfile.ZipInfo]:
    """Archive members that may hold items in [lo, hi), by the timestamp in their names.

    A page stamped T holds items older than T (and newer than the previous page's stamp), so pages
    stamped before `lo` are skipped, and after `hi` only the first one is kept. Members without a
    (real) stamp in their name are always kept (scanned and decided on content).
    """
    stamps = {id(m): member_stamp(m) for m in members}
    dated = sorted((m for m in members if stamps[id(m)] is not None), key=lambda m: stamps[id(m)])  # type: ignore[arg-type, return-value]
    keep = [m for m in members if stamps[id(m)] is None]
    slack = timedelta(days=1)
    after_hi = 0
    for m in dated:
        t = stamps[id(m)]
        assert t is not None
        if t < lo - slack:
            continue
        if t > hi + slack:
            after_hi += 1
            if after_hi > 1:
                break
        keep.append(m)
    return keep


# A member this small is never a bomb, whatever its ratio (tiny pages of repeated markup compress well).
_RATIO_FLOOR = 1 << 20


@dataclass
class InflateBudget:
    """Caps on what one archive may inflate to: in total, and per member byte in the zip."""

    total: int
    ratio: int
    used: int = 0


def extract_member(
    archive: zipfile.ZipFile,
    member: zipfile.ZipInfo,
    dest: Path,
    url: str,
    limit: int,
    dataset: str,
    budget: InflateBudget | None = None,
) -> Download:
    """Inflate one member to `dest` under the page limit and the archive's budget; a named error
    (and no file left behind) when it is encrypted, unreadable or inflates too much."""
    import hashlib

    if member.flag_bits & 0x1:
        raise FeedError(dataset, redact(url), "archive member is encrypted; it cannot be read, not landed")
    digest = hashlib.sha256()
    size = 0
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        with archive.open(member) as src, dest.open("wb") as out:
            for chunk in iter(lambda: src.read(1 << 16), b""):
                size += len(chunk)
                if size > limit:  # the declared size can lie (zip bomb): count what we inflate
                    raise PageTooLargeError(dataset, redact(url), f"inflates past {limit:,} bytes; not landed")
                if budget is not None:
                    budget.used += len(chunk)
                    if budget.used > budget.total:
                        raise PageTooLargeError(
                            dataset,
                            redact(url),
                            f"the archive inflates past max_archive_inflated_bytes ({budget.total:,} bytes) "
                            "at this member; not landed",
                        )
                    if size > _RATIO_FLOOR and size > budget.ratio * max(member.compress_size, 1):
                        raise PageTooLargeError(
                            dataset,
                            redact(url),
                            f"archive member inflates more than {budget.ratio}:1 ({member.compress_size:,} "
                            f"bytes in the zip, over {size:,} inflated so far): a zip bomb? not landed "
                            "(raise max_compression_ratio if the archive is legitimate)",
                        )
                digest.update(chunk)
                out.write(chunk)
    except (zipfile.BadZipFile, EOFError, RuntimeError, NotImplementedError, zlib.error) as err:
        dest.unlink(missing_ok=True)
        raise FeedError(dataset, redact(url), f"archive member cannot be read ({err})") from err
    except OSError as err:
        dest.unlink(missing_ok=True)
        raise FeedError(dataset, redact(url), f"archive member cannot be inflated to {dest.parent} ({err})") from err
    except BaseException:
        dest.unlink(missing_ok=True)
        raise
    return Download(url, url, dest, size, digest.hexdigest(), "application/atom+xml")
