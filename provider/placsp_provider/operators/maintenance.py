"""PlacspMaintainOperator: compact the lake's Delta tables and remove files no recent version uses."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Context

from placsp_provider.extras import require_spark
from placsp_provider.hooks.lake import LakeHook
from placsp_provider.lake import LAKE_TABLES, maintenance_summary_path
from placsp_provider.lineage.maintenance import maintenance_lineage
from placsp_provider.maintenance import runs_on_spark
from placsp_provider.operators.links import SparkUILink
from placsp_provider.operators.spark_submit import SPARK_CONN_DEFAULT, default_application, submit
from placsp_provider.run_policy import spark_pool_args
from placsp_provider.settings import maintenance_file_bytes

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage


class PlacspMaintainOperator(SparkSubmitOperator):
    """Delta `OPTIMIZE`, then `VACUUM`, of the lake's tables (docs/runbook.md, "Table maintenance").

    A thin `SparkSubmitOperator` around `placsp_provider.spark.maintenance` (the job `placsp maintain`
    runs); on an S3 lake, delta-rs's compaction and VACUUM in the task instead, since only delta-rs
    commits there (`delta_rs.maintenance`, decision 0038). Every ingest MERGE rewrites the files it
    touches, and the replaced ones stay until a VACUUM.
    Returns to XCom, per table: files compacted and written, files deleted, files left. The rows
    readers see do not change, so the task declares no Asset outlets (a consumer DAG does not rerun).
    Run it when no ingest or replay writes (the bundled DAG: weekly, at noon UTC on Sunday); a commit
    in between fails it with a one-line message, and a retry later finishes the job.

    :param lake: lake root; defaults to `$PLACSP_LAKE`.
    :param tables: tables to maintain (default: all the Silver ingest writes).
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "lake")
    ui_color = "#e8e3f3"
    operator_extra_links = (SparkUILink(),)

    def __init__(
        self,
        *,
        lake: str | None = None,
        tables: Sequence[str] | None = None,
        conn_id: str = SPARK_CONN_DEFAULT,
        application: str | None = None,
        **kwargs: Any,
    ) -> None:
        if unknown := sorted(set(tables or ()) - set(LAKE_TABLES)):
            raise ValueError(f"tables {unknown}: not lake tables; choose among {list(LAKE_TABLES)}")
        # The pool, when set: one spark-submit at a time, with the ingests.
        kwargs = {"name": "placsp-maintain", **spark_pool_args(), **kwargs}
        super().__init__(
            application=application or default_application("maintenance.py"),
            conn_id=conn_id,
            **kwargs,
        )
        self.spark_conn_id = conn_id
        self.lake = lake
        self.tables = tuple(tables or LAKE_TABLES)
        self._done: dict[str, Any] | None = None

    def execute(self, context: Context) -> dict[str, Any]:  # type: ignore[override]
        lake = LakeHook().lake(self.lake)
        run_id = context["run_id"]
        if not runs_on_spark(lake):  # an S3 lake: delta-rs, in this task (decision 0038)
            from placsp_provider.delta_rs.maintenance import maintain_tables

            self.log.info("lake %s: maintaining %d table(s) with delta-rs", lake, len(self.tables))
            self._done = maintain_tables(lake, self.tables)
            return self._done
        require_spark(f"lake {lake}: table maintenance")
        tables = [arg for table in self.tables for arg in ("--table", table)]
        # The file size read here, where the task's settings are, not in a driver that may run elsewhere.
        size = ["--file-bytes", str(maintenance_file_bytes())]
        self.application_args = ["--lake", str(lake), "--run-id", run_id, *size, *tables]
        with tempfile.TemporaryDirectory(prefix="placsp-pyfiles-") as tmp:
            self.log.info("lake %s: maintaining %d table(s) on Spark", lake, len(self.tables))
            submit(self, Path(tmp), context, app_name="placsp_maintain")
        self._done = json.loads(maintenance_summary_path(lake, run_id).read_text())
        for table, did in self._done.items():
            self.log.info(
                "table %s: %d small files compacted into %d; VACUUM deleted %d files, %d left",
                table,
                did["files_compacted"],
                did["files_written"],
                did["files_deleted"],
                did["files_left"],
            )
        return self._done

    def get_openlineage_facets_on_start(self) -> OperatorLineage:
        return maintenance_lineage(self.lake, self.tables, None)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage:
        return maintenance_lineage(self.lake, self.tables, self._done)
