"""Hostile bytes in a page (issue 31): every check on them is decided in linear time, and no record
makes the Silver parser build a huge tree.

- F2: whether a page ends with its root's end tag (`feed.xml.ends_with_feed_end`, used by the
  extraction's byte scan and by `page_split`) replaced a regex that backtracked exponentially. The
  hostile tails are run in a child process killed after a generous time, on every path that decides
  it (the byte scan's `cut_short`, `page_split`'s `feed_closed`, `parse_page`'s page dead letter);
  ordinary tails keep the old regex's verdicts, and random ones decide as it did.
- The other byte-level patterns rewritten for the audit find exactly what the old ones found, and the
  one that was quadratic (the entry id of a dead letter) is linear.
- F4: a record of millions of nodes (elements, PIs, attributes, namespace declarations) is one dead
  letter (`tree_too_large`, the limit named) in bounded memory, measured as the peak RSS of a child
  process; every record start tag still gives exactly one row or one dead letter; the limits are
  exact, and the extraction's streaming scan draws the same line on the same bytes.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import pytest
from lxml import etree

from placsp_provider import settings
from placsp_provider.datasets import get_dataset
from placsp_provider.feed import page_scan
from placsp_provider.parser import page_split
from placsp_provider.parser.page_parser import PageParseResult, parse_page
from tests.pages import ATOM_ROOT, ID_PREFIX, day, entry

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "include" / "placsp_samples"
AGREGADAS = get_dataset("agregadas")

# The regex `ends_with_feed_end` replaced, kept as the reference for the verdicts.
OLD_FEED_END = re.compile(rb"</(?:[A-Za-z_][\w.\-]*:)?feed\s*>(?:\s|<!--.*?-->|<\?.*?\?>)*\Z", re.DOTALL)
OLD_WINDOW = 4096
# A generous bound for what the fixed code decides in well under a second.
DECIDED_WITHIN_S = 30.0


def _old_verdict(data: bytes) -> bool:
    return OLD_FEED_END.search(data[-OLD_WINDOW:]) is not None


# ---------------------------------------------------------------------------------------------------
# child processes: a hang is killed, memory is the child's own peak

_PRELUDE = """
import json, resource, sys
from pathlib import Path

def peak_mb():
    # The child's own peak: VmHWM belongs to its address space. (Linux's ru_maxrss also keeps the
    # parent's resident size at the fork, so a test process that built a large page would count.)
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024
    except OSError:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / (1 << 20) if sys.platform == "darwin" else peak / 1024

def out(**values):
    print(json.dumps(values))
"""


def run_child(code: str, *args: str, timeout: float = DECIDED_WITHIN_S) -> dict[str, Any]:
    """Run `code` in a fresh interpreter (the same `placsp_provider` the tests import); its last
    output line is JSON. A child that has not finished within `timeout` is killed: the test fails."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(REPO)) if p)
    program = _PRELUDE + textwrap.dedent(code)
    try:
        done = subprocess.run(
            [sys.executable, "-c", program, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=REPO,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"not decided within {timeout:.0f} s: the child process was killed")
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------------
# F2: the end of a page

# Not well-formed before its end (a title left open), so the extraction's byte scan decides `cut_short`
# from the tail; its last record is complete, so Silver flags a missing `</feed>` on the page.
BROKEN_HEAD = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n' + ATOM_ROOT + b"<entry><title>x</entry>" + entry(2, day(5)) + b"</feed>"
)

HOSTILE_TAILS = {
    # name: (tail after `</feed>`, does the page still end with its root's end tag)
    "40 empty comments then a stray byte": (b"<!---->" * 40 + b"x", False),
    "40 empty comments then an unterminated one": (b"<!---->" * 40 + b"<!--", False),
    "40 empty comments": (b"<!---->" * 40, True),
    "800 PIs then a stray byte": (b"<?x?>" * 800 + b"x", False),
    "800 PIs": (b"<?x?>" * 800, True),
    "comments and PIs then a stray byte": ((b"<!---->" + b"<?x?>") * 300 + b"x", False),
    "an unterminated comment": (b"\n<!-- " + b"a" * 3000, False),
    "a PI without its ?>": (b"\n<?pi " + b"b" * 3000, False),
    "4 KiB of <!--": (b"<!--" * 1000, False),
    "500 <!-- then 500 -->": (b"<!--" * 500 + b"-->" * 500, True),
}

_END_OF_PAGE = """
from placsp_provider.datasets import get_dataset
from placsp_provider.feed.page_scan import scan_page
from placsp_provider.parser import page_split
from placsp_provider.parser.page_parser import parse_page

path = Path(sys.argv[1])
data = path.read_bytes()
scan = scan_page(path)
layout = page_split.scan_page(data)
parsed = parse_page(data, dataset=get_dataset("agregadas"), source_file=path.name)
page_letters = [d["error_type"] for d in parsed.dead_letters if d["record_kind"] == "page"]
out(well_formed=scan.well_formed, cut_short=scan.cut_short, feed_closed=layout.feed_closed, page=page_letters)
"""


@pytest.mark.parametrize("name", list(HOSTILE_TAILS))
def test_a_hostile_tail_is_decided_quickly_on_every_path(name: str, tmp_path: Path) -> None:
    tail, closed = HOSTILE_TAILS[name]
    path = tmp_path / "page.atom"
    path.write_bytes(BROKEN_HEAD + tail)
    got = run_child(_END_OF_PAGE, str(path))
    assert got["well_formed"] is False  # the byte scan, which reads the tail, decided
    assert (got["cut_short"], got["feed_closed"]) == (not closed, closed)
    assert got["page"] == ([] if closed else ["truncated"])


# name: tail, the old regex's verdict (checked below against the regex itself)
ORDINARY_TAILS: list[tuple[bytes, bool]] = [
    (b"</feed>", True),
    (b"</feed>\n", True),
    (b"</feed>\r\n\t ", True),
    (b"</feed >", True),
    (b"</feed\n>", True),
    (b"</atom:feed>", True),
    (b"</a.b-c_d:feed>\n", True),
    (b"</feed><!-- generated 2022-01-04 -->\n", True),
    (b"</feed>\n<?processed by=x?>\n", True),
    (b"</feed><!----><??>", True),
    (b"</feed></feed>", True),
    (b"</feed>\x0b\x0c", True),
    (b"</feed><!-- a --> junk -->", True),  # a comment may reach to a later `-->`, as it could
    (b"</feed><!---->-->", True),
    (b"", False),
    (b"</feed", False),
    (b"</feed>x", False),
    (b"</fee>", False),
    (b"</feeds>", False),
    (b"<feed/>", False),
    (b"</1a:feed>", False),
    (b"</:feed>", False),
    (b"</a:b:feed>", False),
    (b"</FEED>", False),
    (b"</feed>\n</entry>", False),
    (b"</feed><!-- x", False),
    (b"</feed><?x", False),
    (b"</feed><!-->", False),
    (b"</feed><!--->", False),
    (b"</feed><?>", False),
    (b"</feed>\x00", False),
    (b"</feed>\xc2\xa0", False),  # a no-break space is no XML blank
    (b"</feed>" + b" " * 5000, False),  # the end tag is further back than the window looked at
]


@pytest.mark.parametrize(("tail", "closed"), ORDINARY_TAILS, ids=[repr(t[:30]) for t, _ in ORDINARY_TAILS])
def test_ordinary_tails_keep_their_verdicts_on_every_path(tail: bytes, closed: bool, tmp_path: Path) -> None:
    assert _old_verdict(tail) is closed  # the table is the old regex's
    data = ATOM_ROOT + entry(1, day(5)) + tail
    assert page_split.scan_page(data).feed_closed is closed
    path = tmp_path / "page.atom"
    path.write_bytes(data)
    assert page_scan._byte_scan(path, "m").cut_short is (not closed)


_TOKENS = [
    b"</feed>", b"</a:feed >", b"</feed\n>", b"<!--", b"-->", b"<?", b"?>", b"<!---->", b"<??>", b" ", b"\n", b"\t",
    b"\x0b", b"x", b"<", b">", b"-", b"--", b"?", b"!", b"feed", b"</", b":", b"<!-", b"<!-->", b"<?>", b"\xc3\xa9",
]  # fmt: skip


def test_random_tails_are_decided_as_the_old_regex_decided_them() -> None:
    rng = random.Random(31)
    closed = 0
    for _ in range(10_000):
        tail = b"".join(rng.choice(_TOKENS) for _ in range(rng.randint(0, 10)))
        assert page_split.scan_page(ATOM_ROOT + tail).feed_closed is _old_verdict(tail), tail
        closed += _old_verdict(tail)
    assert closed > 500  # both verdicts were exercised


def test_the_window_is_the_last_4_kib_as_before() -> None:
    for pad in range(OLD_WINDOW - 12, OLD_WINDOW + 4):
        for tail in (b"</feed>" + b" " * pad, b"<x/>" * 2000 + b"</feed>" + b"<!---->" * (pad // 7)):
            data = ATOM_ROOT + tail
            assert page_split.scan_page(data).feed_closed is _old_verdict(data), pad


def test_the_new_check_is_the_one_both_paths_use() -> None:
    from placsp_provider.feed.xml import FEED_END_WINDOW, ends_with_feed_end

    assert FEED_END_WINDOW == OLD_WINDOW
    for tail, closed in ORDINARY_TAILS:
        assert ends_with_feed_end(tail) is closed


# ---------------------------------------------------------------------------------------------------
# the audit: rewritten patterns find what the old ones found, in linear time

OLD_PATTERNS = {
    "_START_TAG_REST": (
        rb"""(?:\s+[^\s=/>]+\s*=\s*(?:"[^"]*"|'[^']*'))*\s*(/?)>""",
        page_split._START_TAG_REST,
        "match",
    ),
    "_XMLNS": (rb"""\sxmlns(?::([^\s=/>]+))?\s*=\s*(?:"([^"]*)"|'([^']*)')""", page_split._XMLNS, "finditer"),
    "_RECORD_START": (
        rb"<(?:([A-Za-z_][\w.\-]*):)?(entry|deleted-entry)(?=[\s/>])",
        page_split._RECORD_START,
        "finditer",
    ),
    "_TOMBSTONE_REF": (rb"""\sref\s*=\s*(?:"([^"]*)"|'([^']*)')""", page_split._TOMBSTONE_REF, "finditer"),
    "_FIRST_ELEMENT": (rb"<((?:[A-Za-z_][\w.\-]*:)?([A-Za-z_][\w.\-]*))", page_split._FIRST_ELEMENT, "finditer"),
    "_XML_DECLARATION": (rb"\A(?:\xef\xbb\xbf)?\s*(<\?xml\s[^>]*\?>)", page_split._XML_DECLARATION, "match"),
    "ENTRY_START": (rb"<(?:[A-Za-z_][\w.-]*:)?entry[\s>/]", page_scan.ENTRY_START, "finditer"),
    "TOMBSTONE_START": (rb"<(?:[A-Za-z_][\w.-]*:)?deleted-entry[\s>/]", page_scan.TOMBSTONE_START, "finditer"),
    "_ATTR": (rb"""(\w+)\s*=\s*["']([^"']*)["']""", page_scan._ATTR, "finditer"),
    "_LINK_BYTES": (rb"<(?:[\w.-]+:)?link\b([^>]*)/?>", page_scan._LINK_BYTES, "finditer"),
}
OLD_ENTRY_ID = re.compile(rb"<(?:[A-Za-z_][\w.\-]*:)?id(?:\s[^>]*)?>\s*([^<\s][^<]*?)\s*</")
_SOUP = [
    b"<", b">", b"/", b"=", b'"', b"'", b" ", b"\n", b"\t", b"a", b"b:", b"x", b"1", b"_", b".", b"-", b":", b"id",
    b"<id", b"</", b"<id>", b"</id>", b"<id ", b"<p:id", b"xmlns", b"xmlns:", b"ref", b"entry", b"deleted-entry",
    b"<entry", b"<at:", b"link", b"<link", b"rel", b"href", b"?>", b"<?xml ", b"\xef\xbb\xbf", b"?", b"\xc3\xa9",
]  # fmt: skip


def _found(pattern: re.Pattern[bytes], how: str, data: bytes) -> Any:
    if how == "match":
        found = pattern.match(data)
        return None if found is None else (found.span(), found.groups())
    return [(m.span(), m.groups()) for m in pattern.finditer(data)]


def test_the_rewritten_patterns_find_exactly_what_the_old_ones_found() -> None:
    rng = random.Random(7)
    old = {name: (re.compile(source), new, how) for name, (source, new, how) in OLD_PATTERNS.items()}
    for _ in range(30_000):
        data = b"".join(rng.choice(_SOUP) for _ in range(rng.randint(0, 14)))
        for name, (before, after, how) in old.items():
            assert _found(after, how, data) == _found(before, how, data), (name, data)
        found = OLD_ENTRY_ID.search(data)
        expected = found.group(1).strip().decode("utf-8", "backslashreplace") or None if found else None
        assert page_split.recover_entry_id(data, "entry") == expected, data


_HOSTILE_IDS = """
import time
from placsp_provider.parser import page_split

records = {
    "an id, 4 MB of blanks, no end tag": b"<entry><id>a" + b" " * 4_000_000 + b"x",
    "a million <id tags, no >": b"<id " * 1_000_000,
    "a million <id tags, one > far away": b"<id " * 1_000_000 + b">" + b"a" * 1_000_000,
    "a million failing ids": b"<id>a<x" * 600_000,
}
seconds = {}
for name, record in records.items():
    started = time.perf_counter()
    page_split.recover_entry_id(record, "entry")
    seconds[name] = round(time.perf_counter() - started, 3)
out(seconds=seconds)
"""


def test_the_entry_id_of_a_hostile_record_is_read_in_linear_time() -> None:
    # The old regex took quadratic time on each (hours for these 4 MB records); a dead letter of a
    # record that did not parse reads its id this way, so Silver would hang on it.
    got = run_child(_HOSTILE_IDS)
    assert all(s < DECIDED_WITHIN_S for s in got["seconds"].values()), got


# ---------------------------------------------------------------------------------------------------
# F4: records too large to build


def _page(*records: bytes) -> bytes:
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + ATOM_ROOT + b"<id>t</id>" + b"".join(records) + b"</feed>"


def _stuffed(number: int, inside: bytes) -> bytes:
    """A real entry with `inside` added before its end tag."""
    body = entry(number, day(5))
    return body[: -len(b"</entry>")] + inside + b"</entry>"


EIGHT_MB = 8 << 20
FLOODS = {
    # name: what fills 8 MB inside entry 2
    "elements": lambda: b"<x/>" * (EIGHT_MB // 4),
    "processing instructions": lambda: b"<?x?>" * (EIGHT_MB // 5),
    # one start tag of 8 MB: libxml2 would build all its attributes at once when its `>` arrives
    "attributes of one start tag": lambda: b"<x" + b"".join(b' a%d=""' % i for i in range(EIGHT_MB // 11)) + b"/>",
    "namespace declarations of one start tag": lambda: (
        b"<x" + b"".join(b' xmlns:p%d="u"' % i for i in range(EIGHT_MB // 17)) + b"/>"
    ),
}
SILVER_PEAK_MB = 200  # measured 70-85 MB (an 8 MB page is held as bytes, record and dead letter)

_PARSE = """
from placsp_provider.datasets import get_dataset
from placsp_provider.parser.page_parser import parse_page

path = Path(sys.argv[1])
parsed = parse_page(path.read_bytes(), dataset=get_dataset("agregadas"), source_file=path.name)
out(
    peak_mb=peak_mb(),
    seen=[parsed.entries_seen, parsed.tombstones_seen],
    entries=[row["entry_id"] for row in parsed.entries],
    dead=[
        [d["record_kind"], d["stage"], d["error_type"], d["entry_id"], d["error_message"]]
        for d in parsed.dead_letters
    ],
)
"""


@pytest.mark.parametrize("flood", list(FLOODS))
def test_a_record_flooded_with_nodes_is_one_dead_letter_in_bounded_memory(flood: str, tmp_path: Path) -> None:
    path = tmp_path / "page.atom"
    path.write_bytes(_page(entry(1, day(5)), _stuffed(2, FLOODS[flood]()), entry(3, day(5))))
    got = run_child(_PARSE, str(path), timeout=120)
    print(f"parse_page, 8 MB of {flood} in an entry: peak RSS {got['peak_mb']:.0f} MB")  # shown by -rP
    assert got["peak_mb"] < SILVER_PEAK_MB, got["peak_mb"]
    # conservation: three record start tags, two rows and one dead letter
    assert got["seen"] == [3, 0]
    assert got["entries"] == [f"{ID_PREFIX}1", f"{ID_PREFIX}3"]
    ((kind, stage, error_type, entry_id, message),) = got["dead"]
    assert (kind, stage, error_type, entry_id) == ("entry", "parse", "tree_too_large", f"{ID_PREFIX}2")
    assert message.startswith("Dataset agregadas, file page.atom: entry ")
    assert "over the limit MAX_NODES_PER_RECORD = 250,000" in message


def test_junk_between_records_costs_silver_nothing(tmp_path: Path) -> None:
    path = tmp_path / "page.atom"
    path.write_bytes(_page(entry(1, day(5)), b"<x/>" * (EIGHT_MB // 4), entry(2, day(5))))
    got = run_child(_PARSE, str(path), timeout=120)
    print(f"parse_page, 8 MB of elements at the feed root: peak RSS {got['peak_mb']:.0f} MB")
    assert got["peak_mb"] < SILVER_PEAK_MB, got["peak_mb"]
    assert (got["seen"], got["entries"], got["dead"]) == ([2, 0], [f"{ID_PREFIX}1", f"{ID_PREFIX}2"], [])


def test_many_namespace_declarations_in_a_record_are_refused_by_count() -> None:
    inside = b"".join(b'<x xmlns:p%d="u"/>' % i for i in range(settings.MAX_NAMESPACE_DECLARATIONS + 1))
    parsed = _parse(_page(_stuffed(1, inside), entry(2, day(5))))
    assert [row["entry_id"] for row in parsed.entries] == [f"{ID_PREFIX}2"]
    ((dead_letter,),) = [parsed.dead_letters]
    assert dead_letter["error_type"] == "tree_too_large"
    assert (
        "more than 50,000 namespace declarations, over the limit MAX_NAMESPACE_DECLARATIONS"
        in (dead_letter["error_message"])
    )


def _parse(data: bytes) -> PageParseResult:
    return parse_page(data, dataset=AGREGADAS, source_file="page.atom")


def _scan(tmp_path: Path, data: bytes) -> page_scan.PageScan:
    path = tmp_path / "page.atom"
    path.write_bytes(data)
    return page_scan.scan_page(path)


def _nodes(element: Any) -> int:
    """An element's nodes as the limits count them: it, its elements, their attributes, its PIs."""
    return sum(1 + len(e.attrib) for e in element.iter("*")) + sum(1 for _ in element.iter(etree.PI))


def _record_nodes(record: bytes) -> int:
    return _nodes(etree.fromstring(ATOM_ROOT + record + b"</feed>")[0])


@pytest.mark.parametrize("extra", [b'<x a="1"/>', b"<?p?>", b"<x/>"])
def test_the_record_limit_is_exact_and_the_same_in_the_scan_and_in_silver(
    extra: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limit = _record_nodes(entry(1, day(5))) + 3 * (_nodes(etree.fromstring(b"<r>" + extra + b"</r>")) - 1)
    monkeypatch.setattr(settings, "MAX_NODES_PER_RECORD", limit)
    at_limit = _page(_stuffed(1, extra * 3), entry(2, day(5)))
    over = _page(_stuffed(1, extra * 3 + b"<y/>"), entry(2, day(5)))
    assert _record_nodes(_stuffed(1, extra * 3)) == limit  # three `extra` fit exactly
    parsed, scan = _parse(at_limit), _scan(tmp_path, at_limit)
    assert (len(parsed.entries), parsed.dead_letters, scan.well_formed) == (2, [], True)
    parsed, scan = _parse(over), _scan(tmp_path, over)
    assert [row["entry_id"] for row in parsed.entries] == [f"{ID_PREFIX}2"]
    assert [d["error_type"] for d in parsed.dead_letters] == ["tree_too_large"]
    assert (scan.well_formed, scan.entries) == (False, 2)  # counted by the byte scan
    assert scan.error is not None and f"over the limit MAX_NODES_PER_RECORD = {limit:,}" in scan.error


def test_replaying_a_refused_record_refuses_it_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from placsp_provider.dead_letters.record_bytes import parse_dead_letter

    monkeypatch.setattr(settings, "MAX_NODES_PER_RECORD", 1_000)
    parsed = _parse(_page(_stuffed(1, b"<x/>" * 2_000)))
    (dead_letter,) = parsed.dead_letters
    replayed = parse_dead_letter(dead_letter, dataset=AGREGADAS)
    assert [d["error_type"] for d in replayed.dead_letters] == ["tree_too_large"]


def test_depth_is_bounded_by_libxml2_at_256_in_every_path(tmp_path: Path) -> None:
    # The feed root is level 1 and an entry level 2 (the wrapper stands for the root in Silver).
    fits = 256 - 2
    for depth, ok in ((fits, True), (fits + 1, False)):
        data = _page(_stuffed(1, b"<x>" * depth + b"</x>" * depth))
        parsed, scan = _parse(data), _scan(tmp_path, data)
        assert scan.well_formed is ok
        if ok:
            assert parsed.dead_letters == []
        else:
            assert [d["error_type"] for d in parsed.dead_letters] == ["xml_syntax"]
            assert "Excessive depth in document: 256" in parsed.dead_letters[0]["error_message"]
            assert scan.error is not None and "Excessive depth in document: 256" in scan.error


def _real_pages() -> list[tuple[str, bytes]]:
    pages = [(p.name, p.read_bytes()) for p in sorted(SAMPLES.rglob("*.atom")) if "fragment" not in str(p)]
    for archive in sorted(SAMPLES.rglob("*.zip")):
        with zipfile.ZipFile(archive) as opened:
            pages += [(m, opened.read(m)) for m in opened.namelist() if m.endswith(".atom")]
    return pages


def test_the_limits_leave_a_wide_margin_over_every_real_page() -> None:
    most_per_record = most_per_page = most_namespaces = 0
    for _name, data in _real_pages():
        root = etree.fromstring(data)
        most_per_page = max(most_per_page, _nodes(root))
        most_per_record = max([most_per_record] + [_nodes(child) for child in root])
        most_namespaces = max(most_namespaces, data.count(b"xmlns"))
    assert (most_per_record, most_per_page, most_namespaces) == (3_472, 39_944, 389)  # as measured
    assert settings.XML_MAX_DEPTH == 256  # what libxml2 enforces (test_depth_is_bounded_by_libxml2...)
    assert most_per_record * 50 < settings.MAX_NODES_PER_RECORD
    assert most_per_page * 100 < settings.MAX_NODES_PER_PAGE
    assert most_namespaces * 100 < settings.MAX_NAMESPACE_DECLARATIONS
