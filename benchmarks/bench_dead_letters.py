"""Dead-letter threshold check benchmark: `count_dead_letters` (delta-rs, pruned) vs a full scan.

Table: `<lake>/dead_letters` with the exact schema of the Silver ingest's table
(`placsp_provider.ingest.tables.table_schema("dead_letters")`), partitioned by `dataset`, written with
`deltalake.write_deltalake`: 1,000,000 rows in 60 commits (one per daily run), each commit one file
per dataset (5 datasets, so 300 files). Every file mixes the three stages and their error types
like a real run; `raw_record` is a ~1.3 KB CODICE-like entry with the row's own id and amount
(real entries are larger, so the full scan here is cheaper than it would be on real dead letters).

Measured, each in a fresh child interpreter (imports not timed; peak RSS is that child's VmHWM):

1. The check: `count_dead_letters(lake, dataset=D, stages=[S])`, what a sensor with `stages=` reads:
   partition pruning, file-statistics pruning, a row filter pushed into the Parquet scan, four columns.
2. The sensor's two scopes: one run (`dataset` + `run_id`) and the backlog (`dataset` + `status`).
3. The PLACSP view's reads (ui/queries.py, DuckDB over the table's files): the overview (backlog by
   status and dead letters per day and error type of the last 30 days, every dataset), and a page of
   the browser (one dataset's quarantined dead letters: their count and 50 rows, newest first), the
   first page and page 1,000.
4. Reference: a full scan, every column of every file into Arrow (`table_files.table_files(...).to_table()`),
   then the same filter and counts in pyarrow.

The page cache is warm for all (one unmeasured pass of each first); medians of `repeats` runs, in
alternating order. Table generation is never timed.
"""

from __future__ import annotations

import hashlib
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks._common import BenchResult, Table, child_main, med, peak_rss_mb, run_child
from benchmarks._lake import append_rows

NAME = "dead_letters"
TITLE = "Dead-letter threshold check and the PLACSP view's reads vs full table scan"
SEED = 20251129

# dataset -> share of the rows; stage -> (share, error types)
_DATASETS = {"agregadas": 0.35, "licitaciones": 0.25, "menores": 0.25, "encargos": 0.10, "consultas": 0.05}
_STAGES = {
    "parse": (0.55, ("xml_syntax", "encoding", "unbound_prefix", "truncated", "unclosed_record")),
    "validation": (0.40, ("invalid_amount", "invalid_timestamp", "invalid_entry_id", "encoding_error")),
    "reconciliation": (0.05, ("count_mismatch",)),
}
CHECK_DATASET, CHECK_STAGE = "agregadas", "validation"
VIEW_PAGE_SIZE, VIEW_DEEP_PAGE = 50, 1_000


@dataclass(frozen=True)
class Config:
    rows: int = 1_000_000
    runs: int = 60  # commits; each writes one file per dataset
    repeats: int = 3


FULL = Config()
QUICK = Config(rows=20_000, runs=10, repeats=1)


# -- parent ---------------------------------------------------------------------------------------
def run(quick: bool = False) -> BenchResult:
    cfg = QUICK if quick else FULL
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="placsp-bench-dl-") as tmp:
        lake = Path(tmp) / "lake"
        t = time.perf_counter()
        truth = _write_table(lake, cfg)
        generation_s = time.perf_counter() - t
        table = _table_facts(lake)
        run_id = truth["run_ids"][len(truth["run_ids"]) // 2]
        cases = {
            "check": {"dataset": CHECK_DATASET, "stages": [CHECK_STAGE]},
            "run": {"dataset": CHECK_DATASET, "run_id": run_id},
            "backlog": {"dataset": CHECK_DATASET, "status": "quarantined"},
            "view_overview": {"today": truth["last_day"]},
            "view_page": {"dataset": CHECK_DATASET, "status": "quarantined", "page": 1},
            "view_deep_page": {"dataset": CHECK_DATASET, "status": "quarantined", "page": VIEW_DEEP_PAGE},
            "full_scan": {"dataset": CHECK_DATASET, "stages": [CHECK_STAGE]},
        }
        if quick:  # the quick table has fewer rows than the deep page needs
            cases["view_deep_page"]["page"] = 2
        expected = {name: _expected(truth, selection) for name, selection in cases.items()}
        for name, selection in cases.items():  # warm the page cache, check the answers
            result = run_child(__name__, {"task": name, "lake": str(lake), "selection": selection})
            if result["total"] != expected[name]:
                raise RuntimeError(
                    f"{name}: counted {result['total']} dead letters, the generator wrote {expected[name]}"
                )
        measures: dict[str, list[dict[str, Any]]] = {name: [] for name in cases}
        for i in range(cfg.repeats):
            order = list(cases) if i % 2 == 0 else list(reversed(cases))
            for name in order:
                payload = {"task": name, "lake": str(lake), "selection": cases[name]}
                measures[name].append(run_child(__name__, payload))
        files_opened = {
            name: _files_opened(lake, cases[name], name in ("full_scan", "view_overview")) for name in cases
        }
    raw = {"config": cfg.__dict__, "quick": quick, "table": table | {"generation_seconds": generation_s}}
    raw |= {"cases": cases, "files_opened": files_opened, "expected": expected, "measures": measures}
    return report(raw, time.perf_counter() - started)


def _expected(truth: dict[str, Any], selection: dict[str, Any]) -> int:
    """How many of the dead letters the generator wrote `selection` matches."""
    total = 0
    for (dataset, stage, run_id, status), n in truth["counts"].items():
        row = {"dataset": dataset, "run_id": run_id, "status": status}
        if all(selection.get(k) in (None, v) for k, v in row.items()) and stage in (selection.get("stages") or [stage]):
            total += n
    return total


def _files_opened(lake: Path, selection: dict[str, Any], full: bool) -> int:
    from deltalake import DeltaTable

    table = DeltaTable(str(lake / "dead_letters"))
    if full:
        return len(table.file_uris())
    query = _query(lake, {k: v for k, v in selection.items() if k != "page"})
    return len(table.file_uris(file_pruning_predicate=query.pruning_filters()))


def _table_facts(lake: Path) -> dict[str, Any]:
    import pyarrow as pa
    from deltalake import DeltaTable

    table = DeltaTable(str(lake / "dead_letters"))
    actions = pa.table(table.get_add_actions(flatten=True))
    return {
        "version": table.version(),
        "files": len(table.file_uris()),
        "bytes": sum(f.stat().st_size for f in (lake / "dead_letters").rglob("*.parquet")),
        "rows": sum(int(n) for n in actions.column("num_records").to_pylist()),
    }


# -- the table ------------------------------------------------------------------------------------
def _write_table(lake: Path, cfg: Config) -> dict[str, Any]:
    """`cfg.runs` commits of ~rows/runs rows; returns the exact counts by (dataset, stage, run, status)."""
    import numpy as np

    rng = np.random.default_rng(SEED)
    counts: Counter[tuple[str, str, str, str]] = Counter()
    run_ids = []
    per_run = cfg.rows // cfg.runs
    datasets = list(_DATASETS)
    stages = list(_STAGES)
    stage_p = np.array([_STAGES[s][0] for s in stages])
    written = 0
    for r in range(cfg.runs):
        run_id = f"scheduled__2025-{1 + r // 28:02d}-{1 + r % 28:02d}T00:00:00+00:00"
        run_ids.append(run_id)
        n = per_run if r < cfg.runs - 1 else cfg.rows - written
        written += n
        ds_of = rng.choice(len(datasets), size=n, p=np.array(list(_DATASETS.values())))
        stage_of = rng.choice(len(stages), size=n, p=stage_p)
        replayed = rng.random(n) < 0.02  # a few rows already went through replay
        rows = []
        for i in range(n):
            dataset, stage = datasets[ds_of[i]], stages[stage_of[i]]
            types = _STAGES[stage][1]
            error_type = types[(i * 7 + r) % len(types)]
            status = "replayed" if replayed[i] else "quarantined"
            counts[(dataset, stage, run_id, status)] += 1
            rows.append(_row(dataset, stage, error_type, status, run_id, r, i))
        append_rows(lake, "dead_letters", rows)
    last_day = (datetime(2025, 1, 1, tzinfo=UTC) + timedelta(days=cfg.runs - 1)).date().isoformat()
    return {"counts": counts, "run_ids": run_ids, "last_day": last_day}


_RAW = (
    '<entry><id>https://contrataciondelestado.es/sindicacion/{path}/{n}</id><link href="https://'
    'contrataciondelsectorpublico.gob.es/wps/poc?uri=deeplink:detalle_licitacion&amp;idEvl={n}"/>'
    '<summary type="text">Id licitación: {n}/2025; Órgano de Contratación: Ayuntamiento de Ejemplo; '
    "Importe: {amount} EUR; Estado: ADJ</summary><title>Suministro de material de oficina, lote {lot}</title>"
    "<updated>2025-08-18T{hh:02d}:15:42.512+02:00</updated><cac-place-ext:ContractFolderStatus>"
    "<cbc:ContractFolderID>{n}/2025</cbc:ContractFolderID><cbc-place-ext:ContractFolderStatusCode "
    'listURI="https://contrataciondelestado.es/codice/cl/2.04/SyndicationContractFolderStatusCode-2.04.gc">'
    "ADJ</cbc-place-ext:ContractFolderStatusCode><cac-place-ext:LocatedContractingParty><cac:Party>"
    "<cac:PartyName><cbc:Name>Ayuntamiento de Ejemplo</cbc:Name></cac:PartyName></cac:Party>"
    "</cac-place-ext:LocatedContractingParty><cac:ProcurementProject><cbc:Name>Suministro</cbc:Name>"
    '<cac:BudgetAmount><cbc:TotalAmount currencyID="EUR">{amount}</cbc:TotalAmount></cac:BudgetAmount>'
    "</cac:ProcurementProject></cac-place-ext:ContractFolderStatus></entry>"
)


def _row(dataset: str, stage: str, error_type: str, status: str, run_id: str, r: int, i: int) -> dict[str, Any]:
    n = 10_000_000 + r * 100_000 + i
    page = i // 400
    source = f"bronze/{dataset}/pages/{dataset}_{r:03d}_{page:04d}.{n % 65536:04x}{page:04x}.atom"
    offset = (i % 400) * 21_000
    kind = "file" if stage == "reconciliation" else "entry"
    amount = f"{n % 99991},{i % 100:02d}"
    raw = "" if kind == "file" else _RAW.format(path=dataset, n=n, amount=amount, lot=i % 7, hh=i % 24)
    return {
        "dataset": dataset,
        "source_file": source,
        "stage": stage,
        "error_type": error_type,
        "error_message": f"Dataset {dataset}, file {source}, entry {n}, byte {offset}: {stage} failed ({error_type})",
        "raw_record": raw,
        "namespace_context": "" if kind == "file" else 'xmlns="http://www.w3.org/2005/Atom"',
        "record_kind": kind,
        "entry_id": None if kind == "file" else f"https://contrataciondelestado.es/sindicacion/{dataset}/{n}",
        "record_offset": 0 if kind == "file" else offset,
        "dead_letter_id": hashlib.sha256(f"{dataset}|{stage}|{source}|{offset}|{n}".encode()).hexdigest(),
        "run_id": run_id,
        "processing_timestamp": datetime(2025, 1, 1, tzinfo=UTC) + timedelta(days=r, seconds=i % 3600),
        "status": status,
        "attempts": 1 if status == "replayed" else 0,
        "last_attempt_at": None,
        "replayed_at": None,
        "replay_run_id": None,
        "raw_bytes": raw.encode("utf-8"),  # as the ingest writes it (these records hold no declaration)
    }


# -- children -------------------------------------------------------------------------------------
def _query(lake: Path, selection: dict[str, Any]) -> Any:
    from placsp_provider.dead_letters.stats import DeadLetterQuery

    scope: dict[str, Any] = {k: selection.get(k) for k in ("dataset", "run_id", "status")}
    return DeadLetterQuery(str(lake), **scope, stages=tuple(selection.get("stages") or ()))


def _warm_imports() -> None:
    """What both readers import lazily (Arrow's dataset and compute modules, delta-rs): not timed."""
    import deltalake.fs  # noqa: F401
    import pyarrow.compute
    import pyarrow.dataset
    import pyarrow.parquet  # noqa: F401
    from deltalake import DeltaTable  # noqa: F401

    import placsp_provider.dead_letters.stats  # noqa: F401


def _child_check(payload: dict[str, Any]) -> dict[str, Any]:
    _warm_imports()
    from placsp_provider.dead_letters.stats import count

    query = _query(Path(payload["lake"]), payload["selection"])
    baseline = peak_rss_mb()
    t = time.perf_counter()
    counts = count(query)
    seconds = time.perf_counter() - t
    return {"seconds": seconds, "total": counts.total, "peak_rss_mb": peak_rss_mb(), "baseline_rss_mb": baseline}


def _child_full_scan(payload: dict[str, Any]) -> dict[str, Any]:
    _warm_imports()
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    from placsp_provider.table_files import table_files

    selection = payload["selection"]
    baseline = peak_rss_mb()
    t = time.perf_counter()
    path = str((Path(payload["lake"]) / "dead_letters").resolve())
    # the same native filesystem `count` uses (deltalake's default Python one crashes at exit)
    table = table_files(DeltaTable(path)).to_table()
    mask = pc.and_(
        pc.equal(table["dataset"], selection["dataset"]),
        pc.is_in(table["stage"], value_set=pa.array(selection["stages"])),
    )
    rows = table.filter(mask)
    rows.group_by(["stage", "error_type", "status"]).aggregate([([], "count_all")])
    seconds = time.perf_counter() - t
    out = {"seconds": seconds, "total": rows.num_rows, "rows_read": table.num_rows, "arrow_mb": table.nbytes / 1e6}
    return out | {"peak_rss_mb": peak_rss_mb(), "baseline_rss_mb": baseline}


_child_run = _child_backlog = _child_check  # the sensor's two scopes: the same count, other selections


def _child_view_overview(payload: dict[str, Any]) -> dict[str, Any]:
    """The view's overview, as its page reads it: every dataset, the last 30 days up to `today`."""
    _warm_view_imports()
    from datetime import date

    from placsp_provider.datasets import DATASETS
    from placsp_provider.ui.queries import summaries

    baseline = peak_rss_mb()
    t = time.perf_counter()
    found = summaries(
        Path(payload["lake"]), list(DATASETS), 30, today=date.fromisoformat(payload["selection"]["today"])
    )
    seconds = time.perf_counter() - t
    total = sum(s.total for s in found.values())
    return {"seconds": seconds, "total": total, "peak_rss_mb": peak_rss_mb(), "baseline_rss_mb": baseline}


def _child_view_page(payload: dict[str, Any]) -> dict[str, Any]:
    """One page of the view's browser: the filter's count and `VIEW_PAGE_SIZE` rows."""
    _warm_view_imports()
    from placsp_provider.ui.queries import DeadLetterFilter, browse

    selection = payload["selection"]
    baseline = peak_rss_mb()
    t = time.perf_counter()
    found = browse(
        Path(payload["lake"]),
        DeadLetterFilter(dataset=selection["dataset"], status=selection["status"]),
        selection["page"],
        VIEW_PAGE_SIZE,
    )
    seconds = time.perf_counter() - t
    if len(found.rows) != VIEW_PAGE_SIZE:
        raise RuntimeError(f"page {selection['page']}: {len(found.rows)} rows, expected {VIEW_PAGE_SIZE}")
    return {"seconds": seconds, "total": found.matching, "peak_rss_mb": peak_rss_mb(), "baseline_rss_mb": baseline}


_child_view_deep_page = _child_view_page


def _warm_view_imports() -> None:
    _warm_imports()
    import duckdb  # noqa: F401

    import placsp_provider.ui.queries  # noqa: F401


# -- report ---------------------------------------------------------------------------------------
_LABELS = {
    "check": f"`count_dead_letters(dataset={CHECK_DATASET!r}, stages=[{CHECK_STAGE!r}])`",
    "run": "sensor scope run: `dataset` + `run_id`",
    "backlog": "sensor scope backlog: `dataset` + `status`",
    "view_overview": "view: overview (backlog, 30 days by type), all datasets",
    "view_page": f"view: browser, `dataset` + `status`, {VIEW_PAGE_SIZE} rows, page 1",
    "view_deep_page": f"view: the same, page {VIEW_DEEP_PAGE:,}",
    "full_scan": "reference: full scan into Arrow, then filter",
}


def _faster(ratio: float) -> str:
    return f"{ratio:,.1f}x faster" if ratio >= 1 else f"{1 / ratio:,.1f}x slower"


def report(raw: dict[str, Any], seconds: float) -> BenchResult:
    t, cfg, ms = raw["table"], raw["config"], raw["measures"]

    rows = [
        [
            label,
            f"{raw['expected'][name]:,}",
            f"{raw['files_opened'][name]} of {t['files']}",
            f"{med(ms[name]):.3f}",
            "1.00x" if name == "full_scan" else _faster(med(ms["full_scan"]) / med(ms[name])),
            f"{statistics.median(m['peak_rss_mb'] - m['baseline_rss_mb'] for m in ms[name]):,.0f}",
        ]
        for name, label in _LABELS.items()
    ]
    scans = [m["seconds"] for m in ms["full_scan"]]
    return BenchResult(
        NAME,
        TITLE,
        f"A dead-letter table of {t['rows']:,} rows in {t['files']} files ({t['bytes'] / 1e6:,.0f} MB, {cfg['runs']} "
        f"commits, partitioned by `dataset`), the ingest's schema, written by delta-rs. Fresh process per "
        f"measurement, page cache warm, medians of {cfg['repeats']}; every count checked against the generator.",
        [Table(["read", "matched", "files opened", "seconds", "vs full scan", "RSS over baseline MB"], rows)],
        raw,
        seconds,
        figures=[
            f"Full scan {min(scans):.2f}–{max(scans):.2f} s. No file holds one stage only: the check saves the "
            "partition, columns and a pushed-down filter; a run's check opens its commit's file only."
        ],
    )


if __name__ == "__main__":
    child_main(globals())
