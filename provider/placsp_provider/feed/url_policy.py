"""Which URLs the extraction may fetch, and which may receive the connection's credentials.

One rule for every URL (the head feed, `rel="next"` links, archives, each redirect hop): the same
scheme as the configured base URL, and the same host AND port, or a host listed in `allowed_hosts`
(`host` for the scheme's default port, `host:port` for another). The two PLACSP host names are
allowed by default when the base URL is on one of them (the producer moved hosts; ids and hrefs
still name the old one). Anything else (another port on the same host, `http` from an `https`
base, `file:`, `ftp:`, a bare IP the feed points to) is refused before any request is made.

Credentials go only to the base URL's own origin (scheme, host, port): an allowed extra host gets
the request, never the `Authorization` header.

One parse decides all three: what the policy judges, where the connection goes and whether the
credentials go with it. `UrlPolicy.admit` turns a URL into the exact string requests will send
(requests' own `prepare_url`, checked to be a fixed point so requests changes nothing more) and
judges the origin urllib3 connects to (`parse_url` of that string, the adapter's own parse). A URL
that different parsers read differently (`http://evil\\@site/`: urllib.parse sees `site`, urllib3
connects to `evil`) is refused, as is every other authority trick: user info, a backslash, control
characters or whitespace anywhere, percent-encoding or non-ASCII in the host, an empty host or
label, an IPv6 zone id.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

import requests
from urllib3.exceptions import LocationParseError
from urllib3.util import parse_url

from placsp_provider.datasets import PLACSP_HOSTS
from placsp_provider.untrusted import printable

_DEFAULT_PORTS = {"http": 80, "https": 443}
# What a host name may be made of once requests has normalised it (lower-case LDH, plus `_`,
# which some real DNS names use). Checked character by character: no regex over server bytes.
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_.")
_IPV6_CHARS = frozenset("0123456789abcdef:.")
_SHOWN = 80  # characters of server text quoted in a refusal


class RefusedUrlError(ValueError):
    """A URL the policy will not fetch; `reason` says why, already printable. `allow_listable` when
    only its origin is at fault (`allowed_hosts` could admit it), not its form."""

    def __init__(self, reason: str, *, allow_listable: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.allow_listable = allow_listable


@dataclass(frozen=True)
class Origin:
    scheme: str
    host: str  # lower case; an IPv6 address without its brackets
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


@dataclass(frozen=True)
class Admitted:
    """A URL the policy lets through, in the one form that is judged, sent and credited."""

    url: str  # the exact string handed to requests; requests sends it unchanged
    origin: Origin  # where urllib3 connects for it
    credentials: bool  # whether the connection's credentials go with it


def origin_of(url: str) -> Origin | None:
    """(scheme, lower-case host, port with the scheme's default filled in) as urllib.parse reads
    `url`; None when there is none. For display and for cross-checking only: what is fetched is
    judged by `UrlPolicy.admit`."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # a port that is not a number, or out of range
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if not scheme or not host:
        return None
    return Origin(scheme, host, _DEFAULT_PORTS.get(scheme, 0) if port is None else port)


def without_userinfo(url: str) -> tuple[str, tuple[str, str] | None]:
    """`url` with any `user:password@` removed, and the (percent-decoded) pair it carried."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    return urlunsplit(parts._replace(netloc=hostport)), (unquote(user), unquote(password))


def sent_form(url: str, schemes: str = "http and https") -> tuple[str, Origin]:
    """`url` exactly as requests will send it, and the origin urllib3 will connect to.

    Raises RefusedUrlError for any authority trick, or when the parsers disagree on the origin
    (`schemes`: the ones the refusal of another scheme names)."""
    _refuse_unsafe_characters(url)
    scheme = _scheme(url)
    if scheme not in _DEFAULT_PORTS:
        raise RefusedUrlError(f"scheme {printable(scheme, _SHOWN)!r} is never fetched (only {schemes})")
    _refuse_authority_tricks(_authority(url))
    sent = _prepared(url)
    if _prepared(sent) != sent:
        # Sending `sent` must not change it again: requests re-prepares what it is given.
        raise RefusedUrlError("requests would rewrite it again on sending; it has no stable form")
    origin = _connection_origin(sent)
    for seen in (origin_of(url), origin_of(sent)):
        if seen != origin:
            raise RefusedUrlError(
                f"its host reads as {seen or 'nothing'} to urllib.parse but as {origin} to the HTTP library; "
                "a URL that parsers read differently is never fetched"
            )
    return sent, origin


def join(base: str, reference: str) -> str:
    """`reference` (a `Location`, an `href`) resolved against `base`, refused rather than repaired
    when it holds control characters, whitespace or `\\`: `urljoin` would silently drop tabs and
    line breaks, so the URL judged and shown would not be the one the server wrote."""
    _refuse_unsafe_characters(reference)
    return urljoin(base, reference)


def _refuse_unsafe_characters(url: str) -> None:
    """Control characters, whitespace and `\\` anywhere: parsers differ on all of them (urllib.parse
    drops tabs and line breaks, browsers read `\\` as `/`, urllib3 ends the host at `\\`)."""
    for char in url:
        if char == "\\":
            raise RefusedUrlError(
                "it holds a backslash (`\\`), which HTTP libraries and browsers read differently "
                "(a host that ends at it, or a `/`): the request could go elsewhere than the URL shows"
            )
        if char.isspace() or printable(char) != char:
            raise RefusedUrlError(f"it holds a control or whitespace character (U+{ord(char):04X})")


def _scheme(url: str) -> str:
    """The scheme as RFC 3986 spells it (a letter, then letters, digits, `+`, `-`, `.`), lower case;
    empty when there is none."""
    head, sep, _rest = url.partition(":")
    if not sep or not head[:1].isalpha() or not head.isascii():
        return ""
    return head.lower() if all(c.isalnum() or c in "+-." for c in head) else ""


def _authority(url: str) -> str:
    """The text between `scheme://` and the path, query or fragment (no `\\` left to disagree on)."""
    _scheme, sep, rest = url.partition("://")
    if not sep:
        raise RefusedUrlError("it is not an absolute URL with a host and a valid port")
    ends = [at for at in map(rest.find, "/?#") if at >= 0]
    return rest[: min(ends, default=len(rest))]


def _refuse_authority_tricks(authority: str) -> None:
    host = authority if authority.endswith("]") or ":" not in authority else authority.rpartition(":")[0]
    if not host:
        raise RefusedUrlError("it is not an absolute URL with a host and a valid port")
    if "@" in authority:
        raise RefusedUrlError(
            "it carries user info (`…@` before the host): credentials are never taken from a link, "
            "and a host after `@` is a classic way to disguise where a request goes"
        )
    if "%" in authority:
        raise RefusedUrlError("its host is percent-encoded (or names an IPv6 zone): the host must be written plainly")
    if not authority.isascii():
        raise RefusedUrlError(
            f"its host {printable(authority, _SHOWN)!r} holds non-ASCII characters (look-alike letters or "
            "digits that IDNA maps onto another host)"
        )


def _prepared(url: str) -> str:
    """The URL as requests will send it (its `PreparedRequest.prepare_url`)."""
    request = requests.models.PreparedRequest()
    try:
        request.prepare_url(url, None)
    except (requests.exceptions.RequestException, LocationParseError, UnicodeError, ValueError) as err:
        raise RefusedUrlError(f"requests cannot use it ({printable(err, _SHOWN)})") from err
    return str(request.url)


def _connection_origin(sent: str) -> Origin:
    """The origin urllib3 connects to for `sent` (its `parse_url`, as requests' adapter uses it)."""
    try:
        parts = parse_url(sent)
    except LocationParseError as err:
        raise RefusedUrlError(f"urllib3 cannot parse it ({printable(err, _SHOWN)})") from err
    scheme = (parts.scheme or "").lower()
    host = (parts.host or "").lower()
    if not host:
        raise RefusedUrlError("it is not an absolute URL with a host and a valid port")
    if parts.auth is not None:
        raise RefusedUrlError("it carries user info (`…@` before the host)")
    if host.startswith("["):
        host = _ipv6(host)
    elif not set(host) <= _NAME_CHARS:
        raise RefusedUrlError(f"its host {printable(host, _SHOWN)!r} holds characters a host name never has")
    elif "" in host.split("."):
        raise RefusedUrlError(f"its host {host!r} has an empty label (a leading, trailing or doubled dot)")
    port = parts.port if parts.port is not None else _DEFAULT_PORTS[scheme]
    if port == 0:
        raise RefusedUrlError("it is not an absolute URL with a host and a valid port")
    return Origin(scheme, host, port)


def _ipv6(bracketed: str) -> str:
    inner = bracketed[1:-1] if bracketed.endswith("]") else ""
    if not inner or not set(inner) <= _IPV6_CHARS:
        raise RefusedUrlError(f"its IPv6 host {printable(bracketed, _SHOWN)!r} is not a plain address (no zone ids)")
    return inner


@dataclass(frozen=True)
class UrlPolicy:
    """The allow-list of one client, derived from its base URL and `allowed_hosts`."""

    base: Origin
    extra: frozenset[tuple[str, int]]  # (host, port) pairs besides the base origin

    @classmethod
    def for_base(cls, base_url: str, allowed_hosts: tuple[str, ...] = ()) -> UrlPolicy:
        # The base is judged like every other URL: its origin is the one its requests connect to.
        try:
            _sent, base = sent_form(without_userinfo(base_url)[0])
        except RefusedUrlError as err:
            raise ValueError(f"base URL must be a plain http(s) URL with a host: {err.reason}") from err
        default_port = _DEFAULT_PORTS[base.scheme]
        extra: set[tuple[str, int]] = set()
        if base.host in PLACSP_HOSTS:
            extra.update((host, default_port) for host in PLACSP_HOSTS)
        for entry in allowed_hosts:
            host, _, port = entry.strip().lower().rpartition(":") if ":" in entry else (entry.strip().lower(), "", "")
            extra.add((host.strip("[]"), int(port) if port else default_port))
        return cls(base, frozenset(extra))

    def admit(self, url: str) -> Admitted:
        """`url` in the form that is sent, where it connects and whether it gets the credentials;
        RefusedUrlError (before any request) when it may not be fetched."""
        sent, target = sent_form(url, self.base.scheme)
        if target.scheme != self.base.scheme:
            raise RefusedUrlError(f"its scheme {target.scheme} differs from the configured site's ({self.base.scheme})")
        on_site = (target.host, target.port) == (self.base.host, self.base.port)
        if not on_site and (target.host, target.port) not in self.extra:
            if target.host == self.base.host:
                raise RefusedUrlError(
                    f"port {target.port} differs from the configured site's ({self.base.port})", allow_listable=True
                )
            host = str(target).split("://", 1)[1]
            raise RefusedUrlError(
                f"host {host} is neither the configured site ({self.base}) nor in allowed_hosts", allow_listable=True
            )
        return Admitted(sent, target, credentials=target == self.base)

    def refusal(self, url: str) -> str | None:
        """Why `url` may not be fetched, or None when it may."""
        try:
            self.admit(url)
        except RefusedUrlError as err:
            return err.reason
        return None

    def may_send_credentials(self, url: str) -> bool:
        try:
            return self.admit(url).credentials
        except RefusedUrlError:
            return False

    def describe(self) -> str:
        allowed = ", ".join(sorted(f"{h}:{p}" for h, p in self.extra)) or "none"
        return f"site {self.base}; allowed_hosts {allowed}"
