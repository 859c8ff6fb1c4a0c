"""A first load: a batch into a dataset that has no row in any Silver table yet, written by appends
instead of MERGEs, a page's staged rows at a time (decision 0053).

With nothing of the dataset in Silver, every MERGE of `silver_write` would insert its source whole and
match nothing, so the rows it would leave are known before writing, under the same `ingest.rules`:
- entries: each entry's greatest version in the batch (`VERSION_ORDER`), with the newest of its
  tombstones applied when that deletes it (`TOMBSTONE_APPLIES` against no earlier deletion);
- lots, documents, results: the rows of those very versions, once per business key;
- tombstones: the greatest per key (`TOMBSTONE_ORDER`).

The winners are picked from the staged key columns alone; each table's rows then stream from the
staged files into one append, so the writer holds the batch's keys and a page's rows, not the batch's
rows (a year of pages in one run: no MERGE, and no write limit on the batch). Each append carries the dataset's txn
(`ingest.writer_txn`), against the snapshot that showed the dataset empty: a writer of the dataset that
committed since fails it, and the retried write finds the dataset loaded and MERGEs. A run that died
between two appends left the dataset not empty: its rerun MERGEs too, and completes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from placsp_provider.delta_rs.silver_write import _conform, _greatest, _open, _stamped, _tuples, nothing_changed
from placsp_provider.ingest import rules, writer_txn
from placsp_provider.ingest.batch import StagedBatch
from placsp_provider.ingest.rules import BUSINESS_KEYS
from placsp_provider.ingest.staging import read_staged_file, staged_files
from placsp_provider.ingest.tables import UTC_TS, holds_dataset, staged_schema, table_schema
from placsp_provider.lake import CHILD_TABLES, SILVER_TABLES
from placsp_provider.lake_storage import LakePath, side_by_side, uri

Version = tuple[str, datetime, str, str]  # rules.WINNER_COLUMNS / CHILD_VERSION_COLUMNS


def is_first_load(lake: LakePath, dataset: str) -> bool:
    """No Silver table holds a file of the dataset's partition, as of the table objects the write uses."""
    return not any(holds_dataset(_open(lake, t), dataset) for t in SILVER_TABLES)


def append_silver(batch: StagedBatch, stamp: dict[str, tuple[Any, pa.DataType]]) -> dict[str, Any]:
    """The batch's Silver rows appended (see above); what changed by table, as `merge_silver` says it."""
    files = {t: _staged_files(batch, t) for t in SILVER_TABLES}
    tombstones = _greatest(
        _read_all(batch, "tombstones", files["tombstones"]), BUSINESS_KEYS["tombstones"], rules.TOMBSTONE_ORDER
    )
    newest = _newest_tombstones(tombstones)
    losers, lost_versions = _losers(batch, files["entries"])
    applied = [0]

    def entries() -> Iterator[pa.Table]:
        ordinal = 0
        for location in files["entries"]:
            rows = _read(batch, "entries", location)
            count = rows.num_rows
            if losers:
                keep = [ordinal + position not in losers for position in range(count)]
                rows = rows.filter(pa.array(keep, pa.bool_()))
            ordinal += count
            if rows.num_rows:
                deleted_at, kind = _deletions(rows, newest)
                applied[0] += len(deleted_at) - deleted_at.null_count
                yield rows.append_column("deleted_at", deleted_at).append_column("deletion_type", kind)

    def children(table: str) -> Iterator[pa.Table]:
        seen: set[tuple[Any, ...]] = set()
        keys = BUSINESS_KEYS[table]
        for location in files[table]:
            rows = _read(batch, table, location)
            if lost_versions:  # rows of a version that lost go; only then is each row's version looked at
                mine = [v not in lost_versions for v in _tuples(rows, rules.CHILD_VERSION_COLUMNS)]
                rows = rows.filter(pa.array(mine, pa.bool_()))
            if batch.plan.repeated_versions:  # one version twice in a page: its child keys repeat
                first = []
                for key in _tuples(rows, keys):
                    first.append(key not in seen)
                    seen.add(key)
                rows = rows.filter(pa.array(first, pa.bool_()))
            yield rows

    steps: dict[str, Callable[[], Any]] = {
        "entries": partial(_append, batch, "entries", entries(), stamp),
        "tombstones": partial(_append, batch, "tombstones", iter([tombstones]), stamp),
    }
    steps |= {t: partial(_append, batch, t, children(t), stamp) for t in CHILD_TABLES}
    done = side_by_side(steps)
    metrics: dict[str, Any] = {t: _inserted(done[t]) for t in ("entries", *CHILD_TABLES)}
    metrics["tombstones"] = {**_inserted(done["tombstones"]), "applied_to_entries": applied[0]}
    return metrics


def _losers(batch: StagedBatch, files: list[str]) -> tuple[set[int], set[Version]]:
    """The batch's entry rows that are not their entry's greatest version (their ordinals in the staged
    files, in order), and the versions that lost (whose child rows go).

    Only the rows of ids that repeat are put to the rule (`rules.greatest_per_key`): a version alone
    under its id is its greatest (a year of generated pages holds one row per id; a real backfill
    repeats the ids of the folders that changed). The same record twice in a page is one version: its
    second row loses, its children stay (and are deduplicated by key).
    """
    keys = [_read(batch, "entries", location, rules.WINNER_COLUMNS) for location in files]
    if not keys:
        return set(), set()
    every = pa.concat_tables(keys)
    ids = every.column("entry_id")
    counts = pc.value_counts(ids)
    repeated = counts.field("values").filter(pc.greater(counts.field("counts"), 1))
    if not len(repeated):
        return set(), set()
    ordinals = pc.indices_nonzero(pc.is_in(ids, value_set=repeated)).to_pylist()
    rows = every.take(pa.array(ordinals, pa.int64())).to_pylist()
    kept = set(rules.greatest_per_key(rows, ("entry_id",), rules.VERSION_ORDER))
    versions: list[Version] = [tuple(row[c] for c in rules.WINNER_COLUMNS) for row in rows]  # type: ignore[misc]
    won = {versions[i] for i in kept}
    lost = [i for i in range(len(rows)) if i not in kept]
    return {ordinals[i] for i in lost}, {versions[i] for i in lost} - won


def _newest_tombstones(tombstones: pa.Table) -> dict[str, tuple[datetime, str | None]]:
    """Each entry's newest tombstone of the batch (one per (entry, deleted_at) after the pick)."""
    newest: dict[str, tuple[datetime, str | None]] = {}
    for entry_id, deleted_at, kind in _tuples(tombstones, ("entry_id", "deleted_at", "deletion_type")):
        if entry_id not in newest or deleted_at > newest[entry_id][0]:
            newest[entry_id] = (deleted_at, kind)
    return newest


def _deletions(entries: pa.Table, newest: dict[str, tuple[datetime, str | None]]) -> tuple[pa.Array, pa.Array]:
    """(deleted_at, deletion_type) of each entry: its newest tombstone when that deletes this version
    (`rules.TOMBSTONE_APPLIES`: `deleted_at >= updated`), else nulls. Only entries with a tombstone in
    the batch are looked at one by one."""
    deleted_at: list[datetime | None] = [None] * entries.num_rows
    kinds: list[str | None] = [None] * entries.num_rows
    if newest:
        ids = entries.column("entry_id")
        for position in pc.indices_nonzero(pc.is_in(ids, value_set=pa.array(list(newest), pa.string()))).to_pylist():
            tombstone = newest[ids[position].as_py()]
            if tombstone[0] >= entries.column("updated")[position].as_py():
                deleted_at[position], kinds[position] = tombstone
    return pa.array(deleted_at, UTC_TS), pa.array(kinds, pa.string())


def _append(batch: StagedBatch, table: str, parts: Iterator[pa.Table], stamp: dict[str, Any]) -> int:
    """`parts` stamped, in the table's columns, appended in one commit carrying the dataset's txn; the
    rows appended (no commit for none)."""
    from deltalake import CommitProperties, PostCommitHookProperties, Transaction, write_deltalake

    schema = table_schema(table)
    count = [0]

    def batches() -> Iterator[pa.RecordBatch]:
        for part in parts:
            if part.num_rows:
                count[0] += part.num_rows
                yield from _conform(_stamped(part, stamp), table).to_batches()

    stream = batches()
    first = next(stream, None)
    if first is None:
        return 0
    target = _open(batch.lake, table)
    commit = None
    if writer_txn.carries_txn(table):  # every Silver table's does
        app = writer_txn.app_id(batch.dataset)
        txn = Transaction(app, writer_txn.next_version(target.transaction_version(app)))
        commit = CommitProperties(app_transactions=[txn])
    write_deltalake(
        target,
        pa.RecordBatchReader.from_batches(schema, _chain(first, stream)),
        mode="append",
        commit_properties=commit,
        post_commithook_properties=PostCommitHookProperties(cleanup_expired_logs=False),  # as `_merge`'s
    )
    return count[0]


def _chain(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield first
    yield from rest


def _inserted(rows: int) -> dict[str, int]:
    return {**nothing_changed(), "inserted": rows}


def _staged_files(batch: StagedBatch, table: str) -> list[str]:
    """A table's staged files (one per page), in name order; none when no page staged a row of it."""
    folder = batch.staged_path(table)
    return [] if folder is None else staged_files(uri(folder))


def _read(batch: StagedBatch, table: str, location: str, columns: tuple[str, ...] | None = None) -> pa.Table:
    """One staged file's rows (`columns` of them), without a quarantined file's."""
    return batch.kept(table, read_staged_file(location, table, columns))


def _read_all(batch: StagedBatch, table: str, files: list[str]) -> pa.Table:
    parts = [_read(batch, table, location) for location in files]
    return pa.concat_tables(parts) if parts else staged_schema(table).empty_table()
