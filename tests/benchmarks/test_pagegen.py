"""The page generator writes exactly what it reports, and the extraction benchmark runs end to end.

Real lxml (`scan_page`), real bytes, real loopback HTTP in the tiny benchmark run; nothing mocked.
"""

# ruff: noqa: E402  (the repository root must be on sys.path before `benchmarks` is imported)
from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

# `benchmarks` is a top-level folder of the repository, not part of the installed package.
_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from benchmarks.bench_extract import QUICK
from benchmarks.bench_extract import run as run_extract_benchmark
from benchmarks.pagegen import (
    CORRUPTION_KINDS,
    EXPECTED_STAGE,
    PAGE_LEVEL_KINDS,
    Corpus,
    chain_routes,
    generate_corpus,
)

from placsp_provider.feed.page_scan import scan_page

_BLOCK = re.compile(rb"<entry>.*?(?:</entry>|\Z)", re.S)
_ID = re.compile(rb"<id>([^<]*)</id>")
_UPDATED = re.compile(rb"<updated>([^<]*)</updated>")
_TOMB = re.compile(rb'<at:deleted-entry ref="([^"]*)" when="([^"]*)"')


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    return generate_corpus(
        tmp_path_factory.mktemp("corpus"),
        pages=3,
        items_per_page=20,
        seed=7,
        dataset_key="agregadas",
        tombstone_share=0.25,
        corruption_count=len(CORRUPTION_KINDS),  # round-robin: one of each kind
    )


def _entries(data: bytes) -> dict[str, list[bytes]]:
    """Entry id -> entry blocks (an id appears twice only for duplicate_id)."""
    out: dict[str, list[bytes]] = {}
    for block in _BLOCK.findall(data):
        out.setdefault(_ID.search(block).group(1).decode(), []).append(block)  # type: ignore[union-attr]
    return out


def test_pages_scan_to_the_generated_counts(corpus: Corpus) -> None:
    assert len(corpus.files) == len(corpus.pages) == 3
    for path, facts in zip(corpus.files, corpus.pages, strict=True):
        scan = scan_page(path)
        assert (scan.entries, scan.tombstones) == (facts.entries, facts.tombstones) == (15, 5), path.name
        assert scan.well_formed is facts.well_formed, (path.name, scan.error)
        assert facts.bytes == path.stat().st_size
        assert re.fullmatch(r"PlataformasAgregadasSinMenores_\d{8}_\d{6}(_\d+)?\.atom", path.name)
        assert scan.links["self"] == path.name
    assert corpus.total_entries == 45 and corpus.total_tombstones == 15
    assert [p.well_formed for p in corpus.pages] == [
        not any(c.page_file == p.file and c.kind in PAGE_LEVEL_KINDS for c in corpus.ground_truth) for p in corpus.pages
    ]
    # RFC 5005 links: next goes to the older page, prev to the newer one, first to the head.
    names = [p.name for p in corpus.files]
    links = [scan_page(f).links for f in corpus.files]
    assert [lk.get("next") for lk in links] == [names[1], names[2], None]
    assert [lk.get("prev") for lk in links] == ["PlataformasAgregadasSinMenores.atom", names[0], names[1]]
    assert all(lk["first"] == "PlataformasAgregadasSinMenores.atom" for lk in links)


def test_ground_truth_is_exactly_what_was_injected(corpus: Corpus) -> None:
    truth = corpus.ground_truth
    assert sorted(c.kind for c in truth) == sorted(CORRUPTION_KINDS)
    assert all(c.expected_stage == EXPECTED_STAGE[c.kind] for c in truth)
    data = {p.name: p.read_bytes() for p in corpus.files}
    entries = {name: _entries(body) for name, body in data.items()}
    all_ids = Counter(i for page in entries.values() for i, blocks in page.items() for _ in blocks)
    for c in truth:
        body = data[c.page_file]
        if c.kind.startswith("tombstone_"):
            assert (c.entry_id.encode(), c.facts["tombstone_when"].encode()) in _TOMB.findall(body)
            (block,) = entries[c.facts["entry_page_file"]][c.entry_id]
            assert _UPDATED.search(block).group(1).decode() == c.facts["entry_updated"]  # type: ignore[union-attr]
            newer = c.facts["tombstone_when"] > c.facts["entry_updated"]  # same offset in this corpus
            assert newer is (c.kind == "tombstone_after_update")
            continue
        blocks = entries[c.page_file][c.entry_id]
        block = blocks[0]
        if c.kind == "duplicate_id":
            assert all_ids[c.entry_id] == 2
            assert _UPDATED.search(block).group(1).decode() == c.facts["newest_updated"]  # type: ignore[union-attr]
        elif c.kind == "unclosed_tag":
            assert b"<cbc:ContractFolderID>" in block and b"</cbc:ContractFolderID>" not in block
        elif c.kind == "truncated_page":
            assert not body.endswith(b"</feed>\n") and body.endswith(block) and b"</entry>" not in block
        elif c.kind == "latin1_bytes":
            with pytest.raises(UnicodeDecodeError):
                block.decode("utf-8")
        elif c.kind == "unbound_prefix":
            assert b"<ns3:ContractFolderStatus>" in block and b"xmlns:ns3" not in body
        elif c.kind == "na_amount":
            assert f">N/A</{c.facts['element']}>".encode() in block
        elif c.kind == "decimal_comma":
            assert "," in c.facts["written"] and f">{c.facts['written']}</".encode() in block
        elif c.kind == "repeated_single":
            assert block.count(f"<{c.facts['element']}>".encode()) == 2
    # ...and nothing else was injected: every trace of a corruption in the bytes has its record.
    count = Counter(c.kind for c in truth)
    blocks_all = [b for page in entries.values() for bs in page.values() for b in bs]
    assert sum(b"N/A</cbc:" in b for b in blocks_all) == count["na_amount"]
    assert sum(b"<ns3:" in b for b in blocks_all) == count["unbound_prefix"]
    assert sum(not b.endswith(b"</entry>") for b in blocks_all) == count["truncated_page"]
    assert sum(n == 2 for n in all_ids.values()) == count["duplicate_id"]
    tomb_refs = [ref.decode() for body in data.values() for ref, _ in _TOMB.findall(body)]
    assert (
        sum(ref in all_ids for ref in tomb_refs) == count["tombstone_after_update"] + count["tombstone_before_update"]
    )
    undecodable = 0
    for body in data.values():
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            undecodable += 1
    assert undecodable == len({c.page_file for c in truth if c.kind == "latin1_bytes"})


def test_same_seed_same_bytes_and_a_walkable_chain(tmp_path: Path) -> None:
    options = {"pages": 3, "items_per_page": 10, "seed": 3, "dataset_key": "licitaciones", "head": True}
    one, two = (chain_routes(generate_corpus(tmp_path / name, **options)) for name in ("one", "two"))
    assert [p.read_bytes() for p in one.values()] == [p.read_bytes() for p in two.values()]
    head = "/sindicacion/sindicacion_643/licitacionesPerfilesContratanteCompleto3.atom"
    assert next(iter(one)) == head
    path, seen = head, []
    while path:
        seen.append(path)
        nxt = re.search(rb'<link href="([^"]+)" rel="next"/>', one[path].read_bytes())
        path = f"{path.rsplit('/', 1)[0]}/{nxt.group(1).decode()}" if nxt else ""
    assert seen == list(one)


def test_extract_benchmark_tiny_run() -> None:
    result = run_extract_benchmark(quick=True)
    runs = result.raw["main"]["extract"]
    assert runs and all(r["counts_ok"] for r in runs), runs[0]["checks"]
    assert runs[0]["landed"]["pages"] == QUICK.pages
    assert all(p["clean"]["run"]["counts_ok"] for p in result.raw["scaling"])
    assert [g.target for g in result.goals] == [">= 150 MB/s"]
    assert all(t.rows for t in result.tables) and len(result.figures) == 3
