"""Two writers of one dataset always conflict, whatever files each touched; writers of different
datasets never do (`ingest.writer_txn`, decision 0052).

That is what makes a MERGE's time bound safe (`rules.since`): the stale writer below bounds its read
after every row the other one wrote, so their files never meet, and only the dataset's txn stops it.
Real delta-rs, real Delta logs, no JVM (Spark's commits carrying the txn: tests/spark/test_commit_retry.py).
"""

from __future__ import annotations

import contextvars
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from placsp_provider.datasets import get_dataset
from placsp_provider.lake import table_path
from tests.pages import ID_PREFIX, day, page
from tests.spark.bronze import land

pytestmark = pytest.mark.unit

MINE, OTHER = "agregadas", "menores"
LATER = datetime(2022, 2, 1, tzinfo=UTC)  # after every version any writer here writes


def _ingest(lake: Path, dataset: str, run_id: str, pages: dict[str, bytes], interval: str) -> None:
    from placsp_provider.ingest.request import IngestRequest
    from placsp_provider.ingest.run import ingest

    manifest = land(lake, dataset, pages, interval=interval)
    ingest(IngestRequest(get_dataset(dataset), lake, run_id, manifests=(manifest,)), "delta-rs")


def _pages(dataset: str, entries: list[tuple[int, str]]) -> bytes:
    body = page(entries)
    path = get_dataset(dataset).entry_id_path
    return body.replace(ID_PREFIX.encode(), ID_PREFIX.replace(get_dataset(MINE).entry_id_path, path).encode())


@pytest.mark.parametrize(
    ("meanwhile", "txn", "refused"),
    [
        (MINE, True, True),  # the rule
        (OTHER, True, False),  # datasets stay independent
        (MINE, False, False),  # the control: without the txn the stale commit goes through unseen
    ],
)
def test_a_writer_is_refused_when_a_writer_of_its_dataset_committed_since_its_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, meanwhile: str, txn: bool, refused: bool
) -> None:
    from deltalake.exceptions import CommitFailedError

    from placsp_provider.delta_rs import silver_write
    from placsp_provider.ingest import writer_txn
    from placsp_provider.ingest.rules import BUSINESS_KEYS

    if not txn:
        monkeypatch.setattr(writer_txn, "carries_txn", lambda table: False)
    lake = tmp_path / "lake"
    for dataset in (MINE, OTHER):
        _ingest(lake, dataset, f"first-{dataset}", {f"{dataset}-a.atom": _pages(dataset, [(1, day(5))])}, "2022-01-05")

    with silver_write._one_write():
        stale = silver_write._open(lake, "entries")  # the snapshot a writer of MINE decides from
        version = stale.version()
        row = stale.to_pyarrow_table(filters=[("dataset", "=", MINE)]).slice(0, 1)
        row = row.set_column(row.schema.get_field_index("updated"), "updated", pa.array([LATER], row["updated"].type))
        # Another writer (its own table objects: a fresh context) commits a new entry, touching no file
        # the stale one's bound reads.
        pages = {"b.atom": _pages(meanwhile, [(7, day(6))])}
        contextvars.Context().run(_ingest, lake, meanwhile, "meanwhile", pages, "2022-01-06")
        merge = silver_write._merge(lake, "entries", row, BUSINESS_KEYS["entries"], MINE, LATER)
        merge = merge.when_matched_update_all().when_not_matched_insert_all()
        if refused:
            with pytest.raises(CommitFailedError):
                merge.execute()
        else:
            merge.execute()

    from deltalake import DeltaTable

    table = DeltaTable(str(table_path(lake, "entries")))
    assert table.version() == version + 1 + (not refused)  # the other writer's commit, and the stale one's
    assert (table.transaction_version(writer_txn.app_id(MINE)) is not None) is txn
