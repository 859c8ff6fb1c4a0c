"""The driver JVM's settings every PLACSP session and spark-submit gets (no Spark started here)."""

from __future__ import annotations

import pytest

from placsp_provider.spark import session

pytestmark = pytest.mark.unit


def test_driver_runs_c1_only_and_one_gigabyte_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLACSP_SPARK_JAVA_OPTIONS", raising=False)
    monkeypatch.delenv("PLACSP_SPARK_DRIVER_MEMORY", raising=False)
    conf = session.local_conf("2")
    assert conf["spark.driver.extraJavaOptions"] == "-XX:TieredStopAtLevel=1"
    assert conf["spark.driver.memory"] == "1g"
    assert session.DELTA_CONF["spark.sql.execution.arrow.maxRecordsPerBatch"] == "1"


def test_java_options_can_be_replaced_or_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLACSP_SPARK_JAVA_OPTIONS", "-XX:+UseSerialGC")
    assert session.driver_conf() == {"spark.driver.extraJavaOptions": "-XX:+UseSerialGC"}
    monkeypatch.setenv("PLACSP_SPARK_JAVA_OPTIONS", "")
    assert session.driver_conf() == {}
    assert "spark.driver.extraJavaOptions" not in session.local_conf("2")
