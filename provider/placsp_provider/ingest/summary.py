"""The run summary of a Silver ingest: what every reader (operators, XCom, lineage, the gate, the
CLI, quality, benchmarks) reads, typed once. Written as JSON next to the tables
(`<lake>/runs/<dataset>/<run id>.json`) before the conservation check can fail the run.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from placsp_provider.lake import run_summary_path
from placsp_provider.lake_storage import LakePath

if TYPE_CHECKING:
    from placsp_provider.ingest.tally import FileTally


class FileCounts(TypedDict):
    ingested: int
    already_ingested: int
    reconciled: int
    quarantined: int


class RecordCounts(TypedDict):
    entries: int
    tombstones: int


class DeadLetterCounts(TypedDict):
    total: int
    records: int  # record-level dead letters of the files that add up
    by_stage: dict[str, int]
    by_error_type: dict[str, int]


class QuarantinedFile(TypedDict):
    file: str
    reason: str


class Conservation(TypedDict):
    read: int
    silver: int
    dead_letter_records: int
    in_quarantined_files: int
    balanced: bool  # read = silver + dead_letter_records + in_quarantined_files


class RunSummary(TypedDict):
    dataset: str
    run_id: str
    files: FileCounts
    read: RecordCounts  # the manifests' counts of the files ingested
    silver: RecordCounts  # valid records of the files that add up
    dead_letters: DeadLetterCounts
    quarantined_files: list[QuarantinedFile]
    conservation: Conservation
    merge: dict[str, Any]  # what each table's writes changed (inserted, updated, deleted)
    engine: NotRequired[str]  # which engine parsed and wrote (ingest.engines)
    summary_file: NotRequired[str]  # where the summary was written


def empty_summary(dataset: str, run_id: str, files: int, skipped: int) -> RunSummary:
    return {
        "dataset": dataset,
        "run_id": run_id,
        "files": {"ingested": files, "already_ingested": skipped, "reconciled": 0, "quarantined": 0},
        "read": {"entries": 0, "tombstones": 0},
        "silver": {"entries": 0, "tombstones": 0},
        "dead_letters": {"total": 0, "records": 0, "by_stage": {}, "by_error_type": {}},
        "quarantined_files": [],
        "conservation": {"read": 0, "silver": 0, "dead_letter_records": 0, "in_quarantined_files": 0, "balanced": True},
        "merge": {},
    }


def fill_summary(
    summary: RunSummary,
    tallies: Mapping[str, FileTally],
    quarantined: Mapping[str, str],
    dead_letter_counts: Mapping[tuple[str, str], int],
    merge_metrics: dict[str, Any],
) -> None:
    read_e = sum(t.page.entries for t in tallies.values())
    read_t = sum(t.page.tombstones for t in tallies.values())
    ok = [t for f, t in tallies.items() if f not in quarantined]
    silver_e = sum(t.valid_entries for t in ok)
    silver_t = sum(t.valid_tombstones for t in ok)
    dead_records = sum(t.dead_entries + t.dead_tombstones for t in ok)
    in_quarantine = sum(t.expected for f, t in tallies.items() if f in quarantined)
    by_stage: Counter[str] = Counter()
    by_type: Counter[str] = Counter()
    for (stage, error_type), n in dead_letter_counts.items():
        by_stage[stage] += n
        by_type[error_type] += n
    summary["files"]["reconciled"], summary["files"]["quarantined"] = len(ok), len(quarantined)
    summary["read"] = {"entries": read_e, "tombstones": read_t}
    summary["silver"] = {"entries": silver_e, "tombstones": silver_t}
    summary["dead_letters"] = {
        "total": sum(by_stage.values()),
        "records": dead_records,
        "by_stage": dict(by_stage),
        "by_error_type": dict(by_type.most_common()),
    }
    summary["quarantined_files"] = [{"file": f, "reason": r} for f, r in sorted(quarantined.items())]
    summary["conservation"] = {
        "read": read_e + read_t,
        "silver": silver_e + silver_t,
        "dead_letter_records": dead_records,
        "in_quarantined_files": in_quarantine,
        "balanced": read_e + read_t == silver_e + silver_t + dead_records + in_quarantine,
    }
    summary["merge"] = merge_metrics


def finish(summary: RunSummary, lake: LakePath) -> RunSummary:
    path = run_summary_path(lake, summary["dataset"], summary["run_id"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=2, sort_keys=True, default=str))
    summary["summary_file"] = str(path)
    if not summary["conservation"]["balanced"]:
        raise RuntimeError(f"conservation check failed for {summary['dataset']}: {summary['conservation']}")
    return summary
