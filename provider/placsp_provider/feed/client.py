"""HTTP access to the PLACSP site: bounded, retried, verified, streamed to disk.

One `requests.Session` per client (closed with the client). Redirects are followed by hand so a
redirect to a host we do not trust is refused instead of silently followed. Bodies stream to a
file with a running sha256 and a hard size cap, so memory stays flat whatever the page size.
"""

from __future__ import annotations

import email.utils
import hashlib
import logging
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import requests

from placsp_provider import __version__
from placsp_provider.datasets import LIVE_BASE_URL, PLACSP_HOSTS
from placsp_provider.errors import ConfigError, FeedError, PageTooLargeError

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
    max_archive_bytes: int = 8 * 1024 * 1024 * 1024
    max_redirects: int = 5
    verify: bool | str = True  # True, or a CA bundle path (the site chains to the FNMT root)
    allowed_hosts: tuple[str, ...] = ()  # redirects may only go to these (plus the base URL's host)
    user_agent: str = f"airflow-provider-placsp/{__version__} (+https://pypi.org/project/airflow-provider-placsp/)"
    auth: tuple[str, str] | None = field(default=None, repr=False)  # never printed

    def __post_init__(self) -> None:
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"base_url must be an http(s) URL, got {self.base_url!r}")
        for name in ("connect_timeout", "read_timeout", "backoff_base", "backoff_max"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("max_retries", "max_consecutive_failures", "max_page_bytes", "max_archive_bytes"):
            if getattr(self, name) < (0 if name == "max_retries" else 1):
                raise ConfigError(f"{name} is out of range: {getattr(self, name)}")
        if isinstance(self.verify, str) and not Path(self.verify).is_file():
            raise ConfigError(f"CA bundle {self.verify!r} does not exist or is not a file")

    @property
    def trusted_hosts(self) -> frozenset[str]:
        own = urlsplit(self.base_url).hostname or ""
        defaults = PLACSP_HOSTS if own in PLACSP_HOSTS else ()
        return frozenset({own, *defaults, *self.allowed_hosts})


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
        self.session = requests.Session()
        self.session.headers["User-Agent"] = config.user_agent
        self.session.headers["Accept"] = "application/atom+xml, application/zip;q=0.9, */*;q=0.1"
        self.session.verify = config.verify
        if config.auth:
            self.session.auth = config.auth

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> FeedClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- public -----------------------------------------------------------------------------
    def download(self, url: str, dest: Path, *, limit: int | None = None, what: str = "page") -> Download:
        """Stream `url` to `dest`, retrying transient failures; raise FeedError when it cannot."""
        limit = limit or self.config.max_page_bytes
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
            except BaseException:
                dest.unlink(missing_ok=True)
                raise
            self._consecutive_failures = 0
            return result

    # -- one attempt ------------------------------------------------------------------------
    def _download_once(self, url: str, dest: Path, limit: int, what: str) -> Download:
        response = self._get_following_redirects(url)
        with response:
            ctype = response.headers.get("Content-Type", "")
            declared = response.headers.get("Content-Length")
            if declared is not None and declared.isdigit() and int(declared) > limit:
                raise PageTooLargeError(
                    self.dataset,
                    redact(url),
                    f"{what} is {int(declared):,} bytes, over the limit of {limit:,} bytes "
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
                                f"{what} exceeded the limit of {limit:,} bytes while streaming; not landed",
                            )
                        digest.update(chunk)
                        out.write(chunk)
            except (requests.exceptions.ChunkedEncodingError, requests.exceptions.ConnectionError) as err:
                dest.unlink(missing_ok=True)
                expected = f" of {declared} announced" if declared else ""
                raise _TransientError(f"download cut short after {size:,} bytes{expected}") from err
            except requests.exceptions.Timeout as err:
                dest.unlink(missing_ok=True)
                raise _TransientError(f"read timed out after {size:,} bytes") from err
            except PageTooLargeError:
                dest.unlink(missing_ok=True)
                raise
            if declared is not None and declared.isdigit() and size != int(declared):
                dest.unlink(missing_ok=True)
                raise _TransientError(f"download cut short: {size:,} of {int(declared):,} bytes")
            if size == 0:
                raise _TransientError("empty response body (0 bytes)")
            if what == "page":
                self._refuse_html(url, dest, ctype)
            return Download(url, response.url, dest, size, digest.hexdigest(), ctype)

    def _get_following_redirects(self, url: str) -> requests.Response:
        current = url
        for _ in range(self.config.max_redirects + 1):
            try:
                response = self.session.get(
                    current,
                    stream=True,
                    allow_redirects=False,
                    timeout=(self.config.connect_timeout, self.config.read_timeout),
                    # Per request: requests lets REQUESTS_CA_BUNDLE override a session-level
                    # `verify`, which would silently drop the configured FNMT bundle.
                    verify=self.config.verify,
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
            status = response.status_code
            if status in _REDIRECT_STATUS:
                location = response.headers.get("Location", "")
                response.close()
                target = urljoin(current, location)
                host = urlsplit(target).hostname or ""
                if urlsplit(current).scheme == "https" and urlsplit(target).scheme != "https":
                    raise FeedError(
                        self.dataset, redact(url), f"redirected ({status}) from https to {redact(target)}, refused"
                    )
                if host not in self.config.trusted_hosts:
                    raise FeedError(
                        self.dataset,
                        redact(url),
                        f"redirected ({status}) to another host {host!r}, refused; trusted hosts: "
                        f"{', '.join(sorted(self.config.trusted_hosts))} (add it to allowed_hosts if legitimate)",
                    )
                current = target
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
            raise FeedError(self.dataset, redact(current), f"answered {reason}{hint}")
        raise FeedError(self.dataset, redact(url), f"more than {self.config.max_redirects} redirects")

    def _refuse_html(self, url: str, dest: Path, ctype: str) -> None:
        with dest.open("rb") as fh:
            head = fh.read(2048)
        start = head.lstrip().lower()
        if "html" in ctype.lower() or start.startswith((b"<!doctype html", b"<html")):
            title = ""
            lower = head.lower()
            i = lower.find(b"<title>")
            if i >= 0:
                j = lower.find(b"</title>", i)
                title = head[i + 7 : j if j > 0 else i + 87].decode("utf-8", "replace").strip()
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


def _retry_after(value: str | None) -> float | None:
    """`Retry-After` as seconds (RFC 9110: delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
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
    floats = ("connect_timeout", "read_timeout", "backoff_base", "backoff_max")
    ints = ("max_retries", "max_consecutive_failures", "max_page_bytes", "max_archive_bytes", "max_redirects")
    for key in floats:
        if extras.get(key) not in (None, ""):
            kwargs[key] = float(extras[key])
    for key in ints:
        if extras.get(key) not in (None, ""):
            kwargs[key] = int(extras[key])
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
