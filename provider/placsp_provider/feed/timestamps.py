"""RFC 3339 timestamps as PLACSP writes them (`2022-01-03T03:00:13.633+01:00`), compared in UTC."""

from __future__ import annotations

from datetime import UTC, datetime


def parse_rfc3339(text: str) -> datetime:
    """Parse to an aware UTC datetime; raise ValueError with the offending text otherwise."""
    raw = text.strip()
    value = raw[:-1] + "+00:00" if raw.endswith(("Z", "z")) else raw
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as err:
        raise ValueError(f"not an RFC 3339 timestamp: {raw!r}") from err
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp without a UTC offset: {raw!r}")
    return parsed.astimezone(UTC)


def isoformat(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
