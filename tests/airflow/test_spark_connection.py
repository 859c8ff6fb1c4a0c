"""Which Spark master the Spark operators submit to: the connection, else `local[*]` only when it is absent."""

from __future__ import annotations

import json
import logging
import os

import pytest
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk.exceptions import AirflowException

from placsp_provider.operators.spark_submit import spark_connection_or_local

pytestmark = pytest.mark.unit

CONN_ID = "placsp_test_spark"
VARIABLE = f"AIRFLOW_CONN_{CONN_ID.upper()}"
LOG = logging.getLogger("placsp.test.spark_connection")


def _master() -> str:
    # The master the Spark provider builds from the connection: what goes after --master.
    return SparkSubmitHook(conn_id=CONN_ID)._connection["master"]


def test_an_absent_connection_runs_on_local_and_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv(VARIABLE, raising=False)
    with caplog.at_level(logging.INFO, logger=LOG.name), spark_connection_or_local(CONN_ID, LOG):
        assert _master() == "local[*]"
    assert f"No Airflow connection '{CONN_ID}': Spark runs with master local[*]" in caplog.text
    # Only for the submit: nothing of the fallback stays in the environment afterwards.
    assert VARIABLE not in os.environ


def test_a_defined_connection_is_used_as_it_is(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(VARIABLE, json.dumps({"conn_type": "spark", "host": "spark://spark-master", "port": 7077}))
    with caplog.at_level(logging.INFO, logger=LOG.name), spark_connection_or_local(CONN_ID, LOG):
        assert _master() == "spark://spark-master:7077"
    assert "local[*]" not in caplog.text
    assert json.loads(os.environ[VARIABLE])["host"] == "spark://spark-master"


def test_a_failing_lookup_fails_instead_of_running_on_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    # A secrets backend that is down cannot be run here; the lookup itself is replaced by one that
    # raises what such a backend raises (an AirflowException that is not "not found").
    from airflow.sdk import BaseHook

    def unreachable(conn_id: str) -> None:
        raise AirflowException(f"secrets backend unreachable while reading {conn_id}")

    monkeypatch.setattr(BaseHook, "get_connection", unreachable)
    monkeypatch.delenv(VARIABLE, raising=False)
    with pytest.raises(AirflowException, match="secrets backend unreachable"):  # noqa: SIM117
        with spark_connection_or_local(CONN_ID, LOG):
            pytest.fail("the job must not be submitted")
    assert VARIABLE not in os.environ
