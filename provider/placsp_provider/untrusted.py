"""Text the provider does not control (from the feed's records or from the server), made safe to show.

A server's reason phrase, a `Location`, an `href`, a zip member name or an entry id can hold ESC
sequences, carriage returns and newlines. Printed raw they repaint a terminal, forge a log line
("INFO ... all good") or split an alert. `printable` is applied where such text is put into a
message that reaches a terminal, a log, an exception or an alert; the data itself (Bronze bytes,
Silver columns, the dead letter's record) is never changed.

Nothing is dropped silently: every control character becomes a visible escape (`\\x1b`, `\\n`), so a
person still sees that it was there.
"""

from __future__ import annotations

import re

# C0 controls (tab, newline and carriage return included: one message is one line), DEL, C1
# controls, and the Unicode bidirectional overrides and isolates that reorder what a reader sees.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: object, limit: int | None = None) -> str:
    """`text` (anything; str() of it) on one line with every control character escaped; at most
    `limit` characters of the input are kept (longer ends in `…`)."""
    value = str(text)
    if limit is not None and len(value) > limit:
        value = value[: max(limit - 1, 0)] + "…"
    return _UNPRINTABLE.sub(_escape, value)


def printable_lines(text: object) -> str:
    """As `printable`, but the message's own line breaks (`\\n`) kept: for multi-line messages the
    provider writes itself, whose parts were already made printable (a bare `\\r` is still escaped)."""
    return "\n".join(printable(line) for line in str(text).split("\n"))


# What JSON leaves raw with `ensure_ascii=False` (it escapes C0 itself): DEL, C1, bidi controls.
_RAW_IN_JSON = re.compile("[\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def printable_json(value: object, **dumps: object) -> str:
    """`json.dumps(value, ensure_ascii=False, ...)` with the characters JSON would leave raw written
    as `\\uXXXX` escapes: the same JSON for a program, nothing a terminal acts on for a person."""
    import json

    text = json.dumps(value, ensure_ascii=False, **dumps)  # type: ignore[arg-type]
    return _RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
