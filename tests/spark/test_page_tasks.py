"""How an ingest's pages are split into Spark tasks (spark/page_tasks.py).

The planner models Spark's file packing; the Spark test checks that model against what a real scan
of real files does with the planned split, so a Spark upgrade that packs differently fails here.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from placsp_provider.spark.page_tasks import (
    SPARK_MAX_SPLIT,
    SPARK_OPEN_COST,
    _byte_conf,
    _finish,
    pack,
    page_sizes,
    page_task_split,
    plan_page_tasks,
    slots_of,
)

MB = 1_000_000


def _spark_default_finish(sizes: list[int], slots: int) -> int:
    """When the cores finish with Spark's own split (128 MiB, or the bytes over the cores if less)."""
    total = sum(s + SPARK_OPEN_COST for s in sizes)
    split = min(SPARK_MAX_SPLIT, max(SPARK_OPEN_COST, total // slots))
    return _finish(pack(sizes, split), slots, task_cost=SPARK_OPEN_COST)


@pytest.mark.unit
def test_twenty_equal_pages_on_two_cores_end_together_where_spark_leaves_one_core_idle() -> None:
    sizes = [23_500_000 + i * 1_000 for i in range(20)]  # the bench corpus: 20 pages of ~23.5 MB
    # Spark's own packing: 5 tasks of 4 pages, 3 waves on 2 cores, the last wave on one core.
    default = pack(sizes, SPARK_MAX_SPLIT)
    assert [round(t / (23.5 * MB + SPARK_OPEN_COST)) for t in default] == [4, 4, 4, 4, 4]
    plan = plan_page_tasks(sizes, 2)
    assert plan is not None
    assert plan.split_bytes <= SPARK_MAX_SPLIT
    assert sum(plan.tasks) == sum(s + SPARK_OPEN_COST for s in sizes)  # every page in one task
    # Each core parses 10 pages: the run ends after 10 pages' time, not Spark's 12.
    page = 23.5 * MB + SPARK_OPEN_COST
    assert _finish(plan.tasks, 2, task_cost=0) < 10.1 * page
    assert _finish(default, 2, task_cost=0) > 11.9 * page
    assert plan.finish < _spark_default_finish(sizes, 2)
    assert len(plan.tasks) % 2 == 0


@pytest.mark.unit
def test_never_worse_than_spark_and_never_above_the_users_bound() -> None:
    rng = random.Random(15)
    for _ in range(300):
        slots = rng.choice([1, 2, 3, 4, 8])
        sizes = [rng.randint(1_000, 30 * MB) for _ in range(rng.randint(2, 60))]
        cap = rng.choice([SPARK_MAX_SPLIT, 64 << 20, 256 << 20])
        plan = plan_page_tasks(sizes, slots, max_split=cap)
        if plan is None:  # only when every core gets many full tasks anyway
            assert sum(s + SPARK_OPEN_COST for s in sizes) > cap * slots * 8
            continue
        assert plan.split_bytes <= cap
        assert plan.tasks == pack(sizes, plan.split_bytes)
        if cap == SPARK_MAX_SPLIT:
            assert plan.finish <= _spark_default_finish(sizes, slots)


@pytest.mark.unit
def test_nothing_to_plan_for_one_page() -> None:
    assert plan_page_tasks([5 * MB], 2) is None
    assert plan_page_tasks([], 2) is None


@pytest.mark.unit
def test_a_page_gone_before_planning_is_left_for_sparks_listing_to_report(tmp_path: Path) -> None:
    page = tmp_path / "page.atom"
    page.write_bytes(b"x" * 10)
    assert page_sizes([str(page), str(tmp_path / "gone.atom")]) == [10, 0]


@pytest.mark.unit
def test_pack_closes_a_task_when_the_next_page_would_pass_the_split() -> None:
    o = SPARK_OPEN_COST
    # Largest first; a page bigger than the split is a task of its own (pages are not split).
    assert pack([10, 300, 20], split_bytes=100, open_cost=o) == (300 + o, 20 + o, 10 + o)
    assert pack([10, 20, 30], split_bytes=10**9, open_cost=o) == (60 + 3 * o,)
    # The check counts the next page without its open cost, the running total with them (as Spark).
    assert pack([50, 50], split_bytes=100 + o, open_cost=o) == (100 + 2 * o,)
    assert pack([50, 50], split_bytes=100 + o - 1, open_cost=o) == (50 + o, 50 + o)


@pytest.mark.unit
def test_byte_sizes_are_read_as_spark_reads_them() -> None:
    class Conf:
        def __init__(self, value):
            self.value = value

        def get(self, key, default=None):
            return self.value

    class Session:  # only the session's conf is read: a stand-in, no JVM needed for a string
        def __init__(self, value):
            self.conf = Conf(value)

    assert _byte_conf(Session(None), "k", 7) == 7
    assert _byte_conf(Session("134217728"), "k", 7) == 128 << 20
    assert _byte_conf(Session("256m"), "k", 7) == _byte_conf(Session("256MB"), "k", 7) == 256 << 20
    assert _byte_conf(Session("1g"), "k", 7) == 1 << 30
    with pytest.raises(ValueError, match="not a byte size"):
        _byte_conf(Session("lots"), "k", 7)


@pytest.mark.unit
def test_slots_are_the_cores_that_run_tasks() -> None:
    assert slots_of("local[2]", default_parallelism=4) == 2  # local sessions set parallelism for shuffles
    assert slots_of("local[*]", default_parallelism=4) == len(os.sched_getaffinity(0))
    assert slots_of("local", default_parallelism=4) == 1
    assert slots_of("local[3, 2]", default_parallelism=4) == 3
    assert slots_of("spark://master:7077", default_parallelism=6) == 6
    assert slots_of("spark://master:7077", default_parallelism=6, task_cpus=2) == 3


@pytest.mark.spark
def test_spark_scans_the_pages_in_the_planned_tasks(spark, tmp_path: Path) -> None:
    """Real files (sparse: only their length matters), a real binaryFile scan inside the split."""
    from pyspark.sql import functions as F

    sizes = [9 * MB, 7 * MB, 7 * MB, 6 * MB, 5 * MB, 5 * MB, 3 * MB, 2 * MB, 1 * MB]
    files = []
    for i, size in enumerate(sizes):
        f = tmp_path / f"page-{i}.atom"
        with f.open("wb") as out:
            out.truncate(size)
        files.append(str(f))
    before = spark.conf.get("spark.sql.files.maxPartitionBytes", None)
    with page_task_split(spark, files) as plan:
        assert plan is not None and len(plan.tasks) > 1
        rows = (
            spark.read.format("binaryFile").load(files).select("length", F.spark_partition_id().alias("task")).collect()
        )
    assert spark.conf.get("spark.sql.files.maxPartitionBytes", None) == before  # scoped
    by_task: dict[int, int] = {}
    for row in rows:
        by_task[row["task"]] = by_task.get(row["task"], 0) + row["length"] + SPARK_OPEN_COST
    assert tuple(by_task[t] for t in sorted(by_task)) == plan.tasks
