"""Each Bronze file's tally against its extraction manifest, and what the tallies decide before
anything is written, whichever engine parsed or writes: quarantined files, the dead letters and
reconciliation rows to write, the sizes of the write.

Conservation, per Bronze file: the manifest's entry and tombstone counts (taken at extraction by a
streaming parser of its own) must equal the valid rows plus the record-level dead letters the parse
produced for that file. A file that does not add up is quarantined whole: one dead letter with stage
`reconciliation` pointing at the raw file, and none of its rows reach Silver.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from placsp_provider.bronze.manifest import LandedPage
from placsp_provider.dead_letters.lifecycle import QUARANTINED, STAGE_RECONCILIATION
from placsp_provider.lake import SILVER_TABLES
from placsp_provider.lake_storage import LakePath
from placsp_provider.parser.version import PARSER_VERSION

log = logging.getLogger(__name__)

# Page-level parse failures that stand for the whole file (nothing of it can be trusted).
WHOLE_FILE_PARSE_ERRORS = frozenset({"dtd_refused", "not_a_feed"})
_COUNT_MISMATCH = "count_mismatch"
SOURCE_COLUMN = {"dead_letters": "source_file"}  # the Silver tables' is `_source_file`


def dead_letter_id(dataset: str, stage: str, source_file: str, record_offset: int, raw_record: str) -> str:
    """Deterministic id: a rerun of the same input yields the same id, so MERGE inserts nothing twice.

    The record's offset is part of it: two byte-identical broken records in one page are two
    dead letters, not one.
    """
    digest = hashlib.sha256()
    for part in (dataset, stage, source_file, str(record_offset), raw_record):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\x1f")
    return digest.hexdigest()


@dataclass
class FileTally:
    page: LandedPage
    valid_entries: int = 0
    valid_tombstones: int = 0
    dead_entries: int = 0
    dead_tombstones: int = 0
    page_errors: list[str] = field(default_factory=list)
    rows: Counter[str] = field(default_factory=Counter)  # rows staged of the file by table (Silver tables)
    repeated_versions: int = 0  # valid entries repeating an earlier one's (entry_id, updated) in the file
    dead_letters: Counter[tuple[str, str]] = field(default_factory=Counter)  # (stage, error_type) -> n

    @property
    def expected(self) -> int:
        return self.page.entries + self.page.tombstones

    def quarantine_reason(self) -> str | None:
        whole = [e for e in self.page_errors if e in WHOLE_FILE_PARSE_ERRORS]
        if whole:
            return f"page-level parse failure ({', '.join(whole)})"
        entries, tombstones = self.valid_entries + self.dead_entries, self.valid_tombstones + self.dead_tombstones
        if (entries, tombstones) != (self.page.entries, self.page.tombstones):
            return (
                f"the extraction manifest counted {self.page.entries} entries and {self.page.tombstones} "
                f"tombstones, the parser accounted for {entries} entries "
                f"({self.valid_entries} valid + {self.dead_entries} dead letters) and {tombstones} tombstones"
            )
        return None


@dataclass(frozen=True)
class BatchPlan:
    """What a batch's tallies decide before anything is read back or written, whichever engine
    writes: the quarantined files and what the write will hold, counted without reading a row."""

    quarantined: dict[str, str]  # file -> reason
    staged: dict[str, int]  # rows staged by table (dead letters too), quarantined files included
    sizes: dict[str, int]  # rows to write by table, dead letters included
    dead_letter_counts: Counter[tuple[str, str]]  # the dead letters to write by (stage, error_type)
    repeated_versions: int  # in the files that add up: see `silver_merge.merge_silver`


def plan_batch(tallies: Mapping[str, FileTally]) -> BatchPlan:
    quarantined = {f: r for f, t in tallies.items() if (r := t.quarantine_reason())}
    staged = {t: sum(tally.rows[t] for tally in tallies.values()) for t in SILVER_TABLES}
    staged["dead_letters"] = sum(sum(tally.dead_letters.values()) for tally in tallies.values())
    sizes = {t: sum(tally.rows[t] for f, tally in tallies.items() if f not in quarantined) for t in SILVER_TABLES}
    # The dead letters written: the kept files', the page-level ones of files quarantined by a
    # page-level parse failure, and one reconciliation dead letter per other quarantined file.
    dead_counts: Counter[tuple[str, str]] = Counter()
    for f, tally in tallies.items():
        for (stage, error_type), n in tally.dead_letters.items():
            if f not in quarantined or error_type in WHOLE_FILE_PARSE_ERRORS:
                dead_counts[stage, error_type] += n
    dead_counts[STAGE_RECONCILIATION, _COUNT_MISMATCH] += len(_reconciliation_letter_files(quarantined))
    sizes["dead_letters"] = sum(dead_counts.values())
    repeated = sum(t.repeated_versions for f, t in tallies.items() if f not in quarantined)
    return BatchPlan(quarantined, staged, sizes, +dead_counts, repeated)


def tally_files(by_file: list[Any], pages: list[LandedPage], lake: LakePath) -> dict[str, FileTally]:
    """Each file's tally (`staging.TALLY` rows, as the workers counted the rows they staged)."""
    tallies = {p.file: FileTally(p) for p in pages}
    for row in by_file:
        source = row["source_file"]
        tally = tallies.get(source)
        if tally is None:  # rows for a file we did not ask for: a bug, never silent
            raise RuntimeError(f"the parse returned rows for {source!r}, which is not in the manifests")
        kind, n = row["kind"], row["count"]
        if kind in SILVER_TABLES:
            tally.rows[kind] += n
        if kind == "file_stats":
            tally.repeated_versions += row["repeated_versions"]
        elif kind == "entries":
            tally.valid_entries += n
        elif kind == "tombstones":
            tally.valid_tombstones += n
        elif kind == "dead_letters":
            tally.dead_letters[row["stage"], row["error_type"]] += n
            if row["record_kind"] == "entry":
                tally.dead_entries += n
            elif row["record_kind"] == "tombstone":
                tally.dead_tombstones += n
            else:
                tally.page_errors.extend([row["error_type"]] * n)
    seen = {r["source_file"] for r in by_file}  # a set: backfills ingest thousands of files
    for f in tallies:
        if f not in seen:  # nothing at all was read of it: quarantined by the count check
            log.warning("the parse produced nothing for %s", f)
    return tallies


def _reconciliation_letter_files(quarantined: Mapping[str, str | None]) -> dict[str, str | None]:
    """Quarantined files that get a reconciliation dead letter: those not already stood for by their
    page-level parse dead letter."""
    return {f: r for f, r in quarantined.items() if not (r and r.startswith("page-level"))}


def reconciliation_dead_letter_rows(
    dataset: str, tallies: Mapping[str, FileTally], quarantined: Mapping[str, str | None]
) -> list[dict[str, Any]]:
    """The dead letters that stand for quarantined files (`dead_letter_arrow_schema` columns): one
    per file not already stood for by its page-level parse dead letter."""
    rows = []
    for file, reason in _reconciliation_letter_files(quarantined).items():
        message = (
            f"dataset {dataset}: Bronze file {file}: stage reconciliation: {reason}; the whole file is "
            f"quarantined and none of its rows were written to Silver. Inspect the raw file, fix the "
            f"cause, then replay this dead letter (docs/runbook.md)."
        )
        rows.append(
            {
                "dataset": dataset,
                "source_file": file,
                "stage": STAGE_RECONCILIATION,
                "error_type": _COUNT_MISMATCH,
                "error_message": message,
                "raw_record": "",
                "namespace_context": "",
                "record_kind": "file",
                "entry_id": None,
                "record_offset": 0,
                "raw_bytes": b"",  # a whole file: the replay reprocesses the page from Bronze
                "parser_version": PARSER_VERSION,  # the parser's counts did not add up
                "dead_letter_id": dead_letter_id(dataset, STAGE_RECONCILIATION, file, 0, tallies[file].page.sha256),
            }
        )
    return rows


def reconciliation_rows(
    dataset: str, run_id: str, tallies: Mapping[str, FileTally], quarantined: Mapping[str, str], started: datetime
) -> list[dict[str, Any]]:
    """One row per ingested file for the reconciliation table (`tables.RECONCILIATION` columns)."""
    return [
        {
            "dataset": dataset,
            "source_file": f,
            "sha256": t.page.sha256,
            "run_id": run_id,
            "manifest_entries": t.page.entries,
            "manifest_tombstones": t.page.tombstones,
            "valid_entries": t.valid_entries,
            "valid_tombstones": t.valid_tombstones,
            "dead_letter_records": t.dead_entries + t.dead_tombstones,
            "status": "quarantined" if f in quarantined else "reconciled",
            "reason": quarantined.get(f),
            "ingested_at": started,
        }
        for f, t in tallies.items()
    ]


def new_dead_letter_lifecycle(run_id: str, started: datetime) -> dict[str, Any]:
    """The lifecycle columns of a dead letter as an ingest inserts it (docs/dead-letters.md)."""
    return {
        "run_id": run_id,
        "processing_timestamp": started,
        "status": QUARANTINED,
        "attempts": 0,
        "last_attempt_at": None,
        "replayed_at": None,
        "replay_run_id": None,
    }
