"""Table maintenance (`placsp maintain`) on real Spark local and real Delta tables: small files are
compacted, a data file no version uses is deleted once older than the retention, and nothing a
reader sees changes (Spark's rows and delta-rs's, before and after)."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from placsp_provider.datasets import get_dataset
from placsp_provider.delta_rs.maintenance import maintain_tables as maintain_with_delta_rs
from placsp_provider.errors import PlacspError
from placsp_provider.ingest.request import IngestRequest
from placsp_provider.ingest.run import ingest as run_ingest
from placsp_provider.lake import LAKE_TABLES, SILVER_TABLES, VERSION_TIME, table_path
from placsp_provider.spark.maintenance import _LISTING_TASKS_CONF, _MAX_FILE_SIZE_CONF, data_files, maintain_tables
from tests.pages import day, page
from tests.spark.bronze import land

pytestmark = pytest.mark.spark


def _snapshot(spark, lake: Path) -> dict[str, list[str]]:
    return {
        t: sorted(str(r) for r in spark.read.format("delta").load(str(table_path(lake, t))).collect())
        for t in LAKE_TABLES
    }


def _delta_rs_rows(lake: Path) -> dict[str, int]:
    from deltalake import DeltaTable

    return {t: DeltaTable(str(table_path(lake, t))).to_pyarrow_table().num_rows for t in LAKE_TABLES}


def _stray(table_dir: Path, name: str, age_days: float) -> Path:
    """A data file no commit names, as a MERGE killed before its commit leaves one."""
    partition = next(table_dir.glob("dataset=*"))
    stray = partition / name
    stray.write_bytes(next(partition.glob("*.parquet")).read_bytes())
    stamp = time.time() - age_days * 86400
    os.utime(stray, (stamp, stamp))
    return stray


def _data_files(lake: Path, table: str) -> list[str]:
    from deltalake import DeltaTable

    return [u.removeprefix("file://") for u in DeltaTable(str(table_path(lake, table))).file_uris()]


def _time_spans(lake: Path, table: str) -> list[tuple[object, object]]:
    """Each data file's (min, max) of the table's version time, from the Delta log's statistics."""
    import pyarrow as pa
    from deltalake import DeltaTable

    column = VERSION_TIME[table]
    files = pa.table(DeltaTable(str(table_path(lake, table))).get_add_actions(flatten=True))
    lows, highs = files.column(f"min.{column}").to_pylist(), files.column(f"max.{column}").to_pylist()
    return sorted(zip(lows, highs, strict=True))


def _reverse_in_one_file(lake: Path, table: str) -> None:
    """The table rewritten (the same rows, a new version) as one file, newest version first."""
    from deltalake import DeltaTable, write_deltalake

    path = str(table_path(lake, table))
    rows = DeltaTable(path).to_pyarrow_table().sort_by([(VERSION_TIME[table], "descending")])
    write_deltalake(path, rows, mode="overwrite", partition_by=["dataset"])
    (file,) = _data_files(lake, table)
    times = pq.read_table(file, columns=[VERSION_TIME[table]]).column(0).to_pylist()
    assert times != sorted(times), (table, times)  # out of order, or the check below proves nothing


def test_maintenance_compacts_and_deletes_only_what_no_version_uses(spark, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    land(lake, "agregadas", {"p1.atom": page([(1, day(3)), (2, day(3))], tombstones=[(3, day(4))])}, "2022-01-03")
    run_ingest(IngestRequest(get_dataset("agregadas"), lake, "r1"), "spark", spark=spark)
    # A newer version of entry 1: the MERGEs rewrite the child tables' files and add new ones.
    land(lake, "agregadas", {"p2.atom": page([(1, day(5)), (4, day(5))], tombstones=[(5, day(5))])}, "2022-01-05")
    run_ingest(IngestRequest(get_dataset("agregadas"), lake, "r2"), "spark", spark=spark)
    results = table_path(lake, "results")  # the test pages have results, not lots or documents
    old = _stray(results, "part-00000-killed-merge-old.c000.snappy.parquet", age_days=8)
    fresh = _stray(results, "part-00000-killed-merge-new.c000.snappy.parquet", age_days=0)
    on_disk = {t: data_files(table_path(lake, t)) for t in LAKE_TABLES}
    before, before_rs = _snapshot(spark, lake), _delta_rs_rows(lake)

    done = maintain_tables(spark, lake)

    assert _snapshot(spark, lake) == before  # every row of every table, as Spark reads it
    assert _delta_rs_rows(lake) == before_rs  # and as the sensors and quality checks read it
    assert not old.exists()  # older than the 7-day retention, named by no version: deleted
    assert fresh.exists()  # within the retention: a writer may still be about to commit it
    # Run 1 wrote a results file; run 2's delete rewrote it and its insert added one: 2 in use, 1 not.
    assert done["results"]["files_compacted"] == 2 and done["results"]["files_written"] == 1, done
    assert done["results"]["files_deleted"] == 1  # the old stray only: the replaced file is 0 days old
    assert done["lots"] == {"files_compacted": 0, "files_written": 0, "files_deleted": 0, "files_left": 0}
    for t, d in done.items():  # compaction adds its file; the ones it replaced wait out the retention
        assert (
            d["files_left"] == data_files(table_path(lake, t)) == on_disk[t] + d["files_written"] - d["files_deleted"]
        )
    assert spark.conf.get(_LISTING_TASKS_CONF, None) is None  # the session is left as it was
    assert spark.conf.get(_MAX_FILE_SIZE_CONF, None) is None

    # Silver's files cut small (1 byte), by each engine: files of disjoint spans of the versions' time,
    # so a daily MERGE rewrites only those holding its older versions. Spark cuts at most a file per
    # distinct time; delta-rs cuts between the batches it writes (2,048 rows here: one file), sorted.
    # delta-rs gets a copy whose tables are each one file in reverse time order (Spark's maintenance
    # above ordered them already): a plain compaction would leave that file as it is.
    by_delta_rs = shutil.copytree(lake, tmp_path / "by-delta-rs")
    for t in ("entries", "results", "tombstones"):
        _reverse_in_one_file(by_delta_rs, t)
    maintain_tables(spark, lake, SILVER_TABLES, file_bytes=1)
    maintain_with_delta_rs(by_delta_rs, SILVER_TABLES, file_bytes=1)
    for maintained in (lake, by_delta_rs):
        assert _delta_rs_rows(maintained) == before_rs
        for t in ("entries", "results", "tombstones"):
            spans = _time_spans(maintained, t)
            assert len(spans) > 1 or maintained == by_delta_rs, (t, spans)
            assert all(a[1] < b[0] for a, b in itertools.pairwise(spans)), (maintained.name, t, spans)
            for file in _data_files(maintained, t):
                times = pq.read_table(file, columns=[VERSION_TIME[t]]).column(0).to_pylist()
                assert times == sorted(times), (maintained.name, t, file)


def test_a_writer_committing_meanwhile_is_a_one_line_error_naming_table_and_step(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Delta refuses OPTIMIZE's commit when an ingest committed first. That conflict cannot be timed
    from a test, so the refusal is stood in for by an exception carrying Delta's own error class."""
    from delta.tables import DeltaTable

    lake = tmp_path / "lake"
    land(lake, "agregadas", {"p1.atom": page([(1, day(3))])}, "2022-01-03")
    run_ingest(IngestRequest(get_dataset("agregadas"), lake, "r1"), "spark", spark=spark)
    optimize = DeltaTable.optimize

    def refused_on_results(self):
        if self.toDF().inputFiles() and "/results/" in self.toDF().inputFiles()[0]:
            raise RuntimeError("[DELTA_CONCURRENT_APPEND.WITH_PARTITION_HINT] Files were added to partition ...")
        return optimize(self)

    monkeypatch.setattr(DeltaTable, "optimize", refused_on_results)
    with pytest.raises(PlacspError) as refused:
        maintain_tables(spark, lake, ("entries", "results", "tombstones"))
    message = str(refused.value)
    assert message.startswith("table results: step OPTIMIZE: another writer committed meanwhile ([DELTA_CONCURRENT")
    assert message.endswith("run it again when no ingest or replay runs")


def test_maintain_command_does_the_tables_asked_and_says_what_it_did(spark, tmp_path: Path) -> None:
    """`placsp maintain` as a user runs it: its own Spark local, one summary line per table."""
    lake = tmp_path / "lake"
    land(lake, "agregadas", {"p1.atom": page([(1, day(3))])}, "2022-01-03")
    run_ingest(IngestRequest(get_dataset("agregadas"), lake, "r1"), "spark", spark=spark)
    out = subprocess.run(
        [sys.executable, "-m", "placsp_provider.cli", "maintain", "--lake", str(lake), "--table", "results"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "results: files_compacted=0, files_written=0, files_deleted=0, files_left=1" in out.stdout
    assert "entries" not in out.stdout
    assert "table results (1 of 1): 0 small files compacted into 0; VACUUM deleted 0 files, 1 left" in out.stderr
