"""A tiny HTTP server on 127.0.0.1 that serves feed pages and archives like the PLACSP site.

Used by `make demo` (bundled real pages) and by the tests (real and generated pages, plus
misbehaviours: status codes, Retry-After, cut bodies, redirects, HTML error pages). Real HTTP,
real sockets: no mocked `requests`.
"""

from __future__ import annotations

import gzip
import ssl
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

Body = bytes | Path


@dataclass
class Reply:
    """A canned answer. `cut_at` sends a Content-Length for the whole body but only that many bytes
    (without `Content-Length` when `send_length` is False: the client cannot tell it was cut).
    `encoding` (`gzip` or `deflate`) compresses the body on the wire, as a CDN might; `trickle`
    sends it one byte every that many seconds; `stall_at` sends that many bytes, then nothing for
    `stall` seconds before the rest (a download caught half-way). `reason` replaces the status
    line's reason phrase, sent as given (a hostile server's ESC sequences and line breaks included)."""

    body: Body = b""
    status: int = 200
    content_type: str = "application/atom+xml; charset=utf-8"
    headers: dict[str, str] | None = None
    cut_at: int | None = None
    delay: float = 0.0
    encoding: str | None = None
    send_length: bool = True
    trickle: float = 0.0
    stall_at: int | None = None
    stall: float = 0.0
    reason: str | None = None


Handler = Callable[[BaseHTTPRequestHandler], "Reply"]
Route = Body | Reply | Handler


class LoopbackSite:
    """Serve `routes` (path -> bytes, file, Reply or callable) until `close()`; counts hits."""

    def __init__(self, routes: Mapping[str, Route] | None = None, *, tls: tuple[Path, Path] | None = None) -> None:
        """`tls=(certfile, keyfile)` serves HTTPS (tests of certificate verification)."""
        self.routes: dict[str, Route] = dict(routes or {})
        self.hits: dict[str, int] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []  # (path with query, headers) of every request
        site = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                path = urlsplit(self.path).path
                site.hits[path] = site.hits.get(path, 0) + 1
                site.requests.append((self.path, dict(self.headers.items())))
                route = site.routes.get(path)
                if route is None:
                    reply = Reply(b"not found", status=404, content_type="text/plain")
                elif callable(route):
                    reply = route(self)
                elif isinstance(route, Reply):
                    reply = route
                else:
                    reply = Reply(route, content_type=_guess_type(path))
                _send(self, reply)

            def log_message(self, format: str, *args: object) -> None:  # keep test output clean
                return

        self._server = _QuietServer(("127.0.0.1", 0), _Handler)
        self.scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(tls[0]), str(tls[1]))
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
            self.scheme = "https"
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return self.url("/sindicacion")

    def url(self, path: str) -> str:
        host, port = self._server.server_address[:2]
        return f"{self.scheme}://{host!s}:{port}{path}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> LoopbackSite:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        # Clients that hang up mid-body are exactly what some tests do; not worth a traceback.
        return


def _guess_type(path: str) -> str:
    return "application/zip" if path.endswith(".zip") else "application/atom+xml; charset=utf-8"


def _send(handler: BaseHTTPRequestHandler, reply: Reply) -> None:
    if reply.delay:
        time.sleep(reply.delay)
    body = reply.body.read_bytes() if isinstance(reply.body, Path) else reply.body
    if reply.encoding == "gzip":
        body = gzip.compress(body)
    elif reply.encoding == "deflate":
        body = zlib.compress(body)
    handler.send_response(reply.status, reply.reason)
    handler.send_header("Content-Type", reply.content_type)
    if reply.send_length:
        handler.send_header("Content-Length", str(len(body)))
    if reply.encoding:
        handler.send_header("Content-Encoding", reply.encoding)
    for key, value in (reply.headers or {}).items():
        handler.send_header(key, value)
    ends_by_closing = reply.cut_at is not None or not reply.send_length
    if ends_by_closing:
        handler.send_header("Connection", "close")
    handler.end_headers()
    payload = body if reply.cut_at is None else body[: reply.cut_at]
    try:
        if reply.stall_at is not None:
            handler.wfile.write(payload[: reply.stall_at])
            handler.wfile.flush()
            time.sleep(reply.stall)
            handler.wfile.write(payload[reply.stall_at :])
            handler.wfile.flush()
        elif reply.trickle:
            for i in range(len(payload)):
                handler.wfile.write(payload[i : i + 1])
                handler.wfile.flush()
                time.sleep(reply.trickle)
        else:
            handler.wfile.write(payload)
            handler.wfile.flush()
    except (BrokenPipeError, ConnectionResetError):
        return
    if ends_by_closing:
        handler.close_connection = True
