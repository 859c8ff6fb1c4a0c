"""A daily delta-rs ingest's MERGEs read and rewrite only the files of its own dataset (issue 36).

The one file skipping the writers rely on today is the `dataset` partition, named as a literal in every
MERGE condition (`ingest.rules.on`): a daily page of one dataset must not read or rewrite another
dataset's files, however large that dataset grows. Counted from the Delta log (each commit's `add` and
`remove` actions and delta-rs's own `operationMetrics`), never from the run summary. Real entries
(tests/pages.py), real delta-rs, no JVM.

Within its dataset, each MERGE's read is bounded by the earliest version time it can match
(`rules.since`, decision 0052): its recorded read predicate says so, at that very time.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from placsp_provider.datasets import get_dataset
from placsp_provider.lake import SILVER_TABLES, VERSION_TIME, table_path
from tests.pages import ID_PREFIX, day, page
from tests.spark.bronze import land

pytestmark = pytest.mark.unit

MINE, OTHER = "agregadas", "menores"


def _ingest(lake: Path, dataset: str, run_id: str, manifest: Path) -> None:
    from placsp_provider.ingest.request import IngestRequest
    from placsp_provider.ingest.run import ingest

    ingest(IngestRequest(get_dataset(dataset), lake, run_id, manifests=(manifest,)), "delta-rs")


def _log(path: Path) -> list[dict]:
    """Every commit of a Delta table, in order: its actions as read from `_delta_log/*.json`."""
    commits = sorted((path / "_delta_log").glob("*.json"))
    return [[json.loads(line) for line in c.read_text().splitlines() if line.strip()] for c in commits]


def _live_files(commits: list[list[dict]]) -> dict[str, str]:
    """The table's files after these commits: path -> its `dataset` partition value."""
    live: dict[str, str] = {}
    for actions in commits:
        for action in actions:
            if "add" in action:
                live[action["add"]["path"]] = action["add"]["partitionValues"]["dataset"]
            elif "remove" in action:
                live.pop(action["remove"]["path"], None)
    return live


def test_a_daily_merge_touches_only_its_own_dataset(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    # Both datasets hold the same entry ids, so only the partition keeps their rows apart.
    first = page([(n, day(5, 10)) for n in range(1, 7)])
    for dataset in (MINE, OTHER):
        body = first.replace(
            ID_PREFIX.encode(),
            ID_PREFIX.replace(get_dataset(MINE).entry_id_path, get_dataset(dataset).entry_id_path).encode(),
        )
        manifest = land(lake, dataset, {f"{dataset}-a.atom": body}, interval="2022-01-05")
        _ingest(lake, dataset, f"first-{dataset}", manifest)
    # The daily page of one dataset: two newer versions (the old rows are rewritten) and a new entry.
    daily = land(lake, MINE, {"daily.atom": page([(1, day(6)), (2, day(6)), (9, day(6))])}, interval="2022-01-06")
    before = {t: _log(table_path(lake, t)) for t in SILVER_TABLES}
    _ingest(lake, MINE, "daily", daily)

    merges, checked, bounds = 0, [], {}
    for table in SILVER_TABLES:
        commits = _log(table_path(lake, table))
        new = commits[len(before[table]) :]
        live_before = _live_files(before[table])
        other_files = {p for p, d in live_before.items() if d == OTHER}
        if not other_files:  # a table these pages give no rows (lots, documents, tombstones)
            continue
        checked.append(table)
        for actions in new:
            removed = [a["remove"] for a in actions if "remove" in a]
            added = [a["add"] for a in actions if "add" in a]
            # Nothing of the other dataset rewritten or added to.
            assert all(live_before.get(r["path"]) == MINE for r in removed), (table, removed)
            assert all(a["partitionValues"]["dataset"] == MINE for a in added), (table, added)
            info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
            if info.get("operation") != "MERGE":
                continue
            merges += 1
            metrics = info["operationMetrics"]
            mine = sum(d == MINE for d in live_before.values())
            # delta-rs's scan: the files it read are its own dataset's; every other one it skipped.
            assert metrics["num_target_files_scanned"] <= mine, (table, metrics, mine)
            assert metrics["num_target_files_skipped_during_scan"] >= len(other_files), (table, metrics)
            predicate = info["operationParameters"]["predicate"]
            assert f"dataset = '{MINE}'" in predicate, (table, info)
            bound = re.search(rf"\b{VERSION_TIME[table]} >= arrow_cast\('([^']+)'", predicate)
            bounds.setdefault(table, []).append(bound and bound.group(1))
        assert other_files <= set(_live_files(commits)), f"{table}: the other dataset's files are untouched"
    assert {"entries", "results"} <= set(checked)
    assert merges >= 3  # entries, and a child table's delete and insert
    held, daily_version = "2022-01-05T10:00:00.000000", "2022-01-06T12:00:00.000000"
    # entries: Silver's versions of the batch's entries; results: the rows of those older versions go,
    # then the new versions' rows go in (none older can match: they went just before).
    assert bounds == {"entries": [held], "results": [held, daily_version]}, bounds
