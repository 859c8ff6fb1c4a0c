"""A staged batch written by delta-rs under `ingest.rules`, in the order Spark's writer follows
(`spark.silver_merge`); each step idempotent, so a run that dies between commits is completed by
its rerun.

Tables are read through the same `DeltaTable` object that MERGEs them, and every Silver commit
carries the dataset's `txn` (`ingest.writer_txn`), so a writer of the dataset that committed in
between fails the MERGE (delta-rs's conflict check) and the whole write is done again
(`ingest.retry.retry_on_conflict`), deciding afresh from the new snapshot. That lets each MERGE bound
its read by the earliest version time it can match, read from that snapshot (`rules.since`): a daily
batch then reads the few newest files of a table ordered by time (decisions 0051, 0052), not all.

A batch here fits the driver's memory (`ingest.engines.choose_engine`: up to
`PLACSP_DELTA_RS_WRITE_MAX_MB` of pages): its rows are plain Arrow tables and the decisions
(winners, eligible versions, due tombstones) are made in Python on them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from functools import partial
from typing import Any

import pyarrow as pa

from placsp_provider.ingest import rules, writer_txn
from placsp_provider.ingest.batch import StagedBatch
from placsp_provider.ingest.rules import BUSINESS_KEYS
from placsp_provider.ingest.tables import UTC_TS, table_schema
from placsp_provider.lake import CHILD_TABLES, SILVER_TABLES, table_path
from placsp_provider.lake_storage import LakePath, side_by_side
from placsp_provider.table_files import table_files, text_in

# What a MERGE changed, from the metrics delta-rs returns, under the names the run summary uses.
_MERGE_COUNTS = {
    "inserted": "num_target_rows_inserted",
    "updated": "num_target_rows_updated",
    "deleted": "num_target_rows_deleted",
}


def nothing_changed() -> dict[str, int]:
    return dict.fromkeys(_MERGE_COUNTS, 0)


def write_batch(
    batch: StagedBatch,
    rows: Callable[[], Mapping[str, pa.Table]],
    dead_letters: pa.Table,
    reconciliation: pa.Table,
) -> dict[str, Any]:
    """Dead letters, Silver, then the reconciliation that marks the files done; the changes by table.
    `rows`: the batch's rows as Arrow tables (quarantined files left out: `StagedBatch.kept`), asked
    for only when Silver is MERGEd; a first load of the dataset streams them from the staged files
    instead (`first_load`)."""
    with _one_write():
        return _write_batch(batch, rows, dead_letters, reconciliation)


def _write_batch(
    batch: StagedBatch,
    rows: Callable[[], Mapping[str, pa.Table]],
    dead_letters: pa.Table,
    reconciliation: pa.Table,
) -> dict[str, Any]:
    from placsp_provider.delta_rs import first_load

    lake, dataset = batch.lake, batch.dataset
    sizes = batch.plan.sizes
    used = _silver_used(sizes["entries"], sizes["tombstones"])
    _open_side_by_side(lake, ["reconciliation", *(["dead_letters"] if dead_letters.num_rows else []), *used])
    dead = nothing_changed()
    if dead_letters.num_rows:
        dead = _insert_only(lake, "dead_letters", dataset, dead_letters, ("dead_letter_id",))
    # Tombstones alone are a few rows: MERGEd, first load or not.
    if sizes["entries"] and first_load.is_first_load(lake, dataset):
        silver = first_load.append_silver(batch, _stamp(batch.run_id, batch.started))
    else:
        silver = merge_silver(lake, dataset, rows(), batch.plan.repeated_versions, batch.run_id, batch.started)
    merge = _merge(lake, "reconciliation", _conform(reconciliation, "reconciliation"), ("source_file",), dataset)
    _execute(merge.when_matched_update_all(predicate=rules.RECONCILIATION_CHANGES).when_not_matched_insert_all())
    return {**silver, "dead_letters": dead}


def merge_silver(
    lake: LakePath, dataset: str, rows: Mapping[str, pa.Table], repeated_versions: int, run_id: str, started: datetime
) -> dict[str, Any]:
    """Silver rows (a batch's, or a replay's recovered records alone); the changes by table.
    `repeated_versions`: valid records repeating an earlier (entry_id, updated) of their file."""
    with _one_write():
        return _merge_silver(lake, dataset, rows, repeated_versions, run_id, started)


def _merge_silver(
    lake: LakePath, dataset: str, rows: Mapping[str, pa.Table], repeated_versions: int, run_id: str, started: datetime
) -> dict[str, Any]:
    stamp = _stamp(run_id, started)
    metrics: dict[str, Any] = {t: nothing_changed() for t in ("entries", *CHILD_TABLES)}
    _open_side_by_side(
        lake, _silver_used(rows["entries"].num_rows, rows["tombstones"].num_rows)
    )  # no request when `_write_batch` opened them
    if not rows["entries"].num_rows:  # children come only with valid entries: tombstones alone
        log = _insert_tombstones(lake, dataset, rows["tombstones"], stamp)
        applied = _apply_tombstones(lake, dataset, _ids(rows["tombstones"]))
        metrics["tombstones"] = {**log, "applied_to_entries": applied}
        return metrics

    entries = _open(lake, "entries")
    best = _greatest(rows["entries"], ("entry_id",), rules.VERSION_ORDER)  # each entry's winner in the batch
    held = _current(entries, dataset, ["entry_id", "updated", "_source_file"], _ids(best))
    held_version = {e: (u, f) for e, u, f in _tuples(held)}
    # Which batch versions are at least as great as what Silver holds (rules.is_eligible): their
    # children are the truth; a lesser one loses everywhere, so Silver never mixes two versions.
    eligible: list[tuple[str, datetime, str, str]] = []
    newer = 0
    for entry_id, updated, source, digest in _tuples(best, rules.WINNER_COLUMNS):
        held = held_version.get(entry_id)
        if not rules.is_eligible(held, (updated, source)):
            continue
        newer += rules.is_newer(held, (updated, source))
        eligible.append((entry_id, updated, source, digest))
    was_held = any(e[0] in held_version for e in eligible)
    eligible_rows = _from_tuples(eligible, {"entry_id": pa.string(), "updated": UTC_TS, "_source_file": pa.string()})

    # Round one (as Spark's): entries, older children's deletes where Silver held a version, the
    # tombstone log. Round two: the winners' children and the tombstones applied to `entries`.
    if newer:
        source = _with(_stamped(best, stamp), deleted_at=pa.nulls(best.num_rows, UTC_TS), deletion_type=None)
        # What it can match is what `held` read: Silver's versions of the batch's entries.
        earliest = _earliest(best, "updated", [u for u, _ in held_version.values()])
        merge = _merge(lake, "entries", _conform(source, "entries"), BUSINESS_KEYS["entries"], dataset, earliest)
        metrics["entries"] = _execute(
            merge.when_matched_update_all(predicate=rules.ENTRY_REPLACES).when_not_matched_insert_all()
        )
    # Held ones are always cleaned, also when the entries MERGE changed nothing: a run that died
    # after it left the older children behind. Held none, yet the MERGE replaced some: a writer
    # added them since the read, one that carries no dataset txn (`writer_txn` refuses the others'
    # commits): cleaned too.
    clean = was_held or metrics["entries"]["updated"] > 0
    round_one: dict[str, Callable[[], Any]] = {
        "tombstones": partial(_insert_tombstones, lake, dataset, rows["tombstones"], stamp)
    }
    if clean:
        round_one |= {t: partial(_delete_older_children, lake, t, dataset, eligible_rows) for t in CHILD_TABLES}
    done = side_by_side(round_one)  # a round's steps write different tables; the rounds stay in order (0022)
    deleted = {t: done.get(t, 0) for t in CHILD_TABLES}

    winners = set(eligible)
    touched = _ids(rows["tombstones"]) | {e[0] for e in eligible}
    round_two: dict[str, Callable[[], Any]] = {
        t: partial(_insert_children, lake, t, dataset, rows[t], winners, stamp, repeated_versions) for t in CHILD_TABLES
    }
    done |= side_by_side({**round_two, "applied": partial(_apply_tombstones, lake, dataset, touched)})
    metrics |= {t: {**done[t], "deleted": deleted[t]} for t in CHILD_TABLES}
    metrics["tombstones"] = {**done["tombstones"], "applied_to_entries": done["applied"]}
    return metrics


def _stamp(run_id: str, started: datetime) -> dict[str, tuple[Any, pa.DataType]]:
    """The lineage columns every row a run writes carries."""
    return {"_ingest_run_id": (run_id, pa.string()), "_ingested_at": (started, UTC_TS)}


def _greatest(rows: pa.Table, key: tuple[str, ...], order: tuple[str, ...]) -> pa.Table:
    """The row with the greatest `order` for each `key` (`rules.greatest_per_key`), in batch order."""
    columns = {c: rows.column(c).to_pylist() for c in dict.fromkeys((*key, *order))}
    keep = rules.greatest_per_key(
        [dict(zip(columns, v, strict=True)) for v in zip(*columns.values(), strict=True)], key, order
    )
    if len(keep) == rows.num_rows:  # every key once (most batches): no copy of the whole table
        return rows
    return rows.take(pa.array(keep, pa.int64()))


def _delete_older_children(lake: LakePath, table: str, dataset: str, eligible: pa.Table) -> int:
    # Their rows may be of any older version (a run that died between commits leaves some): asked.
    held = _current(_open(lake, table), dataset, ["entry_updated"], _ids(eligible))
    if not held.num_rows:
        return 0
    merge = _merge(lake, table, eligible, ("entry_id",), dataset, _earliest(held, "entry_updated"))
    return _execute(merge.when_matched_delete(predicate=rules.CHILD_IS_OLDER))["deleted"]


def _insert_children(
    lake: LakePath,
    table: str,
    dataset: str,
    rows: pa.Table,
    winners: set[tuple[str, datetime, str, str]],
    stamp: dict[str, Any],
    repeated_versions: int,
) -> dict[str, int]:
    if not rows.num_rows or not winners:
        return nothing_changed()
    fresh = rows.filter(pa.array([v in winners for v in _tuples(rows, rules.CHILD_VERSION_COLUMNS)], pa.bool_()))
    if repeated_versions:  # one version twice in a page: its child keys repeat (see merge_silver)
        fresh = _greatest(fresh, BUSINESS_KEYS[table], ())  # identical rows: the first
    if not fresh.num_rows:
        return nothing_changed()
    # Rows on these keys are of these very versions: older ones went in round one, none is newer.
    earliest = _earliest(fresh, "entry_updated")
    return _insert_only(lake, table, dataset, _stamped(fresh, stamp), BUSINESS_KEYS[table], earliest)


def _insert_tombstones(lake: LakePath, dataset: str, tombstones: pa.Table, stamp: dict[str, Any]) -> dict[str, int]:
    if not tombstones.num_rows:
        return nothing_changed()
    keys = BUSINESS_KEYS["tombstones"]
    fresh = _stamped(_greatest(tombstones, keys, rules.TOMBSTONE_ORDER), stamp)
    earliest = _earliest(fresh, "deleted_at")  # `deleted_at` is a key: a row it matches has the same
    merge = _merge(lake, "tombstones", _conform(fresh, "tombstones"), keys, dataset, earliest)
    return _execute(merge.when_matched_update_all(predicate=rules.TOMBSTONE_REPLACES).when_not_matched_insert_all())


def _apply_tombstones(lake: LakePath, dataset: str, touched: set[str]) -> int:
    """The newest logged tombstone of each touched entry applied to `entries` where it deletes the
    version Silver holds (and is not applied already); returns the entries updated."""
    if not touched:
        return 0
    logged = _current(_open(lake, "tombstones"), dataset, ["entry_id", "deleted_at", "deletion_type"], touched)
    latest: dict[str, tuple[datetime, str | None]] = {}  # one logged tombstone per (entry, deleted_at)
    for entry_id, deleted_at, kind in _tuples(logged):
        if entry_id not in latest or deleted_at > latest[entry_id][0]:
            latest[entry_id] = (deleted_at, kind)
    if not latest:
        return 0
    entries = _open(lake, "entries")
    current = _current(entries, dataset, ["entry_id", "updated", "deleted_at", "deletion_type"], set(latest))
    due = [  # rules.TOMBSTONE_APPLIES, asked in Python first
        (entry_id, latest[entry_id][0], latest[entry_id][1], updated)
        for entry_id, updated, deleted_at, kind in _tuples(current)
        if latest[entry_id][0] >= updated
        and (deleted_at, kind or "") != (latest[entry_id][0], latest[entry_id][1] or "")
    ]
    if not due:  # most batches: no MERGE (asked first, as on Spark)
        return 0
    source = _from_tuples(due, {"entry_id": pa.string(), "deleted_at": UTC_TS, "deletion_type": pa.string()})
    merge = _merge(lake, "entries", source, ("entry_id",), dataset, min(d[3] for d in due))
    updates = {"deleted_at": "s.deleted_at", "deletion_type": "s.deletion_type"}
    return _execute(merge.when_matched_update(updates=updates, predicate=rules.TOMBSTONE_APPLIES))["updated"]


def _insert_only(
    lake: LakePath, table: str, dataset: str, rows: pa.Table, keys: tuple[str, ...], earliest: datetime | None = None
) -> dict[str, int]:
    merge = _merge(lake, table, _conform(_greatest(rows, keys, ()), table), keys, dataset, earliest)
    return _execute(merge.when_not_matched_insert_all())


# -- helpers -----------------------------------------------------------------------------------------
# Each table opened once per write (attempt) and its object reused by the later steps: an open reads
# the table's log, which on S3 is a request per commit file (decision 0039: a daily write opened 7
# tables 10 times). delta-rs moves the object to the version it commits, and a MERGE still fails on
# another writer's commit since, so the write is done again from fresh objects (`retry_on_conflict`).
_OPENED: ContextVar[dict[str, Any] | None] = ContextVar("_OPENED", default=None)


@contextmanager
def _one_write() -> Iterator[None]:
    token = _OPENED.set({}) if _OPENED.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _OPENED.reset(token)


def _open(lake: LakePath, table: str) -> Any:
    from placsp_provider.lake_storage import open_table, uri

    path = table_path(lake, table)
    opened = _OPENED.get()
    if opened is None:
        return open_table(path)
    if uri(path) not in opened:
        opened[uri(path)] = open_table(path)
    return opened[uri(path)]


def _silver_used(entries: int, tombstones: int) -> tuple[str, ...]:
    """The Silver tables a write of so many entries and tombstones reads or writes."""
    if entries:
        return SILVER_TABLES
    return ("tombstones", "entries") if tombstones else ()


def _open_side_by_side(lake: LakePath, tables: Iterable[str]) -> None:
    """The tables this write uses opened at once: on S3 an open waits on a request per log file."""
    side_by_side({t: partial(_open, lake, t) for t in tables})


def _merge(
    lake: LakePath, table: str, source: pa.Table, keys: Iterable[str], dataset: str, earliest: datetime | None = None
) -> Any:
    """A MERGE of `source` (alias `s`) into `table` (alias `t`) on `rules.on(keys, dataset)`, reading
    only rows of versions from `earliest` on when given (`rules.since`: no row it can match is older,
    as read from the table object's snapshot). A Silver table's commit carries the dataset's txn.

    Without delta-rs's expired-log cleanup after the commit: it lists the whole `_delta_log` on every
    commit (a request per commit on S3; decision 0039) and can only remove something once a checkpoint
    exists. Table maintenance checkpoints and cleans up instead (`delta_rs.maintenance`, Spark's).
    """
    from deltalake import CommitProperties, PostCommitHookProperties, Transaction

    target = _open(lake, table)
    condition = rules.on(keys, dataset)
    if earliest is not None:
        condition = f"{condition} AND {rules.since(table, earliest)}"
    commit = None
    if writer_txn.carries_txn(table):
        app = writer_txn.app_id(dataset)
        txn = Transaction(app, writer_txn.next_version(target.transaction_version(app)))
        commit = CommitProperties(app_transactions=[txn])
    hooks = PostCommitHookProperties(cleanup_expired_logs=False)
    return target.merge(
        source,
        condition,
        source_alias="s",
        target_alias="t",
        post_commithook_properties=hooks,
        commit_properties=commit,
    )


def _execute(merge: Any) -> dict[str, int]:
    done = merge.execute()
    return {name: int(done.get(key) or 0) for name, key in _MERGE_COUNTS.items()}


def _current(table: Any, dataset: str, columns: list[str], entry_ids: set[str]) -> pa.Table:
    """`columns` of the dataset's rows for these entries, as of the snapshot `table` holds."""
    rows = table_files(table, [("dataset", "=", dataset)])  # the dataset's partition
    return rows.to_table(columns=columns, filter=text_in("entry_id", sorted(entry_ids)))  # see table_files


def _tuples(rows: pa.Table, columns: Iterable[str] | None = None) -> Iterator[tuple[Any, ...]]:
    """`rows` as Python tuples of `columns` (all by default)."""
    return zip(*(rows.column(c).to_pylist() for c in columns or rows.column_names), strict=True)


def _from_tuples(rows: list[tuple[Any, ...]], types: Mapping[str, pa.DataType]) -> pa.Table:
    """A table of the first `len(types)` items of each tuple, named and typed by `types`."""
    return pa.table({name: pa.array([r[i] for r in rows], type_) for i, (name, type_) in enumerate(types.items())})


def _earliest(rows: pa.Table, column: str, more: Iterable[datetime] = ()) -> datetime | None:
    """The earliest of `rows`' `column` and `more` (a MERGE's time bound: `rules.since`); None (no
    bound: the whole partition read) when one is missing, as a row without a time passes no bound."""
    import pyarrow.compute as pc

    column_values = rows.column(column)
    times = [pc.min(column_values).as_py(), *more]
    return None if column_values.null_count or None in times else min(times)


def _ids(rows: pa.Table) -> set[str]:
    return set(rows.column("entry_id").to_pylist()) if rows.num_rows else set()


def _stamped(rows: pa.Table, stamp: Mapping[str, tuple[Any, pa.DataType]]) -> pa.Table:
    return _with(rows, **{name: pa.array([value] * rows.num_rows, type_) for name, (value, type_) in stamp.items()})


def _with(rows: pa.Table, **columns: Any) -> pa.Table:
    """`rows` with these columns set (None: all null, of the column's table type later)."""
    for name, values in columns.items():
        column = values if values is not None else pa.nulls(rows.num_rows, pa.string())
        index = rows.schema.get_field_index(name)
        rows = rows.set_column(index, name, column) if index >= 0 else rows.append_column(name, column)
    return rows


def _conform(rows: pa.Table, table: str) -> pa.Table:
    """Columns in the table's order and types (what delta-rs's MERGE matches by name and type)."""
    schema = table_schema(table)
    return pa.Table.from_arrays([rows.column(f.name).cast(f.type) for f in schema], schema=schema)
