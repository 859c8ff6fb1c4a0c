"""The pinned Spark jars on an installed provider: the first Spark start without them fetches them
into the jar folder and says so; when they cannot be fetched the error says what to do, in one line.

The fetch is real (spark-submit's Ivy). So that the test does not download ~50 MB again, its Ivy
cache is the one `make jars` filled in this checkout (linked, not copied): Ivy resolves the same
pinned versions from it, and the jars are copied into a folder that held none.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from placsp_provider.errors import ConfigError
from placsp_provider.spark import jars
from tests.conftest import REPO


@pytest.mark.unit
def test_jars_that_cannot_be_fetched_are_one_line_saying_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(jars.JARS_ENV, "/dev/null/spark-jars")  # under a file: no folder can be made there
    with pytest.raises(ConfigError) as raised:
        jars.ensure_jars()
    message = str(raised.value)
    assert message.startswith("Spark jars missing from /dev/null/spark-jars and not fetched from Maven Central")
    assert "python -m placsp_provider.spark.jars fetch" in message and jars.JARS_ENV in message
    assert "\n" not in message


@pytest.mark.spark
def test_the_first_start_without_jars_fetches_them_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ivy = REPO / ".cache" / "ivy"
    if not ivy.is_dir():
        pytest.fail(f"{ivy} missing: `make jars` fills it before the tests run")
    (tmp_path / "ivy").symlink_to(ivy.resolve())  # jars.fetch keeps Ivy's cache beside the jar folder
    folder = tmp_path / "spark-jars"
    monkeypatch.setenv(jars.JARS_ENV, str(folder))
    with pytest.raises(FileNotFoundError):
        jars.jar_paths()  # none yet
    with caplog.at_level(logging.WARNING, logger=jars.__name__):
        paths = jars.ensure_jars()
    pinned = [jars.jar_file_name(c, v) for c, v in jars.SPARK_PACKAGES.items()]
    s3a = (folder / jars.S3A_LIST).read_text().split()  # written last: the s3a set resolved by Ivy
    assert sorted(p.name for p in paths) == sorted(pinned + s3a)
    assert {"org.apache.hadoop_hadoop-aws-3.5.0.jar", "software.amazon.awssdk_s3-2.35.4.jar"} <= set(s3a)
    assert not [n for n in s3a if n.startswith(("io.netty", "software.amazon.awssdk_bundle"))]  # Spark's, or 686 MB
    assert all(p.parent == folder and p.stat().st_size > 1_000 for p in paths)
    (warning,) = [r.getMessage() for r in caplog.records if r.name == jars.__name__]
    assert f"Spark jars missing from {folder}" in warning and "fetching them once from Maven Central" in warning
    assert jars.ensure_jars() == paths  # the second start finds them
