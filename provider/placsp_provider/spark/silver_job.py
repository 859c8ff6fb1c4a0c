"""The Spark engine's parts (ingest.engines): `SparkParser`, pages parsed by Spark's tasks, and
`SparkWriter`, a staged batch written by Spark's Delta MERGEs (`silver_merge`); and `main`, the
spark-submit entry (this file, from the Silver operator), which runs the one
`ingest.run.ingest` with its session. Never imports Airflow.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from placsp_provider.bronze.manifest import LandedPage
from placsp_provider.datasets import Dataset, get_dataset
from placsp_provider.errors import BronzePageError
from placsp_provider.ingest.batch import StagedBatch
from placsp_provider.ingest.request import IngestRequest
from placsp_provider.ingest.staging import lake_relative
from placsp_provider.lake import DEAD_LETTER_TABLE, SILVER_TABLES
from placsp_provider.lake_storage import LakePath, is_local, lake_path
from placsp_provider.spark.page_tasks import page_task_split
from placsp_provider.spark.routing import stage_pages, table_spark_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


class _Session:
    """A Spark session given, or a local one started here and stopped by `close`."""

    def __init__(self, spark: SparkSession | None) -> None:
        self._own = spark is None
        if spark is None:
            from placsp_provider.spark.session import get_session

            spark = get_session("placsp-ingest")
        self.spark: SparkSession = spark

    def close(self) -> None:
        if self._own:
            self.spark.stop()


class SparkParser(_Session):
    """Pages parsed and staged by Spark's tasks (`routing.stage_pages`), on every core or executor."""

    shared_staging = True  # executors on other machines: an S3 lake's staged rows go in the lake

    def stage(
        self, dataset: Dataset, lake: LakePath, pages: list[LandedPage], folder: LakePath
    ) -> list[Mapping[str, Any]]:
        files = [str(lake / p.file) for p in pages]
        with page_task_split(self.spark, files) as plan:  # tasks sized so the cores finish together
            if plan is not None:
                log.info("dataset %s: %s", dataset.key, plan.describe())
            try:  # Spark's listing, then the first action: where a page removed since the check surfaces
                return [
                    row.asDict() for row in stage_pages(self.spark, dataset, str(lake), files, str(folder)).collect()
                ]
            except Exception as err:
                bronze = _page_gone_error(err, dataset.key, lake)
                if bronze is None:
                    raise
                raise bronze from err

    def create_tables(self, lake: LakePath, dataset: str) -> None:
        if not is_local(lake):  # on S3 only delta-rs commits (decision 0038): the in-process engine's way
            from placsp_provider.ingest.engines import InProcessParser

            InProcessParser().create_tables(lake, dataset)
            return
        from placsp_provider.spark.tables import ensure_tables

        ensure_tables(self.spark, lake)


class SparkWriter(_Session):
    """A staged batch written by Spark's Delta MERGEs (`silver_merge`), for batches larger than the
    driver should hold: the staged rows are read by the executors, never collected."""

    def write(self, batch: StagedBatch) -> dict[str, Any]:
        from pyspark.sql import functions as F

        from placsp_provider.spark.silver_merge import (
            insert_only,
            merge_silver,
            nothing_changed,
            record_reconciliation,
            retry_on_conflict,
            run_together,
        )

        spark, lake, dataset, plan = self.spark, batch.lake, batch.dataset, batch.plan

        def staged(table: str) -> DataFrame:
            path = batch.staged_path(table)
            schema = table_spark_schema(table)
            rows = spark.createDataFrame([], schema) if path is None else spark.read.schema(schema).parquet(str(path))
            return rows.where(~F.col("_source_file").isin(list(batch.quarantined))) if batch.quarantined else rows

        rows = {t: staged(t) for t in SILVER_TABLES}
        letters = spark.createDataFrame(batch.dead_letters())
        reconciliation = spark.createDataFrame(batch.reconciliation())

        # Dead letters and Silver at once (different tables), then the reconciliation that marks the
        # files done; every MERGE idempotent, so a commit conflict with a concurrent writer (a replay,
        # another ingest) is met by doing it all again.
        def write() -> dict[str, Any]:
            steps: dict[str, Callable[[], Any]] = {
                "silver": lambda: merge_silver(
                    spark, lake, dataset, rows, batch.run_id, batch.started, plan.sizes, plan.repeated_versions
                )
            }
            if plan.sizes[DEAD_LETTER_TABLE]:
                steps["dead_letters"] = lambda: insert_only(
                    spark, lake, DEAD_LETTER_TABLE, dataset, letters, ("dead_letter_id",)
                )
            done = run_together(spark, steps)
            metrics = {**done["silver"], "dead_letters": done.get("dead_letters", nothing_changed())}
            record_reconciliation(spark, lake, dataset, reconciliation)
            return metrics

        return retry_on_conflict(write, what=f"dataset {dataset}: Silver write of run {batch.run_id}")


# Spark's two words for it: the file went between the check and the listing, or after the listing.
_FILE_GONE = re.compile(
    r"\[PATH_NOT_FOUND\] Path does not exist: (.+?)\.(?: SQLSTATE|$)"
    r"|\[FAILED_READ_FILE\.FILE_NOT_EXIST\] Encountered error while reading file (.+?)\. File does not exist",
    re.MULTILINE,
)


def _page_gone_error(err: Exception, dataset: str, lake: LakePath) -> BronzePageError | None:
    """A page removed after the run checked Bronze, from the text of Spark's own exception (its
    listing checks each named file, and the JVM checks each listed file again before a worker reads
    it): raised as the provider's error, so the user's first line is the message and not a JVM stack.

    Not attempted for an error a worker raises itself (`routing.read_page`): Spark 4.2 does not
    always carry a worker's message back (measured: at times a NullPointerException in
    `ArrowColumnVector.getChild` arrives instead), so that message is only in the task's log.
    """
    gone = _FILE_GONE.search(str(err))
    if gone is None:
        return None
    reason = "the page was removed while the run read it; nothing was written: run the ingest again"
    return BronzePageError(dataset, lake_relative(gone.group(1) or gone.group(2), str(lake)), reason)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="PLACSP Silver ingest (Spark job)")
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--lake", required=True, type=lake_path)
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--manifest", action="append", type=lake_path, default=[])
    parser.add_argument("--reprocess", action="store_true")
    parser.add_argument(
        "--engine",
        default="spark+delta-rs",
        help="spark: Spark parses and writes; spark+delta-rs (default): Spark parses, delta-rs writes",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s %(message)s")
    from placsp_provider.ingest.run import ingest
    from placsp_provider.spark.session import get_session

    request = IngestRequest(get_dataset(args.dataset), args.lake, args.run_id, tuple(args.manifest), args.reprocess)
    summary = ingest(request, args.engine, spark=get_session("placsp-silver-ingest"))
    print("PLACSP_SUMMARY " + json.dumps(summary, default=str))
    return 0


if __name__ == "__main__":
    from placsp_provider.spark.session import run_job

    sys.exit(run_job(main))
