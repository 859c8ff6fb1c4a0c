"""What the volume series costs (issue 34, decision 0043): the old series (Silver `entries` by day of
`updated`, one column of one partition) against the new one (every entry version of the reconciled
Bronze pages, cached) on a lake of a few thousand entries, landed and ingested (delta-rs) the way the
volume tests land them. A study, not a registered benchmark: it prints its figures.

    PYTHONPATH=provider:. .venv/bin/python -m benchmarks.volume_series_study [days]   # about 40 new entries a day
"""

from __future__ import annotations

import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path


def old_series(lake: Path, dataset: str) -> dict:
    """The series before issue 34, as `quality.volume.daily_counts` computed it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from placsp_provider.quality.engine import open_partition

    source = open_partition(lake, "entries", dataset)
    updated = source.to_table(columns=["updated"]).column("updated")
    counts = pc.value_counts(pc.cast(pc.cast(updated, pa.timestamp("us")), pa.date32()))
    return {v["values"].as_py(): int(v["counts"].as_py()) for v in counts}


def main(days: int = 90) -> None:
    from tests.quality import test_volume_series as history
    from tests.quality.volume_lake import ingest, land_day

    from placsp_provider.lake import volume_versions_paths
    from placsp_provider.quality.volume_series import read_series

    history.HISTORY_DAYS = days - 1  # the false-spike test's generator, longer
    history.CHECKED = history.day(days)
    versions = history.published()
    with tempfile.TemporaryDirectory() as tmp:
        lake = Path(tmp) / "lake"
        for n in range(1, days):
            d = history.day(n)
            land_day(
                lake,
                d,
                sorted(versions.get(d, []), key=lambda v: v[1]),
                relanded=versions.get(d - timedelta(days=1), [])[-3:],
            )
        ingest(lake)
        timings = {}
        start = time.perf_counter()
        old = old_series(lake, "agregadas")
        timings["old series (Silver, one column)"] = time.perf_counter() - start
        start = time.perf_counter()
        cold = read_series(lake, "agregadas")
        timings[f"new series, cold cache ({cold.pages_read} pages read)"] = time.perf_counter() - start
        start = time.perf_counter()
        warm = read_series(lake, "agregadas")
        timings["new series, warm cache (nothing new)"] = time.perf_counter() - start
        last = history.day(days)
        land_day(lake, last, sorted(versions.get(last, []), key=lambda v: v[1]))
        ingest(lake)
        start = time.perf_counter()
        daily = read_series(lake, "agregadas")
        timings[f"new series, one new day ({daily.pages_read} page read)"] = time.perf_counter() - start
        bronze = sum(p.stat().st_size for p in (lake / "bronze").rglob("*.atom"))
        cache = sum(p.stat().st_size for p in volume_versions_paths(lake, "agregadas"))
        print(
            f"lake: {days} days, {sum(old.values())} Silver entries, {warm.versions} entry versions, "
            f"{bronze / 1e6:.1f} MB of Bronze pages; cache {cache / 1e3:.0f} kB"
        )
        for what, seconds in timings.items():
            print(f"  {what}: {seconds * 1000:.0f} ms")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:2]))
