"""Where things live in the lake. One place, so paths never drift between stages.

<lake>/bronze/<dataset>/pages/<page stem>.<sha256[:16]>.atom   landed pages (immutable)
<lake>/bronze/<dataset>/manifests/<start>__<end>.json          one manifest per interval
<lake>/bronze/<dataset>/_incoming/                             temp files, same filesystem
<lake>/bronze/<dataset>/manifests/<month>.completeness.json    pages recovered from a month's archive
<lake>/completeness/<dataset>/<YYYY-MM>.json                   completeness report of a month
<lake>/silver/<table>                                          Delta tables
"""

from __future__ import annotations

import re
from datetime import date, datetime
from pathlib import Path

from placsp_provider.feed.timestamps import isoformat


def bronze_dir(lake: Path, dataset: str) -> Path:
    return lake / "bronze" / dataset


def pages_dir(lake: Path, dataset: str) -> Path:
    return bronze_dir(lake, dataset) / "pages"


def incoming_dir(lake: Path, dataset: str) -> Path:
    return bronze_dir(lake, dataset) / "_incoming"


def manifest_path(lake: Path, dataset: str, start: datetime, end: datetime) -> Path:
    stamp = f"{_compact(start)}__{_compact(end)}"
    return bronze_dir(lake, dataset) / "manifests" / f"{stamp}.json"


# A page's file name keeps the name it was published under, made safe for any filesystem: only
# these characters, and short enough (the content hash keeps it unique; the manifest keeps the URL).
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_STEM = 120


def completeness_manifest_path(lake: Path, dataset: str, month: date) -> Path:
    """The manifest of pages a completeness check recovered (read by the Silver ingest like any other)."""
    return bronze_dir(lake, dataset) / "manifests" / f"{month:%Y-%m}.completeness.json"


def completeness_report_path(lake: Path, dataset: str, month: date) -> Path:
    return lake / "completeness" / dataset / f"{month:%Y-%m}.json"


def page_file(lake: Path, dataset: str, name: str, sha256: str) -> Path:
    stem = name.rsplit("/", 1)[-1]
    stem = stem[: -len(".atom")] if stem.endswith(".atom") else stem
    stem = _UNSAFE.sub("_", stem).lstrip(".")[:_MAX_STEM] or "page"
    return pages_dir(lake, dataset) / f"{stem}.{sha256[:16]}.atom"


def silver_table(lake: Path, table: str) -> Path:
    return lake / "silver" / table


def _compact(value: datetime) -> str:
    return isoformat(value).replace(":", "").replace("-", "")
