"""One Silver for the same pages, whatever the engine, the batch split and the page order: versions
of an entry that tie on `updated` (in one page and across pages), exact duplicates, and tombstones of
one entry at one `when` with other types are decided by `ingest.rules` alone (real Spark, real Delta).

Before the rules were written once, Spark kept the greater `xxhash64` of a row's JSON and delta-rs
the greater sha256 of another JSON; and across batches the first page ingested kept its version, so
the forward and the reverse order left different rows.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lxml import etree

from placsp_provider.datasets import get_dataset
from placsp_provider.ingest.request import IngestRequest
from placsp_provider.ingest.run import ingest
from placsp_provider.lake import LAKE_TABLES, table_path
from tests.pages import ID_PREFIX, day, entry, page, tombstone
from tests.spark.bronze import land

pytestmark = pytest.mark.spark

DS = "agregadas"
T = day(5, 10)
CLOCKS = {"_ingest_run_id", "_ingested_at", "run_id", "processing_timestamp", "ingested_at"}


def _version(number: int, title: str, results: int = 1) -> bytes:
    """A real entry at `T` with its own title and `results` tender results (children that differ)."""
    body = entry(number, T).replace(b"<title>", f"<title>{title} ".encode(), 1)
    start = body.index(b"<cac:TenderResult>")
    end = body.index(b"</cac:TenderResult>") + len(b"</cac:TenderResult>")
    return body[:end] + body[start:end] * (results - 1) + body[end:]


def _page(*records: bytes) -> bytes:
    return page([]).replace(b"</feed>", b"".join(records) + b"</feed>")


PAGES = {  # landed one interval each, so they can be ingested one batch per page
    "2022-01-03": (
        "A.atom",
        _page(_version(1, "A"), _version(2, "same"), entry(3, day(5, 8)), tombstone(3, day(5, 9))),
    ),
    "2022-01-04": (
        "B.atom",
        _page(_version(1, "B", 2), _version(2, "same"), tombstone(3, day(5, 9)).replace(b"ANULADA", b"CERRADA")),
    ),
    "2022-01-05": (
        "C.atom",  # one page repeating entry 1 at one `updated` with other content, and entry 4 identically
        _page(_version(1, "C1"), _version(1, "C2", 3), _version(4, "twice"), _version(4, "twice")),
    ),
}


def _land_all(lake: Path) -> dict[str, Path]:
    return {stamp: land(lake, DS, {name: body}, stamp) for stamp, (name, body) in PAGES.items()}


def _ingest(spark, lake: Path, engine: str, batches: list[tuple[Path, ...]]) -> None:
    if engine == "delta-rs":  # its first ingest needs the tables Spark creates
        from placsp_provider.spark.tables import ensure_tables

        ensure_tables(spark, lake)
    for n, manifests in enumerate(batches):
        ingest(IngestRequest(get_dataset(DS), lake, f"run-{n}", manifests), engine, spark=spark)


def _contents(lake: Path) -> dict[str, list[str]]:
    """Every table's rows, clock and run columns aside, sorted: what must not depend on how it was ingested."""
    from deltalake import DeltaTable

    out = {}
    for table in LAKE_TABLES:
        rows = DeltaTable(str(table_path(lake, table))).to_pyarrow_table().to_pylist()
        out[table] = sorted(repr(sorted((k, v) for k, v in r.items() if k not in CLOCKS)) for r in rows)
    return out


def _read_with_lxml() -> tuple[set[str], set[tuple[str, str]]]:
    ids, tombstones = set(), set()
    for _, body in PAGES.values():
        root = etree.fromstring(body, etree.XMLParser(resolve_entities=False, no_network=True))
        ids |= {e.findtext("{http://www.w3.org/2005/Atom}id") for e in root.iter("{http://www.w3.org/2005/Atom}entry")}
        tombstones |= {
            (t.get("ref"), t.get("when")) for t in root.iter("{http://purl.org/atompub/tombstones/1.0}deleted-entry")
        }
    return ids, tombstones


SPLITS = ["one batch", "page by page", "page by page, reversed"]


@pytest.fixture(scope="module")
def lakes(spark, tmp_path_factory) -> dict[tuple[str, str], Path]:
    out = {}
    for engine in ("spark", "spark+delta-rs", "delta-rs"):
        for split in SPLITS:
            lake = tmp_path_factory.mktemp("ties") / "lake"
            manifests = _land_all(lake)
            ordered = [(manifests[stamp],) for stamp in sorted(manifests)]
            batches = {"one batch": [()], "page by page": ordered, "page by page, reversed": ordered[::-1]}[split]
            _ingest(spark, lake, engine, batches)
            out[engine, split] = lake
    return out


def test_every_engine_and_split_leaves_the_same_tables(lakes: dict[tuple[str, str], Path]) -> None:
    reference = _contents(lakes["spark", "one batch"])
    for (engine, split), lake in lakes.items():
        contents = _contents(lake)
        for table in LAKE_TABLES:
            assert contents[table] == reference[table], f"{table} differs: engine {engine}, {split}"


def test_the_winner_is_the_greatest_version_with_its_own_children_only(lakes: dict[tuple[str, str], Path]) -> None:
    from deltalake import DeltaTable

    lake = lakes["delta-rs", "page by page, reversed"]
    entries = {r["entry_id"]: r for r in DeltaTable(str(table_path(lake, "entries"))).to_pyarrow_table().to_pylist()}
    one = entries[f"{ID_PREFIX}1"]
    # C.atom's name sorts last; within it, the greater sha256 of the two records' bytes.
    assert one["_source_file"].split("/")[-1].startswith("C.") and one["title"].split()[0] in ("C1", "C2")
    every_result = DeltaTable(str(table_path(lake, "results"))).to_pyarrow_table().to_pylist()
    results = [r for r in every_result if r["entry_id"] == one["entry_id"]]
    assert len(results) == (1 if one["title"].startswith("C1") else 3)  # never a mix of two versions' results
    assert entries[f"{ID_PREFIX}3"]["deletion_type"] == "CERRADA"  # B.atom's tombstone: the later page


def test_conservation_against_lxml(lakes: dict[tuple[str, str], Path]) -> None:
    from deltalake import DeltaTable

    ids, tombstones = _read_with_lxml()
    for lake in lakes.values():
        silver = {r["entry_id"] for r in DeltaTable(str(table_path(lake, "entries"))).to_pyarrow_table().to_pylist()}
        logged = DeltaTable(str(table_path(lake, "tombstones"))).to_pyarrow_table().to_pylist()
        dead = DeltaTable(str(table_path(lake, "dead_letters"))).to_pyarrow_table().num_rows
        assert (silver, dead) == (ids, 0)
        assert {(t["entry_id"], t["deleted_at"].strftime("%Y-%m-%dT%H:%M:%S.000+00:00")) for t in logged} == tombstones
