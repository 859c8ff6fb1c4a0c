"""Small Spark ingests in one long-lived driver, C1 only against C2 (decision 0050): a study, not a
`make bench` benchmark.

    PYTHONPATH=provider:. .venv/bin/python -m benchmarks.driver_jit            # 7 rounds, C1 C2 C2 C1
    PYTHONPATH=provider:. .venv/bin/python -m benchmarks.driver_jit --rounds 3 --order c1,c2

Each option set runs in a fresh process with its own session (local[2], the test suite's settings):
a round lands two small pages (tests.pages) into a fresh lake and ingests them with Spark's writer,
one batch each, as the Spark tests do hundreds of times in one session. Per process: the first
round's seconds (start-up and compiling) and the median of the rounds from the fourth on (warm).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_OPTIONS = {"c1": "DEFAULT_DRIVER_JAVA_OPTIONS", "c2": "LONG_LIVED_DRIVER_JAVA_OPTIONS"}


def rounds(options_name: str, count: int) -> list[float]:
    """In this process: `count` rounds, each two batches into a fresh lake; seconds a round."""
    from tests.pages import day, page

    from placsp_provider.datasets import get_dataset
    from placsp_provider.demo.samples import land_pages
    from placsp_provider.ingest.request import IngestRequest
    from placsp_provider.ingest.run import ingest
    from placsp_provider.spark import session as spark_session

    options = getattr(spark_session, options_name)
    spark = spark_session.get_session(
        "driver-jit",
        extra={
            "spark.master": "local[2]",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.driver.extraJavaOptions": spark_session.driver_java_options(options),
        },
    )
    dataset = get_dataset("agregadas")
    pages = Path(tempfile.mkdtemp(prefix="driver-jit-pages-"))
    (pages / "p1.atom").write_bytes(page([(1, day(3)), (2, day(3))], tombstones=[(3, day(4))]))
    (pages / "p2.atom").write_bytes(page([(1, day(5)), (4, day(3))], tombstones=[(2, day(4))]))
    out = []
    for _ in range(count):
        lake = Path(tempfile.mkdtemp(prefix="driver-jit-")) / "lake"
        start = time.perf_counter()
        for n, name in enumerate(("p1", "p2"), start=1):
            manifest = land_pages(lake, dataset.key, [pages / f"{name}.atom"], f"2022-01-0{n}")
            ingest(IngestRequest(dataset, lake, f"r{n}", (manifest,)), "spark", spark=spark)
        out.append(time.perf_counter() - start)
    spark.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--order", default="c1,c2,c2,c1")
    parser.add_argument("--child", choices=sorted(_OPTIONS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(rounds(_OPTIONS[args.child], args.rounds)))
        return
    results: dict[str, list[list[float]]] = {name: [] for name in _OPTIONS}
    for name in args.order.split(","):
        child = [sys.executable, "-m", "benchmarks.driver_jit", "--child", name, "--rounds", str(args.rounds)]
        done = subprocess.run(child, capture_output=True, text=True, check=True)
        seconds = json.loads(done.stdout.strip().splitlines()[-1])
        results[name].append(seconds)
        warm = statistics.median(seconds[3:]) if len(seconds) > 3 else float("nan")
        print(f"{name}: rounds {' '.join(f'{s:.1f}' for s in seconds)} s; first {seconds[0]:.1f} s, warm {warm:.1f} s")
    if args.rounds <= 3:
        return
    warm = {n: statistics.median(s for r in runs for s in r[3:]) for n, runs in results.items() if runs}
    if len(warm) == 2:
        print(f"warm rounds, C2 against C1: {warm['c2'] / warm['c1']:.2f}x the time")


if __name__ == "__main__":
    main()
