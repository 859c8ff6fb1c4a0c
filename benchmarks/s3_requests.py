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
import os
import re
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from urllib.parse import unquote

from tests.s3.seaweedfs import CountingProxy

from benchmarks import bench_s3
from benchmarks._common import run_child


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
            proxy = CountingProxy(server.endpoint)
            real = os.environ["AWS_ENDPOINT_URL"]
            os.environ["AWS_ENDPOINT_URL"] = proxy.endpoint
            payload = {"task": "ingest", "lake": lake, "dataset": size.dataset, "engine": "delta-rs", "cores": 2}
            try:
                run_child(bench_s3.__name__, {**payload, "manifest": size.manifest, "check": False})
            finally:
                os.environ["AWS_ENDPOINT_URL"] = real
                proxy.close()
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
