"""A hostile server at the HTTP level, over real sockets on loopback (issue 31).

- URLs that parsers read differently (`http://127.0.0.1:B\\@127.0.0.1:A/`: urllib.parse sees A,
  urllib3 connects to B) and every other authority trick are refused, in links and in redirects,
  with the credentials configured, while a second server ("elsewhere") records that it received
  nothing.
- A server that trickles its status line or headers (each byte inside `read_timeout`) is cut at
  the download's total deadline, which covers connecting, the head and every redirect hop.
- Text the server controls (a reason phrase, a `Location`) reaches exception messages, the log and
  the CLI's stderr with its control characters escaped, never raw.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from placsp_provider.bronze.extract import ExtractRequest, extract_interval
from placsp_provider.datasets import DATASETS
from placsp_provider.demo.loopback_site import LoopbackSite, Reply
from placsp_provider.errors import FeedError, UntrustedUrlError
from placsp_provider.feed.client import ClientConfig, FeedClient
from placsp_provider.feed.url_policy import UrlPolicy
from placsp_provider.untrusted import printable
from tests.pages import day, page

pytestmark = pytest.mark.http

AGR = DATASETS["agregadas"]
FOLDER = f"/sindicacion/{AGR.folder}/"
HEAD = FOLDER + AGR.head_file
START = datetime(2022, 1, 5, tzinfo=UTC)
CREDENTIALS = ("placsp-user", "placsp-password")


@pytest.fixture
def elsewhere() -> Iterator[LoopbackSite]:
    """Another server on 127.0.0.1 (another port): where a disguised URL really connects. It
    records every request; it must receive none."""
    with LoopbackSite() as other:
        other.routes["/p2.atom"] = page([(9, day(5))])
        yield other


def _port(server: LoopbackSite) -> int:
    return int(server.url("").rsplit(":", 1)[1])


def _client(site: LoopbackSite, **overrides: object) -> FeedClient:
    config: dict[str, object] = {"base_url": site.base_url, "backoff_base": 0.0, "max_retries": 0, "read_timeout": 5.0}
    config.update(overrides)
    return FeedClient(ClientConfig(**config), "agregadas")  # type: ignore[arg-type]


def _extract(client: FeedClient, lake: Path) -> None:
    req = ExtractRequest(
        dataset=AGR,
        start=START,
        end=START + timedelta(days=1),
        lake=lake,
        run_id="test",
        overlap=timedelta(0),
        today=date(2026, 11, 29),
    )
    with client:
        extract_interval(client, req)


# -- F1: one parse for the policy, the connection and the credentials ---------------------------
# (id, URL built from the site's port A and elsewhere's port B, why it is refused)
DISGUISED = [
    ("backslash before @", "http://127.0.0.1:{b}\\@127.0.0.1:{a}/p2.atom", "it holds a backslash"),
    ("user info naming another port", "http://127.0.0.1:{b}@127.0.0.1:{a}/p2.atom", "it carries user info"),
    ("user and password", "http://user:pass@127.0.0.1:{a}/p2.atom", "it carries user info"),
    ("percent-encoded host", "http://%31%32%37.0.0.1:{a}/p2.atom", "its host is percent-encoded"),
    ("IPv6 zone id", "http://[::1%25lo]:{a}/p2.atom", "its host is percent-encoded (or names an IPv6 zone)"),
    ("full-width digits", "http://\uff11\uff12\uff17.0.0.1:{a}/p2.atom", "holds non-ASCII characters"),
    ("trailing dot", "http://127.0.0.1.:{a}/p2.atom", "has an empty label"),
]


@pytest.mark.parametrize(("href", "why"), [pytest.param(h, w, id=i) for i, h, w in DISGUISED])
def test_a_disguised_next_link_is_refused_and_nothing_is_sent(lake, site, elsewhere, href, why) -> None:
    link = href.format(a=_port(site), b=_port(elsewhere))
    site.routes[HEAD] = page([(1, day(5, 20))], next_href=link)
    with pytest.raises(UntrustedUrlError) as caught:
        _extract(_client(site, auth=CREDENTIALS), lake)
    message = str(caught.value)
    assert message.startswith(f'dataset agregadas: {site.url(HEAD)}: its rel="next" link ')
    assert "is refused: " in message and why in message
    assert "nothing was fetched from it" in message
    assert elsewhere.requests == []  # not one request: no credentials, nothing landed from it
    assert [path for path, _ in site.requests] == [HEAD]  # and nothing from the link on the site either


@pytest.mark.parametrize(("location", "why"), [pytest.param(h, w, id=i) for i, h, w in DISGUISED[:5]])
def test_a_disguised_redirect_is_refused_and_nothing_is_sent(lake, site, elsewhere, location, why) -> None:
    target = location.format(a=_port(site), b=_port(elsewhere))
    site.routes[HEAD] = Reply(b"", status=302, headers={"Location": target})
    with pytest.raises(UntrustedUrlError) as caught:
        _extract(_client(site, auth=CREDENTIALS), lake)
    message = str(caught.value)
    assert message.startswith(f"dataset agregadas: {site.url(HEAD)}: redirected (302) to ")
    assert "refused before any request: " in message and why in message
    assert elsewhere.requests == []
    assert [path for path, _ in site.requests] == [HEAD]


@pytest.mark.parametrize("char", ["\x1b", "\t", " ", "\x00", "\x85"], ids=["ESC", "tab", "space", "NUL", "NEL"])
def test_a_redirect_with_a_control_or_space_character_is_refused_not_repaired(lake, site, char) -> None:
    # urljoin would silently drop a tab: the URL judged would not be the one the server wrote.
    site.routes[HEAD] = Reply(b"", status=302, headers={"Location": f"/sindicacion/p{char}2.atom"})
    with pytest.raises(UntrustedUrlError, match=r"it holds a control or whitespace character \(U\+00"):
        _extract(_client(site, auth=CREDENTIALS), lake)
    assert [path for path, _ in site.requests] == [HEAD]


@pytest.mark.timeout(60)
def test_a_redirects_body_is_never_read(tmp_path, site) -> None:
    # requests, even with allow_redirects=False, reads a redirect's body in full (uncapped, into
    # memory) to prepare a `next` request: a slow or huge 302 body would hold or bloat the download.
    body = page([(1, day(5))])
    site.routes["/p.atom"] = body
    site.routes["/hop"] = Reply(b"x" * 100, status=302, headers={"Location": "/p.atom"}, trickle=1.0)
    started = time.monotonic()
    with _client(site) as client:
        got = client.download(site.url("/hop"), tmp_path / "p.atom")
    assert got.path.read_bytes() == body
    assert time.monotonic() - started < 3  # not the 100 s the body takes to trickle


def test_one_parse_decides_the_policy_the_connection_and_the_credentials(lake, site, elsewhere) -> None:
    a, b = _port(site), _port(elsewhere)
    policy = UrlPolicy.for_base(site.base_url)
    disguised = f"http://127.0.0.1:{b}\\@127.0.0.1:{a}/sindicacion/p2.atom"
    assert policy.refusal(disguised) is not None
    assert not policy.may_send_credentials(disguised)  # urllib.parse says port A; urllib3 connects to B
    # A plain URL is admitted in the very form requests will send (dot segments resolved, scheme and
    # host lower-cased): that string is what is judged, sent and credited.
    admitted = policy.admit(f"HTTP://127.0.0.1:{a}/sindicacion/x/../p@2.atom?b=1")
    assert admitted.url == f"http://127.0.0.1:{a}/sindicacion/p@2.atom?b=1"
    assert admitted.credentials and admitted.origin.port == a
    # Not over-refused: `@` in a path is not user info, and `..` resolves on the same site.
    site.routes[HEAD] = page([(1, day(5, 20))], next_href="sub/../p@2.atom")
    site.routes[FOLDER + "p@2.atom"] = page([(2, day(4))])  # older than the window: the walk ends
    _extract(_client(site, auth=CREDENTIALS), lake)
    assert [path for path, _ in site.requests] == [HEAD, FOLDER + "p@2.atom"]
    assert all(headers["Authorization"].startswith("Basic ") for _, headers in site.requests)
    assert elsewhere.requests == []


def test_credentials_in_the_base_url_become_the_connections_auth() -> None:
    config = ClientConfig(base_url="https://user:p%40ss@contrataciondelsectorpublico.gob.es/sindicacion")
    assert config.base_url == "https://contrataciondelsectorpublico.gob.es/sindicacion"
    assert config.auth == ("user", "p@ss")
    assert "p%40ss" not in repr(config) and "p@ss" not in repr(config)


# -- F3: one deadline from the connect to the last byte -----------------------------------------
class TricklingHead:
    """A raw-socket HTTP server on 127.0.0.1 that sends its status line and headers one byte every
    `pace` seconds: each byte well inside `read_timeout`, the whole head ~`head_seconds` long. With
    `at_once`, those bytes go first in one piece (a complete status line, say, to trickle only the
    headers). With `keep_alive_first`, the first request on each connection gets that page at once,
    kept alive, so the trickle comes on a reused connection. With `tls_record`, it trickles a TLS
    handshake record instead (the client is stuck in its handshake). It records when each
    connection ended (the client hung up)."""

    def __init__(
        self,
        *,
        pace: float = 0.25,
        head_seconds: float = 12.0,
        at_once: bytes = b"",
        keep_alive_first: bytes | None = None,
        tls_record: bool = False,
    ) -> None:
        self.pace = pace
        self.tls_record = tls_record
        self.at_once = at_once
        self.keep_alive_first = keep_alive_first
        body = page([(1, day(5))])
        padding = b"a" * int(head_seconds / pace)
        self.head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/atom+xml\r\nX-Slow: "
            + padding
            + f"\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        )
        if tls_record:  # a TLS handshake record announced 16 KB long, its bytes trickled
            self.head = b"\x16\x03\x03\x40\x00" + padding
        self.body = body
        self.connections = 0
        self.hung_up: list[float] = []  # monotonic times the client was seen gone
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._open = True
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}{path}"

    def close(self) -> None:
        self._open = False
        self._listener.close()

    def _accept(self) -> None:
        while self._open:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            if self.tls_record:  # the client speaks first (its ClientHello); answer it slowly
                self._trickle(conn)
                return
            first = True
            while _read_request(conn):
                if first and self.keep_alive_first is not None:
                    first = False
                    length = len(self.keep_alive_first)
                    head = f"HTTP/1.1 200 OK\r\nContent-Length: {length}\r\n\r\n".encode()
                    conn.sendall(head + self.keep_alive_first)
                    continue
                self._trickle(conn)
                return

    def _trickle(self, conn: socket.socket) -> None:
        try:
            conn.sendall(self.at_once)
            for i in range(len(self.at_once), len(self.head)):
                conn.sendall(self.head[i : i + 1])
                time.sleep(self.pace)
            conn.sendall(self.body)
        except OSError:  # the client shut the connection down: what the deadline must do
            self.hung_up.append(time.monotonic())


def _read_request(conn: socket.socket) -> bytes:
    conn.settimeout(30)
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            chunk = conn.recv(4096)
        except OSError:
            return b""
        if not chunk:
            return b""
        data += chunk
    return data


@pytest.fixture
def trickling() -> Iterator[Callable[..., TricklingHead]]:
    servers: list[TricklingHead] = []

    def make(**kw: Any) -> TricklingHead:
        servers.append(TricklingHead(**kw))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


DEADLINE = 2.0
MARGIN = 1.5  # the shutdown is immediate; this is for a busy CI machine


def _timed(call: Callable[[], object]) -> tuple[BaseException, float]:
    started = time.monotonic()
    with pytest.raises(FeedError) as caught:
        call()
    return caught.value, time.monotonic() - started


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "at_once", [b"", b"HTTP/1.1 200 OK\r\nContent-Type: application/atom+xml\r\n"], ids=["status line", "headers"]
)
@pytest.mark.parametrize("call", ["download", "probe"])
def test_a_trickled_head_hits_the_deadline(tmp_path, trickling, at_once, call) -> None:
    server = trickling(at_once=at_once)
    config = {"base_url": server.url("/sindicacion"), "max_retries": 0, "read_timeout": 5.0}
    dest = tmp_path / "p.atom"
    with FeedClient(ClientConfig(page_deadline=DEADLINE, **config), "agregadas") as client:  # type: ignore[arg-type]
        if call == "download":
            error, took = _timed(lambda: client.download(server.url("/p.atom"), dest))
        else:  # the connection test of the Airflow hook
            error, took = _timed(lambda: client.probe(server.url("/p.atom")))
    assert f"download exceeded its deadline of {DEADLINE:g} s before the response's headers were complete" in str(error)
    assert DEADLINE - 0.1 <= took < DEADLINE + MARGIN
    assert not dest.exists()
    _the_server_saw_the_connection_end(server)


@pytest.mark.timeout(60)
def test_a_trickled_tls_handshake_hits_the_deadline(tmp_path, trickling) -> None:
    server = trickling(tls_record=True)
    base = server.url("/sindicacion").replace("http://", "https://")
    with FeedClient(ClientConfig(base_url=base, max_retries=0, page_deadline=DEADLINE), "agregadas") as client:
        error, took = _timed(lambda: client.download(base + "/p.atom", tmp_path / "p.atom"))
    assert "download exceeded its deadline of 2 s before the response's headers were complete" in str(error)
    assert DEADLINE - 0.1 <= took < DEADLINE + MARGIN
    _the_server_saw_the_connection_end(server)


@pytest.mark.timeout(60)
def test_the_deadline_spans_redirect_hops(tmp_path, site, trickling) -> None:
    server = trickling()
    host_port = server.url("").split("://")[1]
    # 1.2 s spent on the first hop, then a trickle: the deadline is 2 s from the start, not per hop.
    site.routes["/hop"] = Reply(b"", status=302, headers={"Location": server.url("/p.atom")}, delay=1.2)
    with _client(site, page_deadline=DEADLINE, allowed_hosts=(host_port,)) as client:
        error, took = _timed(lambda: client.download(site.url("/hop"), tmp_path / "p.atom"))
    assert "download exceeded its deadline of 2 s" in str(error)
    assert DEADLINE - 0.1 <= took < DEADLINE + MARGIN
    _the_server_saw_the_connection_end(server)


@pytest.mark.timeout(60)
def test_a_trickle_on_a_kept_alive_connection_hits_the_deadline(tmp_path, trickling) -> None:
    first = page([(1, day(5))])
    server = trickling(keep_alive_first=first)
    config = ClientConfig(base_url=server.url("/sindicacion"), max_retries=0, page_deadline=DEADLINE)
    with FeedClient(config, "agregadas") as client:
        assert client.download(server.url("/first.atom"), tmp_path / "1.atom").path.read_bytes() == first
        error, took = _timed(lambda: client.download(server.url("/second.atom"), tmp_path / "2.atom"))
    assert server.connections == 1  # the second request reused the first one's connection
    assert "download exceeded its deadline of 2 s before the response's headers were complete" in str(error)
    assert took < DEADLINE + MARGIN
    _the_server_saw_the_connection_end(server)


def _the_server_saw_the_connection_end(server: TricklingHead) -> None:
    """The socket was shut down, not abandoned to a thread still reading the trickle."""
    give_up = time.monotonic() + 5
    while not server.hung_up and time.monotonic() < give_up:
        time.sleep(0.05)
    assert server.hung_up, "the client left the trickling connection open"


# -- F5: the server's text is shown escaped ------------------------------------------------------
HOSTILE_REASON = "Busy\x1b[31m\rINFO forged: all good\x07\x9b2J"
_RAW = ("\x1b", "\r", "\x07", "\x9b")


def _raw_controls(text: str) -> list[str]:
    return [c for c in text if c != printable(c)]


def test_a_hostile_reason_phrase_reaches_the_error_and_the_log_escaped(tmp_path, site, caplog) -> None:
    site.routes["/p.atom"] = Reply(b"busy", status=503, reason=HOSTILE_REASON)
    with caplog.at_level(logging.DEBUG), _client(site, max_retries=1) as client, pytest.raises(FeedError) as caught:
        client.download(site.url("/p.atom"), tmp_path / "p.atom")
    message = str(caught.value)
    assert "HTTP 503 Busy\\x1b[31m\\rINFO forged: all good\\x07\\x9b2J (gave up after 2 attempts)" in message
    retries = [r.getMessage() for r in caplog.records if "retry 1 of 1" in r.getMessage()]
    assert len(retries) == 1 and "Busy\\x1b[31m\\rINFO forged" in retries[0]  # visible, not acted on
    for record in caplog.records:
        assert _raw_controls(record.getMessage()) == [], record.getMessage()
    assert not any(c in caplog.text for c in _RAW)


def test_the_connection_test_shows_the_status_line_escaped(site) -> None:
    site.routes[HEAD] = Reply(page([(1, day(5))]), reason=HOSTILE_REASON)
    with _client(site) as client:
        status = client.probe(site.url(HEAD))
    assert status == "HTTP 200 Busy\\x1b[31m\\rINFO forged: all good\\x07\\x9b2J"


def test_the_cli_prints_the_servers_text_escaped(tmp_path, site) -> None:
    calls = []

    def busy_once(_handler) -> Reply:
        calls.append(1)
        if len(calls) == 1:  # one retry (the CLI's backoff: 1 to 2 s), with a warning on stderr
            return Reply(b"busy", status=503, reason=HOSTILE_REASON)
        return Reply(b"gone", status=404, reason="\x1b[2J\x1b[HGone\rERROR forged line")

    site.routes[HEAD] = busy_once
    done = subprocess.run(
        [
            *(sys.executable, "-m", "placsp_provider.cli", "extract", "--dataset", "agregadas"),
            *("--since", "2022-01-05", "--until", "2022-01-06", "--lake", str(tmp_path / "lake")),
            *("--base-url", site.base_url, "--overlap-hours", "0"),
        ],
        capture_output=True,  # bytes: text mode would turn a bare CR into a newline
        timeout=120,
    )
    assert done.returncode == 2
    assert not any(c.encode("latin-1") in done.stderr for c in _RAW), done.stderr
    stderr = done.stderr.decode()
    assert "HTTP 503 Busy\\x1b[31m\\rINFO forged: all good" in stderr  # the retry warning
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("placsp extract: error: dataset agregadas: ")
    assert "answered HTTP 404 \\x1b[2J\\x1b[HGone\\rERROR forged line" in last


@pytest.mark.parametrize("char", ["&#9;", "&#10;", "&#13;"], ids=["tab", "newline", "CR"])
def test_a_next_link_with_a_control_character_is_refused_not_repaired(lake, site, char) -> None:
    # A character reference keeps the tab in the attribute's value (XML normalises a literal one to a
    # space); urljoin would drop it and fetch p2.atom, a page the feed never linked.
    site.routes[HEAD] = page([(1, day(5, 20))], next_href=f"/sindicacion/p{char}2.atom")
    site.routes["/sindicacion/p2.atom"] = page([(2, day(5, 10))])
    with pytest.raises(UntrustedUrlError, match=r'its rel="next" link .* is refused: it holds a control or whitespace'):
        _extract(_client(site, auth=CREDENTIALS), lake)
    assert [path for path, _ in site.requests] == [HEAD]
