"""One writer of a dataset at a time in each Silver table, in either engine (decision 0052).

Every commit a Silver write makes to a Silver table carries a Delta application transaction (a `txn`
action) whose appId names the dataset. Both engines fail a commit when a commit made since its
snapshot carries an appId it carries too (delta-rs: the conflict checker's `read_app_ids`; Delta
Spark: the appId its MERGE read through the idempotent-DML confs). So two writers of one dataset
always conflict, whichever files each touched, and the later one is redone from the new snapshot
(`retry.retry_on_conflict`); writers of different datasets never do.

What that buys: a MERGE may read only the files that can hold the rows it matches (`rules.since`,
computed from its own snapshot), as no commit it did not see can have added one elsewhere. Without
it, delta-rs's conflict check judges a concurrent commit by the MERGE's read predicate alone, and a
writer adding an older version of an entry to an older file would go unseen: a duplicate.

Imports no engine: each writer attaches the action its own way.
"""

from __future__ import annotations

from placsp_provider.lake import SILVER_TABLES

_APP_ID = "placsp-silver-{dataset}"


def app_id(dataset: str) -> str:
    """The appId every Silver commit of `dataset` carries."""
    return _APP_ID.format(dataset=dataset)


def carries_txn(table: str) -> bool:
    """The tables whose commits carry it: Silver's, whose MERGEs may bound their reads."""
    return table in SILVER_TABLES


def next_version(recorded: int | None) -> int:
    """The txn version of the next commit: one above the one the table records. Delta Spark skips a
    MERGE whose version is not above the recorded one (idempotent DML), so a skip means a concurrent
    writer of the dataset committed since the read: the write is redone, as on any conflict."""
    return (recorded or 0) + 1


class ConcurrentDatasetWriteError(Exception):
    """A commit was not made because another writer of the dataset committed since this one's snapshot
    (Delta Spark's skipped MERGE): a commit conflict, the write redone from the new snapshot."""
