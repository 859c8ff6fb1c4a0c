"""The volume check's series (quality/volume_series.py) on lakes landed the way extraction lands them
and ingested by the real delta-rs Silver ingest; real Prophet for the verdicts. Nothing is mocked.

The false spike (issue 34): entries published each day are updated again later (PLACSP: published,
awarded, formalised). Silver keeps only newest versions, so counted by day of `updated` (the old
series, counted here the old way) every past day lost its later-updated entries while the checked
day is whole: a normal day looked like a spike. The new series counts every version landed.
"""

from __future__ import annotations

import random
import shutil
from datetime import date, datetime, timedelta
from pathlib import Path

import pytest

from placsp_provider.lake import table_path, volume_versions_paths
from placsp_provider.quality.volume import VolumeConfig, check_day
from placsp_provider.quality.volume_series import daily_counts, read_series
from tests.quality.volume_lake import Version, ingest, land_day, midnight

pytestmark = pytest.mark.unit

D1 = date(2026, 3, 2)


def day(n: int) -> date:
    return D1 + timedelta(days=n - 1)


def at(n: int, hour: int = 10) -> datetime:
    return midnight(day(n)) + timedelta(hours=hour)


def silver_by_day(lake: Path) -> dict[date, int]:
    """The old series: Silver `entries` (newest versions only) by UTC day of `updated`."""
    from collections import Counter

    from deltalake import DeltaTable

    rows = DeltaTable(str(table_path(lake, "entries"))).to_pyarrow_table(columns=["updated"]).column("updated")
    return dict(Counter(t.as_py().date() for t in rows))


def test_every_version_counts_once_on_covered_days_and_a_past_day_never_shrinks(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    land_day(lake, day(1), [(1, at(1)), (2, at(1, 11))])
    land_day(lake, day(2), [(3, at(2)), (1, at(2, 12))], relanded=[(2, at(1, 11))])  # 2's version again
    land_day(lake, day(3), [])  # the run found nothing: a real 0
    # day 4: no run at all; day 5's window starts an hour before it (the overlap): 4 stays uncovered
    land_day(lake, day(5), [(2, at(5))], overlap=timedelta(hours=1))
    ingest(lake)
    expected = {day(1): 2, day(2): 2, day(3): 0, day(5): 1}
    first = read_series(lake, "agregadas")
    assert (first.counts, first.versions, first.pages_read) == (expected, 5, 5)
    assert silver_by_day(lake) == {day(2): 2, day(5): 1}  # the old series: day 1 lost both its entries

    # a rerun of every file (reconciliation keeps one row per file) reads nothing and counts nothing twice
    ingest(lake, reprocess=True)
    again = read_series(lake, "agregadas")
    assert (again.counts, again.pages_read) == (expected, 0)

    # a later version of entry 1 adds to its day and takes nothing from day 2
    land_day(lake, day(6), [(1, at(6))])
    ingest(lake)
    assert daily_counts(lake, "agregadas") == {**expected, day(6): 1}

    # the cache is rebuilt from Bronze when it is gone, to the same series
    for path in volume_versions_paths(lake, "agregadas"):
        path.unlink()
    rebuilt = read_series(lake, "agregadas")
    assert (rebuilt.counts, rebuilt.pages_read) == ({**expected, day(6): 1}, 6)

    # a day no ingest covered is not judged, and its count is not called 0
    check = check_day(lake, "agregadas", day(4), VolumeConfig(min_history_days=2, training_days=30))
    assert (check.status, check.covered, check.success) == ("skipped", False, True)
    assert check.message() == (
        f"agregadas {day(4)}: unknown number of entries; volume check skipped: no complete ingest covered "
        f"{day(4)} whole (a failed or missing run, or a page not reconciled): its count is unknown, not 0"
    )


def test_a_page_not_yet_ingested_leaves_its_day_uncovered(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    land_day(lake, day(1), [(1, at(1))])
    ingest(lake)
    land_day(lake, day(2), [(2, at(2))])  # landed, not ingested yet
    assert daily_counts(lake, "agregadas") == {day(1): 1}
    ingest(lake)
    assert daily_counts(lake, "agregadas") == {day(1): 1, day(2): 1}


HISTORY_DAYS = 36  # covered days before the checked one (min_history_days is 28)
CHECKED = day(HISTORY_DAYS + 1)


def published(seed: int = 34) -> dict[date, list[Version]]:
    """About 40 new entries a day; 80% updated again 2 days later, 60% once more 9 days later (awarded,
    formalised), landed on the day of each version up to the checked day."""
    rng = random.Random(seed)
    days: dict[date, list[Version]] = {}
    number = 0
    for n in range(1, HISTORY_DAYS + 2):
        for i in range(int(40 * rng.uniform(0.9, 1.1))):
            number += 1
            first = at(n, 8) + timedelta(minutes=5 * i)
            for later, share in ((0, 1.0), (2, 0.8), (9, 0.6)):
                when = first + timedelta(days=later)
                if rng.random() < share and when.date() <= CHECKED:
                    days.setdefault(when.date(), []).append((number, when))
    return days


@pytest.fixture(scope="module")
def history_lake(tmp_path_factory) -> Path:
    lake = tmp_path_factory.mktemp("versions") / "lake"
    versions = published()
    for n in range(1, HISTORY_DAYS + 2):
        d = day(n)
        previous = versions.get(d - timedelta(days=1), [])[-3:]  # the head page again, in other bytes
        land_day(lake, d, sorted(versions.get(d, []), key=lambda v: v[1]), relanded=previous)
    ingest(lake)
    return lake


def test_entries_updated_later_make_no_false_spike_and_real_spikes_and_drops_are_still_flagged(
    history_lake: Path, tmp_path: Path
) -> None:
    truth = {d: len(vs) for d, vs in published().items()}
    series = daily_counts(history_lake, "agregadas")
    assert series == {d: truth.get(d, 0) for d in (day(n) for n in range(1, HISTORY_DAYS + 2))}

    # the old way: Silver by day of `updated`, days without entries as 0, judged with its own model
    silver = silver_by_day(history_lake)
    old = {day(n): silver.get(day(n), 0) for n in range(1, HISTORY_DAYS + 2)}
    assert old[CHECKED] == series[CHECKED]  # the checked day is whole either way
    assert sum(old[day(n)] for n in range(1, 20)) < 0.6 * sum(series[day(n)] for n in range(1, 20))
    before = check_day(tmp_path / "old", "agregadas", CHECKED, counts=old)
    after = check_day(history_lake, "agregadas", CHECKED)
    print(f"\nbefore (Silver by day of updated): {before.message()}\nafter (entry versions): {after.message()}")
    assert before.upper is not None and after.upper is not None
    assert before.status == "anomaly" and before.count > before.upper  # the false spike
    assert after.status == "ok" and after.refitted

    spike = check_day(history_lake, "agregadas", CHECKED, counts={**series, CHECKED: 3 * series[CHECKED]})
    drop = check_day(history_lake, "agregadas", CHECKED, counts={**series, CHECKED: series[CHECKED] // 4})
    assert (spike.status, drop.status) == ("anomaly", "anomaly")
    assert not spike.refitted and not drop.refitted
    assert spike.upper is not None and drop.lower is not None
    assert spike.count > spike.upper and drop.count < drop.lower


def test_an_unreadable_cache_is_rebuilt_from_bronze(history_lake: Path, tmp_path: Path, caplog) -> None:
    lake = tmp_path / "lake"
    shutil.copytree(history_lake, lake)
    expected = daily_counts(lake, "agregadas")
    versions, index = volume_versions_paths(lake, "agregadas")
    versions.write_bytes(b"not parquet")
    index.write_text("{")
    with caplog.at_level("WARNING"):
        series = read_series(lake, "agregadas")
    assert series.counts == expected and series.pages_read > HISTORY_DAYS
    assert "unreadable" in caplog.text and "Traceback" not in caplog.text
