"""The Spark writer's MERGEs: a staged batch written into the Delta tables under `ingest.rules`
(the newest version wins, ties decided the same way in every engine; reruns change nothing).
Every MERGE condition names the dataset as a literal: partition pruning, and MERGEs of different
datasets never conflict. Every commit to a Silver table carries the dataset's txn
(`ingest.writer_txn`), as delta-rs's do: a writer of the dataset in either engine that committed since
this one's snapshot fails it (or, committed before the MERGE began, makes Delta skip it: raised as a
conflict), and the write is done again.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any, TypeVar

from placsp_provider.ingest import retry, rules, writer_txn
from placsp_provider.ingest.rules import BUSINESS_KEYS
from placsp_provider.lake import CHILD_TABLES, table_path
from placsp_provider.lake_storage import LakePath
from placsp_provider.spark.tables import spark_table_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

T = TypeVar("T")


def is_commit_conflict(err: BaseException) -> bool:
    """Delta's optimistic concurrency refused a commit because another writer committed first."""
    from delta import exceptions as delta_errors

    conflicts = (
        delta_errors.DeltaConcurrentModificationException,
        delta_errors.ConcurrentWriteException,
        delta_errors.MetadataChangedException,
        delta_errors.ProtocolChangedException,
        delta_errors.ConcurrentAppendException,
        delta_errors.ConcurrentDeleteReadException,
        delta_errors.ConcurrentDeleteDeleteException,
        delta_errors.ConcurrentTransactionException,
        writer_txn.ConcurrentDatasetWriteError,
    )
    return isinstance(err, conflicts) or "DELTA_CONCURRENT_" in str(err)


def retry_on_conflict(write: Callable[[], T], *, what: str, **kwargs: Any) -> T:
    """`ingest.retry.retry_on_conflict` for Spark's writes: a conflict is delta-spark's."""
    return retry.retry_on_conflict(write, what=what, conflict=is_commit_conflict, **kwargs)


# What a MERGE changed, from the row `DeltaMergeBuilder.execute()` returns (delta-spark 4.x:
# num_affected_rows, num_updated_rows, num_deleted_rows, num_inserted_rows), under the names the run
# summary and lineage use. The command's own result: reading it runs no Spark job and no history read.
_MERGE_COUNTS = {"inserted": "num_inserted_rows", "updated": "num_updated_rows", "deleted": "num_deleted_rows"}


def nothing_changed() -> dict[str, int]:
    """The counts of a MERGE that was not run because its source is known to be empty."""
    return dict.fromkeys(_MERGE_COUNTS, 0)


def _execute(merge: Any) -> dict[str, int]:
    done = merge.execute().collect()
    if not done:  # Delta skipped it: its txn version was not above the one recorded (`_delta`)
        raise writer_txn.ConcurrentDatasetWriteError("a writer of the dataset committed since this one's snapshot")
    (row,) = done
    return {name: int(row[column] or 0) for name, column in _MERGE_COUNTS.items()}


def _delta(spark: SparkSession, lake: LakePath, table: str, dataset: str | None = None) -> Any:
    """The Delta table, to read or to MERGE into. For a MERGE of `dataset` into a Silver table, bound
    to a session of its own whose idempotent-DML confs make its commit carry the dataset's txn: the
    confs are per session, and MERGEs run side by side in threads (`run_together`)."""
    from delta.tables import DeltaTable

    path = table_path(lake, table)
    if dataset is None or not writer_txn.carries_txn(table):
        return DeltaTable.forPath(spark, str(path))
    from placsp_provider.lake_storage import open_table

    app = writer_txn.app_id(dataset)
    session = spark.newSession()  # shares the SparkContext, the jars and the listeners
    session.conf.set("spark.databricks.delta.write.txnAppId", app)
    session.conf.set(
        "spark.databricks.delta.write.txnVersion",
        str(writer_txn.next_version(open_table(path).transaction_version(app))),
    )
    return DeltaTable.forPath(session, str(path))


def _merge(target: Any, source: DataFrame, keys: tuple[str, ...], dataset: str) -> Any:
    """A MERGE of `source` (alias `s`) into the Delta table `target` (`t`) on `keys`, within `dataset`."""
    return target.alias("t").merge(source.alias("s"), rules.on(keys, dataset))


def _conform(df: DataFrame, table: str) -> DataFrame:
    """Columns in the table's order and types (so MERGE ... InsertAll never guesses)."""
    from pyspark.sql import functions as F

    return df.select([F.col(f.name).cast(f.dataType).alias(f.name) for f in spark_table_schema(table).fields])


def greatest(rows: DataFrame, key: tuple[str, ...], order: tuple[str, ...]) -> DataFrame:
    """The row with the greatest `order` for each `key` (rules.VERSION_ORDER, rules.TOMBSTONE_ORDER)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    window = Window.partitionBy(*key).orderBy(*(F.col(c).desc() for c in order))
    return rows.withColumn("_rank", F.row_number().over(window)).where("_rank = 1").drop("_rank")


def winners(entries: DataFrame) -> DataFrame:
    """Each entry's greatest version in the batch (`rules.VERSION_ORDER`)."""
    return greatest(entries, ("dataset", "entry_id"), rules.VERSION_ORDER)


def merge_silver(
    spark: SparkSession,
    lake: LakePath,
    dataset: str,
    rows: dict[str, DataFrame],
    run_id: str,
    ingested_at: Any,
    sizes: Mapping[str, int] | None = None,
    repeated_versions: int | None = None,
) -> dict[str, dict[str, int]]:
    """MERGE one batch into the Silver tables; return what each table's MERGEs changed.

    `sizes`: the rows of each table in `rows`, where the caller already counted them (the ingest's
    per-file tally). A MERGE whose source is known to be empty is not run: it would change nothing,
    and even an empty MERGE costs a second and several Spark jobs (decision 0002). A table missing
    from `sizes` is MERGEd whatever its size.

    `repeated_versions`: valid entry records of the batch's files that repeat the (entry_id, updated)
    of an earlier record in their file (None: not counted). A version's child rows come from one
    record, whose child keys are unique (positions; validated lot ids), so with none repeated the
    children skip Spark's dedup, the largest per-row cost of the write (decision 0020).
    """
    from pyspark.sql import functions as F

    stamp = {"_ingest_run_id": F.lit(run_id), "_ingested_at": F.lit(ingested_at).cast("timestamp")}
    metrics: dict[str, dict[str, int]] = {t: nothing_changed() for t in ("entries", *CHILD_TABLES)}
    if _known_empty(sizes, "entries"):  # children come only with valid entries: tombstones alone
        logged = _insert_tombstones(spark, lake, dataset, rows["tombstones"], stamp, sizes)
        applied = _apply_tombstones(spark, lake, dataset, rows["tombstones"], None, sizes)
        metrics["tombstones"] = {**logged, "applied_to_entries": applied}
        return metrics
    target = _delta(spark, lake, "entries", dataset)

    unset = {"deleted_at": F.lit(None).cast("timestamp"), "deletion_type": F.lit(None).cast("string")}
    best = winners(rows["entries"]).withColumns(stamp).withColumns(unset)
    # Which batch versions are at least as great as what Silver holds (rules.is_eligible): their
    # children are the truth. The very version Silver holds is eligible again (a rerun, or recovery
    # from a run that died between MERGEs); a lesser one loses everywhere, as it does in `entries`, so
    # Silver never mixes two versions of one entry.
    current = (
        target.toDF()
        .where(F.col("dataset") == dataset)
        .select("entry_id", F.col("updated").alias("_held"), F.col("_source_file").alias("_held_file"))
    )
    newer = F.expr(rules.IS_NEWER_SQL)
    same = F.coalesce(F.expr(rules.IS_SAME_SQL), F.lit(False))
    eligible = (
        best.join(current, "entry_id", "left")
        .where(newer | same)
        .select("dataset", "entry_id", "updated", "_source_file", rules.DIGEST, "_held", newer.alias("_newer"))
        .localCheckpoint(eager=False)
    )
    # One job both materialises the checkpoint (before any MERGE changes `entries`) and counts what
    # the MERGEs below have to do.
    todo = eligible.agg(
        F.count("*").alias("eligible"),
        F.count("_held").alias("held"),  # eligible entries Silver held a version of
        F.count_if("_newer").alias("newer"),
    ).first()
    assert todo is not None  # an aggregate without grouping has one row
    # Children of an older version exist only where Silver held the entry. Held ones are always
    # cleaned, also when the entries MERGE below changes nothing: a run that died after it left the
    # older children behind.
    held = bool(todo["held"])
    e = eligible.select(
        "entry_id",
        F.col("updated").alias("_winner_updated"),
        F.col("_source_file").alias("_winner_file"),
        F.col(rules.DIGEST).alias("_winner_digest"),
    )

    def merge_entries() -> dict[str, int]:
        merge = _merge(target, _conform(best, "entries"), BUSINESS_KEYS["entries"], dataset)
        return _execute(merge.whenMatchedUpdateAll(condition=rules.ENTRY_REPLACES).whenNotMatchedInsertAll())

    def delete_children(table: str) -> int:
        merge = _merge(_delta(spark, lake, table, dataset), eligible, ("entry_id",), dataset)
        return _execute(merge.whenMatchedDelete(condition=rules.CHILD_IS_OLDER))["deleted"]

    def insert_children(table: str) -> dict[str, int]:
        if not todo["eligible"] or _known_empty(sizes, table):
            return nothing_changed()
        keys = BUSINESS_KEYS[table]
        fresh = (
            rows[table]
            .join(e, "entry_id")
            .where(
                (F.col("entry_updated") == F.col("_winner_updated"))
                & (F.col("_source_file") == F.col("_winner_file"))
                & (F.col(rules.DIGEST) == F.col("_winner_digest"))
            )
            .drop("_winner_updated", "_winner_file", "_winner_digest")
            .withColumns(stamp)
        )
        if repeated_versions != 0:
            fresh = fresh.dropDuplicates(list(keys))
        return _execute(
            _merge(_delta(spark, lake, table, dataset), _conform(fresh, table), keys, dataset).whenNotMatchedInsertAll()
        )

    # Every write below is to its own table and decided by `eligible` (checkpointed above), so they run
    # at once, in two rounds: a MERGE of a few rows keeps the 2 cores busy only when others run beside
    # it (decisions 0009, 0022). Round one: the entries MERGE, the old children's deletes where Silver
    # held a version, the tombstone log's insert. Round two: what must follow the entries MERGE: the
    # winners' children (inserted after their table's delete) and the tombstones applied to `entries`.
    # A run that dies between commits leaves what a rerun completes: it decides again from the tables,
    # and every step is idempotent (tests/reliability).
    first: dict[str, Callable[[], Any]] = {}
    if todo["newer"]:  # else every eligible version is already the one Silver holds
        first["entries"] = merge_entries
    if held:
        first.update({f"delete {t}": functools.partial(delete_children, t) for t in CHILD_TABLES})
    first["tombstone log"] = lambda: _insert_tombstones(spark, lake, dataset, rows["tombstones"], stamp, sizes)
    done = run_together(spark, first)
    metrics["entries"] = done.get("entries", metrics["entries"])
    deleted = {t: done.get(f"delete {t}", 0) for t in CHILD_TABLES}
    if not held and metrics["entries"]["updated"] > 0:
        # Silver held none of the batch's entries when `eligible` was read, yet the MERGE replaced some:
        # a writer without the dataset's txn added them since (one with it makes this MERGE fail or be
        # skipped, and the write is redone: `writer_txn`). Their children go now.
        deleted = run_together(spark, {t: functools.partial(delete_children, t) for t in CHILD_TABLES})

    second: dict[str, Callable[[], Any]] = {t: functools.partial(insert_children, t) for t in CHILD_TABLES}
    # The entries to check for a tombstone: the eligible versions (checkpointed: no second run of the
    # winners' window); a version older than Silver's changed nothing here.
    second["tombstones"] = lambda: _apply_tombstones(spark, lake, dataset, rows["tombstones"], eligible, sizes)
    written = run_together(spark, second)
    for table in CHILD_TABLES:
        metrics[table] = {**written[table], "deleted": deleted[table]}
    metrics["tombstones"] = {**done["tombstone log"], "applied_to_entries": written["tombstones"]}
    return metrics


def run_together(spark: SparkSession, steps: Mapping[str, Callable[[], T]]) -> dict[str, T]:
    """Run independent writes (each to its own tables) at once, in threads; return each one's result.

    A MERGE of a few rows spends most of its second or two on the driver (planning, reading the
    table's log, committing) with the 2 cores idle, so two such MERGEs side by side take little more
    than one (decision 0009). Every step is waited for, also when one fails: a failed write is redone
    whole (`retry_on_conflict`), never while a step of it still runs. The error raised is the first
    that is not a commit conflict, else the first conflict.
    """
    from pyspark.util import inheritable_thread_target  # the job group and other local properties go along

    if len(steps) < 2:
        return {name: step() for name, step in steps.items()}
    with ThreadPoolExecutor(max_workers=len(steps), thread_name_prefix="placsp-merge") as pool:
        futures = {name: pool.submit(inheritable_thread_target(spark)(step)) for name, step in steps.items()}
        wait(futures.values())
    errors = [err for f in futures.values() if (err := f.exception()) is not None]
    if errors:
        raise next((err for err in errors if not is_commit_conflict(err)), errors[0])
    return {name: f.result() for name, f in futures.items()}


def _known_empty(sizes: Mapping[str, int] | None, table: str) -> bool:
    return sizes is not None and sizes.get(table) == 0


def _insert_tombstones(
    spark: SparkSession, lake: LakePath, dataset: str, batch: DataFrame, stamp: dict, sizes: Mapping[str, int] | None
) -> dict[str, int]:
    if _known_empty(sizes, "tombstones"):
        return nothing_changed()
    keys = BUSINESS_KEYS["tombstones"]
    fresh = _conform(greatest(batch, keys, rules.TOMBSTONE_ORDER).withColumns(stamp), "tombstones")
    merge = _merge(_delta(spark, lake, "tombstones", dataset), fresh, keys, dataset)
    return _execute(merge.whenMatchedUpdateAll(condition=rules.TOMBSTONE_REPLACES).whenNotMatchedInsertAll())


def _apply_tombstones(
    spark: SparkSession,
    lake: LakePath,
    dataset: str,
    batch: DataFrame,
    versions: DataFrame | None,
    sizes: Mapping[str, int] | None,
) -> int:
    """Apply the newest tombstone of every entry this batch touched (its tombstones, and its entry
    `versions` at least as new as Silver's), whichever run brought it: a tombstone may arrive before
    the version it deletes, or after. Also when the entries MERGE changed nothing: a run that died
    right after it left the new versions without their tombstone. Returns the entries updated."""
    from pyspark.sql import functions as F

    no_tombstones = _known_empty(sizes, "tombstones")
    touching = [df.select("entry_id") for df in (None if no_tombstones else batch, versions) if df is not None]
    if not touching:
        return 0
    touched = touching[0].union(touching[1]) if len(touching) == 2 else touching[0]
    latest = (
        _delta(spark, lake, "tombstones")
        .toDF()
        .where(F.col("dataset") == dataset)
        .join(touched.distinct(), "entry_id")
        .groupBy("dataset", "entry_id")
        .agg(F.max("deleted_at").alias("deleted_at"), F.max_by("deletion_type", "deleted_at").alias("deletion_type"))
    )
    entries = _delta(spark, lake, "entries", dataset)
    applies = rules.TOMBSTONE_APPLIES
    # Most batches have no tombstone that changes one of their entries, and a MERGE that changes
    # nothing still held the write's last round for 1-4 s (decision 0026): asked first with one small
    # job. Race-free: a concurrent writer's tombstone committed after this read is applied by that
    # writer's own run, which reads `entries` after its tombstone log's commit.
    current = (
        entries.toDF().where(F.col("dataset") == dataset).select("entry_id", "updated", "deleted_at", "deletion_type")
    )
    due = latest.alias("s").join(current.alias("t"), "entry_id").where(applies)
    if not due.take(1):
        return 0
    merge = _merge(entries, latest, ("entry_id",), dataset)
    applied = {"deleted_at": "s.deleted_at", "deletion_type": "s.deletion_type"}
    return _execute(merge.whenMatchedUpdate(condition=applies, set=applied))["updated"]


def insert_only(
    spark: SparkSession, lake: LakePath, table: str, dataset: str, df: DataFrame, keys: tuple[str, ...]
) -> dict[str, int]:
    fresh = _conform(df, table).dropDuplicates(list(keys))
    return _execute(_merge(_delta(spark, lake, table), fresh, keys, dataset).whenNotMatchedInsertAll())


def record_reconciliation(spark: SparkSession, lake: LakePath, dataset: str, df: DataFrame) -> dict[str, int]:
    """One row per Bronze file, its latest outcome: a reprocessed file that now adds up turns from
    quarantined to reconciled; an identical rerun changes nothing."""
    merge = _merge(_delta(spark, lake, "reconciliation"), _conform(df, "reconciliation"), ("source_file",), dataset)
    return _execute(merge.whenMatchedUpdateAll(condition=rules.RECONCILIATION_CHANGES).whenNotMatchedInsertAll())
