"""Validation and normalisation of one parsed record's values.

A record that parses is still rejected (dead letter, stage 'validation') when a value the Silver tables
depend on is unusable: an id that is not this dataset's, a timestamp that is not RFC 3339, an amount
that does not read as a number, text that was mis-encoded upstream. Nothing here guesses: a value is
either read exactly or reported.

All problems of a record are collected (`Problems`) and reported in ONE dead letter: its error_type is
the first problem's, in the order the checks run -- encoding (U+FFFD, the likely root cause of any
other oddity), entry id / ref, timestamp, then typed values (amounts, counts, indicators, lot ids) in
document order -- and its message lists every problem (the first 10, then a count).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal, InvalidOperation

from placsp_provider.datasets import Dataset
from placsp_provider.feed.timestamps import parse_rfc3339_strict

# The Silver amount type is decimal(AMOUNT_PRECISION, AMOUNT_SCALE). Amounts with more decimals than
# the scale are refused rather than rounded (Arrow would refuse to rescale them anyway).
AMOUNT_PRECISION = 38
AMOUNT_SCALE = 6
_MAX_INTEGER_DIGITS = AMOUNT_PRECISION - AMOUNT_SCALE
_SCALE_UNIT = Decimal(1).scaleb(-AMOUNT_SCALE)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

# Error types of stage 'validation'.
INVALID_ENTRY_ID = "invalid_entry_id"
INVALID_TIMESTAMP = "invalid_timestamp"
INVALID_AMOUNT = "invalid_amount"
INVALID_INTEGER = "invalid_integer"
INVALID_BOOLEAN = "invalid_boolean"
ENCODING_ERROR = "encoding_error"
INVALID_TOMBSTONE = "invalid_tombstone"
INVALID_LOT_ID = "invalid_lot_id"

DELETION_TYPES = frozenset({"ANULADA", "CERRADA"})

_MAX_LISTED_PROBLEMS = 10

# Amount shapes. A single separator (`.` or `,`) is the decimal separator; several identical ones are
# thousands groups; with both, the last one is the decimal separator and the other must group by 3.
# Linear on any text (issue 31's audit; a text node may hold 10 MB): `fullmatch` makes one attempt,
# each repetition is delimited (digit runs end at a separator, groups are 3 digits after a
# separator), so giving back tries at most a few positions per group: 4 MB cost ~0.1 s.
_PLAIN = re.compile(r"[+-]?\d+", re.ASCII)
_ONE_SEPARATOR = re.compile(r"[+-]?(?:\d+[.,]\d*|[.,]\d+)", re.ASCII)
_GROUPED = re.compile(r"[+-]?\d{1,3}(?P<sep>[.,])\d{3}(?:(?P=sep)\d{3})*", re.ASCII)
_GROUPED_WITH_DECIMALS = re.compile(r"[+-]?\d{1,3}(?P<sep>[.,])\d{3}(?:(?P=sep)\d{3})*(?P<dec>[.,])\d+", re.ASCII)
_REPLACEMENT_CHAR = "\ufffd"
_REPLACEMENT_BYTES = _REPLACEMENT_CHAR.encode("utf-8")
# Searched over a record's raw bytes: an attempt starts only at `&#` and reads one run of zeros.
_REPLACEMENT_REFERENCE = re.compile(rb"&#(?:[xX]0*[fF][fF][fF][dD]|0*65533);")


@dataclass(frozen=True)
class Problem:
    """One reason to reject a record: a snake_case error_type and a sentence naming field and value."""

    error_type: str
    detail: str


@dataclass
class Problems:
    """The problems found in one record, in the order they were found."""

    items: list[Problem] = field(default_factory=list)

    def add(self, error_type: str, detail: str) -> None:
        self.items.append(Problem(error_type, detail))

    def __bool__(self) -> bool:
        return bool(self.items)

    @property
    def error_type(self) -> str:
        return self.items[0].error_type

    def describe(self) -> str:
        shown = [f"{p.error_type}: {p.detail}" for p in self.items[:_MAX_LISTED_PROBLEMS]]
        more = len(self.items) - len(shown)
        suffix = f"; and {more} more problem(s)" if more > 0 else ""
        return f"{len(self.items)} problem(s): " + "; ".join(shown) + suffix


def parse_amount(text: str | None) -> Decimal:
    """An amount as an exact Decimal, whether written with a decimal comma or a decimal dot.

    Accepted: `5989390,79`, `4949909.74`, `1.234.567,89`, `1,234,567.89`, `1.234.567`, `-12.5`.
    Refused (ValueError): empty text, `N/A`, `12,34,5`, exponents, more than AMOUNT_SCALE decimals.
    A lone separator followed by exactly three digits (`79,013`) is read as a DECIMAL separator: that is
    what xsd:decimal means, and thousands grouping without decimals needs at least two groups here.
    """
    raw = (text or "").strip()
    normalised = _normalise_amount(raw)
    if normalised is None:
        raise ValueError(f"not an amount: {raw!r}")
    try:
        value = Decimal(normalised)
    except InvalidOperation as err:  # the shapes above should make this unreachable
        raise ValueError(f"not an amount: {raw!r}") from err
    exponent = value.as_tuple().exponent
    if isinstance(exponent, int) and -exponent > AMOUNT_SCALE:
        exact = value.quantize(_SCALE_UNIT)
        if exact != value:
            raise ValueError(f"amount {raw!r} has more than {AMOUNT_SCALE} decimals (would be rounded)")
        value = exact  # only trailing zeros were beyond the scale
    if value and value.adjusted() >= _MAX_INTEGER_DIGITS:
        raise ValueError(f"amount {raw!r} exceeds decimal({AMOUNT_PRECISION},{AMOUNT_SCALE})")
    return value


def _normalise_amount(raw: str) -> str | None:
    """The amount in Python Decimal syntax, or None when its shape is not an amount."""
    if _PLAIN.fullmatch(raw):
        return raw
    if _ONE_SEPARATOR.fullmatch(raw):
        return raw.replace(",", ".")
    grouped = _GROUPED.fullmatch(raw)
    if grouped:
        return raw.replace(grouped.group("sep"), "")
    mixed = _GROUPED_WITH_DECIMALS.fullmatch(raw)
    if mixed and mixed.group("sep") != mixed.group("dec"):
        return raw.replace(mixed.group("sep"), "").replace(mixed.group("dec"), ".")
    return None


def parse_integer(text: str | None) -> int:
    """A count (e.g. ReceivedTenderQuantity): optional sign and digits only, within int64."""
    raw = (text or "").strip()
    if not _PLAIN.fullmatch(raw):
        raise ValueError(f"not an integer: {raw!r}")
    value = int(raw)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"integer {raw!r} does not fit in 64 bits")
    return value


def parse_boolean(text: str | None) -> bool:
    """xsd:boolean: `true`/`false`/`1`/`0`."""
    raw = (text or "").strip()
    if raw in ("true", "1"):
        return True
    if raw in ("false", "0"):
        return False
    raise ValueError(f"not a boolean (xsd:boolean is true/false/1/0): {raw!r}")


def check_entry_id(text: str | None, dataset: Dataset, problems: Problems, *, what: str = "id") -> int | None:
    """The folder number (numeric tail) of a valid entry id; records a problem otherwise."""
    raw = (text or "").strip()
    if not raw:
        problems.add(INVALID_ENTRY_ID, f"{what} is missing")
        return None
    match = dataset.entry_id_pattern.match(raw)
    if match is None:
        problems.add(
            INVALID_ENTRY_ID,
            f"{what} {raw!r} is not a {dataset.key} entry id (expected .../sindicacion/"
            f"{dataset.entry_id_path}/<number>)",
        )
        return None
    return int(match.group(1))


def check_timestamp(text: str | None, problems: Problems, *, what: str) -> datetime | None:
    """An aware UTC datetime from RFC 3339 text; records a problem otherwise."""
    if text is None or not text.strip():
        problems.add(INVALID_TIMESTAMP, f"{what} is missing")
        return None
    try:
        return parse_rfc3339_strict(text)
    except ValueError as err:
        problems.add(INVALID_TIMESTAMP, f"{what}: {err}")
        return None


def check_deletion_type(text: str | None, problems: Problems) -> str | None:
    """The tombstone's at:comment type: ANULADA, CERRADA, or None when the comment/type is absent."""
    if text is None:
        return None
    value = text.strip()
    if value not in DELETION_TYPES:
        problems.add(INVALID_TOMBSTONE, f"at:comment type {value!r} is not one of {', '.join(sorted(DELETION_TYPES))}")
        return None
    return value


def has_replacement_characters(raw: bytes) -> bool:
    """Whether the record's bytes hold U+FFFD, literally or as a character reference.

    A byte check over the raw record is enough (and C-speed): in a record that parsed as UTF-8, every
    U+FFFD in text or attributes is either these three bytes or a character reference. Their lead
    byte is looked for first: a one-byte find runs at memchr speed, where the three-byte one read
    ~1.6 GB/s (0.15 against 1.9 ms for a real-shaped page, whose Spanish text holds no \\xef).
    """
    return (b"\xef" in raw and _REPLACEMENT_BYTES in raw) or _REPLACEMENT_REFERENCE.search(raw) is not None


def describe_replacement_characters(element: object) -> str:
    """Where the U+FFFD characters are, for the dead letter (runs on failing records only)."""
    places: list[str] = []
    for node in element.iter():  # type: ignore[attr-defined]
        if not isinstance(node.tag, str):
            continue
        name = node.tag.rsplit("}", 1)[-1]
        if node.text and _REPLACEMENT_CHAR in node.text:
            places.append(f"<{name}> text {node.text.strip()[:80]!r}")
        for attr, value in node.attrib.items():
            if _REPLACEMENT_CHAR in value:
                places.append(f"<{name}> attribute {attr.rsplit('}', 1)[-1]}={value[:80]!r}")
    listed = "; ".join(places[:5]) + (f"; and {len(places) - 5} more" if len(places) > 5 else "")
    return "text holds U+FFFD replacement characters, i.e. it was mis-encoded before it reached the feed" + (
        f": {listed}" if listed else ""
    )
