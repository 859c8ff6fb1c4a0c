"""One dataset's quality check end to end: contract rules, the volume check, results appended.

Shared by `DataContractCheckOperator` and `placsp quality check`: the same code decides and records.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date
from typing import Any

from placsp_provider.lake_storage import LakePath
from placsp_provider.quality.contract import CONTRACT_TABLES
from placsp_provider.quality.engine import CheckReport, CheckRequest, failure_message, run_checks
from placsp_provider.quality.results import append_results
from placsp_provider.quality.volume import VolumeCheck, VolumeConfig, check_day


@dataclass(frozen=True)
class DatasetCheck:
    """What a check concluded: the rule results (volume included) and how many rows were recorded."""

    report: CheckReport
    volume: VolumeCheck | None
    recorded: int

    @property
    def passed(self) -> bool:
        return self.report.passed

    def message(self) -> str | None:
        """The bounded failure message when an error or warn rule failed, else None."""
        return failure_message(self.report) if self.report.errors or self.report.warnings else None

    def summary(self) -> dict[str, Any]:
        """A compact XCom: verdict, counts, failing rules, the volume verdict (full rows: quality_results)."""
        failing = [r for r in self.report.results if not r.success]
        return {
            "dataset": self.report.request.dataset,
            "run_id": self.report.request.run_id,
            "passed": self.passed,
            "rules": len(self.report.results),
            "failed_error": [r.rule_id for r in failing if r.severity == "error"],
            "failed_warn": [r.rule_id for r in failing if r.severity == "warn"],
            "failures": [r.describe() for r in failing[:10]],
            "volume": self.volume.to_dict() if self.volume else None,
            "rows": self.report.rows,
            "recorded": self.recorded,
        }


def check_dataset(
    lake: str | LakePath,
    dataset: str,
    *,
    run_id: str | None,
    tables: tuple[str, ...] = CONTRACT_TABLES,
    contracts_dir: str | None = None,
    volume_day: date | None = None,
    volume_config: VolumeConfig | None = None,
    record: bool = True,
) -> DatasetCheck:
    """Run the contract rules of `tables` and, with `volume_day`, the volume check of that day.

    `record`: append every result to `quality_results` under `run_id` (or `manual` without one).
    """
    request = CheckRequest(str(lake), dataset, run_id=run_id, tables=tables, contracts_dir=contracts_dir)
    report = run_checks(request)
    volume = None
    if volume_day is not None and "entries" in tables:
        volume = check_day(lake, dataset, volume_day, volume_config or VolumeConfig())
        report = replace(report, results=(*report.results, volume.to_rule_result()))
    recorded = append_results(lake, run_id or "manual", report.results, report.checked_at) if record else 0
    return DatasetCheck(report, volume, recorded)
