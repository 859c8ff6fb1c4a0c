"""Fixtures of the quality tests.

`real_lake`: the bundled real pages (643 licitaciones: 3 pages with lots, results, documents and 3 dead
letters; 1044 agregadas: the 2022-01 archive's 2 pages, 951 entries and 49 tombstones) landed the way
extraction lands them and ingested by the real Silver job on the shared SparkSession
(tests/spark/conftest.py), once per session (two ingests: each costs a Spark job). Tests never write
to it: a test that needs a broken table copies it first (`broken_copy`).
"""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest

from tests.conftest import SAMPLES
from tests.pages import licitaciones_samples
from tests.spark.conftest import spark  # noqa: F401 - the one shared SparkSession, re-exported here

RUN_ID = "run-quality"
DATASETS = ("licitaciones", "agregadas")


@pytest.fixture(scope="session")
def real_lake(spark, tmp_path_factory) -> Path:  # noqa: F811 - the fixture above
    from placsp_provider.datasets import get_dataset
    from placsp_provider.ingest.request import IngestRequest
    from placsp_provider.ingest.run import ingest as run_ingest
    from tests.spark.bronze import land

    lake = tmp_path_factory.mktemp("quality") / "lake"

    land(lake, "licitaciones", licitaciones_samples())
    with zipfile.ZipFile(SAMPLES / "1044_agregadas" / "PlataformasAgregadasSinMenores_202201_05-06.zip") as z:
        land(lake, "agregadas", {n: z.read(n) for n in z.namelist()})
    for dataset in DATASETS:
        run_ingest(IngestRequest(get_dataset(dataset), lake, RUN_ID), "spark", spark=spark)
    return lake


@pytest.fixture
def broken_copy(real_lake: Path, tmp_path: Path) -> Path:
    """A copy of the real lake that a test may break."""
    copy = tmp_path / "lake"
    shutil.copytree(real_lake, copy)
    return copy
