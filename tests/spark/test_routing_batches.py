"""The router's Arrow batches (pure Python, no Spark started): a page routed 50 records at a time
gives exactly the rows of the page routed whole, and one file_stats row."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from placsp_provider.datasets import get_dataset
from placsp_provider.spark.routing import RECORDS_PER_BATCH, TABLES, route_page, routed_schema
from tests.pages import day, page

pytestmark = pytest.mark.unit

SAMPLES = Path(__file__).resolve().parents[2] / "include" / "placsp_samples"
PAGE_2022 = SAMPLES / "1044_agregadas" / "PlataformasAgregadasSinMenores_20220104_030016_1.atom"


def _by_kind(batches: list[pa.RecordBatch]) -> dict[str, pa.Table]:
    table = pa.Table.from_batches(batches, schema=routed_schema())
    return {kind: table.filter(pc.equal(table["kind"], kind)) for kind in (*TABLES, "file_stats")}


@pytest.mark.parametrize("cut", [None, 130_000])  # whole, and cut inside a record (a truncated page)
def test_batches_of_records_route_the_same_rows_as_the_whole_page(cut: int | None) -> None:
    data = PAGE_2022.read_bytes()[:cut]
    agregadas = get_dataset("agregadas")
    whole = list(route_page(data, dataset=agregadas, source_file="p.atom", records_per_batch=None))
    small = list(route_page(data, dataset=agregadas, source_file="p.atom", records_per_batch=7))
    assert RECORDS_PER_BATCH == 50
    assert len(small) > len(whole)  # it did cut the page: 500 records, 7 at a time
    whole_rows, small_rows = _by_kind(whole), _by_kind(small)
    for kind in (*TABLES, "file_stats"):
        assert small_rows[kind].equals(whole_rows[kind]), kind
    (stats,) = whole_rows["file_stats"].column("file_stats").to_pylist()
    if cut is None:
        assert (stats["entries_seen"], stats["tombstones_seen"]) == (117, 383)
    else:
        assert stats["entries_seen"] < 117
    assert whole_rows["entries"].num_rows + whole_rows["tombstones"].num_rows > 0
    if cut is not None:  # the truncated record is a dead letter, counted once
        assert whole_rows["dead_letters"].num_rows == 1


@pytest.mark.parametrize("records_per_batch", [None, 1])  # counted across the parts of a page too
@pytest.mark.parametrize(
    ("versions", "repeated"),
    [
        ([(1, day(3)), (2, day(3))], 0),
        ([(1, day(3)), (1, day(4))], 0),  # the same id, another version: not a repeat
        ([(1, day(3)), (2, day(3)), (1, day(3)), (1, day(3))], 2),
    ],
)
def test_the_router_counts_records_repeating_a_version_of_their_page(
    versions: list[tuple[int, str]], repeated: int, records_per_batch: int | None
) -> None:
    batches = route_page(
        page(versions), dataset=get_dataset("agregadas"), source_file="p.atom", records_per_batch=records_per_batch
    )
    routed = _by_kind(list(batches))
    assert routed["entries"].num_rows == len(versions)
    (stats,) = routed["file_stats"].column("file_stats").to_pylist()
    assert stats["repeated_versions"] == repeated


# -- the router reads its pages from the lake ------------------------------------------------------
def _run_router(paths: list[str], lake: Path) -> list[pa.RecordBatch]:
    from placsp_provider.spark.routing import make_router

    listing = pa.RecordBatch.from_pylist([{"path": p} for p in paths])  # a listing as Spark hands it over
    return list(make_router(get_dataset("agregadas"), str(lake))(iter([listing])))


def test_router_reads_each_listed_page_from_the_lake(tmp_path: Path) -> None:
    lake = tmp_path / "my lake"  # a space: Spark's listing spells it %20
    page = lake / "bronze" / "agregadas" / "pages" / "p.atom"
    page.parent.mkdir(parents=True)
    page.write_bytes(PAGE_2022.read_bytes())
    spark_spelling = "file:" + str(page).replace(" ", "%20")
    routed = _by_kind(_run_router([spark_spelling], lake))
    relative = "bronze/agregadas/pages/p.atom"  # as the manifest names it
    direct = _by_kind(list(route_page(PAGE_2022.read_bytes(), dataset=get_dataset("agregadas"), source_file=relative)))
    assert routed["entries"].num_rows == 117
    for kind in (*TABLES, "file_stats"):
        assert routed[kind].equals(direct[kind]), kind


def test_a_page_gone_after_listing_is_a_clear_error(tmp_path: Path) -> None:
    from placsp_provider.errors import BronzePageError

    gone = f"file:{tmp_path}/bronze/agregadas/pages/gone.atom"
    with pytest.raises(BronzePageError) as raised:
        _run_router([gone], tmp_path)
    message = str(raised.value)
    assert message.startswith("dataset agregadas: bronze/agregadas/pages/gone.atom: stage parse: "), message
    assert "No such file" in message and "removed after landing" in message


def test_a_lake_that_is_not_a_posix_path_is_refused(tmp_path: Path) -> None:
    from placsp_provider.errors import BronzePageError

    with pytest.raises(BronzePageError, match="the lake must be a POSIX path"):
        _run_router(["s3a://bucket/lake/bronze/agregadas/pages/p.atom"], tmp_path)
