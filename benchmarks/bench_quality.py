"""Data-contract checks (delta-rs + DuckDB over Arrow) vs a full scan, and the Prophet volume model.

Tables: `<lake>/silver/{entries,lots,documents,results,tombstones}` with the exact schemas of the Silver
ingest (`placsp_provider.ingest.tables.table_schema`), partitioned by `dataset`, written with
`deltalake.write_deltalake` in `runs` commits (one per daily run, `_ingest_run_id` = the run). Entries:
1,000,000 rows, 70% agregadas and 30% licitaciones; children at the ratios of the bundled real 1044
pages (per entry: 0.9 documents, 0.9 results, 0.5 lots, 0.05 tombstones). Rows carry ids, timestamps
over three years, amounts, 1-3 CPV codes, a ~60-character title and party name; other optional
columns are null (real rows are wider, which makes a full scan dearer and a projected check no dearer).

Measured, each in a fresh child interpreter (imports not timed; peak RSS is that child's VmHWM):

1. All checks: `run_checks` of the seven contracts on agregadas with one run's id (what the daily
   task runs: 39 rules and 7 schema rules; dead_letters and reconciliation do not exist here, so their
   rules see empty tables).
2. Reference: a full scan, every column of every file of the five Silver tables into Arrow
   (`table_files.table_files(...).to_table()`).
3. Prophet: a fit on three years of synthetic daily counts (weekly pattern, Spanish holidays) and one
   prediction (`volume.check_day` with no stored model), then the same check reusing the stored model.

Medians of `repeats` runs; the page cache is warm (one unmeasured pass first). Generation is not timed.
"""

from __future__ import annotations

import random
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from benchmarks._common import BenchResult, Table, child_main, f2, med, peak_rss_mb, run_child
from benchmarks._lake import append_rows

NAME = "quality"
TITLE = "Data-contract checks (delta-rs + DuckDB) vs full scan; Prophet volume model"
SEED = 20261201
_DATASETS = {"agregadas": 0.7, "licitaciones": 0.3}
_CHILDREN = {"documents": 0.9, "results": 0.9, "lots": 0.5, "tombstones": 0.05}
CHECK_DATASET = "agregadas"


@dataclass(frozen=True)
class Config:
    rows: int = 1_000_000
    runs: int = 20
    repeats: int = 3
    prophet_days: int = 3 * 365


FULL = Config()
QUICK = Config(rows=20_000, runs=4, repeats=1, prophet_days=120)


def run(quick: bool = False) -> BenchResult:
    cfg = QUICK if quick else FULL
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="placsp-bench-quality-") as tmp:
        lake = Path(tmp) / "lake"
        t = time.perf_counter()
        truth = _write_tables(lake, cfg)
        generation_s = time.perf_counter() - t
        run_id = truth["run_ids"][len(truth["run_ids"]) // 2]
        payload = {"lake": str(lake), "run_id": run_id}
        warm = run_child(__name__, {"task": "checks", **payload}, timeout=1800)
        if warm["failed_error"]:
            raise RuntimeError(f"generated tables fail error rules: {warm['failed_error']}")
        run_child(__name__, {"task": "full_scan", **payload}, timeout=1800)
        checks, scans = [], []
        for _ in range(cfg.repeats):
            checks.append(run_child(__name__, {"task": "checks", **payload}, timeout=1800))
            scans.append(run_child(__name__, {"task": "full_scan", **payload}, timeout=1800))
        if scans[0]["rows"] != truth["rows_total"]:
            raise RuntimeError(f"full scan read {scans[0]['rows']} rows, generated {truth['rows_total']}")
        prophet = [
            run_child(__name__, {"task": "prophet", "lake": str(Path(tmp) / f"p{i}"), "days": cfg.prophet_days})
            for i in range(cfg.repeats)
        ]
    raw = {"config": cfg.__dict__, "checks": checks, "scans": scans, "prophet": prophet, "truth": truth}
    return report(raw | {"generation_seconds": generation_s}, time.perf_counter() - started)


def report(raw: dict[str, Any], seconds: float) -> BenchResult:
    cfg, checks, truth = raw["config"], raw["checks"], raw["truth"]

    check_s, scan_s = med(checks), med(raw["scans"])
    check_mb, scan_mb = med(checks, "peak_mb"), med(raw["scans"], "peak_mb")
    rows = [
        [f"`run_checks`: seven contracts on `{CHECK_DATASET}`, one run ({checks[0]['rules']} rules)",
         f2(check_s), f"{check_mb:,.0f}"],
        ["reference: full scan of five tables into Arrow", f2(scan_s), f"{scan_mb:,.0f}"],
        [f"Prophet: fit on {cfg['prophet_days']} days + store + one prediction",
         f2(med(raw["prophet"], "fit_seconds")), f"{med(raw['prophet'], 'peak_mb'):,.0f}"],
        ["Prophet, next day: stored model + one prediction", f2(med(raw["prophet"], "reuse_seconds")), ""],
    ]  # fmt: skip
    return BenchResult(
        NAME,
        TITLE,
        f"The five Silver tables for {cfg['rows']:,} entries ({truth['rows_total']:,} rows, {cfg['runs']} commits), "
        "exact schemas, written by delta-rs; most optional columns null (real rows are wider: a full scan is "
        "dearer, a projected check is not). Fresh child per measurement, page cache warm, medians.",
        [Table(["what", "seconds", "peak RSS MB"], rows)],
        raw,
        seconds,
        figures=[
            f"The check takes {check_s / scan_s:.2f}x the time and {check_mb / scan_mb:.2f}x the memory of a full "
            "scan: each rule is a DuckDB query; uniqueness and orphan rules read the keys of the whole partition "
            f"({checks[0]['rows']['entries']:,} entries; the run holds {checks[0]['run_rows']:,})."
        ],
    )


# -- generation ------------------------------------------------------------------------------------
def _write_tables(lake: Path, cfg: Config) -> dict[str, Any]:
    rng = random.Random(SEED)
    start = datetime(2023, 12, 1, tzinfo=UTC)
    span = 3 * 365 * 86400
    per_run = cfg.rows // cfg.runs
    run_ids = [
        f"scheduled__{(date(2026, 11, 1) + timedelta(days=i)).isoformat()}T00:00:00+00:00" for i in range(cfg.runs)
    ]
    totals = dict.fromkeys(("entries", *_CHILDREN), 0)
    serial = 0
    for run_id in run_ids:
        tables: dict[str, list[dict[str, Any]]] = {t: [] for t in ("entries", *_CHILDREN)}
        lineage = {"_source_file": "bronze/p.atom", "_ingest_run_id": run_id, "_ingested_at": datetime.now(UTC)}
        for _ in range(per_run):
            serial += 1
            dataset = "agregadas" if rng.random() < _DATASETS["agregadas"] else "licitaciones"
            entry_id = f"https://contrataciondelestado.es/sindicacion/x/{serial}"
            updated = start + timedelta(seconds=rng.randrange(span))
            amount = Decimal(rng.randrange(100_000, 500_000_000)).scaleb(-2)
            cpv = [f"{rng.randrange(3, 98):02d}{rng.randrange(0, 999999):06d}" for _ in range(rng.randint(1, 3))]
            common = {"dataset": dataset, "entry_id": entry_id, "entry_updated": updated} | lineage
            tables["entries"].append(
                {
                    **common,
                    "folder_number": serial,
                    "updated": updated,
                    "title": f"Suministro de material {serial:>40}",
                    "party_name": f"Ayuntamiento de municipio {serial % 8000:>30}",
                    "party_identifiers": [],
                    "party_activity_codes": [],
                    "parent_party_names": [],
                    "cpv_codes": cpv,
                    "nuts_codes": [],
                    "funding_program_codes": [],
                    "notices": [],
                    "lot_count": 0,
                    "result_count": 1,
                    "document_count": 1,
                    "total_amount": amount,
                    "tax_exclusive_amount": (amount / Decimal("1.21")).quantize(Decimal("0.01")),
                }
            )
            for child, ratio in _CHILDREN.items():
                if rng.random() >= ratio:
                    continue
                if child == "documents":
                    tables[child].append({**common, "document_kind": "legal", "position": 0, "file_name": "pliego.pdf"})
                elif child == "results":
                    tables[child].append(
                        {
                            **common,
                            "result_position": 0,
                            "winner_position": 0,
                            "winner_count": 1,
                            "winner_identifiers": [],
                            "awarded_tax_exclusive_amount": (amount * Decimal("0.9")).quantize(Decimal("0.01")),
                            "winner_name": f"Empresa {serial % 5000}",
                        }
                    )
                elif child == "lots":
                    tables[child].append(
                        {
                            **common,
                            "lot_id": "1",
                            "lot_position": 0,
                            "cpv_codes": cpv[:1],
                            "nuts_codes": [],
                            "total_amount": amount,
                        }
                    )
                else:  # a tombstone has no entry_updated
                    row = {k: v for k, v in common.items() if k != "entry_updated"}
                    tables[child].append(row | {"folder_number": serial, "deleted_at": updated + timedelta(days=30)})
        for name, rows in tables.items():
            if rows:
                append_rows(lake, name, rows)
                totals[name] += len(rows)
    return {"run_ids": run_ids, "rows": totals, "rows_total": sum(totals.values())}


# -- children --------------------------------------------------------------------------------------
def _warm_imports() -> None:
    """What the task's process has imported before the check (not timed): Arrow datasets, pandas
    (pulled in by pyarrow.dataset), DuckDB, delta-rs, the JSON Schema validator."""
    import duckdb  # noqa: F401
    import jsonschema  # noqa: F401
    import pandas  # noqa: F401
    import pyarrow.dataset  # noqa: F401
    import yaml  # noqa: F401
    from deltalake import DeltaTable  # noqa: F401


def _child_checks(payload: dict[str, Any]) -> dict[str, Any]:
    _warm_imports()
    from placsp_provider.quality.engine import CheckRequest, run_checks

    t = time.perf_counter()
    report = run_checks(CheckRequest(payload["lake"], CHECK_DATASET, run_id=payload["run_id"]))
    seconds = time.perf_counter() - t
    run_rows = next(r.rows_checked for r in report.results if r.rule_id == "entries_entry_id_not_null")
    out = {"seconds": seconds, "peak_mb": peak_rss_mb(), "rules": len(report.results)}
    failed = [r.rule_id for r in report.errors if not r.rule_id.endswith("_schema")]
    return out | {"failed_error": failed, "rows": report.rows, "run_rows": run_rows}


def _child_full_scan(payload: dict[str, Any]) -> dict[str, Any]:
    _warm_imports()
    from deltalake import DeltaTable

    from placsp_provider.lake import SILVER_TABLES, table_path
    from placsp_provider.table_files import table_files

    t = time.perf_counter()
    # Every file of every table into Arrow, through Arrow's local filesystem (table_files.table_files):
    # deltalake's own crashes processes at exit.
    lake = Path(payload["lake"])
    rows = sum(table_files(DeltaTable(str(table_path(lake, n)))).to_table().num_rows for n in SILVER_TABLES)
    return {"seconds": time.perf_counter() - t, "peak_mb": peak_rss_mb(), "rows": rows}


def _child_prophet(payload: dict[str, Any]) -> dict[str, Any]:
    import prophet  # noqa: F401 - imports are not timed

    from placsp_provider.quality.volume import check_day

    rng = random.Random(SEED)
    first = date(2023, 11, 1)
    days = [first + timedelta(days=i) for i in range(payload["days"])]
    counts = {d: int((80 if d.weekday() >= 5 else 420) * rng.uniform(0.9, 1.1)) for d in days}
    day = first + timedelta(days=payload["days"])
    counts[day] = 400
    t = time.perf_counter()
    fitted = check_day(payload["lake"], "agregadas", day, counts=counts)
    fit_s = time.perf_counter() - t
    t = time.perf_counter()
    reused = check_day(payload["lake"], "agregadas", day + timedelta(days=1), counts=counts)
    reuse_s = time.perf_counter() - t
    assert fitted.refitted and not reused.refitted, (fitted, reused)
    return {"fit_seconds": fit_s, "reuse_seconds": reuse_s, "peak_mb": peak_rss_mb(), "status": fitted.status}


if __name__ == "__main__":
    child_main(globals())
