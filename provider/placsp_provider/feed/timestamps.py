"""RFC 3339 timestamps as PLACSP writes them (`2022-01-03T03:00:13.633+01:00`), compared in UTC."""

from __future__ import annotations

import re
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


# RFC 3339 section 5.6 (date-time). `datetime.fromisoformat` alone also accepts ISO 8601 forms that
# RFC 3339 forbids (basic format `20220103T030013+0100`, week dates, `,` fractions, hour-only times),
# so validation checks the shape first. A space instead of `T` is allowed by RFC 3339's note.
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})")


def parse_rfc3339_strict(text: str) -> datetime:
    """Like `parse_rfc3339`, but refuse anything that is not an RFC 3339 date-time."""
    if not _RFC3339.fullmatch(text.strip()):
        raise ValueError(f"not an RFC 3339 timestamp: {text.strip()!r}")
    return parse_rfc3339(text)
