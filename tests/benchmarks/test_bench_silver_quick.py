"""The Silver benchmark measures what it says: its reference and its routing-off variant see the same
records as the real parser, and its memory sampler sees child processes. (The end-to-end run is
`make bench`: it starts three Spark sessions, minutes that belong in benchmarks, not in the suite.)

Real generated pages (real 643 entries), real lxml and pyarrow; the end-to-end run starts real Spark.
"""

# ruff: noqa: E402  (the repository root must be on sys.path before `benchmarks` is imported)
from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from benchmarks.pagegen import generate_corpus

from benchmarks import bench_silver as bench
from placsp_provider.datasets import get_dataset
from placsp_provider.parser.page_parser import parse_page


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory):
    return generate_corpus(
        tmp_path_factory.mktemp("silver-bench"),
        pages=2,
        items_per_page=20,
        seed=bench.SEED,
        dataset_key=bench._DATASET,
        entry_pool=bench._POOL,
    )


@pytest.mark.unit
def test_reference_extracts_the_records_parse_page_reads(corpus) -> None:
    ds = get_dataset(bench._DATASET)
    counts: Counter[str] = Counter()
    parsed = Counter()
    for path in corpus.files:
        records = bench._reference_extract(str(path), counts)
        result = parse_page(path.read_bytes(), dataset=ds, source_file=path.name)
        parsed["entries"] += len(result.entries)
        parsed["tombstones"] += len(result.tombstones)
        parsed["lots"] += len(result.lots)
        parsed["results"] += sum(e["result_count"] for e in result.entries)
        ids = {r[0] for r in records if r[0] != "tombstone"}
        assert ids == {e["entry_id"] for e in result.entries}
        assert all(r[3] and r[4] for r in records if r[0] != "tombstone")  # folder id and status read
    assert counts["entries"] == parsed["entries"] == corpus.total_entries
    assert counts["tombstones"] == parsed["tombstones"] == corpus.total_tombstones
    assert counts["lots"] == parsed["lots"] > 0
    assert counts["results"] == parsed["results"] > 0


@pytest.mark.unit
def test_routing_off_emits_the_same_valid_rows_without_dead_letter_columns(corpus) -> None:
    import pyarrow as pa

    from placsp_provider.spark.routing import make_router

    ds = get_dataset(bench._DATASET)
    lake = str(corpus.files[0].parent)
    paths = [p.as_uri() for p in corpus.files]
    batch = pa.RecordBatch.from_pydict(
        {"path": paths, "content": [p.read_bytes() for p in corpus.files]},
        schema=pa.schema([("path", pa.string()), ("content", pa.binary())]),
    )
    on = list(make_router(ds, lake)(iter([batch])))
    off = list(bench._router_off(ds, lake)(iter([batch])))

    def kinds(batches: list[pa.RecordBatch]) -> Counter[str]:
        out: Counter[str] = Counter()
        for b in batches:
            out.update(b.column("kind").to_pylist())
        return out

    on_kinds, off_kinds = kinds(on), kinds(off)
    assert on_kinds.pop("file_stats") == len(paths)
    assert "dead_letters" not in on_kinds  # a clean corpus
    assert on_kinds == off_kinds
    assert all(b.schema == bench._off_schema() for b in off)
    for b_on, b_off in zip([b for b in on if b.column("kind")[0].as_py() != "file_stats"], off, strict=True):
        assert b_on.column("source_file").equals(b_off.column("source_file"))
        kind = b_on.column("kind")[0].as_py()
        assert b_on.column(kind).equals(b_off.column(kind))  # the same rows, value for value
    assert "dead_letters" not in bench._off_schema().names


@pytest.mark.unit
def test_helpers() -> None:
    assert bench._abba(2, "on", "off") == ["on", "off", "off", "on"]
    assert bench._abba(1, "on", "off") == ["on", "off"]
    err = Exception(
        "An error occurred while calling o1.collectToPython.\n: org.apache.spark.SparkException: "
        "[FAILED_READ_FILE.NO_HINT] Encountered error while reading file x.\n\tat a.b\n"
        "Caused by: java.io.CharConversionException: Invalid UTF-8 start byte 0xf3\n\tat c.d"
    )
    assert bench._error_text(err) == (
        "FAILED_READ_FILE.NO_HINT; caused by CharConversionException: Invalid UTF-8 start byte 0xf3"
    )
    facts = {"written": "261901,77", "expected_value": "261901.77", "element": "cbc:TotalAmount"}
    assert "read as 26190177" in bench._amount_verdict([1.0, 26190177.0], facts)
    assert bench._amount_verdict([261901.77], facts).startswith(", 261901,77 read as 261901.77")


@pytest.mark.unit
def test_tree_sampler_sees_a_child_process() -> None:
    tree = bench._Tree(interval=0.05)
    tree.reset()
    tree.start()
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; b = bytearray(80_000_000); b[::4096] = b'x' * len(b[::4096]); time.sleep(1.0)",
        ]
    )
    try:
        time.sleep(1.2)  # the tree is re-scanned every second
    finally:
        child.wait()
        tree.stop()
    report = tree.report()
    assert report["workers"] >= 1  # anything that is not this process or a JVM
    assert report["workers_hwm_max_mb"] >= 80
    assert report["peak_total_mb"] >= 80
