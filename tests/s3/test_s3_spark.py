"""Spark on an S3 lake: a real SeaweedFS server on loopback, real Spark (local), real `placsp` processes.

- The Spark engine (Spark's tasks parse and stage in the lake, delta-rs writes), a dead-letter replay
  and table maintenance on an `s3://` lake give the same tables as the same runs on local disk.
- A run leaves nothing under the lake's `_staging` prefix, and the secret key reaches nothing it wrote.
- A replay task's staged files on S3 are whole or absent (`routing._TaskStage`, no Spark needed).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest

from placsp_provider.datasets import get_dataset
from placsp_provider.demo.loopback_site import LoopbackSite
from placsp_provider.demo.samples import demo_routes
from placsp_provider.lake import LAKE_TABLES, resolve_lake
from placsp_provider.lake_storage import read_parquet
from placsp_provider.parser.silver_schema import SCHEMAS
from placsp_provider.spark.routing import _TaskStage
from tests.reliability import harness
from tests.s3.conftest import S3Lake
from tests.s3.test_s3_lake import objects, rows, without_clocks

pytestmark = [pytest.mark.s3, pytest.mark.http, pytest.mark.timeout(1200)]


def spark_runs(lake: str, site: LoopbackSite, workdir: Path) -> list[harness.Outcome]:
    """A day and a month landed, both ingested by Spark's engine, the dead letters replayed (none is
    fixed: each fails again, and its attempt is recorded), the tables maintained."""
    url = ["--base-url", site.base_url, "--json"]
    extract = ["extract", "--dataset", "licitaciones", "--since", "2025-08-18", "--until", "2025-08-19"]
    month = ["completeness", "--dataset", "agregadas", "--month", "2022-01", "--lake", lake, "--run-id", "month"]
    outcomes = [harness.run([*extract, "--lake", lake, "--run-id", "day", *url], workdir=workdir, name="extract").ok()]
    outcomes.append(harness.run([*month, *url], workdir=workdir, name="month"))  # the archive is incomplete: exit 2
    for dataset in ("agregadas", "licitaciones"):
        ingest = ["ingest", "--dataset", dataset, "--lake", lake, "--run-id", "day", "--engine", "spark+delta-rs"]
        outcomes.append(harness.run([*ingest, "--json"], workdir=workdir, name=f"ingest-{dataset}").ok())
    replay = ["dead-letters", "replay", "--dataset", "licitaciones", "--lake", lake, "--run-id", "replay", "--json"]
    outcomes.append(harness.run(replay, workdir=workdir, name="replay").ok())
    outcomes.append(harness.run(["maintain", "--lake", lake, "--json"], workdir=workdir, name="maintain").ok())
    return outcomes


@pytest.mark.spark
def test_spark_ingest_replay_and_maintenance_on_s3_write_what_they_write_on_local_disk(
    s3_lake: S3Lake, tmp_path: Path
) -> None:
    local = str(tmp_path / "lake")
    # The two lakes' runs side by side: each step is a process that waits on its JVM's start much of
    # its time, and the two sequences share nothing but the loopback site.
    with LoopbackSite(demo_routes()) as site, ThreadPoolExecutor(max_workers=2) as pool:
        disk_runs = pool.submit(spark_runs, local, site, tmp_path / "local")
        s3_runs = pool.submit(spark_runs, s3_lake.uri, site, tmp_path / "s3")
        on_disk, on_s3 = disk_runs.result(), s3_runs.result()

    for a, b in zip(on_disk, on_s3, strict=True):
        assert a.returncode == b.returncode, f"{b.args}: exit {b.returncode} on S3, {a.returncode} on disk\n{b.stderr}"
    for table in LAKE_TABLES:
        assert rows(s3_lake.uri, table) == rows(local, table), table
    assert len(rows(s3_lake.uri, "entries")) > 900  # the archive's real entries reached Silver through Spark
    replayed = [r for r in rows(s3_lake.uri, "dead_letters") if '"attempts": 1' in r]
    assert replayed, "the replay recorded no attempt: it selected nothing, and the comparison proves less"
    replay_summary, maintained = on_s3[-2].json(), on_s3[-1].json()
    assert without_clocks(on_disk[-2].stdout) == without_clocks(on_s3[-2].stdout), "replay summaries differ"
    assert replay_summary["selected"] == len(replayed)
    assert set(maintained) == set(LAKE_TABLES)  # delta-rs maintained every table (Spark does on disk)
    assert all(m["files_left"] >= 1 for m in maintained.values())

    s3_objects = objects(s3_lake.uri)
    assert not [n for n in s3_objects if n.startswith("_staging/")], "a run left staged rows in the lake"
    assert s3_objects.keys() == objects(local).keys()
    # The secret reached no object, no table file, no output and no scratch file.
    root = resolve_lake(s3_lake.uri)
    secret = s3_lake.secret.encode()
    leaks = [str(p) for p in root.rglob("*") if p.is_file() and secret in p.read_bytes()]
    leaks += [" ".join(o.args) for o in on_s3 if s3_lake.secret in o.stdout + o.stderr]
    leaks += [str(p) for p in (tmp_path / "s3").rglob("*") if p.is_file() and secret in p.read_bytes()]
    assert s3_lake.scratch.is_dir(), "the runs kept no scratch folder here: its grep would prove nothing"
    leaks += [str(p) for p in s3_lake.scratch.rglob("*") if p.is_file() and secret in p.read_bytes()]
    assert not leaks, f"the secret key is in {leaks}"


def test_a_replay_tasks_staged_files_on_s3_are_whole_or_absent(s3_lake: S3Lake) -> None:
    staging = f"{s3_lake.uri}/_staging/licitaciones/run"
    entries = SCHEMAS["entries"].empty_table()
    batch = pa.RecordBatch.from_pylist([], schema=entries.schema)
    dataset = get_dataset("licitaciones")

    kept = _TaskStage(staging, dataset)
    kept.write("entries", batch)
    kept.finish()
    failed = _TaskStage(staging, dataset)
    failed.write("entries", batch)
    failed.abort()  # a task that failed: its file is gone, not left half-written

    folder = resolve_lake(staging) / "entries"
    files = sorted(p.name for p in folder.iterdir() if p.name.endswith((".parquet", ".tmp")))
    assert files == [f"{kept.key}.parquet"]
    assert read_parquet(folder, SCHEMAS["entries"]).num_rows == 0


def test_on_s3_only_delta_rs_commits(s3_lake: S3Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    from placsp_provider.delta_rs.tables import ensure_tables
    from placsp_provider.errors import ConfigError
    from placsp_provider.ingest import engines
    from placsp_provider.ingest.request import IngestRequest

    lake = resolve_lake(s3_lake.uri)
    ensure_tables(lake)
    request = IngestRequest(get_dataset("licitaciones"), lake, "run")
    # Limits below any batch: on local disk `auto` gives Spark's MERGEs (tests/spark/test_delta_rs_ingest.py),
    # or, for a first load of the dataset as here, delta-rs's appends (tests/test_first_load.py).
    monkeypatch.setenv(engines.MAX_MB_ENV, "-1")
    monkeypatch.setenv(engines.WRITE_MAX_MB_ENV, "-1")
    assert engines.choose_engine(request) == engines.DELTA_RS
    assert engines.choose_engine(request, spark_cluster=lambda: True) == engines.SPARK_DELTA_RS
    with pytest.raises(ConfigError, match="not safe on S3"):
        engines.choose_engine(request, engines.SPARK)
    assert engines.choose_engine(request, engines.DELTA_RS) == engines.DELTA_RS


def test_page_sizes_on_s3_are_the_objects_sizes(s3_lake: S3Lake) -> None:
    """What the Spark tasks are sized by (spark/page_tasks.py): a missing page is 0, as on disk."""
    from placsp_provider.lake_storage import put_new
    from placsp_provider.spark.page_tasks import page_sizes

    page = resolve_lake(s3_lake.uri) / "bronze" / "licitaciones" / "pages" / "p.atom"
    assert put_new(page, b"x" * 1234)
    assert page_sizes([str(page), f"{s3_lake.uri}/bronze/licitaciones/pages/gone.atom"]) == [1234, 0]
