"""How the pages of one ingest are split into Spark tasks, so that the cores finish together.

Spark packs files into tasks by size ("next fit decreasing": files sorted largest first, a task
closed when the next file would take it past the split size), with a split size of at most
`spark.sql.files.maxPartitionBytes` (128 MiB). Parsing a page costs time in proportion to its bytes,
so the ingest lasts as long as the busiest core. On few cores that packing can waste a third of it:
20 pages of 23.5 MB on 2 cores become 5 tasks of 4 pages, run in 3 waves, the last on one core
(decisions 0010, 0018). Here the split size is chosen by running Spark's packing and its task
scheduling on the page sizes, for every candidate, and keeping the one that ends first. Pure Python:
Spark is only told the chosen size (`page_task_split`), around the staging action.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from placsp_provider.ingest.local_parse import usable_cpus
from placsp_provider.lake_storage import arrow_location
from placsp_provider.spark.session import session_conf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SPARK_OPEN_COST = 4 << 20  # spark.sql.files.openCostInBytes' default: what Spark charges per file
SPARK_MAX_SPLIT = 128 << 20  # spark.sql.files.maxPartitionBytes' default
# Candidate task counts go up to this many waves of the cores; past them, tasks are small next to the
# whole and Spark's own packing already balances (and this search would cost more than it saves).
MAX_WAVES = 8
# Candidate split sizes around each even share: the share itself plus a little, since page sizes
# differ and a share a few bytes short of one more page makes one more task (a whole extra wave).
_SHARE_SLACK = (1.0, 1.01, 1.03, 1.06, 1.1, 1.15, 1.25)


@dataclass(frozen=True)
class TaskPlan:
    """The split size to give Spark and what it will make of the pages: task sizes in packing order."""

    split_bytes: int
    tasks: tuple[int, ...]  # bytes per task, each file's open cost included, in Spark's order
    slots: int
    open_cost: int = SPARK_OPEN_COST

    @property
    def finish(self) -> int:
        """When the last core is done, in bytes (Spark hands the tasks out in order to free cores)."""
        return _finish(self.tasks, self.slots, task_cost=self.open_cost)

    def describe(self) -> str:
        return f"pages split into {len(self.tasks)} Spark task(s) for {self.slots} core(s), to end together"


def pack(sizes: Sequence[int], split_bytes: int, open_cost: int = SPARK_OPEN_COST) -> tuple[int, ...]:
    """Spark's file packing (FilePartition.getFilePartitions): largest first, next fit; a file larger
    than the split is a task of its own (binary files are not split). Returns each task's bytes."""
    tasks: list[int] = []
    current, files = 0, 0
    for size in sorted(sizes, reverse=True):
        if files and current + size > split_bytes:
            tasks.append(current)
            current, files = 0, 0
        current += size + open_cost
        files += 1
    if files:
        tasks.append(current)
    return tuple(tasks)


def _finish(tasks: Sequence[int], slots: int, task_cost: int) -> int:
    """List scheduling: each task in order goes to the core that frees first."""
    cores = [0] * slots
    for task in tasks:
        i = cores.index(min(cores))
        cores[i] += task + task_cost
    return max(cores)


def plan_page_tasks(
    sizes: Sequence[int], slots: int, *, open_cost: int = SPARK_OPEN_COST, max_split: int = SPARK_MAX_SPLIT
) -> TaskPlan | None:
    """The split size whose tasks finish first on `slots` cores, or None to leave Spark's own packing
    (one page, or so many bytes that every core gets many tasks).

    Each task is charged one more `open_cost` on top of its files': starting a task (a Python worker's
    Arrow stream, the task's scheduling) costs about a small page, which is what makes 20 one-page
    tasks slower than 4 of 5 pages (decision 0010). Ties go to the larger split (fewer tasks).
    Never above `max_split`: the user's bound on a task's bytes stays a bound.
    """
    slots = max(1, slots)
    total = sum(s + open_cost for s in sizes)
    if len(sizes) < 2 or total > max_split * slots * MAX_WAVES:
        return None
    # Spark's own split (its parallelism taken as the cores) is a candidate: never worse than it.
    candidates = {min(max_split, max(open_cost, total // slots))}
    for count in range(1, min(len(sizes), slots * MAX_WAVES) + 1):
        candidates.update(min(max_split, int(total / count * slack)) for slack in _SHARE_SLACK)
    split = min(candidates, key=lambda c: (_finish(pack(sizes, c, open_cost), slots, task_cost=open_cost), -c))
    return TaskPlan(split_bytes=split, tasks=pack(sizes, split, open_cost), slots=slots, open_cost=open_cost)


def task_slots(spark: SparkSession) -> int:
    """Tasks that run at once: the N of `local[N]`, else Spark's default parallelism (the executors'
    cores in a cluster), over `spark.task.cpus`. Not `defaultParallelism` in local mode: local
    sessions set `spark.default.parallelism` for shuffles, not for the cores there are."""
    sc = spark.sparkContext
    return slots_of(sc.master or "", sc.defaultParallelism, int(sc.getConf().get("spark.task.cpus", "1")))


def slots_of(master: str, default_parallelism: int, task_cpus: int = 1) -> int:
    local = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\s*\d+)?\])?", master)
    if local:
        cores = local.group(1)
        slots = 1 if cores is None else usable_cpus() if cores == "*" else int(cores)
    else:
        slots = default_parallelism
    return max(1, slots // max(1, task_cpus))


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def _byte_conf(spark: SparkSession, key: str, default: int) -> int:
    """A byte-size SQL conf as the session holds it ("134217728", "128m", "128MB"), in bytes."""
    value = spark.conf.get(key, None)
    if value is None:
        return default
    size = re.fullmatch(r"\s*(\d+)\s*([bkmgt]?)b?\s*", str(value).lower())
    if size is None:
        raise ValueError(f"{key}={value!r}: not a byte size Spark reads (e.g. 134217728, 128m)")
    return int(size.group(1)) * _UNITS[size.group(2)]


def page_sizes(files: Sequence[str]) -> list[int]:
    """Each page's bytes; 0 for one that cannot be read here, so that Spark's listing, which comes
    next, is where a missing page fails (with the ingest's own message for it)."""
    sizes = []
    for f in files:
        try:
            if f.startswith("s3://"):  # an S3 lake's page: one HEAD through Arrow's S3 client
                filesystem, location = arrow_location(f)
                sizes.append(filesystem.get_file_info(location).size or 0)
            else:
                sizes.append(os.path.getsize(f))
        except OSError:
            sizes.append(0)
    return sizes


@contextmanager
def page_task_split(spark: SparkSession, files: Sequence[str]) -> Iterator[TaskPlan | None]:
    """Inside, a scan of `files` splits into the planned tasks. Spark reads the split size when the
    scan runs, so the parse-and-route's action goes inside; set for the whole session it would also
    split every Silver read."""
    plan = plan_page_tasks(
        page_sizes(files),
        task_slots(spark),
        open_cost=_byte_conf(spark, "spark.sql.files.openCostInBytes", SPARK_OPEN_COST),
        max_split=_byte_conf(spark, "spark.sql.files.maxPartitionBytes", SPARK_MAX_SPLIT),
    )
    with ExitStack() as scoped:
        if plan is not None:
            scoped.enter_context(session_conf(spark, "spark.sql.files.maxPartitionBytes", str(plan.split_bytes)))
            # The split size alone decides: Spark would otherwise cap it at the bytes over its parallelism.
            scoped.enter_context(session_conf(spark, "spark.sql.files.minPartitionNum", "1"))
        yield plan
