from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import placsp_provider.dags

# The provider's DAGs, one module each (dags/ of the repository holds one import line per DAG).
DAG_NAMES = sorted(m.name for m in pkgutil.iter_modules(placsp_provider.dags.__path__))


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
    """The DAG of `placsp_provider.dags.<name>`, defined afresh: the module runs again, as the DAG
    processor parses each file in a fresh process, so what it reads at parse time (severity, deadline,
    schedule) comes from this test's environment."""
    import importlib

    module_name = f"placsp_provider.dags.{name}"
    if module_name in sys.modules:
        module = importlib.reload(sys.modules[module_name])
    else:
        module = importlib.import_module(module_name)
    for task in module.dag.tasks if for_dag_test else ():
        # dag.test() would wait out real retry delays (minutes): a failure must show at once here.
        task.retries = 0
    return module.dag
