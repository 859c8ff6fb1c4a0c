"""The driver JVM's settings every PLACSP session and spark-submit gets (no Spark started here)."""

from __future__ import annotations

import pytest

from placsp_provider.spark import session

pytestmark = pytest.mark.unit


def test_driver_defaults_c1_with_a_full_code_cache_serial_gc_and_768_megabytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLACSP_SPARK_JAVA_OPTIONS", raising=False)
    monkeypatch.setenv("PLACSP_JVM_CLASS_ARCHIVE", "off")  # its options: tests/spark/test_class_archive.py
    monkeypatch.delenv("PLACSP_SPARK_DRIVER_MEMORY", raising=False)
    conf = session.local_conf("2")
    options = conf["spark.driver.extraJavaOptions"].split()
    # C1 alone would reserve 48 MB of code cache, which a long session fills (then runs interpreted).
    assert options == ["-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m", "-XX:+UseSerialGC"]
    assert conf["spark.driver.memory"] == "768m"
    assert session.driver_conf()["spark.driver.memory"] == "768m"  # spark-submit (the operators) too
    assert session.DELTA_CONF["spark.sql.execution.arrow.maxRecordsPerBatch"] == "1"


def test_java_options_can_be_replaced_or_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLACSP_JVM_CLASS_ARCHIVE", "off")
    monkeypatch.setenv("PLACSP_SPARK_JAVA_OPTIONS", "-XX:+UseSerialGC")
    assert session.driver_conf()["spark.driver.extraJavaOptions"] == "-XX:+UseSerialGC"
    monkeypatch.setenv("PLACSP_SPARK_JAVA_OPTIONS", "")
    monkeypatch.setenv("PLACSP_SPARK_DRIVER_MEMORY", "2g")
    assert session.driver_conf() == {"spark.driver.memory": "2g"}
    assert "spark.driver.extraJavaOptions" not in session.local_conf("2")
