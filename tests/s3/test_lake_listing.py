"""An S3 lake folder is listed with one request and says what upath's own listing says (a real
SeaweedFS server on loopback: conftest.py). The request count is read from a counting proxy between
obstore and the server, the way `benchmarks/s3_requests.py` counts an ingest's requests."""

from __future__ import annotations

import http.client
import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from upath.implementations.cloud import S3Path

from placsp_provider import lake_storage
from placsp_provider.lake import resolve_lake
from tests.s3.conftest import S3Lake

pytestmark = [pytest.mark.s3, pytest.mark.http]


class _Counting(http.server.ThreadingHTTPServer):
    daemon_threads = True
    upstream = ""
    requests: list[str]


class _Forward(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Counting

    def log_message(self, *args: Any) -> None:
        del args

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        upstream = http.client.HTTPConnection(self.server.upstream, timeout=60)
        upstream.request(self.command, self.path, body=body, headers=dict(self.headers.items()))
        reply = upstream.getresponse()
        data = reply.read()
        self.server.requests.append(f"{self.command} {self.path}")
        self.send_response(reply.status)
        for name, value in reply.getheaders():
            if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(name, value)
        size = reply.getheader("Content-Length") if self.command == "HEAD" else None
        self.send_header("Content-Length", size or str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        upstream.close()

    do_GET = do_PUT = do_HEAD = _forward  # noqa: N815 (http.server's names)


@pytest.fixture
def counted(s3_lake: S3Lake, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Requests of this process to the server from now on (obstore's stores made afresh through the proxy)."""
    proxy = _Counting(("127.0.0.1", 0), _Forward)
    proxy.upstream, proxy.requests = s3_lake.env["AWS_ENDPOINT_URL"].removeprefix("http://"), []
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{proxy.server_address[1]}")
    lake_storage._s3_store.cache_clear()
    lake_storage._filesystem.cache_clear()
    yield proxy.requests
    proxy.shutdown()
    lake_storage._s3_store.cache_clear()
    lake_storage._filesystem.cache_clear()


def test_a_folder_is_listed_in_one_request_with_upaths_answer(s3_lake: S3Lake, counted: list[str]) -> None:
    lake = resolve_lake(s3_lake.uri)
    log = lake / "silver" / "entries" / "_delta_log"
    for name in ("00000000000000000000.json", "00000000000000000001.json", "sub/inner.json"):
        lake_storage.put_new(log / name, b"{}")
    counted.clear()
    got = sorted(p.name for p in log.iterdir())
    assert len(counted) == 1 and "list-type=2" in counted[0], counted
    assert got == ["00000000000000000000.json", "00000000000000000001.json", "sub"]
    assert got == sorted(p.name for p in S3Path.iterdir(log))  # upath's own listing: the same children
    assert all(str(p).startswith(str(log) + "/") for p in log.iterdir())


def test_a_missing_folder_or_a_file_is_no_folder(s3_lake: S3Lake, counted: list[str]) -> None:
    lake = resolve_lake(s3_lake.uri)
    lake_storage.put_new(lake / "runs" / "summary.json", b"{}")
    for path in (lake / "silver" / "lots" / "_delta_log", lake / "runs" / "summary.json"):
        with pytest.raises(NotADirectoryError):
            list(path.iterdir())
    assert counted  # the answer came from the server
