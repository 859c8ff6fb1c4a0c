"""The Prophet volume check on a small synthetic history (real Prophet, real cmdstan fit, no mocks).

History: 16 weeks of a weekly pattern (weekdays about 500 entries, weekends about 100) with noise
from a seeded generator, as PLACSP's daily volume looks. One module fixture fits the model once; the
tests then reuse the stored model (a refit is itself tested once).
"""

from __future__ import annotations

import json
import random
from datetime import date, timedelta
from pathlib import Path

import pytest

from placsp_provider.errors import ConfigError
from placsp_provider.quality.volume import VolumeConfig, check_day, history, is_anomaly, model_path
from placsp_provider.quality.volume_series import SERIES

pytestmark = pytest.mark.unit

FIRST = date(2026, 8, 3)  # a Monday
DAY = FIRST + timedelta(weeks=16)  # the day checked: a Monday after 112 days of history


def synthetic(first: date, days: int) -> dict[date, int]:
    rng = random.Random(13)
    out = {}
    for i in range(days):
        d = first + timedelta(days=i)
        out[d] = int((100 if d.weekday() >= 5 else 500) * rng.uniform(0.93, 1.07))
    return out


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> tuple[Path, dict[date, int], object]:
    lake = tmp_path_factory.mktemp("volume") / "lake"
    counts = synthetic(FIRST, 112)
    first = check_day(lake, "agregadas", DAY, counts={**counts, DAY: 480})
    return lake, counts, first


def test_a_normal_day_passes_with_the_issue_message(fitted) -> None:
    lake, _, check = fitted
    assert check.status == "ok" and check.refitted and check.history_days == 112
    assert check.lower < 480 < check.upper and 350 < check.predicted < 650
    assert check.message() == (
        f"agregadas {DAY}: 480 entries, expected {max(0, round(check.lower)):,} to {round(check.upper):,} "
        f"(Prophet 99% interval, trained on {FIRST}..{DAY - timedelta(days=1)})"
    )
    stored = json.loads(model_path(lake, "agregadas").read_text())
    assert (stored["trained_from"], stored["trained_to"]) == (str(FIRST), str(DAY - timedelta(days=1)))
    assert stored["prophet"] and stored["settings"] == {
        "interval_width": 0.99,
        "holidays_country": "ES",
        "training_days": 3 * 365,
        "series": SERIES,
    }


def test_a_dip_and_a_spike_are_anomalies(fitted) -> None:
    lake, counts, _ = fitted
    dip = check_day(lake, "agregadas", DAY, counts={**counts, DAY: 12})
    spike = check_day(lake, "agregadas", DAY, counts={**counts, DAY: 2500})
    assert (dip.status, spike.status) == ("anomaly", "anomaly")
    assert not dip.refitted and not spike.refitted  # the stored model judged them
    assert dip.message().startswith(f"agregadas {DAY}: 12 entries, expected ")
    assert dip.message().endswith("(anomaly: not strictly inside the interval)")
    result = dip.to_rule_result()
    assert (result.rule_id, result.success, result.severity, result.actual) == ("entries_volume", False, "warn", 12.0)


def test_a_count_on_a_bound_is_an_anomaly(fitted) -> None:
    _, _, check = fitted
    lower, upper = check.lower, check.upper
    assert is_anomaly(lower, lower, upper) and is_anomaly(upper, lower, upper)
    assert not is_anomaly((lower + upper) / 2, lower, upper)
    assert is_anomaly(500, 500.0, 500.0)  # a degenerate interval admits nothing


def test_the_model_is_refitted_when_older_than_a_week_and_never_on_the_checked_day(fitted) -> None:
    lake, counts, _ = fitted
    later = synthetic(FIRST, 126)
    within = check_day(lake, "agregadas", DAY + timedelta(days=7), counts=later)
    assert not within.refitted and within.trained_to == str(DAY - timedelta(days=1))
    stale = check_day(lake, "agregadas", DAY + timedelta(days=9), counts=later)
    assert stale.refitted and stale.trained_to == str(DAY + timedelta(days=8))
    # a backfill of a day the stored model has seen refits on the days before it
    back = check_day(lake, "agregadas", DAY - timedelta(days=2), counts=counts)
    assert back.refitted and back.trained_to == str(DAY - timedelta(days=3))


def test_short_history_is_skipped_with_its_reason(tmp_path: Path) -> None:
    counts = synthetic(FIRST, 10)
    check = check_day(tmp_path, "menores", FIRST + timedelta(days=10), counts=counts)
    assert check.status == "skipped" and check.success and check.lower is None
    assert check.message() == (
        f"menores {FIRST + timedelta(days=10)}: 0 entries; volume check skipped: 10 day(s) of history before "
        f"{FIRST + timedelta(days=10)}, fewer than min_history_days 28"
    )
    assert not model_path(tmp_path, "menores").exists()


def test_history_leaves_uncovered_days_missing_and_stops_before_the_day() -> None:
    counts = {date(2025, 12, 31): 0, date(2026, 1, 1): 5, date(2026, 1, 3): 0, date(2026, 1, 4): 7, date(2026, 1, 6): 9}
    # from the first day with entries; 2 January (no ingest covered it) is missing, 3 January a real 0
    assert history(counts, date(2026, 1, 6), 365) == [
        (date(2026, 1, 1), 5),
        (date(2026, 1, 3), 0),
        (date(2026, 1, 4), 7),
    ]
    assert history(counts, date(2026, 1, 6), 3) == [(date(2026, 1, 3), 0), (date(2026, 1, 4), 7)]


def test_settings_that_cannot_work_are_refused() -> None:
    with pytest.raises(ConfigError, match="interval_width"):
        VolumeConfig(interval_width=99)
    with pytest.raises(ConfigError, match="severity"):
        VolumeConfig(severity="fatal")
    with pytest.raises(ConfigError, match="training_days"):
        VolumeConfig(min_history_days=60, training_days=30)


@pytest.mark.parametrize("change", ["prophet", "training_days", "unreadable"])
def test_a_model_of_another_prophet_other_training_days_or_unreadable_is_refitted_in_one_line(
    fitted, tmp_path: Path, caplog, change: str
) -> None:
    lake, counts, _ = fitted
    stored = json.loads(model_path(lake, "agregadas").read_text())
    config = VolumeConfig()
    if change == "prophet":
        stored["prophet"] = "0.9"  # fitted by another release: its JSON may not load in this one
    elif change == "training_days":
        config = VolumeConfig(training_days=200)
    else:
        stored["model"] = json.dumps({"what": "model_from_json cannot read this"})
    copy = model_path(tmp_path, "agregadas")
    copy.parent.mkdir(parents=True)
    copy.write_text(json.dumps(stored))
    with caplog.at_level("INFO", logger="placsp_provider.quality.volume"):
        check = check_day(tmp_path, "agregadas", DAY, config, counts={**counts, DAY: 480})
    assert check.refitted and check.status == "ok"
    assert json.loads(copy.read_text())["settings"]["training_days"] == config.training_days
    said = [r for r in caplog.records if "refitting" in r.getMessage()]
    assert len(said) == 1 and said[0].exc_info is None and "Traceback" not in caplog.text
    if change == "unreadable":
        assert said[0].levelname == "WARNING" and "cannot be used by this Prophet" in said[0].getMessage()
