"""The DTD guard reads the whole prolog in any encoding, and the extraction's count (the manifest)
and the Silver parser agree on pages written in UTF-16: both sides read the same bytes the same way.

`parse_page` is the Silver job's plain-Python parser (no Spark needed to call it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from placsp_provider.datasets import DATASETS
from placsp_provider.feed.page_scan import scan_page
from placsp_provider.feed.prolog import DTD_MESSAGE, ENTITY_MESSAGE, dtd_refusal, dtd_refusal_file, to_utf8
from placsp_provider.parser.page_parser import parse_page
from tests.pages import day, page

pytestmark = pytest.mark.unit

AGR = DATASETS["agregadas"]
GOOD = page([(1, day(5)), (2, day(5))], tombstones=[(3, day(5))])
DECLARATION = b'<?xml version="1.0" encoding="UTF-8"?>\n'
BODY = GOOD[len(DECLARATION) :]
DOCTYPE = b'<!DOCTYPE feed [<!ENTITY boom "boom">]>'


def _both(tmp_path: Path, data: bytes) -> tuple[object, object]:
    path = tmp_path / "p.atom"
    path.write_bytes(data)
    return scan_page(path), parse_page(data, dataset=AGR, source_file="p.atom")


@pytest.mark.parametrize(
    "data",
    [
        DECLARATION + b"<!--" + b"x" * 70_000 + b"-->" + DOCTYPE + BODY,  # past any fixed-size window
        DECLARATION + b"<?pi " + b"y" * 70_000 + b"?>\n" + DOCTYPE + BODY,
        b"\xef\xbb\xbf" + DECLARATION + DOCTYPE + BODY,
        (DECLARATION.decode().replace("UTF-8", "UTF-16") + DOCTYPE.decode() + BODY.decode()).encode("utf-16"),
        (DECLARATION.decode().replace("UTF-8", "UTF-16") + DOCTYPE.decode() + BODY.decode()).encode("utf-16-be"),
        (DECLARATION.decode().replace("UTF-8", "UTF-32") + DOCTYPE.decode() + BODY.decode()).encode("utf-32"),
    ],
    ids=["after-70KB-comment", "after-70KB-PI", "utf8-bom", "utf16-bom", "utf16-be-no-bom", "utf32"],
)
def test_a_doctype_anywhere_in_the_prolog_is_refused_by_both_sides(tmp_path, data) -> None:
    scan, parsed = _both(tmp_path, data)
    assert not scan.well_formed and scan.error == f"not well-formed for this pipeline: page {ENTITY_MESSAGE}"
    assert [d["error_type"] for d in parsed.dead_letters] == ["dtd_refused"]
    assert ENTITY_MESSAGE in parsed.dead_letters[0]["error_message"]
    assert parsed.entries == [] and parsed.tombstones == []


def test_a_doctype_without_entities_has_its_own_message() -> None:
    assert dtd_refusal(DECLARATION + b"<!DOCTYPE feed SYSTEM 'http://127.0.0.1:9/x.dtd'>" + BODY) == DTD_MESSAGE


def test_comments_and_pis_without_a_doctype_pass(tmp_path) -> None:
    data = DECLARATION + b"<!-- <!DOCTYPE inside a comment is text --><?pi x?>\n" + BODY
    (tmp_path / "p.atom").write_bytes(data)
    assert dtd_refusal(data) is None and dtd_refusal_file(tmp_path / "p.atom") is None


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-32"])
def test_a_utf16_page_is_counted_alike_by_the_manifest_and_the_parser(tmp_path, codec) -> None:
    data = GOOD.decode().replace('encoding="UTF-8"', f'encoding="{codec.upper()[:6]}"').encode(codec)
    scan, parsed = _both(tmp_path, data)
    # Whether libxml2 takes the page whole (it does not take UTF-32 here) or the byte scan counts
    # it after transcoding, the extraction counts the records the parser will find.
    assert scan.well_formed == (codec != "utf-32")
    assert (scan.entries, scan.tombstones) == (2, 1)
    assert (parsed.entries_seen, parsed.tombstones_seen) == (2, 1)
    assert len(parsed.entries) == 2 and len(parsed.tombstones) == 1 and parsed.dead_letters == []


def test_a_broken_utf16_page_is_counted_alike_by_the_byte_scan_and_the_parser(tmp_path) -> None:
    data = GOOD.decode().replace('encoding="UTF-8"', 'encoding="UTF-16"').encode("utf-16")
    cut = data[: len(data) - 40]  # ends inside the last entry: not well-formed
    scan, parsed = _both(tmp_path, cut)
    assert not scan.well_formed and scan.cut_short
    assert (scan.entries, scan.tombstones) == (parsed.entries_seen, parsed.tombstones_seen) == (2, 1)


def test_to_utf8_leaves_ascii_compatible_pages_alone() -> None:
    latin = GOOD.replace(b'encoding="UTF-8"', b'encoding="ISO-8859-1"')
    assert to_utf8(latin) is latin
    assert to_utf8(GOOD.decode().encode("utf-16")) == GOOD
