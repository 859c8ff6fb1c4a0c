"""Conservation asserted from what the pipeline wrote, against counts it did not compute.

The records of each landed page are listed here, outside the pipeline: by a plain lxml parse of the
page (its own hardened parser, not the splitter the ingest uses), or, for a page lxml cannot read
(broken on purpose), by the test that built it. Then, after the MERGE, the Delta tables must account
for every one of them:

- a record-level dead letter of the run in that page (matched by entry id; one dead letter per record),
- or the whole page is out of Silver (a reconciliation row 'quarantined' for the run) and a dead letter
  of the run names the page,
- or Silver holds it: the entry id in `entries` (the newest version wins, so an older copy is
  accounted for by the version Silver keeps), the tombstone in `tombstones`.

And nothing comes from nowhere: every record-level dead letter of the run matches a record read, and
every Silver row stamped with the run (`_ingest_run_id`) is an entry read in the run. The run summary
is not read at all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from lxml import etree

from placsp_provider.lake import table_path

_ATOM = "{http://www.w3.org/2005/Atom}"
_DELETED_ENTRY = "{http://purl.org/atompub/tombstones/1.0}deleted-entry"
ENTRY, TOMBSTONE = "entry", "tombstone"


@dataclass(frozen=True)
class Record:
    page: str  # the landed page's name without `.atom` (what the test called it)
    kind: str  # ENTRY or TOMBSTONE
    id: str


def read_with_lxml(name: str, body: bytes, *, recover: bool = False) -> list[Record]:
    """Every entry and tombstone of a well-formed page, by one strict lxml parse (no entities, no network).

    `recover=True` only for a page whose one fault is an undeclared namespace prefix: libxml2 reports
    it and keeps every element, so the records are still all listed.
    """
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=True, recover=recover)
    root = etree.fromstring(body, parser)
    page = _stem(name)
    entries = [Record(page, ENTRY, e.findtext(f"{_ATOM}id") or "") for e in root.iter(f"{_ATOM}entry")]
    return entries + [Record(page, TOMBSTONE, t.get("ref") or "") for t in root.iter(_DELETED_ENTRY)]


def documented(name: str, entry_ids: list[str], tombstone_ids: tuple[str, ...] = ()) -> list[Record]:
    """The records of a page lxml cannot parse, as the test that built (or documented) it knows them."""
    page = _stem(name)
    return [Record(page, ENTRY, i) for i in entry_ids] + [Record(page, TOMBSTONE, i) for i in tombstone_ids]


@dataclass(frozen=True)
class Accounted:
    read: int  # records listed outside the pipeline
    in_silver: int  # of them, held by Silver (entries or tombstones)
    dead_letter_records: int  # of them, each in its own dead letter of the run
    in_quarantined_pages: int  # of them, in a page kept out of Silver whole
    silver_rows_of_run: int  # rows of `entries` + `tombstones` stamped with the run, after the MERGE


Rows = Callable[..., list[Any]]  # (table, equalities, *columns) -> rows with those columns as attributes


def assert_conserved(spark, lake: Path, dataset: str, run_id: str, records: list[Record]) -> Accounted:
    """Conservation read through Spark (the tests that hold the shared SparkSession)."""

    def read(name: str, equal: dict[str, str], *cols: str) -> list[Any]:
        where = " AND ".join(f"{column} = '{value}'" for column, value in {"dataset": dataset, **equal}.items())
        return spark.read.format("delta").load(str(table_path(lake, name))).where(where).select(*cols).collect()

    return _assert_conserved(read, run_id, records)


def assert_conserved_with_delta_rs(lake: Path, dataset: str, run_id: str, records: list[Record]) -> Accounted:
    """The same, read with delta-rs: for tests whose Spark ran in a spark-submit of its own (a DAG run)."""
    from deltalake import DeltaTable

    def read(name: str, equal: dict[str, str], *cols: str) -> list[Any]:
        rows = DeltaTable(str(table_path(lake, name))).to_pyarrow_table(columns=[*{"dataset", *equal, *cols}])
        wanted = {"dataset": dataset, **equal}
        return [
            SimpleNamespace(**{c: row[c] for c in cols})
            for row in rows.to_pylist()
            if all(row[column] == value for column, value in wanted.items())
        ]

    return _assert_conserved(read, run_id, records)


def _assert_conserved(read: Rows, run_id: str, records: list[Record]) -> Accounted:
    entries = read("entries", {}, "entry_id", "_source_file", "_ingest_run_id")
    tombstones = read("tombstones", {}, "entry_id", "_ingest_run_id")
    dead = read("dead_letters", {"run_id": run_id}, "source_file", "record_kind", "entry_id")
    quarantined = {
        _stem(r.source_file) for r in read("reconciliation", {"run_id": run_id, "status": "quarantined"}, "source_file")
    }
    pages = {r.page for r in records}
    assert quarantined <= pages, f"quarantined pages not landed by the test: {quarantined - pages}"
    named = {_stem(r.source_file) for r in dead if r.record_kind in ("file", "page")}
    assert quarantined <= named, f"pages kept out of Silver with no dead letter naming them: {quarantined - named}"

    # Record-level dead letters match records read, one for one, first by id, then (no id) by page.
    letters = Counter(
        (_stem(r.source_file), r.record_kind, r.entry_id) for r in dead if r.record_kind in (ENTRY, TOMBSTONE)
    )
    whole = [r for r in records if r.page in quarantined]
    rest = Counter(r for r in records if r.page not in quarantined)
    matched = 0
    for (page, kind, entry_id), n in list(letters.items()):
        if entry_id is None:
            continue
        take = min(n, rest[Record(page, kind, entry_id)])
        rest[Record(page, kind, entry_id)] -= take
        letters[(page, kind, entry_id)] -= take
        matched += take
    held_entries = {r.entry_id for r in entries}
    held_tombstones = {r.entry_id for r in tombstones}

    def held(r: Record) -> bool:
        return r.id in (held_entries if r.kind == ENTRY else held_tombstones)

    for (page, kind, entry_id), n in list(letters.items()):
        if entry_id is not None or n == 0:
            continue
        candidates = [r for r in rest if r.page == page and r.kind == kind and rest[r] and not held(r)]
        for r in sorted(candidates, key=lambda r: r.id):
            take = min(letters[(page, kind, entry_id)], rest[r])
            rest[r] -= take
            letters[(page, kind, entry_id)] -= take
            matched += take
    unmatched_letters = +letters
    assert not unmatched_letters, f"dead letters of run {run_id} for records no page holds: {dict(unmatched_letters)}"
    lost = [r for r in (+rest).elements() if not held(r)]
    assert not lost, f"records read but neither in Silver nor in a dead letter: {lost[:10]} ({len(lost)})"

    in_silver = sum((+rest).values())
    ids_read = {r.id for r in records if r.page not in quarantined and r.kind == ENTRY}
    stamped = [r for r in entries if r._ingest_run_id == run_id]
    strays = [r.entry_id for r in stamped if r.entry_id not in ids_read or _stem(r._source_file) in quarantined]
    assert not strays, f"Silver rows stamped {run_id} for entries the run did not read: {strays[:10]}"
    stamped_tombstones = [r for r in tombstones if r._ingest_run_id == run_id]
    tomb_read = {r.id for r in records if r.page not in quarantined and r.kind == TOMBSTONE}
    assert {r.entry_id for r in stamped_tombstones} <= tomb_read
    result = Accounted(len(records), in_silver, matched, len(whole), len(stamped) + len(stamped_tombstones))
    assert result.read == result.in_silver + result.dead_letter_records + result.in_quarantined_pages, result
    return result


def _stem(name: str) -> str:
    """`bronze/<ds>/pages/<stem>.<sha16>.atom` or `<stem>.atom` -> `<stem>`."""
    base = name.rsplit("/", 1)[-1]
    base = base[: -len(".atom")] if base.endswith(".atom") else base
    if "/" in name:  # a landed file: drop the content hash the landing added
        base = base.rsplit(".", 1)[0]
    return base
