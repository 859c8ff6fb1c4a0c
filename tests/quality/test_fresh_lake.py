"""A fresh lake on a day without pages: the check passes whatever order the datasets' tasks ran in.

On the first daily run, one dataset's Silver task may find nothing to ingest and finish before
another dataset's Silver task created the lake's tables. Its data-contract check then finds no
table at all; it must not fail for that (it passes when the tables exist and hold nothing of its
dataset), while a lake path without the run's summary is still checked, and fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from placsp_provider.ingest.summary import empty_summary, finish
from placsp_provider.lake import table_path
from placsp_provider.operators.quality import XCOM_KEY, DataContractCheckOperator, nothing_to_check

pytestmark = pytest.mark.unit

RUN = "scheduled__2025-08-19T00:00:00+00:00"


def _nothing_ingested(lake: Path, dataset: str = "menores") -> None:
    finish(empty_summary(dataset, RUN, 0, 0), lake)  # what the Silver operator writes for an empty manifest


def test_a_fresh_lake_and_an_empty_run_have_nothing_to_check(tmp_path: Path) -> None:
    _nothing_ingested(tmp_path)
    assert nothing_to_check(tmp_path, "menores", RUN)


def test_without_the_runs_summary_the_lake_is_checked(tmp_path: Path) -> None:
    assert not nothing_to_check(tmp_path, "menores", RUN)  # e.g. a wrong lake path
    _nothing_ingested(tmp_path)
    assert not nothing_to_check(tmp_path, "menores", "another_run")
    assert not nothing_to_check(tmp_path, "agregadas", RUN)


def test_a_run_that_ingested_files_or_a_lake_with_a_table_is_checked(tmp_path: Path) -> None:
    finish(empty_summary("menores", RUN, 1, 0), tmp_path)
    assert not nothing_to_check(tmp_path, "menores", RUN)
    _nothing_ingested(tmp_path)
    (table_path(tmp_path, "dead_letters") / "_delta_log").mkdir(parents=True)
    assert not nothing_to_check(tmp_path, "menores", RUN)


class _TaskInstance:
    """Stands in for Airflow's TaskInstance, whose only use here is `xcom_push` (the DAG-level run of
    this operator is tests/quality/test_dag_quality.py and the deployed system test)."""

    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


def test_the_check_task_passes_on_a_fresh_lake_and_fails_on_a_wrong_path(tmp_path: Path) -> None:
    from placsp_provider.operators.quality import DataQualityError

    _nothing_ingested(tmp_path)
    ti = _TaskInstance()
    task = DataContractCheckOperator(task_id="quality_menores", dataset="menores", lake=str(tmp_path), volume=False)
    summary = task.execute({"run_id": RUN, "ti": ti, "data_interval_start": None})  # type: ignore[arg-type]
    assert summary == ti.pushed[XCOM_KEY]
    assert (summary["passed"], summary["rules"], summary["skipped"]) == (True, 0, True)
    wrong = tmp_path / "not-the-lake"
    wrong.mkdir()
    task = DataContractCheckOperator(task_id="quality_menores", dataset="menores", lake=str(wrong), volume=False)
    with pytest.raises(DataQualityError, match="no Delta table at"):
        task.execute({"run_id": RUN, "ti": _TaskInstance(), "data_interval_start": None})  # type: ignore[arg-type]
