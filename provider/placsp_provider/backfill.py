"""Month ranges for the backfill form, validated before any download."""

from __future__ import annotations

from datetime import UTC, datetime

from placsp_provider.datasets import get_dataset
from placsp_provider.errors import ConfigError


def month_interval(
    dataset: str, first_month: str, last_month: str, now: datetime | None = None
) -> tuple[datetime, datetime]:
    """[first day of first_month, first day after last_month) in UTC."""
    ds = get_dataset(dataset)
    try:
        first = datetime.strptime(first_month, "%Y-%m").replace(tzinfo=UTC)
        last = datetime.strptime(last_month, "%Y-%m").replace(tzinfo=UTC)
    except ValueError as err:
        raise ConfigError(f"months must look like YYYY-MM: got {first_month!r} and {last_month!r}") from err
    if last < first:
        raise ConfigError(f"last_month {last_month} is before first_month {first_month}")
    if first.year < ds.first_year:
        raise ConfigError(f"dataset {ds.key} starts in {ds.first_year}; {first_month} is before that")
    now = now or datetime.now(UTC)
    if first > now:
        raise ConfigError(f"first_month {first_month} is in the future")
    end = datetime(last.year + (last.month == 12), last.month % 12 + 1, 1, tzinfo=UTC)
    return first, end
