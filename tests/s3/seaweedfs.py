"""A real S3-compatible server for the tests: SeaweedFS (Apache-2.0), its `weed` binary built once from
the Go module proxy and cached under `.cache/seaweedfs/` (about 6 minutes on 2 cores, a no-op after),
started on 127.0.0.1 with fresh ports and a data folder of the test session's own.

`go install ...@version` refuses the module (its go.mod has replace directives), so the module is
downloaded and `./weed` built in a writable copy. `python -m tests.s3.seaweedfs build` builds it ahead
(the Makefile does, before pytest).
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VERSION = "v0.0.0-20261109003541-7506e5f91cd6"  # github.com/seaweedfs/seaweedfs, as the proxy resolves it
MODULE = "github.com/seaweedfs/seaweedfs"
CACHE = Path(__file__).resolve().parents[2] / ".cache" / "seaweedfs"
READY_SECONDS = 90


def binary() -> Path:
    """The cached `weed` binary, built first if missing."""
    target = CACHE / f"weed-{VERSION}"
    if target.is_file():
        return target
    go = shutil.which("go") or "/usr/local/go/bin/go"
    CACHE.mkdir(parents=True, exist_ok=True)
    print(f"building SeaweedFS {VERSION} from the Go module proxy (once; about 6 minutes)", file=sys.stderr)
    started = time.monotonic()
    listing = subprocess.run([go, "mod", "download", "-json", f"{MODULE}@{VERSION}"], check=True, capture_output=True)
    source = Path(json.loads(listing.stdout)["Dir"])
    with tempfile.TemporaryDirectory(dir=CACHE) as work:
        copy = Path(work) / "src"
        shutil.copytree(source, copy)
        for path in [copy, *copy.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)
        partial = Path(work) / "weed"
        subprocess.run([go, "build", "-o", str(partial), "./weed"], cwd=copy, check=True)
        partial.replace(target)  # whole or absent: a build killed half-way leaves no binary
    print(f"built {target.name} in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return target


@dataclass
class S3Server:
    endpoint: str
    process: subprocess.Popen
    data: Path
    log: Path

    def create_bucket(self, name: str) -> str:
        request = urllib.request.Request(f"{self.endpoint}/{name}", method="PUT")
        with urllib.request.urlopen(request, timeout=30) as reply:
            assert reply.status == 200, reply.status
        return name

    def stop(self) -> None:
        # A graceful stop takes the server 12 s or more, and its data folder is thrown away: 5 s, then kill.
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start(data: Path) -> S3Server:
    """`weed server -s3` on 127.0.0.1, ready to serve (an S3 GET answers)."""
    data.mkdir(parents=True, exist_ok=True)
    s3, master, volume, filer = _free_ports(4)
    log = data / "weed.log"
    args = [
        str(binary()),
        "server",
        f"-dir={data}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-master.port={master}",
        f"-volume.port={volume}",
        f"-filer.port={filer}",
        "-s3",
        f"-s3.port={s3}",
        # A bucket is a collection of its own, which grows 7 volumes at its first write: 20 volumes
        # served 2 buckets, and a third test's PUTs got 500s. Small volumes (files are sparse), many.
        "-master.volumeSizeLimitMB=64",
        "-volume.max=300",
    ]
    with log.open("wb") as out:
        # AWS_* keys in its environment make `weed` require them (compose's store does so on purpose);
        # this server is anonymous, whatever the caller's environment holds.
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    server = S3Server(f"http://127.0.0.1:{s3}", process, data, log)
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"weed server exited ({process.returncode}):\n{log.read_text()[-3000:]}")
        try:
            server.create_bucket("ready-check")
            return server
        except OSError:
            time.sleep(0.5)
    server.stop()
    raise RuntimeError(f"weed server not ready after {READY_SECONDS} s:\n{log.read_text()[-3000:]}")


def _free_ports(n: int) -> list[int]:
    """`n` free ports whose gRPC twins (port + 10000, SeaweedFS's default) are free too."""
    ports: list[int] = []
    while len(ports) < n:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port + 10000 < 65536 and port not in ports and _free(port + 10000):
            ports.append(port)
    return ports


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class CountingProxy:
    """A proxy on 127.0.0.1 in front of an S3 endpoint: each request forwarded unchanged (one upstream
    connection per client connection) and logged as (method, path, the server's answer seconds).
    Point `AWS_ENDPOINT_URL` at `endpoint` to count a client's requests (tests/s3, benchmarks)."""

    def __init__(self, upstream: str) -> None:
        self.log: list[tuple[str, str, float]] = []
        self._server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), _forwarder(upstream.removeprefix("http://"), self.log)
        )
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _forwarder(upstream: str, log: list[tuple[str, str, float]]) -> type[http.server.BaseHTTPRequestHandler]:
    class Forward(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            del args  # the log is the output

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            if not hasattr(self, "_up"):
                self._up = http.client.HTTPConnection(upstream, timeout=120)
            started = time.perf_counter()
            self._up.request(self.command, self.path, body=body, headers=dict(self.headers.items()))
            reply = self._up.getresponse()
            data = reply.read()
            log.append((self.command, self.path, time.perf_counter() - started))
            self.send_response(reply.status)
            for name, value in reply.getheaders():
                if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(name, value)
            size = reply.getheader("Content-Length") if self.command == "HEAD" else None
            self.send_header("Content-Length", size or str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward  # noqa: N815 (http.server's names)

    return Forward


if __name__ == "__main__" and sys.argv[1:] == ["build"]:
    print(binary())
    os._exit(0)
