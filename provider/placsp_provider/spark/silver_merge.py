"""MERGE routed rows into the Delta tables: newest `updated` wins, reruns change nothing.

- entries: one row per (dataset, entry_id); a row is replaced only by a strictly newer `updated`.
- lots, documents, results: the child rows of the winning version replace those of older versions
  of the same entry (a newer version may have fewer results; old ones must not linger).
- tombstones: kept as a log, then applied to entries when `deleted_at >= updated`.
- dead letters and reconciliation: insert-only.
Every MERGE condition names the dataset as a literal: partition pruning, and MERGEs of different
datasets never conflict.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from placsp_provider.lake import CHILD_TABLES, table_path
from placsp_provider.parser.silver_schema import BUSINESS_KEYS
from placsp_provider.spark.tables import spark_table_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

CONFLICT_ATTEMPTS = 5

log = logging.getLogger(__name__)
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
    )
    return isinstance(err, conflicts) or "DELTA_CONCURRENT_" in str(err)


def retry_on_conflict(
    write: Callable[[], T], *, what: str, attempts: int = CONFLICT_ATTEMPTS, sleep: Callable[[float], None] = time.sleep
) -> T:
    """Run an idempotent write again when a concurrent writer won the commit race.

    Every write of ours is a MERGE that is safe to repeat (newest wins, insert-only, conditional
    status updates), and the whole `write` is repeated, not the failed MERGE alone: what it decided
    from the table's old snapshot (which versions are newest) is decided again from the new one.
    """
    for attempt in range(1, attempts + 1):
        try:
            return write()
        except Exception as err:
            if not is_commit_conflict(err) or attempt == attempts:
                raise
            delay = min(0.5 * 2 ** (attempt - 1), 8.0)
            first_line = str(err).strip().splitlines()[0][:300] if str(err).strip() else type(err).__name__
            log.warning(
                "%s: a concurrent writer committed first (%s); writing again in %.1f s (attempt %d of %d)",
                what,
                first_line,
                delay,
                attempt + 1,
                attempts,
            )
            sleep(delay)
    raise AssertionError("unreachable")


def _on(keys: tuple[str, ...], dataset: str, t: str = "t", s: str = "s") -> str:
    parts = [f"{t}.dataset = '{dataset}'"] + [f"{t}.`{k}` = {s}.`{k}`" for k in keys]
    return " AND ".join(parts)


# What a MERGE changed, from the row `DeltaMergeBuilder.execute()` returns (delta-spark 4.x:
# num_affected_rows, num_updated_rows, num_deleted_rows, num_inserted_rows), under the names the run
# summary and lineage use. The command's own result: reading it runs no Spark job and no history read.
_MERGE_COUNTS = {"inserted": "num_inserted_rows", "updated": "num_updated_rows", "deleted": "num_deleted_rows"}


def nothing_changed() -> dict[str, int]:
    """The counts of a MERGE that was not run because its source is known to be empty."""
    return dict.fromkeys(_MERGE_COUNTS, 0)


def _execute(merge: Any) -> dict[str, int]:
    (row,) = merge.execute().collect()
    return {name: int(row[column] or 0) for name, column in _MERGE_COUNTS.items()}


def _conform(df: DataFrame, table: str) -> DataFrame:
    """Columns in the table's order and types (so MERGE ... InsertAll never guesses)."""
    from pyspark.sql import functions as F

    return df.select([F.col(f.name).cast(f.dataType).alias(f.name) for f in spark_table_schema(table).fields])


def winners(entries: DataFrame) -> DataFrame:
    """Newest version per entry within the batch; ties broken deterministically (by file name, where
    dated pages sort by their timestamp, then by content)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = Window.partitionBy("dataset", "entry_id").orderBy(
        F.col("updated").desc(), F.col("_source_file").desc(), F.xxhash64(F.to_json(F.struct("*"))).desc()
    )
    return entries.withColumn("_rank", F.row_number().over(order)).where("_rank = 1").drop("_rank")


def merge_silver(
    spark: SparkSession,
    lake: Path,
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
    and even an empty MERGE costs a second and several Spark jobs. A table missing from `sizes` is
    MERGEd whatever its size.

    `repeated_versions`: how many valid entry records of the batch's files repeat the (entry_id,
    updated) of an earlier record in the same file, where the caller counted them (the ingest's
    router). A version's child rows come from one file only (the winner's), and one record's child
    keys are unique (positions; lot ids are validated), so with none repeated the children need no
    dedup: Spark's dedup sorts every child row twice (first() of strings is a sort aggregate), the
    largest per-row cost of the write (docs/benchmarks.md, speed log). None: not counted, dedup.
    """
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    stamp = {"_ingest_run_id": F.lit(run_id), "_ingested_at": F.lit(ingested_at).cast("timestamp")}
    metrics: dict[str, dict[str, int]] = {t: nothing_changed() for t in ("entries", *CHILD_TABLES)}
    if _known_empty(sizes, "entries"):  # children come only with valid entries: tombstones alone
        metrics["tombstones"] = _merge_tombstones(spark, lake, dataset, rows["tombstones"], None, stamp, sizes)
        return metrics
    entries_path = table_path(lake, "entries")
    target = DeltaTable.forPath(spark, str(entries_path))

    best = winners(rows["entries"]).withColumns(stamp)
    best = best.withColumn("deleted_at", F.lit(None).cast("timestamp")).withColumn(
        "deletion_type", F.lit(None).cast("string")
    )
    # Which batch versions are at least as new as what Silver holds: their children are the truth.
    # Equal `updated` counts only when it is the same file again (a rerun, or recovery from a run
    # that died between MERGEs): a different version with the same `updated` loses everywhere,
    # as it does in `entries`, so Silver never mixes two versions of one entry.
    current = (
        target.toDF()
        .where(F.col("dataset") == dataset)
        .select("entry_id", F.col("updated").alias("_held"), F.col("_source_file").alias("_held_file"))
    )
    eligible = (
        best.join(current, "entry_id", "left")
        .where(
            F.col("_held").isNull()
            | (F.col("_held") < F.col("updated"))
            | ((F.col("_held") == F.col("updated")) & (F.col("_held_file") == F.col("_source_file")))
        )
        .select("dataset", "entry_id", "updated", "_source_file", "_held")
        .localCheckpoint(eager=False)
    )
    # One job both materialises the checkpoint (before any MERGE changes `entries`) and counts what
    # the MERGEs below have to do.
    todo = eligible.agg(
        F.count("*").alias("eligible"),
        F.count("_held").alias("held"),  # eligible entries Silver held a version of
        F.count_if(F.col("_held").isNull() | (F.col("_held") < F.col("updated"))).alias("newer"),
    ).first()
    assert todo is not None  # an aggregate without grouping has one row
    if todo["newer"]:  # else every eligible version is already the one Silver holds
        metrics["entries"] = _execute(
            target.alias("t")
            .merge(_conform(best, "entries").alias("s"), _on(BUSINESS_KEYS["entries"], dataset))
            .whenMatchedUpdateAll(condition="s.updated > t.updated")
            .whenNotMatchedInsertAll(),
        )
    # Children of an older version exist only where Silver held the entry: when this batch held
    # none before (e.g. a fresh lake) and the MERGE above replaced none (a concurrent writer may have
    # added one since; one that commits during that MERGE fails it, and the write is redone), there
    # is nothing to delete. Held ones are always cleaned: a run that died after the entries MERGE
    # left the older children behind.
    replaced = bool(todo["held"]) or metrics["entries"]["updated"] > 0
    e = eligible.select(
        "entry_id", F.col("updated").alias("_winner_updated"), F.col("_source_file").alias("_winner_file")
    )

    def child_table(table: str) -> dict[str, int]:
        counts = nothing_changed()
        child = DeltaTable.forPath(spark, str(table_path(lake, table)))
        keys = BUSINESS_KEYS[table]
        fresh = (
            rows[table]
            .join(e, "entry_id")
            .where(
                (F.col("entry_updated") == F.col("_winner_updated")) & (F.col("_source_file") == F.col("_winner_file"))
            )
            .drop("_winner_updated", "_winner_file")
            .withColumns(stamp)
        )
        if repeated_versions != 0:
            fresh = fresh.dropDuplicates(list(keys))
        if replaced:
            counts["deleted"] = _execute(
                child.alias("t")
                .merge(eligible.alias("s"), f"t.dataset = '{dataset}' AND t.entry_id = s.entry_id")
                .whenMatchedDelete(condition="t.entry_updated < s.updated"),
            )["deleted"]
        if todo["eligible"] and not _known_empty(sizes, table):
            inserted = _execute(
                child.alias("t").merge(_conform(fresh, table).alias("s"), _on(keys, dataset)).whenNotMatchedInsertAll(),
            )
            counts.update(inserted=inserted["inserted"], updated=inserted["updated"])
        return counts

    # Each child table, and the tombstones, are written by their own MERGEs on their own tables, all
    # decided by `eligible` (checkpointed above) and the entries MERGE: independent, so at once.
    steps: dict[str, Callable[[], dict[str, int]]] = {t: functools.partial(child_table, t) for t in CHILD_TABLES}
    steps["tombstones"] = lambda: _merge_tombstones(spark, lake, dataset, rows["tombstones"], best, stamp, sizes)
    metrics.update(run_together(spark, steps))
    return metrics


def run_together(spark: SparkSession, steps: Mapping[str, Callable[[], T]]) -> dict[str, T]:
    """Run independent writes (each to its own tables) at once, in threads; return each one's result.

    A MERGE of a few rows spends most of its second or two on the driver (planning, reading the
    table's log, committing) with the 2 cores idle, so two such MERGEs side by side take little more
    than one (docs/benchmarks.md, speed log). Every step is waited for, also when one fails: a
    failed write is redone whole (`retry_on_conflict`), never while a step of it still runs. The
    error raised is the first that is not a commit conflict, else the first conflict.
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


def _merge_tombstones(
    spark: SparkSession,
    lake: Path,
    dataset: str,
    batch: DataFrame,
    best: DataFrame | None,
    stamp: dict,
    sizes: Mapping[str, int] | None,
) -> dict[str, int]:
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    path = table_path(lake, "tombstones")
    log = DeltaTable.forPath(spark, str(path))
    counts = nothing_changed()
    counts["applied_to_entries"] = 0
    no_tombstones = _known_empty(sizes, "tombstones")
    if not no_tombstones:
        fresh = batch.dropDuplicates(list(BUSINESS_KEYS["tombstones"])).withColumns(stamp)
        counts.update(
            _execute(
                log.alias("t")
                .merge(_conform(fresh, "tombstones").alias("s"), _on(BUSINESS_KEYS["tombstones"], dataset))
                .whenNotMatchedInsertAll(),
            )
        )

    # Apply the newest tombstone of every entry this batch touched, whichever run brought it:
    # a tombstone may arrive before the version it deletes, or after. Also when the entries MERGE
    # changed nothing: a run that died right after it left the new versions without their tombstone.
    touching = [df.select("entry_id") for df in (None if no_tombstones else batch, best) if df is not None]
    if not touching:
        return counts
    touched = touching[0].union(touching[1]) if len(touching) == 2 else touching[0]
    latest = (
        log.toDF()
        .where(F.col("dataset") == dataset)
        .join(touched.distinct(), "entry_id")
        .groupBy("dataset", "entry_id")
        .agg(F.max("deleted_at").alias("deleted_at"), F.max_by("deletion_type", "deleted_at").alias("deletion_type"))
    )
    entries = DeltaTable.forPath(spark, str(table_path(lake, "entries")))
    applied = _execute(
        entries.alias("t")
        .merge(latest.alias("s"), _on(("entry_id",), dataset))
        .whenMatchedUpdate(
            condition="s.deleted_at >= t.updated AND (t.deleted_at IS NULL OR t.deleted_at <> s.deleted_at)",
            set={"deleted_at": "s.deleted_at", "deletion_type": "s.deletion_type"},
        ),
    )
    counts["applied_to_entries"] = applied["updated"]
    return counts


def insert_only(
    spark: SparkSession, lake: Path, table: str, dataset: str, df: DataFrame, keys: tuple[str, ...]
) -> dict[str, int]:
    from delta.tables import DeltaTable

    path = table_path(lake, table)
    return _execute(
        DeltaTable.forPath(spark, str(path))
        .alias("t")
        .merge(_conform(df, table).dropDuplicates(list(keys)).alias("s"), _on(keys, dataset))
        .whenNotMatchedInsertAll(),
    )


def record_reconciliation(spark: SparkSession, lake: Path, dataset: str, df: DataFrame) -> dict[str, int]:
    """One row per Bronze file, its latest outcome: a reprocessed file that now adds up turns from
    quarantined to reconciled; an identical rerun changes nothing."""
    from delta.tables import DeltaTable

    path = table_path(lake, "reconciliation")
    return _execute(
        DeltaTable.forPath(spark, str(path))
        .alias("t")
        .merge(_conform(df, "reconciliation").alias("s"), _on(("source_file",), dataset))
        .whenMatchedUpdateAll(condition="t.status <> s.status")
        .whenNotMatchedInsertAll(),
    )
