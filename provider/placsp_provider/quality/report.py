"""One self-contained HTML page per dataset: its rules, their latest results, and its daily volume.

The chart (matplotlib, Agg backend, embedded as a base64 PNG) shows the daily entry count by
`updated` day, the stored Prophet model's interval over the same days (the model's training window
and the days after it), and marks the days whose count is not strictly inside it.
"""

from __future__ import annotations

import base64
import html
import io
from datetime import UTC, date, datetime, timedelta
from typing import Any

from placsp_provider import extras
from placsp_provider.bronze.landing import write_text_atomically
from placsp_provider.lake_storage import LakePath, lake_path
from placsp_provider.quality.contract import CONTRACT_TABLES, load_contracts
from placsp_provider.quality.engine import SCHEMA_RULE_SUFFIX
from placsp_provider.quality.results import latest_results
from placsp_provider.quality.volume import RULE_ID as VOLUME_RULE_ID
from placsp_provider.quality.volume import daily_counts, forecast_band, is_anomaly, model_path

CHART_DAYS = 365


def build_report(lake: str | LakePath, dataset: str, *, contracts_dir: str | None = None) -> str:
    contracts = load_contracts(CONTRACT_TABLES, contracts_dir)
    latest = {(r["table_name"], r["rule_id"]): r for r in latest_results(lake, dataset)}
    counts = daily_counts(lake, dataset)
    days = _chart_days(counts)
    band = forecast_band(lake, dataset, days) if days else []
    # a day no ingest covered has no count (a gap in the line), never a 0 or an anomaly
    anomalies = [(d, counts[d]) for d, lo, _, hi in band if d in counts and is_anomaly(counts[d], lo, hi)]
    no_chart = extras.missing("matplotlib", "report")
    chart = _chart(dataset, days, counts, band, anomalies) if days and not no_chart else None
    model = model_path(lake, dataset)
    rows = []
    for contract in contracts:
        rules = {r.id: r for r in contract.rules}
        volume = [VOLUME_RULE_ID] if contract.table == "entries" else []
        for rule_id in [f"{contract.table}{SCHEMA_RULE_SUFFIX}", *(r.id for r in contract.rules), *volume]:
            rows.append(_row(contract.table, rule_id, rules.get(rule_id), latest.get((contract.table, rule_id))))
    failing = sum(1 for r in latest.values() if not r["success"])
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    chart_html = (
        f'<img alt="daily entries of {html.escape(dataset)} with the forecast interval" '
        f'src="data:image/png;base64,{chart}">'
        if chart
        else f"<p>No chart: {html.escape(no_chart)}.</p>"
        if no_chart and days
        else "<p>No entries in Silver for this dataset yet.</p>"
    )
    model_note = (
        f"Forecast band: the stored model {html.escape(str(model))}."
        if model.is_file()
        else "No volume model yet (too little history, or no volume check has run): counts only."
    )
    anomaly_list = ", ".join(f"{d} ({n})" for d, n in anomalies[-20:]) or "none"
    return _PAGE.format(
        dataset=html.escape(dataset),
        lake=html.escape(str(lake)),
        generated=generated,
        results=len(latest),
        failing=failing,
        chart=chart_html,
        model_note=model_note,
        anomalies=html.escape(anomaly_list),
        rows="\n".join(rows),
    )


def write_report(
    lake: str | LakePath, dataset: str, out: str | LakePath, *, contracts_dir: str | None = None
) -> LakePath:
    """The page written to `out`: a local file, or an S3 object (`s3://bucket/key`, one PUT)."""
    path = lake_path(out) if isinstance(out, str) else out
    write_text_atomically(path, build_report(lake, dataset, contracts_dir=contracts_dir))
    return path


def _chart_days(counts: dict[date, int]) -> list[date]:
    if not counts:
        return []
    last = max(counts)
    first = max(min(counts), last - timedelta(days=CHART_DAYS - 1))
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def _chart(
    dataset: str,
    days: list[date],
    counts: dict[date, int],
    band: list[tuple[date, float, float, float]],
    anomalies: list[tuple[date, int]],
) -> str:
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")  # no display: render to memory
    from matplotlib.figure import Figure

    def x(values: list[date]) -> Any:
        return np.array(values, dtype="datetime64[D]")

    figure = Figure(figsize=(11, 4), dpi=100)
    axes = figure.subplots()
    if band:
        band_days, lower, predicted, upper = (list(column) for column in zip(*band, strict=True))
        lower = [max(0.0, v) for v in lower]
        axes.fill_between(x(band_days), lower, upper, color="#9ecae1", alpha=0.5, label="forecast interval")
        axes.plot(x(band_days), predicted, color="#3182bd", linewidth=1, label="forecast")
    line = [counts.get(d, np.nan) for d in days]  # NaN: a day no ingest covered, drawn as a gap
    axes.plot(x(days), line, color="#222222", linewidth=1, label="entry versions per day")
    if anomalies:
        axes.scatter(
            x([d for d, _ in anomalies]), [n for _, n in anomalies], color="#d62728", zorder=3, label="anomaly"
        )
    axes.set_title(f"{dataset}: entry versions per day (by updated)")
    axes.set_ylabel("entries")
    axes.legend(loc="upper left", fontsize=8)
    figure.autofmt_xdate()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _row(table: str, rule_id: str, rule: Any, result: dict[str, Any] | None) -> str:
    if result is None:
        verdict, css, actual, checked = "not run", "none", "", ""
    else:
        verdict = "pass" if result["success"] else "FAIL"
        css = "pass" if result["success"] else result["severity"]
        actual = "" if result["actual"] is None else f"{result['actual']:g}"
        checked = f"{result['checked_at']:%Y-%m-%d %H:%M}" if result["checked_at"] else ""
    what = result["message"] if result else (rule.what if rule else "")
    severity = result["severity"] if result else (rule.severity if rule else "error")
    expected = result["expected"] if result else (rule.expected if rule else "")
    description = rule.description if rule else ""
    cells = [table, rule_id, severity, what, expected, actual, verdict, checked, description]
    return f'<tr class="{css}">' + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>"


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>PLACSP data quality: {dataset}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; font-size: 0.85em; }}
td, th {{ border: 1px solid #ccc; padding: 0.3em 0.5em; vertical-align: top; }}
tr.error td {{ background: #f8d7da; }} tr.warn td {{ background: #fff3cd; }} tr.none td {{ color: #888; }}
img {{ max-width: 100%; }}
</style></head><body>
<h1>Data quality: {dataset}</h1>
<p>Lake {lake}. Generated {generated}. Latest results of {results} rules, {failing} failing
(quality_results; rules and what to do: docs/data-quality.md).</p>
<h2>Daily volume</h2>
{chart}
<p>{model_note} Anomalies shown: {anomalies}.</p>
<h2>Rules and their latest results</h2>
<table><tr><th>table</th><th>rule</th><th>severity</th><th>measure</th><th>expected</th><th>actual</th>
<th>result</th><th>checked at</th><th>description</th></tr>
{rows}
</table></body></html>
"""
