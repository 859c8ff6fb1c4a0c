"""The boundaries the architecture promises are import-linter contracts (`[tool.importlinter]` in
pyproject.toml, run by `make lint`): layers, the ingest core free of engines and Airflow, the two
writers independent, jobs free of Airflow, DAG files and the triggerer's code free of Spark.

What a static graph cannot see is checked here by running it: the daily ingest (engine `delta-rs`)
in a fresh interpreter never imports pyspark or delta-spark, from the operator's first import to
its summary.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pages import day, page
from tests.spark.bronze import land

pytestmark = pytest.mark.unit

_DAILY_INGEST = """
import json, sys
from pathlib import Path
from placsp_provider.operators.silver import PlacspSilverOperator
op = PlacspSilverOperator(task_id="silver", dataset="agregadas", lake=sys.argv[1], manifest=sys.argv[2])
summary = op.execute({"run_id": "scheduled__2022-01-04"})
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "delta", "py4j"))
print(json.dumps({"engine": summary["engine"], "read": summary["read"], "heavy": heavy}))
"""


def _empty_tables(lake: Path) -> None:
    """The lake's tables, empty, as a lake after its first ingest has them (made by delta-rs here)."""
    from deltalake import write_deltalake

    from placsp_provider.ingest.tables import table_schema
    from placsp_provider.lake import LAKE_TABLES, table_path

    for table in LAKE_TABLES:
        write_deltalake(str(table_path(lake, table)), table_schema(table).empty_table(), partition_by=["dataset"])


def test_the_daily_ingest_never_imports_pyspark(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    _empty_tables(lake)
    manifest = land(lake, "agregadas", {"p.atom": page([(1, day(4)), (2, day(4))], tombstones=[(3, day(4))])})
    out = subprocess.run(
        [sys.executable, "-c", _DAILY_INGEST, str(lake), str(manifest)], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["engine"] == "delta-rs" and result["read"] == {"entries": 2, "tombstones": 1}
    assert result["heavy"] == []
