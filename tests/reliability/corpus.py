"""Two small days of agregadas pages (from the real 1044 entry of tests/pages.py) that make every
kind of Delta commit of an ingest happen, with the records an lxml parse lists in them.

Day 1 (a fresh lake: the tables are created):
  d1        entries 1, 2, 3 (Jan 5) and 4 (Jan 5, earlier)
  na        entries 21 (amount N/A: a validation dead letter) and 22
  unclosed  entries 11, 12 (its XML is broken: a parse dead letter), 13
Day 2 (a daily run into that lake):
  d2        entry 2 again, newer (its row and children are replaced), entry 5, a tombstone of 4
            (deletes it) and an older tombstone of 3 (kept in the log, not applied)
  na2       entry 23 (amount N/A)
  miscount  entries 41, 42 while the manifest counts 3: the whole file is quarantined
The replay test fixes entry 12 by hand and corrects the miscount manifest (tests/spark/test_replay.py
does the same in-process).
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conservation import Record, documented, read_with_lxml
from tests.pages import ID_PREFIX, day, entry, page
from tests.spark.bronze import land

DATASET = "agregadas"
DAY1, DAY2 = "2022-01-05", "2022-01-06"


def _unclosed() -> bytes:
    body = page([(11, day(5, 10)), (12, day(5, 10)), (13, day(5, 10))])
    second = body.index(b"<entry>", body.index(b"<entry>") + 1)
    return body[:second] + body[second:].replace(b"</cbc:ContractFolderID>", b"", 1)


def _na(numbers: list[int], when: str) -> bytes:
    return page([(n, when) for n in numbers]).replace(b'currencyID="EUR">', b'currencyID="EUR">N/A', 1)


def day1_pages() -> dict[str, bytes]:
    return {
        "d1.atom": page([(1, day(5, 10)), (2, day(5, 10)), (3, day(5, 10)), (4, day(5, 8))]),
        "na.atom": _na([21, 22], day(5, 11)),
        "unclosed.atom": _unclosed(),
    }


def day2_pages() -> dict[str, bytes]:
    return {
        "d2.atom": page([(2, day(6, 9)), (5, day(6, 9))], tombstones=[(4, day(6, 10)), (3, day(5, 9))]),
        "na2.atom": _na([23], day(6, 11)),
        "miscount.atom": page([(41, day(6, 12)), (42, day(6, 12))]),
    }


def land_day1(lake: Path) -> Path:
    return land(lake, DATASET, day1_pages(), DAY1)


def land_day2(lake: Path) -> Path:
    manifest = land(lake, DATASET, day2_pages(), DAY2)
    set_count(manifest, "miscount", 3)  # what an extraction release with a counting bug would write
    return manifest


def set_count(manifest: Path, stem: str, entries: int) -> None:
    data = json.loads(manifest.read_text())
    (landed,) = [p for p in data["pages"] if f"/{stem}." in p["file"]]
    landed["entries"] = entries
    manifest.write_text(json.dumps(data))


def records(*days: dict[str, bytes]) -> list[Record]:
    """Every entry and tombstone of the pages, listed by lxml (the broken page: by how it was built)."""
    out: list[Record] = []
    for pages in days:
        for name, body in pages.items():
            if name == "unclosed.atom":
                out += documented(name, [f"{ID_PREFIX}{n}" for n in (11, 12, 13)])
            else:
                out += read_with_lxml(name, body)
    return out


def fixed_entry_12() -> str:
    """Entry 12 as a person corrects it in its dead letter's raw_record."""
    return entry(12, day(5, 10)).decode()
