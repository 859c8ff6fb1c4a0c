"""HTTP access to the PLACSP site: bounded, retried, verified, streamed to disk.

One `requests.Session` per client (closed with the client). Every URL, and every redirect hop
(followed by hand), passes `url_policy` before any request: same scheme, host and port as the
configured site, or an allowed host; credentials only to the site's own origin. Bodies stream to a
file with a running sha256 and hard caps (wire bytes against `Content-Length`, decompressed bytes
against the size limit, a total deadline per download), so memory stays flat whatever the page
size and a trickling server cannot hold a run forever.
"""

from __future__ import annotations

import contextlib
import email.utils
import hashlib
import logging
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import requests

from placsp_provider import __version__
from placsp_provider.datasets import LIVE_BASE_URL
from placsp_provider.errors import ConfigError, FeedError, PageGoneError, PageTooLargeError, UntrustedUrlError
from placsp_provider.feed.url_policy import UrlPolicy

log = logging.getLogger(__name__)

_RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_REDIRECT_STATUS = frozenset({301, 302, 303, 307, 308})
_CHUNK = 1 << 16


@dataclass(frozen=True)
class ClientConfig:
    """How to talk to the site. Validated on construction, before any network work."""

    base_url: str = LIVE_BASE_URL
    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    max_retries: int = 4  # per request, after the first try
    backoff_base: float = 2.0  # seconds; doubles per retry, with jitter
    backoff_max: float = 120.0
    max_consecutive_failures: int = 8  # across a whole run: the site is down, stop hammering it
    max_page_bytes: int = 256 * 1024 * 1024
    max_archive_bytes: int = 8 * 1024 * 1024 * 1024  # the zip as downloaded
    # What an archive may inflate to, all members together, and how much one member may inflate per
    # byte it takes in the zip (real pages compress about 10:1; a zip bomb 1000:1).
    max_archive_inflated_bytes: int = 64 * 1024 * 1024 * 1024
    max_compression_ratio: int = 200
    max_redirects: int = 5
    # A total deadline per download (seconds), whatever the server's pace: read_timeout is per read,
    # so a server sending a byte a second would otherwise keep a download alive for ever.
    page_deadline: float = 600.0
    archive_deadline: float = 4 * 3600.0
    # A page that ends early (not well-formed, no `</feed>`) is downloaded again this many times
    # before it is landed for quarantine: a cut connection without Content-Length looks like that.
    max_truncated_retries: int = 2
    verify: bool | str = True  # True, or a CA bundle path (the site chains to the FNMT root)
    allowed_hosts: tuple[str, ...] = ()  # `host` or `host:port` fetched besides the base URL's origin
    user_agent: str = f"airflow-provider-placsp/{__version__} (+https://pypi.org/project/airflow-provider-placsp/)"
    auth: tuple[str, str] | None = field(default=None, repr=False)  # never printed

    def __post_init__(self) -> None:
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"base_url must be an http(s) URL, got {redact(self.base_url)!r}")
        if parts.query or parts.fragment:
            # Dataset paths are appended to the base URL: a query string would end up in the middle
            # of every URL (and tokens in it in every log line). Not echoed: it may hold a secret.
            raise ConfigError(
                f"base_url must not carry a query string or fragment (got {redact(self.base_url)!r}); "
                "put credentials in the connection's login and password"
            )
        for name in ("connect_timeout", "read_timeout", "backoff_base", "backoff_max"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("page_deadline", "archive_deadline"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be > 0 seconds, got {getattr(self, name)}")
        for name in ("max_retries", "max_truncated_retries"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in (
            "max_consecutive_failures",
            "max_page_bytes",
            "max_archive_bytes",
            "max_archive_inflated_bytes",
            "max_compression_ratio",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} is out of range: {getattr(self, name)}")
        if isinstance(self.verify, str) and not Path(self.verify).is_file():
            raise ConfigError(f"CA bundle {self.verify!r} does not exist or is not a file")
        try:
            UrlPolicy.for_base(self.base_url, self.allowed_hosts)
        except ValueError as err:
            raise ConfigError(f"allowed_hosts must be `host` or `host:port` entries: {err}") from err

    @property
    def url_policy(self) -> UrlPolicy:
        return UrlPolicy.for_base(self.base_url, self.allowed_hosts)


@dataclass(frozen=True)
class Download:
    """A body streamed to `path`."""

    url: str
    final_url: str
    path: Path
    bytes: int
    sha256: str
    content_type: str


def redact(url: str) -> str:
    """A URL safe to log: no user info, no query string (tokens live there). The fragment stays:
    it names an archive member and is never sent to the server."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    query = "…" if parts.query else ""
    return urlunsplit((parts.scheme, host, parts.path, query, parts.fragment))


class FeedClient:
    """Downloads pages and archives for one dataset; every error names the dataset and the URL."""

    def __init__(
        self,
        config: ClientConfig,
        dataset: str,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self.dataset = dataset
        self._sleep = sleep
        self._consecutive_failures = 0
        self.policy = config.url_policy
        self.session = requests.Session()
        self.session.headers["User-Agent"] = config.user_agent
        self.session.headers["Accept"] = "application/atom+xml, application/zip;q=0.9, */*;q=0.1"
        self.session.verify = config.verify
        # No session-level auth: requests would send it to every URL. It goes per request, and only
        # to the base URL's own origin (see `_get_following_redirects`).
        if config.verify is False:
            log.warning(
                "dataset %s: TLS certificate verification is OFF for %s (connection extra verify=false): "
                "pages could be altered in transit; pass the FNMT CA with ca_bundle instead",
                dataset,
                redact(config.base_url),
            )

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> FeedClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- public -----------------------------------------------------------------------------
    def check_link(self, url: str, *, linked_from: str, via: str) -> None:
        """Refuse (before any request) a URL the feed points to that is not on the site."""
        why = self.policy.refusal(url)
        if why is not None:
            raise UntrustedUrlError(
                self.dataset,
                redact(linked_from),
                f"its {via} {redact(url)} is refused: {why}; nothing was fetched from it "
                f"({self.policy.describe()}; add the host to allowed_hosts if it is legitimate)",
            )

    def probe(self, url: str) -> str:
        """Ask for `url` under the same rules as a download (URL policy, redirects by hand, TLS,
        credentials to the site only) and read only the status and headers (a streamed GET: servers
        that refuse HEAD still answer); return the status line, or raise FeedError naming what failed."""
        why = self.policy.refusal(url)
        if why is not None:
            raise UntrustedUrlError(self.dataset, redact(url), f"refused before any request: {why}")
        try:
            response = self._get_following_redirects(url, time.monotonic() + self.config.page_deadline)
        except _TransientError as err:
            raise FeedError(self.dataset, redact(url), err.reason) from err.__cause__
        response.close()
        return f"HTTP {response.status_code} {response.reason or ''}".strip()

    def download(self, url: str, dest: Path, *, limit: int | None = None, what: str = "page") -> Download:
        """Stream `url` to `dest`, retrying transient failures; raise FeedError when it cannot."""
        limit = limit or self.config.max_page_bytes
        why = self.policy.refusal(url)
        if why is not None:
            raise UntrustedUrlError(self.dataset, redact(url), f"refused before any request: {why}")
        attempt = 0
        while True:
            try:
                result = self._download_once(url, dest, limit, what)
            except _TransientError as err:
                self._consecutive_failures += 1
                if attempt >= self.config.max_retries:
                    raise FeedError(
                        self.dataset, redact(url), f"{err.reason} (gave up after {attempt + 1} attempts)"
                    ) from err.__cause__
                if self._consecutive_failures >= self.config.max_consecutive_failures:
                    raise FeedError(
                        self.dataset,
                        redact(url),
                        f"{err.reason}; {self._consecutive_failures} consecutive failures in this run, "
                        "stopping so as not to hammer the site",
                    ) from err.__cause__
                delay = self._backoff(attempt, err.retry_after)
                log.warning(
                    "dataset %s: %s: %s; retry %d of %d in %.1f s",
                    self.dataset,
                    redact(url),
                    err.reason,
                    attempt + 1,
                    self.config.max_retries,
                    delay,
                )
                self._sleep(delay)
                attempt += 1
                continue
            except OSError as err:  # the disk, not the network (requests' errors are caught inside)
                dest.unlink(missing_ok=True)
                raise FeedError(
                    self.dataset,
                    redact(url),
                    f"stage landing: could not write the {what} to {dest.parent}: {err.strerror or err}; "
                    "nothing partial was kept",
                ) from err
            except BaseException:
                dest.unlink(missing_ok=True)
                raise
            self._consecutive_failures = 0
            return result

    # -- one attempt ------------------------------------------------------------------------
    def _download_once(self, url: str, dest: Path, limit: int, what: str) -> Download:
        budget = self.config.archive_deadline if what == "archive" else self.config.page_deadline
        deadline = time.monotonic() + budget
        response = self._get_following_redirects(url, deadline)
        # A watchdog: `read_timeout` bounds each read, not the whole body. Past the deadline the
        # socket is shut down, which ends a read blocked on a trickling server.
        expired = threading.Event()

        def _expire() -> None:
            expired.set()
            # Already released or closed: nothing left to end.
            with contextlib.suppress(ValueError, RuntimeError, OSError):
                response.raw.shutdown()

        watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), _expire)
        watchdog.daemon = True
        watchdog.start()
        try:
            with response:
                return self._stream_body(response, url, dest, limit, what, expired, budget)
        finally:
            watchdog.cancel()

    def _stream_body(
        self,
        response: requests.Response,
        url: str,
        dest: Path,
        limit: int,
        what: str,
        expired: threading.Event,
        budget: float,
    ) -> Download:
        ctype = response.headers.get("Content-Type", "")
        declared = _content_length(response.headers.get("Content-Length"))
        encoded = response.headers.get("Content-Encoding", "identity").strip().lower() not in ("", "identity")
        # Content-Length counts the bytes on the wire; compare it with those, and cap what they
        # decompress to with the size limit (a small gzip body can inflate a thousandfold).
        if declared is not None and not encoded and declared > limit:
            raise PageTooLargeError(
                self.dataset,
                redact(url),
                f"{what} is {declared:,} bytes, over the limit of {limit:,} bytes "
                "(raise max_page_bytes / max_archive_bytes in the connection extras); not landed",
            )
        digest = hashlib.sha256()
        size = 0
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            with dest.open("wb") as out:
                for chunk in response.iter_content(_CHUNK):
                    size += len(chunk)
                    if size > limit:
                        raise PageTooLargeError(
                            self.dataset,
                            redact(url),
                            f"{what} exceeded the limit of {limit:,} bytes"
                            f"{' once decompressed' if encoded else ''} while streaming; not landed",
                        )
                    digest.update(chunk)
                    out.write(chunk)
        except (requests.exceptions.ChunkedEncodingError, requests.exceptions.ConnectionError) as err:
            dest.unlink(missing_ok=True)
            if expired.is_set():
                raise _TransientError(f"download exceeded its deadline of {budget:.0f} s") from err
            expected = f" of {declared:,} announced" if declared is not None else ""
            raise _TransientError(f"download cut short after {_wire(response, size):,} bytes{expected}") from err
        except requests.exceptions.Timeout as err:
            dest.unlink(missing_ok=True)
            raise _TransientError(f"read timed out after {_wire(response, size):,} bytes") from err
        except requests.exceptions.ContentDecodingError as err:
            dest.unlink(missing_ok=True)
            raise _TransientError(f"the {response.headers.get('Content-Encoding')} body cannot be decoded") from err
        except BaseException:
            dest.unlink(missing_ok=True)
            raise
        if expired.is_set():
            dest.unlink(missing_ok=True)
            raise _TransientError(f"download exceeded its deadline of {budget:.0f} s")
        wire = _wire(response, size)
        if declared is not None and wire != declared:
            dest.unlink(missing_ok=True)
            raise _TransientError(f"download cut short: {wire:,} of {declared:,} bytes")
        if size == 0:
            dest.unlink(missing_ok=True)
            raise _TransientError("empty response body (0 bytes)")
        if what == "page":
            self._refuse_html(url, dest, ctype)
        return Download(url, response.url, dest, size, digest.hexdigest(), ctype)

    def _get_following_redirects(self, url: str, deadline: float) -> requests.Response:
        current = url
        hop = ""  # how the current URL was reached, for the refusal message
        for _ in range(self.config.max_redirects + 1):
            if time.monotonic() > deadline:
                raise _TransientError("download exceeded its deadline while following redirects")
            why = self.policy.refusal(current)
            if why is not None:
                raise UntrustedUrlError(
                    self.dataset, redact(url), f"{hop} to {redact(current)}, refused before any request: {why}"
                )
            try:
                response = self.session.get(
                    current,
                    stream=True,
                    allow_redirects=False,
                    timeout=(self.config.connect_timeout, self.config.read_timeout),
                    # Per request: requests lets REQUESTS_CA_BUNDLE override a session-level
                    # `verify`, which would silently drop the configured FNMT bundle.
                    verify=self.config.verify,
                    auth=self.config.auth if self.policy.may_send_credentials(current) else None,
                )
            except requests.exceptions.SSLError as err:
                raise FeedError(
                    self.dataset,
                    redact(current),
                    f"TLS verification failed ({_first_line(err)}); the site chains to the FNMT root "
                    "CA, which some bundles lack: set ca_bundle in the connection extras",
                ) from err
            except requests.exceptions.Timeout as err:
                raise _TransientError(f"timed out ({_first_line(err)})") from err
            except requests.exceptions.ConnectionError as err:
                raise _TransientError(f"connection failed ({_first_line(err)})") from err
            except requests.exceptions.RequestException as err:  # a URL requests cannot use
                raise FeedError(self.dataset, redact(current), f"cannot be requested ({_first_line(err)})") from err
            status = response.status_code
            if status in _REDIRECT_STATUS:
                location = response.headers.get("Location", "")
                response.close()
                current = urljoin(current, location)
                hop = f"redirected ({status})"
                continue
            if status == 200:
                return response
            response.close()
            reason = f"HTTP {status} {response.reason or ''}".strip()
            if status in _RETRY_STATUS:
                raise _TransientError(reason, retry_after=_retry_after(response.headers.get("Retry-After")))
            hint = (
                " (check base_url in the placsp connection, or whether the site still publishes this file)"
                if status == 404
                else ""
            )
            error = PageGoneError if status == 404 else FeedError
            raise error(self.dataset, redact(current), f"answered {reason}{hint}")
        raise FeedError(self.dataset, redact(url), f"more than {self.config.max_redirects} redirects")

    def _refuse_html(self, url: str, dest: Path, ctype: str) -> None:
        with dest.open("rb") as fh:
            head = fh.read(_HTML_SNIFF_BYTES)
        if "html" in ctype.lower() or looks_like_html(head):
            title = ""
            lower = head.lower()
            i = lower.find(b"<title>")
            if i >= 0:
                j = lower.find(b"</title>", i)
                title = head[i + 7 : j if j > 0 else i + 87].decode("utf-8", "replace").strip()[:80]
            dest.unlink(missing_ok=True)
            # Maintenance pages come and go: worth a retry before failing.
            raise _TransientError(
                f"served an HTML page instead of an Atom feed (title: {title!r}, Content-Type: {ctype!r})"
            )

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.config.backoff_max)
        delay = self.config.backoff_base * (2**attempt)
        return min(delay * (0.5 + random.random() / 2), self.config.backoff_max)


class _TransientError(Exception):
    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


_HTML_SNIFF_BYTES = 8192
# What may stand before the first element: a BOM, whitespace, comments, processing instructions.
_LEADING_NOISE = re.compile(rb"(?:\xef\xbb\xbf|\s+|<!--.*?-->|<\?.*?\?>)*", re.DOTALL)


def looks_like_html(head: bytes) -> bool:
    """True when the first element (after a BOM, whitespace, comments, PIs) is an HTML one."""
    start = head[_LEADING_NOISE.match(head).end() :].lower()  # type: ignore[union-attr]
    return start.startswith((b"<!doctype html", b"<html", b"<head", b"<body"))


def _digits(value: str | None) -> int | None:
    """A header made of ASCII digits only, as an int (`str.isdigit` also accepts `²` or `٣`)."""
    if value is None:
        return None
    value = value.strip()
    return int(value) if value and value.isascii() and value.isdigit() else None


def _content_length(value: str | None) -> int | None:
    return _digits(value)


def _wire(response: requests.Response, decoded: int) -> int:
    """Bytes received on the wire (before any Content-Encoding is undone)."""
    tell = getattr(response.raw, "tell", None)
    return int(tell()) if callable(tell) else decoded


def _retry_after(value: str | None) -> float | None:
    """`Retry-After` as seconds (RFC 9110: delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    seconds = _digits(value)
    if seconds is not None:
        return float(seconds)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _first_line(err: BaseException) -> str:
    """The useful part of a requests/urllib3 error (their text nests three exceptions deep)."""
    text = str(err)
    errno = re.search(r"\[Errno -?\d+\] [^'\")]+", text)
    if errno:
        return errno.group(0).strip()
    if "timed out" in text.lower():
        return "timed out"
    if "certificate verify failed" in text:
        found = re.search(r"certificate verify failed: [^'\")]+", text)
        return found.group(0) if found else "certificate verify failed"
    first = text.splitlines()[0] if text else type(err).__name__
    return first[:160]


def client_config_from_extras(base_url: str | None, extras: dict[str, Any]) -> ClientConfig:
    """Build a config from a connection's extras (the form fields of the `placsp` connection type)."""
    kwargs: dict[str, Any] = {}
    if base_url:
        kwargs["base_url"] = base_url
    floats = ("connect_timeout", "read_timeout", "backoff_base", "backoff_max", "page_deadline", "archive_deadline")
    ints = (
        "max_retries",
        "max_consecutive_failures",
        "max_page_bytes",
        "max_archive_bytes",
        "max_archive_inflated_bytes",
        "max_compression_ratio",
        "max_redirects",
        "max_truncated_retries",
    )
    for keys, kind in ((floats, float), (ints, int)):
        for key in keys:
            if extras.get(key) in (None, ""):
                continue
            try:
                kwargs[key] = kind(str(extras[key]).strip())
            except ValueError:
                raise ConfigError(
                    f"connection extra {key} must be a{'n integer' if kind is int else ' number'}, got {extras[key]!r}"
                ) from None
    if extras.get("ca_bundle"):
        kwargs["verify"] = str(extras["ca_bundle"])
    elif str(extras.get("verify", "true")).lower() in ("false", "0", "no"):
        kwargs["verify"] = False
    hosts = extras.get("allowed_hosts")
    if hosts:
        kwargs["allowed_hosts"] = tuple(h.strip() for h in str(hosts).split(",") if h.strip())
    if extras.get("user_agent"):
        kwargs["user_agent"] = str(extras["user_agent"])
    return ClientConfig(**kwargs)
