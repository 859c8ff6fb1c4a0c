"""What the quality and completeness pages read (ui/quality_pages.py).

- the latest result of every contract rule: `quality.results.latest_results` (its DuckDB query over
  the `quality_results` files of one dataset, the newest row per rule picked by DuckDB);
- the daily volume: the `entries_volume` rows of `quality_results`, the newest per judged day, the
  last `days` of them (DuckDB: filter, window, LIMIT). The check records only the days it judged,
  with the band it judged them by, so those are the days shown;
- completeness: the month reports (JSON, one per month and dataset: `lake.completeness_reports`).

A state the view cannot show is a `view_state.ViewStateError`: its sentence is the page.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from placsp_provider.lake_storage import LakePath
from placsp_provider.ui.view_state import ViewStateError, read_twice, require_table

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RuleRow:
    table: str
    rule_id: str
    severity: str
    status: str  # pass | warn | fail
    expected: str
    actual: float | None
    message: str
    checked_at: Any
    run_id: str


@dataclass(frozen=True)
class VolumeRow:
    day: str
    count: float | None  # None: the check was skipped (no band, or the day's count unknown)
    lower: float | None
    upper: float | None
    anomaly: bool
    message: str
    run_id: str


@dataclass(frozen=True)
class MonthRow:
    month: str
    dataset: str
    status: str  # confirmed | recovered | archive_incomplete
    published: int
    landed: int
    recovered: int
    gap_days: list[str]
    checked_at: str
    run_id: str


def rule_status(success: bool, severity: str) -> str:
    """What the page calls a result: a failed `warn` rule warns, any other failed rule fails."""
    if success:
        return "pass"
    return "warn" if severity == "warn" else "fail"


def quality_rules(lake: LakePath, dataset: str) -> list[RuleRow]:
    """The newest result of every rule of `dataset`; a `ViewStateError` when no check has written any."""
    from placsp_provider.quality.results import latest_results

    _require_quality_results(lake)
    rows = read_twice(lambda: latest_results(lake, dataset), what="quality_results")
    if not rows:
        raise ViewStateError(
            f"No data-contract check has recorded results for {dataset} yet (quality_results holds "
            "other datasets only): the placsp_daily DAG's quality task writes them after each ingest."
        )
    return [
        RuleRow(
            table=r["table_name"],
            rule_id=r["rule_id"],
            severity=r["severity"],
            status=rule_status(bool(r["success"]), r["severity"]),
            expected=r["expected"],
            actual=r["actual"],
            message=r["message"],
            checked_at=r["checked_at"],
            run_id=r["run_id"],
        )
        for r in rows
    ]


def volume_days(lake: LakePath, dataset: str, days: int) -> list[VolumeRow]:
    """The last `days` days the volume check judged, newest first, each by its newest check."""
    import duckdb

    from placsp_provider.lake import quality_results_path
    from placsp_provider.lake_storage import open_table
    from placsp_provider.quality.volume import MESSAGE_DAY_PATTERN, band_of
    from placsp_provider.quality.volume import RULE_ID as VOLUME_RULE_ID
    from placsp_provider.table_files import table_files

    _require_quality_results(lake)

    def read() -> list[tuple[Any, ...]]:
        # Written by delta-rs only (quality.results): one string type, no views needed (table_files).
        source = table_files(open_table(quality_results_path(lake)), [("dataset", "=", dataset)])
        with duckdb.connect() as con:
            con.register("results", source)
            return con.execute(
                "SELECT day, actual, expected, success, message, run_id FROM ("
                "  SELECT *, regexp_extract(message, ?, 1) AS day FROM results WHERE dataset = ? AND rule_id = ?"
                ") WHERE day <> '' "
                "QUALIFY row_number() OVER (PARTITION BY day ORDER BY checked_at DESC) = 1 "
                "ORDER BY day DESC LIMIT ?",
                [MESSAGE_DAY_PATTERN, dataset, VOLUME_RULE_ID, days],
            ).fetchall()

    out = []
    for day, actual, expected, success, message, run_id in read_twice(read, what="quality_results"):
        band = band_of(expected)
        out.append(
            VolumeRow(
                day=day,
                count=actual,
                lower=band[0] if band else None,
                upper=band[1] if band else None,
                anomaly=not success,
                message=message,
                run_id=run_id,
            )
        )
    return out


def completeness_months(lake: LakePath, datasets: Iterable[str], months: int) -> list[MonthRow]:
    """The last `months` month reports of each dataset, newest month first."""
    from placsp_provider.bronze.completeness import CompletenessReport
    from placsp_provider.lake import completeness_reports

    out = []
    for dataset in datasets:
        paths = read_twice(partial(completeness_reports, lake, dataset), what="the completeness reports")
        for path in paths[-months:] if months else []:
            try:
                report = CompletenessReport.from_json(read_twice(path.read_text, what=str(path)))
            except (ValueError, TypeError) as err:
                # One unreadable report is a row that says so, not a page without the others.
                log.warning("completeness report %s is unreadable: %s", path, err)
                out.append(MonthRow(path.name.removesuffix(".json"), dataset, "unreadable", 0, 0, 0, [], "", ""))
                continue
            out.append(
                MonthRow(
                    month=report.month,
                    dataset=report.dataset,
                    status=report.status,
                    published=report.published,
                    landed=report.landed_before,
                    recovered=report.recovered,
                    gap_days=report.gap_days(),
                    checked_at=report.checked_at,
                    run_id=report.run_id,
                )
            )
    if not out:
        raise ViewStateError(
            "No completeness report yet: the placsp_completeness DAG (or `placsp completeness check`) "
            "writes one per month and dataset once the month has ended."
        )
    return sorted(out, key=lambda r: (r.month, r.dataset), reverse=True)


def _require_quality_results(lake: LakePath) -> None:
    from placsp_provider.lake import QUALITY_RESULTS_TABLE, quality_results_path

    require_table(
        lake,
        quality_results_path(lake),
        QUALITY_RESULTS_TABLE,
        "no data-contract check has run on it; the placsp_daily DAG's quality tasks (or `placsp quality check`) "
        "create it.",
    )
