"""Volume anomaly: is a day's entry count inside what Prophet expects from the dataset's history?

The series, the model and the verdict: docs/data-quality.md ("The volume anomaly check"). The series
is every entry version the lake landed, by day of `updated`, on the days an ingest covered whole
(`volume_series`: not Silver, which keeps only newest versions; a day no ingest covered is missing,
not zero). The fitted model is stored in the lake, `<lake>/quality_models/volume/<dataset>.json`
(`model` is `prophet.serialize.model_to_json`, beside its training window, settings and Prophet's
version), and reused while its training window ends within `max_model_age_days` before the checked
day, its settings (`training_days` and the series' definition included) and Prophet's version are
the same, and it can be read back: a backfill of an old day never uses a model that saw it, and a
model that cannot be used is refitted (logged in one line), never a failure.

A count equal to an interval bound is already an anomaly (`is_anomaly`). With fewer than
`min_history_days` covered days of history, or when no ingest covered the checked day whole, the
check is skipped with its reason, never a false alarm.
Prophet's interval is simulated: the random generator is seeded, so a check is reproducible.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from placsp_provider import extras
from placsp_provider.bronze.landing import write_text_atomically
from placsp_provider.errors import ConfigError, PlacspError
from placsp_provider.lake import resolve_lake, volume_model_path
from placsp_provider.lake_storage import LakePath
from placsp_provider.quality.engine import RuleResult
from placsp_provider.quality.volume_series import SERIES, daily_counts

MODEL_FORMAT = 1
SEED = 20261130
RULE_ID = "entries_volume"
log = logging.getLogger(__name__)


class VolumeModelError(PlacspError):
    """A stored volume model cannot be read (it is refitted) or written."""


@dataclass(frozen=True)
class VolumeConfig:
    """How the volume check judges a day; every field validated here, before any read."""

    interval_width: float = 0.99
    min_history_days: int = 28
    training_days: int = 3 * 365
    max_model_age_days: int = 7
    severity: str = "warn"
    holidays_country: str | None = "ES"

    def __post_init__(self) -> None:
        if not 0 < self.interval_width < 1:
            raise ConfigError(
                f"interval_width is a probability between 0 and 1 (0.99 = 99%); got {self.interval_width}"
            )
        if self.min_history_days < 2:
            raise ConfigError(
                f"min_history_days must be at least 2 (Prophet needs two points); got {self.min_history_days}"
            )
        if self.training_days < self.min_history_days:
            raise ConfigError(
                f"training_days ({self.training_days}) must be >= min_history_days ({self.min_history_days})"
            )
        if self.max_model_age_days < 0:
            raise ConfigError(f"max_model_age_days must be >= 0; got {self.max_model_age_days}")
        if self.severity not in ("error", "warn"):
            raise ConfigError(f"severity must be 'error' or 'warn'; got {self.severity!r}")

    def model_settings(self) -> dict[str, Any]:
        """What a stored model must have been fitted with to be reused."""
        return {
            "interval_width": self.interval_width,
            "holidays_country": self.holidays_country,
            "training_days": self.training_days,
            "series": SERIES,
        }


@dataclass(frozen=True)
class VolumeCheck:
    """The verdict on one day. `status`: ok, anomaly or skipped (too little history)."""

    dataset: str
    day: str  # YYYY-MM-DD
    count: int
    status: str
    severity: str
    interval_width: float
    lower: float | None = None
    upper: float | None = None
    predicted: float | None = None
    trained_from: str | None = None
    trained_to: str | None = None
    history_days: int = 0
    refitted: bool = False
    reason: str = ""
    covered: bool = True  # False: no ingest covered the day whole, its count is unknown (not 0)

    @property
    def success(self) -> bool:
        return self.status != "anomaly"

    @property
    def expected(self) -> str:
        if self.lower is None or self.upper is None:
            return "skipped"
        return f"{_bound(self.lower)} to {_bound(self.upper)}"

    def message(self) -> str:
        head = f"{self.dataset} {self.day}: {self.count if self.covered else 'unknown number of'} entries"
        if self.status == "skipped":
            return f"{head}; volume check skipped: {self.reason}"
        verdict = " (anomaly: not strictly inside the interval)" if self.status == "anomaly" else ""
        return (
            f"{head}, expected {self.expected} (Prophet {self.interval_width * 100:g}% interval, "
            f"trained on {self.trained_from}..{self.trained_to}){verdict}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "message": self.message()}

    def to_rule_result(self) -> RuleResult:
        return RuleResult(
            rule_id=RULE_ID,
            dataset=self.dataset,
            table="entries",
            column=None,
            kind="volume",
            metric="rowCount",
            dimension="completeness",
            severity=self.severity,
            scope="run",
            expected=self.expected,
            actual=None if self.status == "skipped" else float(self.count),
            success=self.success,
            rows_checked=self.count,
            message=self.message(),
            content=f"entry versions of {self.day} by updated day vs Prophet {self.interval_width * 100:g}% interval",
            description="The day's entry count is strictly inside the forecast interval of its history.",
        )


# quality_results has no column for the day a volume row judged: its message starts with
# "<dataset> <YYYY-MM-DD>:" (`VolumeCheck.message`), which readers match with this (the PLACSP view).
MESSAGE_DAY_PATTERN = r"^\S+ (\d{4}-\d{2}-\d{2}):"


def band_of(expected: str) -> tuple[float, float] | None:
    """(lower, upper) as a volume row's `expected` records them (`VolumeCheck.expected`: bounds rounded,
    never below 0); None for a skipped check."""
    lower, sep, upper = expected.partition(" to ")
    if not sep:
        return None
    try:
        return float(lower.replace(",", "")), float(upper.replace(",", ""))
    except ValueError:
        return None


def is_anomaly(count: float, lower: float, upper: float) -> bool:
    """Strict interval: a count on a bound is an anomaly."""
    return not (lower < count < upper)


# -- the series (volume_series) --------------------------------------------------------------------
def history(counts: dict[date, int], day: date, training_days: int) -> list[tuple[date, int]]:
    """The covered days before `day` (within `training_days`), from the first day with entries. A day
    missing from `counts` (no ingest covered it) stays missing: Prophet fits around it."""
    earlier = [d for d, n in counts.items() if d < day and n > 0]
    if not earlier:
        return []
    start = max(min(earlier), day - timedelta(days=training_days))
    return sorted((d, n) for d, n in counts.items() if start <= d < day)


# -- the model -------------------------------------------------------------------------------------
def model_path(lake: str | LakePath, dataset: str) -> LakePath:
    return volume_model_path(resolve_lake(lake), dataset)


def check_day(
    lake: str | LakePath,
    dataset: str,
    day: date,
    config: VolumeConfig | None = None,
    *,
    counts: dict[date, int] | None = None,
) -> VolumeCheck:
    """Judge `day`'s count of `dataset` against its Prophet interval (fit or reuse the stored model)."""
    config = config or VolumeConfig()
    counts = daily_counts(lake, dataset) if counts is None else counts
    count = counts.get(day, 0)  # a day not covered is reported as such below, never judged as 0
    series = history(counts, day, config.training_days)
    common: dict[str, Any] = {
        "dataset": dataset,
        "day": day.isoformat(),
        "count": count,
        "severity": config.severity,
        "interval_width": config.interval_width,
        "history_days": len(series),
    }
    # Without Prophet the check can never run: that is what to say first, whatever the history.
    if missing := extras.missing("prophet", "volume"):
        log.warning("dataset %s: volume check skipped: %s", dataset, missing)
        return VolumeCheck(status="skipped", reason=missing, covered=day in counts, **common)
    if len(series) < config.min_history_days:
        reason = f"{len(series)} day(s) of history before {day}, fewer than min_history_days {config.min_history_days}"
        return VolumeCheck(status="skipped", reason=reason, **common)
    if day not in counts:
        reason = (
            f"no complete ingest covered {day} whole (a failed or missing run, or a page not reconciled): "
            "its count is unknown, not 0"
        )
        return VolumeCheck(status="skipped", reason=reason, covered=False, **common)
    path = model_path(lake, dataset)
    stored = _load(path, config, day)
    band = _predict_or_none(path, stored["model"], [day], then="refitting") if stored is not None else None
    refitted = band is None
    if stored is None or band is None:
        stored = _fit(series, config, dataset)
        _save(path, stored)
        band = _predict(stored["model"], [day])
    [(_, lower, predicted, upper)] = band
    return VolumeCheck(
        status="anomaly" if is_anomaly(count, lower, upper) else "ok",
        lower=lower,
        upper=upper,
        predicted=predicted,
        trained_from=stored["trained_from"],
        trained_to=stored["trained_to"],
        refitted=refitted,
        **common,
    )


def _load(path: LakePath, config: VolumeConfig, day: date) -> dict[str, Any] | None:
    """The stored model if it can judge `day` (fresh enough, same settings, never trained on `day`)."""
    if not path.is_file():
        return None
    try:
        stored: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        trained_to = date.fromisoformat(stored["trained_to"])
        if stored.get("format") != MODEL_FORMAT or stored.get("settings") != config.model_settings():
            log.info("volume model %s: other settings, refitting", path)
            return None
        if stored.get("prophet") != _prophet_version():
            log.info(
                "volume model %s: fitted by Prophet %s, this is %s: refitting",
                path,
                stored.get("prophet"),
                _prophet_version(),
            )
            return None
    except (OSError, ValueError, KeyError, TypeError) as err:
        log.warning("volume model %s is unreadable (%s); refitting", path, err)
        return None
    if trained_to >= day:
        log.info("volume model %s was trained up to %s, not before %s: refitting", path, trained_to, day)
        return None
    if (day - timedelta(days=1) - trained_to).days > config.max_model_age_days:
        log.info(
            "volume model %s trained up to %s is older than %s days: refitting",
            path,
            trained_to,
            config.max_model_age_days,
        )
        return None
    return stored


def _fit(series: list[tuple[date, int]], config: VolumeConfig, dataset: str) -> dict[str, Any]:
    import pandas as pd
    import prophet
    from prophet import Prophet
    from prophet.serialize import model_to_json

    for name in ("cmdstanpy", "prophet"):
        logging.getLogger(name).setLevel(logging.WARNING)
    frame = pd.DataFrame({"ds": pd.to_datetime([d for d, _ in series]), "y": [float(n) for _, n in series]})
    model = Prophet(
        interval_width=config.interval_width,
        weekly_seasonality=True,
        daily_seasonality=False,
        yearly_seasonality=len(series) >= 730,
    )
    if config.holidays_country:
        model.add_country_holidays(country_name=config.holidays_country)
    with _quiet():
        model.fit(frame)
    log.info("volume model of %s fitted on %s..%s (%d days)", dataset, series[0][0], series[-1][0], len(series))
    return {
        "format": MODEL_FORMAT,
        "dataset": dataset,
        "prophet": _prophet_version() or prophet.__version__,
        "trained_from": series[0][0].isoformat(),
        "trained_to": series[-1][0].isoformat(),
        "fitted_at": datetime.now(UTC).isoformat(),
        "settings": config.model_settings(),
        "model": model_to_json(model),
    }


def forecast_band(lake: str | LakePath, dataset: str, days: list[date]) -> list[tuple[date, float, float, float]]:
    """(day, lower, predicted, upper) of the stored model over `days` (for the report's chart)."""
    path = model_path(lake, dataset)
    if not path.is_file() or not days or extras.missing("prophet", "volume"):
        return []
    try:
        model_json = json.loads(path.read_text(encoding="utf-8"))["model"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        log.warning("volume model %s is unreadable (%s): no forecast band", path, err)
        return []
    return _predict_or_none(path, model_json, days, then="no forecast band") or []


def _predict_or_none(
    path: LakePath, model_json: str, days: list[date], *, then: str
) -> list[tuple[date, float, float, float]] | None:
    """`_predict`, or None (logged in one line) when this Prophet cannot read or run the stored model:
    an upgrade can change what `model_from_json` accepts, and Prophet's errors are of any type."""
    try:
        return _predict(model_json, days)
    except Exception as err:  # any failure of the stored model means: refit it
        reason = f"{type(err).__name__}: {str(err).splitlines()[0][:300] if str(err) else ''}"
        log.warning("volume model %s cannot be used by this Prophet (%s): %s", path, reason, then)
        return None


def _prophet_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("prophet")
    except PackageNotFoundError:
        return ""


def _predict(model_json: str, days: list[date]) -> list[tuple[date, float, float, float]]:
    import numpy as np
    import pandas as pd
    from prophet.serialize import model_from_json

    with _quiet():
        model = model_from_json(model_json)
        np.random.seed(SEED)  # Prophet simulates the interval with numpy's global generator
        frame = model.predict(pd.DataFrame({"ds": pd.to_datetime(days)}))
    return [
        (d, float(r["yhat_lower"]), float(r["yhat"]), float(r["yhat_upper"]))
        for d, (_, r) in zip(days, frame.iterrows(), strict=True)
    ]


@contextmanager
def _quiet() -> Iterator[None]:
    """Prophet 1.5 calls pandas APIs that pandas 3 deprecates: those warnings are not ours to show."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", module=r"prophet(\..*)?")
        yield


def _save(path: LakePath, stored: dict[str, Any]) -> None:
    try:
        write_text_atomically(path, json.dumps(stored))
    except OSError as err:
        raise VolumeModelError(f"volume model {path} cannot be written: {err}") from err


def _bound(value: float) -> str:
    return f"{max(0, round(value)):,}"
