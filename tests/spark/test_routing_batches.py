"""The stager (pure Python, no Spark started): a page parsed 50 records at a time stages exactly the
rows of the page parsed whole, one Parquet file per table in place whole, and its tally counts them."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from placsp_provider.datasets import get_dataset
from placsp_provider.ingest.staging import BYTES_PER_PART, TABLES, TALLY, stage_page, staged_file
from placsp_provider.parser.page_parser import parse_page
from tests.pages import day, page
from tests.staging import read_staged

pytestmark = pytest.mark.unit

SAMPLES = Path(__file__).resolve().parents[2] / "include" / "placsp_samples"
PAGE_2022 = SAMPLES / "1044_agregadas" / "PlataformasAgregadasSinMenores_20220104_030016_1.atom"


def _tally(batch: pa.RecordBatch) -> dict[tuple, int]:
    assert batch.schema.equals(TALLY)
    return {(r["kind"], r["record_kind"], r["stage"], r["error_type"]): r["count"] for r in batch.to_pylist()}


@pytest.mark.parametrize("cut", [None, 130_000])  # whole, and cut inside a record (a truncated page)
def test_a_page_parsed_in_parts_stages_the_rows_of_the_page_parsed_whole(cut: int | None, tmp_path: Path) -> None:
    data = PAGE_2022.read_bytes()[:cut]
    agregadas = get_dataset("agregadas")
    whole = stage_page(data, dataset=agregadas, source_file="p.atom", staging=str(tmp_path / "w"), bytes_per_part=None)
    small = stage_page(data, dataset=agregadas, source_file="p.atom", staging=str(tmp_path / "s"), bytes_per_part=7_000)
    assert BYTES_PER_PART == 2 * 1024 * 1024
    whole_rows, small_rows = read_staged(tmp_path / "w"), read_staged(tmp_path / "s")
    assert whole_rows.keys() == small_rows.keys()
    for table in whole_rows:
        assert small_rows[table].equals(whole_rows[table]), table
    assert _tally(small) == _tally(whole)
    # The rows are the plain parser's, and the tally counts what was staged (a count of its own).
    parsed = parse_page(data, dataset=agregadas, source_file="p.atom")
    tally = _tally(whole)
    for table in TABLES:
        rows = getattr(parsed, table)
        assert (whole_rows[table].num_rows if rows else 0) == len(rows), table
        if table != "dead_letters" and rows:
            assert tally[table, None, None, None] == len(rows), table
    dead = whole_rows.get("dead_letters")
    assert sum(n for k, n in tally.items() if k[0] == "dead_letters") == (dead.num_rows if dead else 0)
    if cut is None:
        assert (whole_rows["entries"].num_rows, whole_rows["tombstones"].num_rows) == (117, 383)
        assert "dead_letters" not in whole_rows
    else:  # the truncated record is a dead letter, counted once
        assert whole_rows["dead_letters"].num_rows == 1
        assert whole_rows["entries"].num_rows < 117
    assert whole_rows["entries"].column("_source_file").unique().to_pylist() == ["p.atom"]


def test_a_page_staged_again_replaces_its_files(tmp_path: Path) -> None:
    """A Spark task run again (a lost executor, a retried stage) stages its pages again: the files
    are replaced, never added to, so no row is read twice."""
    agregadas = get_dataset("agregadas")
    data = PAGE_2022.read_bytes()
    for _ in range(2):
        stage_page(data, dataset=agregadas, source_file="p.atom", staging=str(tmp_path))
    staged = read_staged(tmp_path)
    assert staged["entries"].num_rows == 117
    assert Path(staged_file(str(tmp_path), "entries", "p.atom")).is_file()


def test_staged_files_of_two_pages_do_not_collide(tmp_path: Path) -> None:
    agregadas = get_dataset("agregadas")
    for name in ("a.atom", "b.atom"):
        stage_page(page([(1, day(3))]), dataset=agregadas, source_file=f"bronze/x/{name}", staging=str(tmp_path))
    assert len(list((tmp_path / "entries").iterdir())) == 2


@pytest.mark.parametrize("bytes_per_part", [None, 1])  # counted across the parts of a page too
@pytest.mark.parametrize(
    ("versions", "repeated"),
    [
        ([(1, day(3)), (2, day(3))], 0),
        ([(1, day(3)), (1, day(4))], 0),  # the same id, another version: not a repeat
        ([(1, day(3)), (2, day(3)), (1, day(3)), (1, day(3))], 2),
    ],
)
def test_the_stager_counts_records_repeating_a_version_of_their_page(
    versions: list[tuple[int, str]], repeated: int, bytes_per_part: int | None, tmp_path: Path
) -> None:
    tally = stage_page(
        page(versions),
        dataset=get_dataset("agregadas"),
        source_file="p.atom",
        staging=str(tmp_path),
        bytes_per_part=bytes_per_part,
    ).to_pylist()
    (stats,) = [r for r in tally if r["kind"] == "file_stats"]
    assert stats["repeated_versions"] == repeated
    assert read_staged(tmp_path)["entries"].num_rows == len(versions)


# -- the stager reads its pages from the lake ------------------------------------------------------
def _run_stager(paths: list[str], lake: Path) -> list[pa.RecordBatch]:
    from placsp_provider.spark.routing import make_stager

    listing = pa.RecordBatch.from_pylist([{"path": p} for p in paths])  # a listing as Spark hands it over
    return list(make_stager(get_dataset("agregadas"), str(lake), str(lake / "_staging"))(iter([listing])))


def test_the_stager_reads_each_listed_page_from_the_lake(tmp_path: Path) -> None:
    lake = tmp_path / "my lake"  # a space: Spark's listing spells it %20
    landed = lake / "bronze" / "agregadas" / "pages" / "p.atom"
    landed.parent.mkdir(parents=True)
    landed.write_bytes(PAGE_2022.read_bytes())
    spark_spelling = "file:" + str(landed).replace(" ", "%20")
    (tally,) = _run_stager([spark_spelling], lake)
    relative = "bronze/agregadas/pages/p.atom"  # as the manifest names it
    direct = stage_page(
        PAGE_2022.read_bytes(), dataset=get_dataset("agregadas"), source_file=relative, staging=str(tmp_path / "d")
    )
    assert tally.equals(direct)
    staged, expected = read_staged(lake / "_staging"), read_staged(tmp_path / "d")
    assert staged["entries"].num_rows == 117
    for table in expected:
        assert staged[table].equals(expected[table]), table


def test_a_page_gone_after_listing_is_a_clear_error(tmp_path: Path) -> None:
    from placsp_provider.errors import BronzePageError

    gone = f"file:{tmp_path}/bronze/agregadas/pages/gone.atom"
    with pytest.raises(BronzePageError) as raised:
        _run_stager([gone], tmp_path)
    message = str(raised.value)
    assert message.startswith("dataset agregadas: bronze/agregadas/pages/gone.atom: stage parse: "), message
    assert "No such file" in message and "removed after landing" in message


def test_a_lake_that_is_not_a_posix_path_is_refused(tmp_path: Path) -> None:
    from placsp_provider.errors import BronzePageError

    with pytest.raises(BronzePageError, match="the lake must be a POSIX path"):
        _run_stager(["s3a://bucket/lake/bronze/agregadas/pages/p.atom"], tmp_path)


def test_rows_that_cannot_be_staged_are_a_clear_error_naming_the_page(tmp_path: Path) -> None:
    """An executor that cannot write under the lake's staging folder (a read-only mount, a full disk;
    staged here by a file standing where the table's folder must go): the provider's error, naming
    the dataset, the page, the stage and what to fix."""
    from placsp_provider.errors import BronzePageError

    (tmp_path / "entries").write_text("not a folder")
    with pytest.raises(BronzePageError) as raised:
        stage_page(
            PAGE_2022.read_bytes(), dataset=get_dataset("agregadas"), source_file="p.atom", staging=str(tmp_path)
        )
    message = str(raised.value)
    assert message.startswith(
        f"dataset agregadas: p.atom: stage staging: cannot stage the page's parsed rows in {tmp_path}/entries ("
    ), message
    assert "every Spark executor) must be able to write under the lake's _staging folder" in message
    # The run fails, and its folder goes with it; until then no file is half-written.
    assert not [p for p in tmp_path.rglob(".*")], list(tmp_path.rglob("*"))
