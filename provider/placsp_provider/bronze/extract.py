"""Land every feed page that may hold entries updated in [start - overlap, end) into Bronze.

The live chain is walked from the head feed through `rel="next"` (towards older pages) until
`stop_after_old_pages` consecutive pages whose items are all older than the window: one
out-of-order page (a backdated entry) does not end the walk, and is landed when newer pages follow
it. A link back to a page already walked (`page_address`) ends the walk as a broken chain. Whatever
part of the window the chain cannot reach is served from the monthly/yearly archives, inflated
member by member under a total size cap and a ratio cap.

Bronze never holds a page no manifest lists, however the run ends: a landed page waits in the run's
`_incoming` folder until a checkpoint (`_Checkpoint`) renames it into `pages/` and rewrites the
manifest listing it (`complete: false`). A run killed outright leaves the manifest of its last
checkpoint; the pages still waiting go with its `_incoming` folder, and the rerun lands them. A
run that fails writes the manifest with the reason; a run that ends writes it `complete: true`.

Text the server controls reaches logs, exceptions and progress messages only escaped: URLs through
`redact`, other text (a member's name, a parser's message, a wrapped error) through `printable`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
import uuid
import zipfile
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

from placsp_provider import settings
from placsp_provider.bronze.landing import land_atomically, make_durable, run_folder, write_text_atomically
from placsp_provider.bronze.manifest import LandedPage, Manifest
from placsp_provider.datasets import Dataset
from placsp_provider.errors import ConfigError, FeedError, PageGoneError, PageTooLargeError, PlacspError
from placsp_provider.feed.client import Download, FeedClient, redact
from placsp_provider.feed.page_scan import PageScan, scan_page
from placsp_provider.feed.timestamps import isoformat
from placsp_provider.feed.url_policy import origin_of
from placsp_provider.lake import incoming_dir, manifest_path, page_file, relative_path
from placsp_provider.lake_storage import LakePath
from placsp_provider.untrusted import printable

log = logging.getLogger(__name__)

_MEMBER_STAMP = re.compile(r"_(\d{8})_(\d{6})(?:_\d+)?\.atom$")

# A checkpoint rewrites the whole manifest (about 600 bytes a page): bounded by time for slow
# chains, by count for archives that land thousands of members a minute.
CHECKPOINT_SECONDS = 30.0
CHECKPOINT_PAGES = 1000


@dataclass(frozen=True)
class ExtractRequest:
    """One dataset, one interval. Validated before any network work."""

    dataset: Dataset
    start: datetime
    end: datetime
    lake: LakePath
    run_id: str = ""
    overlap: timedelta = timedelta(hours=settings.DEFAULT_OVERLAP_HOURS)
    max_pages: int = settings.DEFAULT_MAX_PAGES
    # Stop the walk only after this many consecutive pages entirely older than the window: the
    # chain is ordered by publication, and one backdated page must not hide the pages after it.
    stop_after_old_pages: int = settings.DEFAULT_STOP_AFTER_OLD_PAGES
    today: date | None = None  # which archives exist depends on it; tests pin it
    source: str = "auto"  # "auto": live chain, then archives for what it cannot reach; "archives"
    # Landed pages enter Bronze, listed by the manifest, at least this often (whichever comes first).
    checkpoint_seconds: float = CHECKPOINT_SECONDS
    checkpoint_pages: int = CHECKPOINT_PAGES

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
        if self.checkpoint_pages < 1 or not self.checkpoint_seconds >= 0:
            raise ConfigError(
                f"checkpoint_pages must be at least 1 and checkpoint_seconds not negative, got "
                f"{self.checkpoint_pages} and {self.checkpoint_seconds}"
            )

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
            checkpoint = _Checkpoint(path, manifest, request)
            try:
                _Run(client, request, manifest, progress, incoming, checkpoint).extract()
            except BaseException:
                # Inside the run's folder still: the pages waiting there are moved into Bronze, so
                # the failure manifest below lists them.
                checkpoint.publish_before_failing()
                raise
            checkpoint.publish()
    except BaseException as err:
        # What was landed stays listed: Bronze never holds a page that no manifest names.
        manifest.complete = False
        manifest.stop_reason = printable(f"interrupted: {err}", 500)
        manifest.extracted_at = isoformat(datetime.now(UTC))
        listed = {p.file for p in manifest.pages}  # and what an earlier run of the interval listed
        manifest.pages.extend(p for p in _listed_before(path) if p.file not in listed)
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
    return PlacspError(f"dataset {dataset}: extraction failed unexpectedly: {type(err).__name__}: {printable(err)}")


def _write_manifest(path: LakePath, text: str, dataset: str) -> None:
    """Write the interval's manifest whole or not at all; a disk that refuses it is a named error."""
    try:
        write_text_atomically(path, text)
    except OSError as err:
        raise PlacspError(
            f"dataset {dataset}: stage landing: could not write the manifest {path}: {err.strerror or err}"
        ) from err


def _listed_before(path: LakePath) -> list[LandedPage]:
    """The pages the interval's manifest lists now (none when there is none, or it is unreadable:
    the list of this run is still better than none)."""
    try:
        return Manifest.load(path).pages
    except (OSError, ValueError, TypeError):
        return []


# -- URLs as the walk and Bronze see them --------------------------------------------------------
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def page_address(url: str) -> str:
    """The page `url` names, spelled one way: what the walk compares to find a loop, and what a feed
    page's Bronze name is taken from (`page_name`).

    RFC 3986's syntax- and scheme-based normalisation (6.2.2, 6.2.3; the path keeps its case), with
    the query and the fragment dropped. PLACSP's own links carry neither, so a chain whose links
    differ only there (`p2.atom?x=1`, `?x=2`, ...) is a loop, refused by name at once instead of
    walked to the page cap with a query in every Bronze file name.
    """
    parts = urlsplit(url)
    origin = origin_of(url)
    if origin is None:  # never fetched: the URL policy refuses it first; still one spelling
        return f"{parts.scheme.lower()}://{parts.netloc.lower()}{_canonical_path(parts.path)}"
    host = f"[{origin.host}]" if ":" in origin.host else origin.host
    port = "" if origin.port == {"http": 80, "https": 443}.get(origin.scheme) else f":{origin.port}"
    return f"{origin.scheme}://{host}{port}{_canonical_path(parts.path)}"


def page_name(url: str) -> str:
    """The name a feed page is published under: the last segment of its address (no query)."""
    return page_address(url).rsplit("/", 1)[-1]


def _canonical_path(path: str) -> str:
    decoded = _ESCAPE.sub(lambda m: chr(int(m[1], 16)) if chr(int(m[1], 16)) in _UNRESERVED else m[0].upper(), path)
    kept: list[str] = []
    segments = decoded.split("/")
    for segment in segments:
        if segment == "..":
            if len(kept) > 1:
                kept.pop()
        elif segment != ".":
            kept.append(segment)
    if segments[-1] in (".", ".."):  # `/a/b/..` names the folder `/a/`
        kept.append("")
    return "/".join(kept) or "/"


# -- checkpoints ---------------------------------------------------------------------------------
@dataclass
class _Waiting:
    """A landed page not in Bronze yet: whole and flushed in the run's folder, until the checkpoint."""

    page: LandedPage
    tmp: Path
    final: LakePath
    url: str


class _Checkpoint:
    """Moves the landed pages into Bronze in batches, each followed at once by the manifest listing it.

    Checkpoints come after the first page (an operator sees the run at once), then every
    `checkpoint_seconds` or `checkpoint_pages` pages, whichever is first, before each archive
    download and before the run raises: each rewrite lists every page so far, so one per page grew
    quadratically (issue 31, F6). Each page is serialised once, and the pages an earlier run of the
    interval listed stay listed.
    """

    def __init__(self, path: LakePath, manifest: Manifest, request: ExtractRequest) -> None:
        self.path = path
        self.manifest = manifest
        self.every_seconds = request.checkpoint_seconds
        self.every_pages = request.checkpoint_pages
        self.waiting: deque[_Waiting] = deque()
        self.last: float | None = None  # time.monotonic() of the last checkpoint
        self.pages: dict[str, str] = {}  # file -> its JSON, this run's pages first, then earlier ones
        self.earlier = {p.file: _page_json(p) for p in _listed_before(path)}

    def add(self, waiting: _Waiting) -> None:
        self.waiting.append(waiting)
        if (
            self.last is None
            or len(self.waiting) >= self.every_pages
            or time.monotonic() - self.last >= self.every_seconds
        ):
            self.write()

    def flush(self) -> None:
        """A checkpoint now, when pages are waiting (before a step that can take minutes)."""
        if self.waiting:
            self.write()

    def write(self) -> None:
        """Move the waiting pages into Bronze, then rewrite the manifest that lists them."""
        self.publish()
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
        self.last = time.monotonic()

    def publish(self) -> None:
        """Rename the waiting pages into Bronze (flushed when they were landed: renames only, so the
        moment between a batch's renames and its manifest is short) and add them to the manifest."""
        while self.waiting:
            page = self.waiting[0]
            try:
                page.page.newly_landed = land_atomically(page.tmp, page.final, synced=True)
            except OSError as err:  # a full disk, permissions: the page is not landed, say where and why
                raise landing_error(self.manifest.dataset, page.url, page.final, err) from err
            self.waiting.popleft()
            self.manifest.pages.append(page.page)
            self.pages.setdefault(page.page.file, _page_json(page.page))

    def publish_before_failing(self) -> None:
        """The run is failing: move what it landed into Bronze, so its manifest lists it. A page that
        cannot be moved stays out, with the ones after it (its rerun lands them); the run's own error
        is the one raised."""
        try:
            self.publish()
        except PlacspError as err:
            log.warning("%s; %d landed page(s) left out of Bronze with it", err, len(self.waiting))


def _page_json(page: LandedPage) -> str:
    return json.dumps(asdict(page), sort_keys=True, ensure_ascii=False)


def landing_error(dataset: str, url: str, final: LakePath, err: OSError) -> PlacspError:
    return PlacspError(
        f"dataset {dataset}: {redact(url)}: stage landing: could not land the page into {final.parent}: "
        f"{err.strerror or err}; nothing partial was left in Bronze"
    )


@dataclass
class _Run:
    client: FeedClient
    req: ExtractRequest
    manifest: Manifest
    progress: Progress | None
    # A folder per run: concurrent runs of one dataset never touch each other's temp files.
    incoming: Path
    checkpoint: _Checkpoint
    bytes_so_far: int = 0
    landed: set[str] = field(default_factory=set)  # lake-relative files landed by this run (in Bronze or waiting)

    def extract(self) -> None:
        ds, request = self.req.dataset, self.req
        use_chain = ds.has_live_feed and request.source == "auto"
        if not use_chain:
            self.manifest.stop_reason = "archives requested" if ds.has_live_feed else "archive-only dataset"
        reached = self.walk_chain() if use_chain else None
        if not use_chain or (reached is not None and reached > request.window_start):
            # The whole window, not just the uncovered part: a page already landed from the
            # chain has the same bytes in the archive and is recorded once (same file).
            self.from_archives(request.window_start, request.end)

    # -- the live chain ---------------------------------------------------------------------
    def walk_chain(self) -> datetime | None:
        """Walk from the head; return the oldest time the chain reached when it did not cover
        the window (so archives must serve the rest), or None when it did."""
        ds, req = self.req.dataset, self.req
        url: str | None = ds.head_url(self.client.config.base_url)
        walked: dict[str, tuple[int, str]] = {}  # page_address -> (page number, the URL it was fetched as)
        oldest_seen: datetime | None = None
        # Pages entirely older than the window, held back until we know whether newer pages follow
        # (then they were out of order and are landed) or the walk ends on them (then they are not).
        held: list[tuple[Download, PageScan, str]] = []
        while url is not None:
            address = page_address(url)
            if address in walked:
                number, first = walked[address]
                raise FeedError(
                    ds.key,
                    redact(url),
                    f'rel="next" loops back to page {number} of this run ({redact(first)}) after {len(walked)} '
                    "pages: links are compared without their query string and fragment, which PLACSP's own "
                    "links never carry; the feed chain is broken upstream",
                )
            if len(walked) >= req.max_pages:
                self.manifest.stop_reason = f"page cap of {req.max_pages} reached; rest from archives"
                log.warning("dataset %s: %s", ds.key, self.manifest.stop_reason)
                self._drop(held)
                return oldest_seen or req.end
            walked[address] = (len(walked) + 1, url)
            try:
                download, scan = self._fetch_page(url)
            except PageGoneError as err:
                if not held:
                    raise
                # The walk is already past the window (the last page was entirely older): the page
                # after it is gone upstream (rotated). Nothing of the window can be there in order;
                # the month's completeness check would still catch it. Said, never silent.
                self._drop(held)
                self.manifest.stop_reason = printable(
                    f"a page entirely older than the window, then the next page is gone ({err})"
                )
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
                    self._land(old_download, old_scan, source="feed", url=old_url, name=page_name(old_url))
                held.clear()
                if decision == "land":
                    self._land(download, scan, source="feed", url=url, name=page_name(url))
                else:
                    download.path.unlink(missing_ok=True)
            href = scan.links.get("next")
            via = 'rel="next" link'
            url = self.client.follow_link(download.final_url, href, linked_from=url, via=via) if href else None
        self._drop(held)
        self.manifest.stop_reason = "end of the live chain"
        return oldest_seen or req.end

    def _fetch_page(self, url: str) -> tuple[Download, PageScan]:
        """Download and scan a page; one that ends early (cut without a Content-Length to tell) is
        downloaded again, up to `max_truncated_retries` times, before it is landed for quarantine."""
        retries = self.client.config.max_truncated_retries
        for attempt in range(retries + 1):
            download = self.client.download(url, self.incoming / f"page-{uuid.uuid4().hex}.atom", what="page")
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
                printable(scan.error),
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
            # A big archive downloads for minutes: what is landed already does not wait that long.
            self.checkpoint.flush()
            log.info("dataset %s: reading archive %s for %s..%s", ds.key, redact(url), isoformat(lo), isoformat(hi))
            tmp = self.incoming / f"archive-{uuid.uuid4().hex}.zip"
            self.client.download(url, tmp, limit=self.client.config.max_archive_bytes, what="archive")
            try:
                self._land_members(url, tmp, lo, hi)
            finally:
                tmp.unlink(missing_ok=True)

    def _land_members(self, archive_url: str, zip_path: Path, lo: datetime, hi: datetime) -> None:
        ds, config = self.req.dataset, self.client.config
        budget = InflateBudget(config.max_archive_inflated_bytes, config.max_compression_ratio)
        with open_archive(ds.key, archive_url, zip_path) as archive:
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
                    self._land(
                        download,
                        scan,
                        source="archive",
                        url=url,
                        name=member.filename,
                        counter=f"member {n} of {len(wanted)}",
                    )
                else:
                    tmp.unlink(missing_ok=True)

    # -- common -----------------------------------------------------------------------------
    def _land(self, download: Download, scan: PageScan, *, source: str, url: str, name: str, counter: str = "") -> None:
        """Land a page: flushed to disk and listed now, moved into Bronze at the next checkpoint."""
        ds, lake = self.req.dataset, self.req.lake
        final = page_file(lake, ds.key, name, download.sha256)
        rel = relative_path(lake, final)
        if rel in self.landed:
            download.path.unlink(missing_ok=True)
            return  # the same bytes reached twice (live chain and archive): count them once
        try:
            make_durable(download.path)
        except OSError as err:
            download.path.unlink(missing_ok=True)
            raise landing_error(ds.key, url, final, err) from err
        new = not final.exists()  # what the message says; the checkpoint's rename decides the manifest's
        page = LandedPage.from_scan(
            scan,
            url=redact(url),
            file=rel,
            size=download.bytes,
            sha256=download.sha256,
            source=source,
            newly_landed=new,
        )
        self.landed.add(rel)
        self.bytes_so_far += download.bytes
        where = counter or f"page {len(self.landed)}"
        message = (
            f"dataset {ds.key}: {where}, {download.bytes / 1e6:.1f} MB "
            f"({self.bytes_so_far / 1e6:.1f} MB so far): {scan.entries} entries, {scan.tombstones} tombstones"
            f"{'' if new else ', already in Bronze'}"
        )
        if not scan.well_formed:
            log.warning("%s; NOT WELL-FORMED, landed for quarantine: %s", message, printable(scan.error))
        else:
            log.info("%s", message)
        self.checkpoint.add(_Waiting(page, download.path, final, url))
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


def open_archive(dataset: str, url: str, path: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as err:
        raise FeedError(dataset, redact(url), f"is not a readable zip archive ({printable(err)})") from err


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
        log.warning(
            "archive member %s: the date in its name is impossible; decided on its content", printable(member.filename)
        )
        return None


def members_for_window(members: list[zipfile.ZipInfo], lo: datetime, hi: datetime) -> list[zipfile.ZipInfo]:
    """Archive members that may hold items in [lo, hi), by the timestamp in their names.

    A page stamped T holds items older than T (and newer than the previous page's stamp), so pages
    stamped before `lo` are skipped, and after `hi` only the first one is kept. Members without a
    (real) stamp in their name are always kept (scanned and decided on content).
    """
    stamped = [(member_stamp(m), m) for m in members]
    keep = [m for t, m in stamped if t is None]
    dated = sorted(((t, m) for t, m in stamped if t is not None), key=lambda pair: pair[0])
    slack = timedelta(days=1)
    after_hi = 0
    for t, m in dated:
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
    budget: InflateBudget,
) -> Download:
    """Inflate one member to `dest` under the page limit and the archive's budget; a named error
    (and no file left behind) when it is encrypted, unreadable or inflates too much."""
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
    except BaseException as err:
        dest.unlink(missing_ok=True)
        if isinstance(err, zipfile.BadZipFile | EOFError | RuntimeError | NotImplementedError | zlib.error):
            raise FeedError(dataset, redact(url), f"archive member cannot be read ({printable(err)})") from err
        if isinstance(err, OSError):
            raise FeedError(
                dataset, redact(url), f"archive member cannot be inflated to {dest.parent} ({printable(err)})"
            ) from err
        raise
    return Download(url, url, dest, size, digest.hexdigest(), "application/atom+xml")
