"""Where an S3 ingest's time goes: the requests of one daily ingest, counted by kind (a study, not timed).

    .venv/bin/python -m benchmarks.s3_requests              # the S3 benchmark's daily run
    .venv/bin/python -m benchmarks.s3_requests --history 30 # after 30 earlier days (longer Delta logs)
    .venv/bin/python -m benchmarks.s3_requests --history 30 --compacted   # ... then compacted, checkpointed

The S3 benchmark's daily lake (`bench_s3`: the real 1044 page of 2022-01-06 into a lake holding the day
before) on a SeaweedFS server, with a counting proxy on 127.0.0.1 between the ingest and the server.
`--history N` adds N earlier days to that lake (`bench_s3`'s aged lake: small generated `agregadas`
pages, one ingest, so one commit and one data file per table, each). Each request is classed by what
it touches; the time shown is the server's answer time seen by the proxy. `--compacted` compacts each
table of that lake and writes a checkpoint (delta-rs `optimize.compact`, `create_checkpoint`) before
the day, as a table maintenance run would: what it saves an S3 daily run. The ingest's own seconds
through the proxy are no measurement (the proxy is Python): `bench_s3` times the ingest without it.
"""

from __future__ import annotations

import argparse
import http.client
import http.server
import os
import re
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from benchmarks import bench_s3
from benchmarks._common import run_child


class _Counted(http.server.ThreadingHTTPServer):
    daemon_threads = True
    upstream = ""
    log: list[tuple[str, str, float]]


class _Proxy(http.server.BaseHTTPRequestHandler):
    """Forwards each request to the server unchanged (one upstream connection per client connection)."""

    protocol_version = "HTTP/1.1"
    server: _Counted

    def log_message(self, *args: Any) -> None:
        del args  # the counts are the output

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        if not hasattr(self, "_up"):
            self._up = http.client.HTTPConnection(self.server.upstream, timeout=120)
        t = time.perf_counter()
        self._up.request(self.command, self.path, body=body, headers=dict(self.headers.items()))
        reply = self._up.getresponse()
        data = reply.read()
        self.server.log.append((self.command, self.path, time.perf_counter() - t))
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


def kind(method: str, path: str) -> str:
    """What a request is for, in the ingest's terms."""
    key, _, query = unquote(path).partition("?")
    if "list-type" in query:
        listed = re.search(r"prefix=([^&]*)", query)
        where = listed.group(1) if listed else ""
        if "delimiter" in query and where.endswith("_delta_log/"):
            return "LIST  table exists? (`has_commit`, one folder listing)"
        return "LIST  Delta log (open, commit)" if "_delta_log" in where else "LIST  other"
    if "_delta_log/" in key or key.endswith("_delta_log"):
        if key.endswith("_delta_log"):
            return "HEAD  table exists? (`has_commit`)"
        if key.endswith("_last_checkpoint"):
            return f"{method:5s} Delta log: _last_checkpoint"
        return f"{method:5s} Delta log: " + ("checkpoint" if ".checkpoint." in key else "commit file")
    if key.endswith(".parquet"):
        return f"{method:5s} table data file (Parquet)"
    return f"{method:5s} Bronze page, manifest, run summary"


def _compact(lake: Path) -> None:
    """Each table of the lake compacted (its small files rewritten as one per partition) and checkpointed."""
    from placsp_provider.lake import LAKE_TABLES, table_path
    from placsp_provider.lake_storage import open_table

    for table in LAKE_TABLES:
        delta = open_table(table_path(lake, table))
        delta.optimize.compact()
        delta.create_checkpoint()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, default=0, help="earlier days ingested first (one commit each)")
    parser.add_argument("--compacted", action="store_true", help="compact and checkpoint the tables first")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="placsp-s3-requests-") as tmp_name:
        tmp = Path(tmp_name)
        size = bench_s3._daily(tmp, "daily", args.history)  # its earlier days ingested on disk (not counted)
        if args.compacted:
            _compact(size.template)
        with bench_s3.s3_environment(tmp / "seaweedfs") as server:
            lake = bench_s3._lay_lake(size, "s3", tmp, "requests")
            proxy = _Counted(("127.0.0.1", 0), _Proxy)
            proxy.upstream, proxy.log = server.endpoint.removeprefix("http://"), []
            threading.Thread(target=proxy.serve_forever, daemon=True).start()
            real = os.environ["AWS_ENDPOINT_URL"]
            os.environ["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{proxy.server_address[1]}"
            payload = {"task": "ingest", "lake": lake, "dataset": size.dataset, "engine": "delta-rs", "cores": 2}
            try:
                run_child(bench_s3.__name__, {**payload, "manifest": size.manifest, "check": False})
            finally:
                os.environ["AWS_ENDPOINT_URL"] = real
                proxy.shutdown()
    counts: Counter[str] = Counter()
    seconds: dict[str, float] = defaultdict(float)
    for method, path, took in proxy.log:
        counts[kind(method, path)] += 1
        seconds[kind(method, path)] += took
    total = sum(seconds.values())
    state = ", compacted and checkpointed" if args.compacted else ""
    print(
        f"daily ingest on S3 after {1 + args.history} earlier day(s){state}: {len(proxy.log)} requests, {total:.3f} s"
    )
    for name in sorted(counts, key=lambda k: -counts[k]):
        print(f"  {counts[name]:5d}  {seconds[name] * 1000:8.1f} ms  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
