"""PlacspSilverOperator without Spark: an interval with nothing landed writes its (empty) run summary
under the task's own lake, where the dead-letter gate looks for it (an explicit `lake=` included)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from placsp_provider.bronze.manifest import Manifest
from placsp_provider.lake import run_summary_path

pytestmark = pytest.mark.unit


def test_nothing_to_ingest_writes_the_summary_under_the_explicit_lake(tmp_path: Path, monkeypatch) -> None:
    from placsp_provider.operators.silver import PlacspSilverOperator

    elsewhere, lake = tmp_path / "env-lake", tmp_path / "task-lake"
    monkeypatch.setenv("PLACSP_LAKE", str(elsewhere))
    manifest = tmp_path / "empty.json"
    manifest.write_text(Manifest("agregadas", 1044, "r", "", "", "", "").to_json())
    op = PlacspSilverOperator(task_id="silver", dataset="agregadas", lake=str(lake), manifest=str(manifest))
    summary = op.execute({"run_id": "scheduled__2026-11-30"})  # type: ignore[arg-type]
    written = run_summary_path(lake.resolve(), "agregadas", "scheduled__2026-11-30")
    assert json.loads(written.read_text())["conservation"]["read"] == 0
    assert summary["summary_file"] == str(written)
    assert not elsewhere.exists()
