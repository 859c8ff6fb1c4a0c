"""The package boundaries the architecture promises, checked on every import statement (module level
and inside functions) of the source files:

- `parser/` (the page parser) imports neither pyspark nor Airflow: it runs on executors and in tests;
- `spark/` never imports Airflow: the jobs run on a cluster that has no Airflow;
- `delta_rs/` imports neither pyspark, delta-spark nor Airflow: it runs in the task without a JVM, and
  in the Spark job;
- sensors, triggers and DAG files never import pyspark or the parser: they run in the triggerer and
  the DAG processor, which must stay light.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.unit

PACKAGE = REPO / "provider" / "placsp_provider"

RULES = [
    (PACKAGE / "parser", ("pyspark", "delta", "airflow")),
    (PACKAGE / "spark", ("airflow",)),
    (PACKAGE / "delta_rs", ("pyspark", "delta", "airflow")),  # the ingest without a JVM, run in the task
    (PACKAGE / "sensors", ("pyspark", "delta", "placsp_provider.parser", "placsp_provider.spark")),
    (PACKAGE / "triggers", ("pyspark", "delta", "placsp_provider.parser", "placsp_provider.spark")),
    (REPO / "dags", ("pyspark", "delta", "placsp_provider.parser", "placsp_provider.spark")),
]


def imported_modules(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{alias.name}" for alias in node.names)
    return out


def _breaks(modules: set[str], banned: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == b or m.startswith(b + ".") for b in banned))


@pytest.mark.parametrize(("folder", "banned"), RULES, ids=lambda v: v.name if isinstance(v, Path) else "")
def test_package_boundaries(folder: Path, banned: tuple[str, ...]) -> None:
    files = sorted(folder.rglob("*.py"))
    assert files, folder
    broken = {str(f.relative_to(REPO)): _breaks(imported_modules(f), banned) for f in files}
    assert {f: b for f, b in broken.items() if b} == {}


def test_the_checker_sees_imports_inside_functions(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from pyspark.sql import functions as F\n    import airflow.sdk\n")
    assert _breaks(imported_modules(source), ("pyspark", "airflow")) == [
        "airflow.sdk",
        "pyspark.sql",
        "pyspark.sql.functions",
    ]
