"""The lake's layout: its root and every path in it, defined once. Imports nothing heavy.

<lake>/bronze/<dataset>/pages/<page stem>.<sha256[:16]>.atom   landed pages (immutable)
<lake>/bronze/<dataset>/manifests/<start>__<end>.json          one manifest per interval
<lake>/bronze/<dataset>/manifests/<YYYY-MM>.completeness.json  pages recovered from a month's archive
<lake>/bronze/<dataset>/_incoming/                             temp files, same filesystem
<lake>/silver/<table>                                          Silver Delta tables
<lake>/dead_letters, <lake>/reconciliation                     the other Delta tables
<lake>/runs/<dataset>/<run id>.json, replay-<run id>.json      run summaries (Silver ingest, replay)
<lake>/runs/_maintenance/<run id>.json                         what a table maintenance run did
<lake>/_staging/<dataset>/<run folder>/<table>/*.parquet         rows of a running Silver ingest (temp)
<lake>/completeness/<dataset>/<YYYY-MM>.json                   completeness report of a month
<lake>/quality_results                                         Delta table of data-contract check results
<lake>/quality_models/volume/<dataset>.json                    the stored Prophet volume model

The Spark jobs, operators, sensor, trigger, lineage names, CLI and benchmarks all take paths from
here, so they never drift. The lake must be a POSIX path visible at the same place to the Airflow
worker, the Spark driver and its executors (docs/architecture.md).
"""

from __future__ import annotations

import os
import re
from datetime import date, datetime
from pathlib import Path

from placsp_provider.feed.timestamps import isoformat

CHILD_TABLES = ("lots", "documents", "results")  # rows of one version of an entry, replaced with it
SILVER_TABLES = ("entries", *CHILD_TABLES, "tombstones")
DEAD_LETTER_TABLE = "dead_letters"
RECONCILIATION_TABLE = "reconciliation"
LAKE_TABLES = (*SILVER_TABLES, DEAD_LETTER_TABLE, RECONCILIATION_TABLE)  # what the Silver ingest writes
QUALITY_RESULTS_TABLE = "quality_results"  # what the data-contract checks write


def resolve_lake(explicit: str | Path | None = None) -> Path:
    """The lake root: an explicit value (an operator's `lake=`, a CLI flag), else `$PLACSP_LAKE`,
    else `placsp-lake` under `$AIRFLOW_HOME` (or the working directory). Always absolute and resolved
    (the lineage names and Spark's paths are the resolved ones)."""
    if explicit is not None and str(explicit).strip() not in ("", "None"):
        return Path(str(explicit)).expanduser().resolve()
    value = os.environ.get("PLACSP_LAKE")
    if value:
        return Path(value).expanduser().resolve()
    home = os.environ.get("AIRFLOW_HOME")
    return (Path(home) if home else Path.cwd()).resolve() / "placsp-lake"


# -- Bronze -----------------------------------------------------------------------------------------
def bronze_dir(lake: Path, dataset: str) -> Path:
    return lake / "bronze" / dataset


def pages_dir(lake: Path, dataset: str) -> Path:
    return bronze_dir(lake, dataset) / "pages"


def manifests_dir(lake: Path, dataset: str) -> Path:
    return bronze_dir(lake, dataset) / "manifests"


def incoming_dir(lake: Path, dataset: str) -> Path:
    return bronze_dir(lake, dataset) / "_incoming"


def manifest_path(lake: Path, dataset: str, start: datetime, end: datetime) -> Path:
    return manifests_dir(lake, dataset) / f"{_compact(start)}__{_compact(end)}.json"


def completeness_manifest_path(lake: Path, dataset: str, month: date) -> Path:
    return manifests_dir(lake, dataset) / f"{month:%Y-%m}.completeness.json"


# A page's file name keeps the name it was published under, made safe for any filesystem: only
# these characters, and short enough (the content hash keeps it unique; the manifest keeps the URL).
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_STEM = 120


def page_file(lake: Path, dataset: str, name: str, sha256: str) -> Path:
    """Where a page lands: `name` is the last segment of its URL's path or an archive member's name.

    A query string never names a page: whatever follows a `?` is left out, so a link's `?token=...`
    cannot reach a file name while the manifest shows that URL redacted (and a query holding `/`
    cannot pick the segment either). The content hash keeps names unique; the manifest keeps the URL.
    """
    stem = name.split("?", 1)[0].rsplit("/", 1)[-1]
    stem = stem[: -len(".atom")] if stem.endswith(".atom") else stem
    stem = _UNSAFE.sub("_", stem).lstrip(".")[:_MAX_STEM] or "page"
    return pages_dir(lake, dataset) / f"{stem}.{sha256[:16]}.atom"


# -- tables -----------------------------------------------------------------------------------------
def table_path(lake: Path, table: str) -> Path:
    if table not in LAKE_TABLES:
        raise ValueError(f"unknown lake table {table!r}; the tables are {', '.join(LAKE_TABLES)}")
    if table in (DEAD_LETTER_TABLE, RECONCILIATION_TABLE):
        return lake / table
    return lake / "silver" / table


# -- summaries and reports --------------------------------------------------------------------------
def safe_run_id(run_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.+" else "_" for c in run_id)


def staging_dir(lake: Path, dataset: str) -> Path:
    return lake / "_staging" / dataset


def run_summary_path(lake: Path, dataset: str, run_id: str) -> Path:
    return lake / "runs" / dataset / f"{safe_run_id(run_id)}.json"


def replay_summary_path(lake: Path, dataset: str, run_id: str) -> Path:
    return lake / "runs" / dataset / f"replay-{safe_run_id(run_id)}.json"


def maintenance_summary_path(lake: Path, run_id: str) -> Path:
    return lake / "runs" / "_maintenance" / f"{safe_run_id(run_id)}.json"


def completeness_report_path(lake: Path, dataset: str, month: date) -> Path:
    return lake / "completeness" / dataset / f"{month:%Y-%m}.json"


def quality_results_path(lake: Path) -> Path:
    return lake / QUALITY_RESULTS_TABLE


def volume_model_path(lake: Path, dataset: str) -> Path:
    return lake / "quality_models" / "volume" / f"{dataset}.json"


def _compact(value: datetime) -> str:
    return isoformat(value).replace(":", "").replace("-", "")
