"""HTTP access to the PLACSP site: bounded, retried, verified, streamed to disk.

Every URL, and every redirect hop (followed by hand), passes `url_policy` before any request. Bodies
stream to a file with a running sha256 and hard caps, under one total deadline per download
(`_Deadline`): memory stays flat, and a trickling server cannot hold a run forever. Text from the
server is shown only through `untrusted.printable` (URLs through `redact`).
"""

from __future__ import annotations

import contextlib
import email.utils
import hashlib
import logging
import os
import random
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
import urllib3
from requests.adapters import HTTPAdapter

from placsp_provider import __version__
from placsp_provider.datasets import LIVE_BASE_URL
from placsp_provider.errors import ConfigError, FeedError, PageGoneError, PageTooLargeError, UntrustedUrlError
from placsp_provider.feed.url_policy import Admitted, RefusedUrlError, UrlPolicy, join, without_userinfo
from placsp_provider.untrusted import printable

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
        try:
            parts = urlsplit(self.base_url)
        except ValueError:  # an unbalanced `[` in the host
            parts = urlsplit("")
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"base_url must be an http(s) URL, got {redact(self.base_url)!r}")
        # `https://user:pw@site/...` becomes the site's URL plus `auth` (unless `auth` is set): no URL
        # that is fetched may carry user info (the URL policy refuses it: `evil\@site` tricks live there),
        # and the credentials then never ride along in URLs, logs or the manifest.
        base_url, userinfo = without_userinfo(self.base_url)
        if userinfo is not None:
            object.__setattr__(self, "base_url", base_url)
            if self.auth is None:
                object.__setattr__(self, "auth", userinfo)
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
            UrlPolicy.for_base(self.base_url)
        except ValueError as err:
            raise ConfigError(f"base_url {redact(self.base_url)!r} cannot be used: {err}") from err
        try:
            UrlPolicy.for_base(self.base_url, self.allowed_hosts)
        except ValueError as err:
            raise ConfigError(f"allowed_hosts must be `host` or `host:port` entries: {err}") from err


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
    """A URL safe to log and to show: no user info (`…@` says there was some), no query string
    (tokens live there), and every control character escaped (`untrusted.printable`: a link or a
    `Location` from the server can hold ESC sequences and line breaks). The fragment stays: it names
    an archive member and is never sent to the server. Never raises, whatever the URL."""
    shown = printable(url)  # first: urllib.parse silently drops tabs and line breaks
    try:
        parts = urlsplit(shown)
    except ValueError:  # an unbalanced `[` in the host: show no authority rather than guess one
        scheme, _, rest = shown.partition("://")
        path = rest.partition("/")[2].partition("?")[0].partition("#")[0]
        return f"{scheme}://(a host that cannot be parsed)/{path}"
    _userinfo, at, hostport = parts.netloc.rpartition("@")
    netloc = f"…@{hostport}" if at else hostport
    query = "…" if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


class FeedClient:
    """Downloads pages and archives for one dataset; every error names the dataset and the URL."""

    def __init__(self, config: ClientConfig, dataset: str, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.config = config
        self.dataset = dataset
        self._sleep = sleep
        self._consecutive_failures = 0
        self.policy = UrlPolicy.for_base(config.base_url, config.allowed_hosts)
        self.session = _HandRedirectSession()
        # Connections whose sockets the download's deadline can end (see `_Deadline`).
        for prefix in ("http://", "https://"):
            self.session.mount(prefix, _DeadlineBoundAdapter())
        self.session.headers["User-Agent"] = config.user_agent
        self.session.headers["Accept"] = "application/atom+xml, application/zip;q=0.9, */*;q=0.1"
        self.session.verify = config.verify
        # No session-level auth: requests would send it to every URL. It goes per request, and only
        # to the base URL's own origin (see `_request`).
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

    def follow_link(self, base: str, href: str, *, linked_from: str, via: str) -> str:
        """`href` (as a page wrote it) resolved against `base`; refused before any request when it is
        not on the site, or when `urljoin` would repair it (a tab, a line break, a `\\`)."""
        url = href  # what a refusal names when `href` cannot even be joined
        try:
            url = join(base, href)
            self.policy.admit(url)
        except RefusedUrlError as err:
            hint = "; add the host to allowed_hosts if it is legitimate" if err.allow_listable else ""
            raise UntrustedUrlError(
                self.dataset,
                redact(linked_from),
                f"its {via} {redact(url)} is refused: {err.reason}; nothing was fetched from it "
                f"({self.policy.describe()}{hint})",
            ) from None
        return url

    def probe(self, url: str) -> str:
        """Ask for `url` under the same rules as a download (URL policy, redirects by hand, TLS,
        credentials to the site only, the page deadline) and read only the status and headers (a
        streamed GET: servers that refuse HEAD still answer); return the status line, or raise
        FeedError naming what failed."""
        try:
            with _Deadline(self.config.page_deadline) as deadline:
                response = self._get_following_redirects(url, deadline)
                response.close()
        except _TransientError as err:
            raise FeedError(self.dataset, redact(url), err.reason) from err.__cause__
        return f"HTTP {response.status_code} {printable(response.reason or '', _SHOWN)}".strip()

    def download(self, url: str, dest: Path, *, limit: int | None = None, what: str = "page") -> Download:
        """Stream `url` to `dest`, retrying transient failures; raise FeedError when it cannot."""
        limit = limit or self.config.max_page_bytes
        attempt = 0
        while True:
            try:
                result = self._download_once(url, dest, limit, what)
            except BaseException as err:
                dest.unlink(missing_ok=True)
                if isinstance(err, OSError):  # the disk, not the network (requests' errors are caught inside)
                    raise FeedError(
                        self.dataset,
                        redact(url),
                        f"stage landing: could not write the {what} to {dest.parent}: {err.strerror or err}; "
                        "nothing partial was kept",
                    ) from err
                if not isinstance(err, _TransientError):
                    raise
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
            self._consecutive_failures = 0
            return result

    # -- one attempt ------------------------------------------------------------------------
    def _download_once(self, url: str, dest: Path, limit: int, what: str) -> Download:
        """One attempt; whatever it raises, `download` removes `dest`."""
        budget = self.config.archive_deadline if what == "archive" else self.config.page_deadline
        with _Deadline(budget) as deadline:
            response = self._get_following_redirects(url, deadline)
            with response:
                return self._stream_body(response, url, dest, limit, what, deadline)

    def _stream_body(
        self, response: requests.Response, url: str, dest: Path, limit: int, what: str, deadline: _Deadline
    ) -> Download:
        ctype = response.headers.get("Content-Type", "")
        declared = _digits(response.headers.get("Content-Length"))
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
            if deadline.expired.is_set():
                raise _TransientError(deadline.exceeded()) from err
            expected = f" of {declared:,} announced" if declared is not None else ""
            raise _TransientError(f"download cut short after {_wire(response, size):,} bytes{expected}") from err
        except requests.exceptions.Timeout as err:
            raise _TransientError(f"read timed out after {_wire(response, size):,} bytes") from err
        except requests.exceptions.ContentDecodingError as err:
            coding = printable(response.headers.get("Content-Encoding"), _SHOWN)
            raise _TransientError(f"the {coding} body cannot be decoded") from err
        if deadline.expired.is_set():
            raise _TransientError(deadline.exceeded())
        wire = _wire(response, size)
        if declared is not None and wire != declared:
            raise _TransientError(f"download cut short: {wire:,} of {declared:,} bytes")
        if size == 0:
            raise _TransientError("empty response body (0 bytes)")
        if what == "page":
            self._refuse_html(url, dest, ctype)
        return Download(url, response.url, dest, size, digest.hexdigest(), ctype)

    def _get_following_redirects(self, url: str, deadline: _Deadline) -> requests.Response:
        current = url
        hop = ""  # how the current URL was reached, for the refusal message
        for _ in range(self.config.max_redirects + 1):
            if deadline.expired.is_set() or deadline.remaining() <= 0:
                raise _TransientError(deadline.exceeded("while following redirects"))
            target = self._admit(url, current, hop)
            response = self._request(target, deadline)
            status = response.status_code
            if status in _REDIRECT_STATUS:
                location = response.headers.get("Location")
                response.close()
                hop = f"redirected ({status})"
                if not location:
                    raise FeedError(self.dataset, redact(target.url), f"{hop} without a Location header")
                try:
                    # Joined to the URL actually requested, and never silently cleaned: a Location
                    # with control characters or whitespace is refused, not repaired.
                    current = join(target.url, location)
                except RefusedUrlError as err:
                    raise UntrustedUrlError(
                        self.dataset,
                        redact(url),
                        f"{hop} to {redact(location)}, refused before any request: {err.reason}",
                    ) from None
                continue
            if status == 200:
                return response
            response.close()
            reason = f"HTTP {status} {printable(response.reason or '', _SHOWN)}".strip()
            if status in _RETRY_STATUS:
                raise _TransientError(reason, retry_after=_retry_after(response.headers.get("Retry-After")))
            if status == 404:
                hint = " (check base_url in the placsp connection, or whether the site still publishes this file)"
                raise PageGoneError(self.dataset, redact(target.url), f"answered {reason}{hint}")
            raise FeedError(self.dataset, redact(target.url), f"answered {reason}")
        raise FeedError(self.dataset, redact(url), f"more than {self.config.max_redirects} redirects")

    def _admit(self, first: str, current: str, hop: str) -> Admitted:
        """The policy's verdict on the next URL to request (`first`, or where `hop` led from it): the
        form to send, and its credentials."""
        try:
            return self.policy.admit(current)
        except RefusedUrlError as err:
            moved = f"{hop} to {redact(current)}, " if hop else ""
            raise UntrustedUrlError(
                self.dataset, redact(first), f"{moved}refused before any request: {err.reason}"
            ) from None

    def _request(self, target: Admitted, deadline: _Deadline) -> requests.Response:
        """One GET of exactly `target.url` (requests sends it unchanged: the policy checked), with the
        credentials only when the policy said so, the connect bounded by what is left of the deadline."""
        try:
            response = self.session.get(
                target.url,
                stream=True,
                allow_redirects=False,
                timeout=(min(self.config.connect_timeout, deadline.remaining()), self.config.read_timeout),
                # Per request: requests lets REQUESTS_CA_BUNDLE override a session-level
                # `verify`, which would silently drop the configured FNMT bundle.
                verify=self.config.verify,
                auth=self.config.auth if target.credentials else None,
            )
        except (requests.exceptions.Timeout, requests.exceptions.ConnectionError) as err:  # SSLError too
            if deadline.expired.is_set():
                raise _TransientError(deadline.exceeded("before the response's headers were complete")) from err
            if isinstance(err, requests.exceptions.SSLError):
                raise FeedError(
                    self.dataset,
                    redact(target.url),
                    f"TLS verification failed ({_first_line(err)}); the site chains to the FNMT root "
                    "CA, which some bundles lack: set ca_bundle in the connection extras",
                ) from err
            kind = "timed out" if isinstance(err, requests.exceptions.Timeout) else "connection failed"
            raise _TransientError(f"{kind} ({_first_line(err)})") from err
        except requests.exceptions.RequestException as err:  # a URL requests cannot use
            raise FeedError(self.dataset, redact(target.url), f"cannot be requested ({_first_line(err)})") from err
        if deadline.expired.is_set():
            # The socket was shut down mid-headers: http.client may have returned what it had read.
            response.close()
            raise _TransientError(deadline.exceeded("before the response's headers were complete"))
        return response

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
            # Maintenance pages come and go: worth a retry before failing.
            raise _TransientError(
                f"served an HTML page instead of an Atom feed (title: '{printable(title, _SHOWN)}', "
                f"Content-Type: '{printable(ctype, _SHOWN)}')"
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


class _HandRedirectSession(requests.Session):
    """A session that never works out a redirect itself: every hop is followed by hand, judged by
    the URL policy first. Even with `allow_redirects=False`, requests' `send` prepares the "next"
    request of a redirect (for `Response.next`, which nothing here reads): it reads the redirect's
    whole body into memory, uncapped, and decodes its `Location` as UTF-8 (a UnicodeDecodeError,
    not a FeedError, on other bytes from a hostile server)."""

    def resolve_redirects(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        yield from ()


class _Deadline:
    """The total time one download may take: connecting, the TLS handshake, the status line, the
    headers, every redirect hop and the body. `read_timeout` bounds each read only, so a server
    that sends a byte every few seconds (even of its status line) would otherwise hold a download
    for ever. At the deadline every socket the download used is shut down, which ends the read
    blocked on it; the read then fails and `expired` says why.

    The sockets are reached through duplicates of their descriptors taken as each connection is
    made or reused (`_DeadlineBoundHTTPConnection`): a duplicate stays valid while TLS wraps the
    socket, or after requests closes it, so shutting it down can never hit an unrelated socket that
    happens to reuse a closed descriptor's number."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds
        self.expired = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._outer: _Deadline | None = None
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def remaining(self) -> float:
        return max(0.0, self.at - time.monotonic())

    def exceeded(self, when: str = "") -> str:
        return f"download exceeded its deadline of {self.seconds:g} s{' ' + when if when else ''}"

    def watch(self, sock: socket.socket) -> None:
        try:
            duplicate = socket.socket(fileno=os.dup(sock.fileno()))
        except OSError:  # already closed: nothing left to end
            return
        with self._lock:
            self._sockets.append(duplicate)
            if self.expired.is_set():  # connected after the deadline: end it at once
                _shut_down(duplicate)

    def _expire(self) -> None:
        with self._lock:
            self.expired.set()
            for sock in self._sockets:
                _shut_down(sock)

    def __enter__(self) -> _Deadline:
        self._outer = getattr(_current, "deadline", None)
        _current.deadline = self
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        _current.deadline = self._outer
        with self._lock:
            for sock in self._sockets:
                sock.close()  # our duplicate only: the connection itself lives on in the pool
            self._sockets.clear()


# The deadline of the download running in this thread, for the connections it opens or reuses.
_current = threading.local()


def _watch(sock: socket.socket | None) -> None:
    deadline: _Deadline | None = getattr(_current, "deadline", None)
    if deadline is not None and sock is not None:
        deadline.watch(sock)


def _shut_down(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already shut down or reset by the peer
        sock.shutdown(socket.SHUT_RDWR)


class _DeadlineBoundHTTPConnection(urllib3.connection.HTTPConnection):
    """A connection whose socket the running download's deadline can shut down: watched when it is
    made (before any TLS handshake) and each time it is reused for a request (keep-alive)."""

    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        _watch(sock)
        return sock

    def request(self, method: str, url: str, body: Any = None, headers: Any = None, **kwargs: Any) -> None:
        _watch(self.sock)  # None on a new plain-HTTP connection: `_new_conn` watches it then
        super().request(method, url, body=body, headers=headers, **kwargs)


class _DeadlineBoundHTTPSConnection(_DeadlineBoundHTTPConnection, urllib3.connection.HTTPSConnection):
    pass


class _DeadlineBoundHTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _DeadlineBoundHTTPConnection


class _DeadlineBoundHTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _DeadlineBoundHTTPSConnection


_DEADLINE_BOUND_POOLS = {"http": _DeadlineBoundHTTPPool, "https": _DeadlineBoundHTTPSPool}


class _DeadlineBoundAdapter(HTTPAdapter):
    """requests' adapter, with connections the download deadline can end (direct or through an
    HTTP(S) proxy; a SOCKS proxy keeps its own connections, bounded by `read_timeout` per read only)."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _DEADLINE_BOUND_POOLS

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if proxy.lower().startswith(("http://", "https://")):
            manager.pool_classes_by_scheme = _DEADLINE_BOUND_POOLS
        return manager


_SHOWN = 80  # characters of server text (a reason phrase, a title, a header) quoted in a message
_HTML_SNIFF_BYTES = 8192
# What may stand before the first element: a BOM, whitespace, comments, processing instructions.
_LEADING_NOISE = re.compile(rb"(?:\xef\xbb\xbf|\s+|<!--.*?-->|<\?.*?\?>)*", re.DOTALL)


def looks_like_html(head: bytes) -> bool:
    """True when the first element (after a BOM, whitespace, comments, PIs) is an HTML one."""
    start = head[_LEADING_NOISE.match(head).end() :].lower()  # type: ignore[union-attr]
    return start.startswith((b"<!doctype html", b"<html", b"<head", b"<body"))


def _digits(value: str | None) -> int | None:
    """A header made of ASCII digits only, as an int (`str.isdigit` also accepts `²` or `٣`)."""
    value = (value or "").strip()
    return int(value) if value.isascii() and value.isdigit() else None


def _wire(response: requests.Response, decoded: int) -> int:
    """Bytes received on the wire (before any Content-Encoding is undone)."""
    tell = getattr(response.raw, "tell", None)
    return int(tell()) if callable(tell) else decoded


def _retry_after(value: str | None) -> float | None:
    """`Retry-After` as seconds (RFC 9110: delta-seconds or an HTTP date)."""
    if not value:
        return None
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
    """The useful part of a requests/urllib3 error (their text nests three exceptions deep), made
    printable: it can quote what the server sent (a malformed status line, a header)."""
    text = str(err)
    errno = re.search(r"\[Errno -?\d+\] [^'\")]+", text)
    if errno:
        useful = errno.group(0).strip()
    elif "timed out" in text.lower():
        useful = "timed out"
    elif "certificate verify failed" in text:
        found = re.search(r"certificate verify failed: [^'\")]+", text)
        useful = found.group(0) if found else "certificate verify failed"
    else:
        useful = (text.splitlines()[0] if text else type(err).__name__)[:160]
    return printable(useful, 160)


def client_config_from_extras(base_url: str | None, extras: dict[str, Any]) -> ClientConfig:
    """Build a config from a connection's extras (the form fields of the `placsp` connection type)."""
    kwargs: dict[str, Any] = {}
    if base_url:
        kwargs["base_url"] = base_url
    for option in fields(ClientConfig):  # every number of the config is an extra of the same name
        key, kind = option.name, {"float": float, "int": int}.get(str(option.type))
        if kind is None or extras.get(key) in (None, ""):
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
    if hosts := extras.get("allowed_hosts"):
        kwargs["allowed_hosts"] = tuple(h.strip() for h in str(hosts).split(",") if h.strip())
    if extras.get("user_agent"):
        kwargs["user_agent"] = str(extras["user_agent"])
    return ClientConfig(**kwargs)
