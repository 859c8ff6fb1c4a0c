from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def airflow_db() -> None:
    """A fresh SQLite metadata DB for this test session (AIRFLOW_HOME is set in tests/conftest.py)."""
    airflow = Path(sys.executable).with_name("airflow")
    subprocess.run([str(airflow), "db", "migrate"], check=True, capture_output=True)


@pytest.fixture
def placsp_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """PLACSP_LAKE in a temp folder; the caller sets the connection."""
    lake = tmp_path / "lake"
    monkeypatch.setenv("PLACSP_LAKE", str(lake))
    yield lake


def set_connection(monkeypatch: pytest.MonkeyPatch, base_url: str, **extras: object) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_PLACSP_DEFAULT",
        json.dumps({"conn_type": "placsp", "host": base_url, "extra": {"backoff_base": 0, **extras}}),
    )


def load_dag(name: str, *, for_dag_test: bool = True):
    import importlib.util

    path = Path(os.environ["AIRFLOW__CORE__DAGS_FOLDER"]) / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"dag_{name}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for task in module.dag.tasks if for_dag_test else ():
        # dag.test() would wait out real retry delays (minutes): a failure must show at once here.
        task.retries = 0
    return module.dag
