"""The part of a page before its first element: encoding detection and the DTD guard.

What is guaranteed:
- `dtd_refusal` finds a `<!DOCTYPE` (and so any `<!ENTITY>`, which can only live inside one)
  anywhere in the prolog, however long the comments and processing instructions before it, and in
  any encoding a page can be written in without a declaration lxml must honour first: UTF-8 (with
  or without BOM), ASCII-compatible 8-bit encodings, UTF-16 and UTF-32 (BOM or not). A DOCTYPE can
  stand nowhere else in a well-formed document, so a page that passes holds no DTD the parser would
  see. The scan reads the prolog only, chunk by chunk: memory stays flat.
- `to_utf8` gives the byte-level record splitter (which looks for ASCII markup) UTF-8 bytes for a
  wide-encoded page, so the extraction's count (lxml reads UTF-16 natively) and the parser's agree.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Iterator
from itertools import chain
from pathlib import Path

DTD_MESSAGE = "declares a DTD (<!DOCTYPE>), which PLACSP feeds never do: refused without loading it"
ENTITY_MESSAGE = "declares XML entities (<!ENTITY>): refused without expanding them (entity-expansion guard)"

_CHUNK = 1 << 16
# Byte patterns of the XML spec's appendix F (autodetection without external information).
_WIDE = (
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\x00\x00\x00<", "utf-32-be"),
    (b"<\x00\x00\x00", "utf-32-le"),
    (b"\xfe\xff", "utf-16-be"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\x00<\x00?", "utf-16-be"),
    (b"<\x00?\x00", "utf-16-le"),
    (b"\x00<", "utf-16-be"),
    (b"<\x00", "utf-16-le"),
)
# Linear (issue 31's audit): anchored, so tried once; the lazy `[^>]*?` stops at the declaration's
# first `>`, and each value runs to the next quote only: no byte is read more than a few times.
_DECLARED_ENCODING = re.compile(r"""\A(<\?xml\b[^>]*?\bencoding\s*=\s*)(["'])[^"']*\2""")
_BLANKS = re.compile(r"[ \t\r\n]*+")


def wide_encoding(head: bytes) -> str | None:
    """The codec of a page written in UTF-16 or UTF-32 (from its first bytes), else None."""
    return next((codec for marker, codec in _WIDE if head.startswith(marker)), None)


def to_utf8(data: bytes) -> bytes:
    """A wide-encoded page as UTF-8 (BOM dropped, declaration saying UTF-8); others unchanged.

    Bytes that do not decode become U+FFFD, which validation reports as an encoding error on the
    record that holds them: nothing is dropped.
    """
    codec = wide_encoding(data[:4])
    if codec is None:
        return data
    text = data.decode(codec, errors="replace").lstrip("\ufeff")
    return _DECLARED_ENCODING.sub(r"\1\2UTF-8\2", text, count=1).encode("utf-8")


def utf8_chunks(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """`chunks` of a page, transcoded to UTF-8 on the fly when the page is wide-encoded."""
    it = iter(chunks)
    first = next(it, b"")
    codec = wide_encoding(first[:4])
    if codec is None:
        yield first
        yield from it
        return
    decoder = codecs.getincrementaldecoder(codec)(errors="replace")
    yield decoder.decode(first).lstrip("\ufeff").encode("utf-8")
    for chunk in it:
        yield decoder.decode(chunk).encode("utf-8")
    yield decoder.decode(b"", final=True).encode("utf-8")


def dtd_refusal(data: bytes) -> str | None:
    """Reason to refuse a page held in memory, or None when its prolog has no DOCTYPE."""
    view = memoryview(data)
    return _scan_prolog(bytes(view[i : i + _CHUNK]) for i in range(0, len(data), _CHUNK))


def dtd_refusal_file(path: Path) -> str | None:
    """The same for a page on disk, read chunk by chunk up to its first element."""
    with path.open("rb") as fh:
        return _scan_prolog(iter(lambda: fh.read(_CHUNK), b""))


def prolog_pis_file(path: Path, stop_after: int) -> int:
    """The processing instructions before the page's first element (the XML declaration is none),
    counted up to `stop_after + 1`: a whole-document parser keeps each of them, and lxml cannot free
    them before the document goes (feed/page_scan.py bounds them)."""
    counter = [0]
    with path.open("rb") as fh:
        _scan_prolog(iter(lambda: fh.read(_CHUNK), b""), counter, stop_after)
    return max(counter[0], 0)


def _decoded(chunks: Iterable[bytes]) -> Iterator[str]:
    it = iter(chunks)
    first = next(it, b"")
    # latin-1 maps every byte to one character: ASCII markup is found as is in any 8-bit encoding.
    decoder = codecs.getincrementaldecoder(wide_encoding(first[:4]) or "latin-1")(errors="replace")
    yield from map(decoder.decode, chain([first], it))


def _scan_prolog(chunks: Iterable[bytes], pis: list[int] | None = None, stop_after: int | None = None) -> str | None:
    """The refusal, or None; `pis[0]` counts the PIs read (stopping once over `stop_after`)."""
    buf = ""
    started = False
    for text in _decoded(chunks):
        buf += text
        if not started:
            buf = buf.removeprefix("\ufeff").removeprefix("\xef\xbb\xbf")  # a BOM; a UTF-8 BOM read as latin-1
            started = True
            if pis is not None and buf.startswith("<?xml") and buf[5:6] in (" ", "\t", "\r", "\n"):
                pis[0] -= 1  # the XML declaration, counted as a PI below, is none
        verdict, buf = _step(buf, final=False, pis=pis)
        if verdict is not _MORE:
            return verdict  # type: ignore[return-value]
        if pis is not None and stop_after is not None and pis[0] > stop_after:
            return None
    verdict, _ = _step(buf, final=True, pis=pis)
    return None if verdict is _MORE else verdict  # type: ignore[return-value]


_MORE = object()  # the prolog goes on past what was read
_OPENERS = ("<!--", "<?", "<!DOCTYPE", "<!ENTITY")


def _step(buf: str, *, final: bool, pis: list[int] | None = None) -> tuple[object, str]:
    """Consume comments, PIs and whitespace; decide on the first thing that is none of them.

    Walks `buf` by position, never slicing the rest off: each byte is read once, however many
    comments or PIs the chunk holds."""
    at = 0
    while True:
        at = _BLANKS.match(buf, at).end()  # type: ignore[union-attr]
        if at == len(buf):
            return _MORE, ""
        for opener, closer in (("<!--", "-->"), ("<?", "?>")):
            if buf.startswith(opener, at):
                end = buf.find(closer, at + len(opener))
                if end < 0:
                    # Keep only what can still hold the start of the closer: memory stays flat.
                    rest = buf[at + len(opener) :]
                    return (None if final else _MORE), opener + rest[len(rest) - len(closer) + 1 :]
                at = end + len(closer)
                if pis is not None and opener == "<?":
                    pis[0] += 1
                break
        else:
            s = buf[at:]
            if len(s) < 9 and not final and any(t.startswith(s.upper()) for t in _OPENERS):
                return _MORE, s  # too short to tell yet
            if s[:9].upper() == "<!DOCTYPE":
                return (ENTITY_MESSAGE if "<!ENTITY" in s.upper() else DTD_MESSAGE), ""
            if s[:8].upper() == "<!ENTITY":
                return ENTITY_MESSAGE, ""
            return None, ""  # the first element (or junk): the prolog is over, and held no DTD
