"""The lake's layout: its root and every path in it, defined once. Imports nothing heavy.

<lake>/bronze/<dataset>/pages/<page stem>.<sha256[:16]>.atom   landed pages (immutable)
<lake>/bronze/<dataset>/manifests/<start>__<end>.json          one manifest per interval
<lake>/bronze/<dataset>/manifests/<YYYY-MM>.completeness.json  pages recovered from a month's archive
<lake>/bronze/<dataset>/_incoming/                             temp files, same filesystem (S3: local scratch)
<lake>/silver/<table>                                          Silver Delta tables
<lake>/dead_letters, <lake>/reconciliation                     the other Delta tables
<lake>/runs/<dataset>/<run id>.json, replay-<run id>.json      run summaries (Silver ingest, replay)
<lake>/runs/_maintenance/<run id>.json                         what a table maintenance run did
<lake>/_staging/<dataset>/<run folder>/<table>/*.parquet|arrow   rows of a running Silver ingest (temp; S3: local)
<lake>/completeness/<dataset>/<YYYY-MM>.json                   completeness report of a month
<lake>/quality_results                                         Delta table of data-contract check results
<lake>/quality_models/volume/<dataset>.json                    the stored Prophet volume model
<lake>/quality_models/volume/<dataset>.versions.{parquet,json}  the volume series' entry versions, pages read

The Spark jobs, operators, sensor, trigger, lineage names, CLI and benchmarks all take paths from
here, so they never drift. The lake is a local path visible at the same place to the Airflow worker,
the Spark driver and its executors, or an S3 prefix (`lake_storage`; docs/architecture.md).
"""

from __future__ import annotations

import os
import re
from datetime import date, datetime
from pathlib import Path

from placsp_provider.feed.timestamps import isoformat
from placsp_provider.lake_storage import LakePath, is_object_store_uri, object_store_lake, scratch_dir

CHILD_TABLES = ("lots", "documents", "results")  # rows of one version of an entry, replaced with it
SILVER_TABLES = ("entries", *CHILD_TABLES, "tombstones")
DEAD_LETTER_TABLE = "dead_letters"
RECONCILIATION_TABLE = "reconciliation"
LAKE_TABLES = (*SILVER_TABLES, DEAD_LETTER_TABLE, RECONCILIATION_TABLE)  # what the Silver ingest writes
QUALITY_RESULTS_TABLE = "quality_results"  # what the data-contract checks write
# The time of the version a Silver row belongs to. A daily batch replaces versions of about its own
# time: maintenance orders the files by it (decision 0051), and a MERGE bounds its read by it (0052).
VERSION_TIME = {table: "entry_updated" for table in SILVER_TABLES} | {"entries": "updated", "tombstones": "deleted_at"}


def resolve_lake(explicit: str | LakePath | None = None) -> LakePath:
    """The lake root: an explicit value (an operator's `lake=`, a CLI flag), else `$PLACSP_LAKE`,
    else `placsp-lake` under `$AIRFLOW_HOME` (or the working directory). A local one is absolute and
    resolved (the lineage names and Spark's paths are the resolved ones); `s3://bucket/prefix` is an
    object-store lake (`lake_storage`)."""
    if explicit is not None and not isinstance(explicit, (str, Path)):
        return explicit  # already a lake path (an S3 one)
    value = str(explicit).strip() if explicit is not None else ""
    if value in ("", "None"):
        value = os.environ.get("PLACSP_LAKE", "")
    if value:
        if is_object_store_uri(value):
            return object_store_lake(value)
        return Path(value).expanduser().resolve()
    home = os.environ.get("AIRFLOW_HOME")
    return (Path(home) if home else Path.cwd()).resolve() / "placsp-lake"


# -- Bronze -----------------------------------------------------------------------------------------
def bronze_dir(lake: LakePath, dataset: str) -> LakePath:
    return lake / "bronze" / dataset


def pages_dir(lake: LakePath, dataset: str) -> LakePath:
    return bronze_dir(lake, dataset) / "pages"


def manifests_dir(lake: LakePath, dataset: str) -> LakePath:
    return bronze_dir(lake, dataset) / "manifests"


def incoming_dir(lake: LakePath, dataset: str) -> Path:
    """Downloads in progress: local always (`lake_storage.scratch_dir`); in the lake when it is local."""
    return scratch_dir(lake, "bronze", dataset, "_incoming")


def manifest_files(lake: LakePath, dataset: str) -> list[LakePath]:
    """Every manifest of a dataset, in name order."""
    folder = manifests_dir(lake, dataset)
    return sorted(folder.glob("*.json"), key=str) if folder.is_dir() else []


def manifest_path(lake: LakePath, dataset: str, start: datetime, end: datetime) -> LakePath:
    return manifests_dir(lake, dataset) / f"{_compact(start)}__{_compact(end)}.json"


def completeness_manifest_path(lake: LakePath, dataset: str, month: date) -> LakePath:
    return manifests_dir(lake, dataset) / f"{month:%Y-%m}.completeness.json"


# A page's file name keeps the name it was published under, made safe for any filesystem: only
# these characters, and short enough (the content hash keeps it unique; the manifest keeps the URL).
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_STEM = 120


def page_file(lake: LakePath, dataset: str, name: str, sha256: str) -> LakePath:
    """Where a page lands: `name` is the last segment of its URL's path or an archive member's name.

    A query string never names a page: whatever follows a `?` is left out, so a link's `?token=...`
    cannot reach a file name while the manifest shows that URL redacted (and a query holding `/`
    cannot pick the segment either). The content hash keeps names unique; the manifest keeps the URL.
    """
    stem = name.split("?", 1)[0].rsplit("/", 1)[-1]
    stem = stem[: -len(".atom")] if stem.endswith(".atom") else stem
    stem = _UNSAFE.sub("_", stem).lstrip(".")[:_MAX_STEM] or "page"
    return pages_dir(lake, dataset) / f"{stem}.{sha256[:16]}.atom"


def relative_path(lake: LakePath, path: LakePath) -> str:
    """`path` as the manifests name it: relative to the lake root (`bronze/<dataset>/pages/...`)."""
    root, full = str(lake).rstrip("/") + "/", str(path)
    if not full.startswith(root):
        raise ValueError(f"{full} is not in the lake {lake}")
    return full[len(root) :]


# -- tables -----------------------------------------------------------------------------------------
def table_path(lake: LakePath, table: str) -> LakePath:
    if table not in LAKE_TABLES:
        raise ValueError(f"unknown lake table {table!r}; the tables are {', '.join(LAKE_TABLES)}")
    if table in (DEAD_LETTER_TABLE, RECONCILIATION_TABLE):
        return lake / table
    return lake / "silver" / table


# -- summaries and reports --------------------------------------------------------------------------
def safe_run_id(run_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.+" else "_" for c in run_id)


def staging_dir(lake: LakePath, dataset: str) -> Path:
    """Rows of a running ingest: in the lake when it is local (Spark's executors see it there); local
    scratch for an S3 lake, whose ingest parses in this process (the delta-rs engine)."""
    return scratch_dir(lake, "_staging", dataset)


def run_summary_path(lake: LakePath, dataset: str, run_id: str) -> LakePath:
    return lake / "runs" / dataset / f"{safe_run_id(run_id)}.json"


def replay_summary_path(lake: LakePath, dataset: str, run_id: str) -> LakePath:
    return lake / "runs" / dataset / f"replay-{safe_run_id(run_id)}.json"


def maintenance_summary_path(lake: LakePath, run_id: str) -> LakePath:
    return lake / "runs" / "_maintenance" / f"{safe_run_id(run_id)}.json"


def completeness_report_path(lake: LakePath, dataset: str, month: date) -> LakePath:
    return completeness_dir(lake, dataset) / f"{month:%Y-%m}.json"


def completeness_dir(lake: LakePath, dataset: str) -> LakePath:
    return lake / "completeness" / dataset


def completeness_reports(lake: LakePath, dataset: str) -> list[LakePath]:
    """Every completeness report of a dataset, oldest month first."""
    folder = completeness_dir(lake, dataset)
    return sorted(folder.glob("*.json"), key=str) if folder.is_dir() else []


def quality_results_path(lake: LakePath) -> LakePath:
    return lake / QUALITY_RESULTS_TABLE


def volume_model_path(lake: LakePath, dataset: str) -> LakePath:
    return lake / "quality_models" / "volume" / f"{dataset}.json"


def volume_versions_paths(lake: LakePath, dataset: str) -> tuple[LakePath, LakePath]:
    """The volume series' cache (`quality.volume_series`): the entry versions seen, and what was read."""
    folder = lake / "quality_models" / "volume"
    return folder / f"{dataset}.versions.parquet", folder / f"{dataset}.versions.json"


def _compact(value: datetime) -> str:
    return isoformat(value).replace(":", "").replace("-", "")
