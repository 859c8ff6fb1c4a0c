"""Which URLs the extraction may fetch, and which may receive the connection's credentials.

One rule for every URL (the head feed, `rel="next"` links, archives, each redirect hop): the same
scheme as the configured base URL, and the same host AND port, or a host listed in `allowed_hosts`
(`host` for the scheme's default port, `host:port` for another). The two PLACSP host names are
allowed by default when the base URL is on one of them (the producer moved hosts; ids and hrefs
still name the old one). Anything else (another port on the same host, `http` from an `https`
base, `file:`, `ftp:`, a bare IP the feed points to) is refused before any request is made.

Credentials go only to the base URL's own origin (scheme, host, port): an allowed extra host gets
the request, never the `Authorization` header.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from placsp_provider.datasets import PLACSP_HOSTS

_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Origin:
    scheme: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"


def origin_of(url: str) -> Origin | None:
    """(scheme, lower-case host, port with the scheme's default filled in); None when there is none."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # a port that is not a number, or out of range
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if not scheme or not host:
        return None
    if port is None:
        port = _DEFAULT_PORTS.get(scheme, 0)
    return Origin(scheme, host, port)


@dataclass(frozen=True)
class UrlPolicy:
    """The allow-list of one client, derived from its base URL and `allowed_hosts`."""

    base: Origin
    extra: frozenset[tuple[str, int]]  # (host, port) pairs besides the base origin

    @classmethod
    def for_base(cls, base_url: str, allowed_hosts: tuple[str, ...] = ()) -> UrlPolicy:
        base = origin_of(base_url)
        if base is None or base.scheme not in _DEFAULT_PORTS:
            raise ValueError(f"base URL must be an http(s) URL with a host, got {base_url!r}")
        default_port = _DEFAULT_PORTS[base.scheme]
        extra: set[tuple[str, int]] = set()
        if base.host in PLACSP_HOSTS:
            extra.update((host, default_port) for host in PLACSP_HOSTS)
        for entry in allowed_hosts:
            host, _, port = entry.strip().lower().rpartition(":") if ":" in entry else (entry.strip().lower(), "", "")
            extra.add((host, int(port)) if port else (host, default_port))
        return cls(base, frozenset(extra))

    def refusal(self, url: str) -> str | None:
        """Why `url` may not be fetched, or None when it may."""
        scheme = urlsplit(url).scheme.lower()
        if scheme not in _DEFAULT_PORTS:
            return f"scheme {scheme!r} is never fetched (only {self.base.scheme})"
        target = origin_of(url)
        if target is None:
            return "it is not an absolute URL with a host and a valid port"
        if target.scheme != self.base.scheme:
            return f"its scheme {target.scheme} differs from the configured site's ({self.base.scheme})"
        if (target.host, target.port) == (self.base.host, self.base.port) or (target.host, target.port) in self.extra:
            return None
        if target.host == self.base.host:
            return f"port {target.port} differs from the configured site's ({self.base.port})"
        return f"host {target.host}:{target.port} is neither the configured site ({self.base}) nor in allowed_hosts"

    def may_send_credentials(self, url: str) -> bool:
        return origin_of(url) == self.base

    def describe(self) -> str:
        allowed = ", ".join(sorted(f"{h}:{p}" for h, p in self.extra)) or "none"
        return f"site {self.base}; allowed_hosts {allowed}"
