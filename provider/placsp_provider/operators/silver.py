"""PlacspSilverOperator: the Silver ingest of one dataset, in the task or on Spark."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator, Context

from placsp_provider.assets import record_versions
from placsp_provider.datasets import get_dataset
from placsp_provider.hooks.lake import LakeHook
from placsp_provider.lake import run_summary_path
from placsp_provider.lake_storage import lake_path
from placsp_provider.lineage import silver as silver_lineage
from placsp_provider.operators.links import LineageJobLink, SparkUILink
from placsp_provider.operators.spark_submit import (
    SPARK_CONN_DEFAULT,
    default_application,
    spark_cluster,
    spark_connection_or_local,
    spark_submit_settings,
    with_spark_task_defaults,
)

if TYPE_CHECKING:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from airflow.providers.openlineage.extractors import OperatorLineage

    from placsp_provider.ingest.summary import RunSummary


class PlacspSilverOperator(BaseOperator):
    """Parse the Bronze pages of one dataset into the Silver Delta tables and the dead letters.

    The engine (`ingest.engines`) decides where: a small batch into a lake whose tables exist (what a
    daily run brings: up to `$PLACSP_DELTA_RS_MAX_MB`, default 64 MB of pages) is ingested in the task
    itself, by delta-rs, without a JVM; so is a first load of the dataset, appended (a larger one's
    pages parsed by a worker process per core), unless `conn_id` is a Spark cluster, which then parses
    it. Otherwise the task submits the Spark job
    (the package's `spark/silver_job.py`) through the Spark provider's `SparkSubmitHook`, with the
    provider package and the pinned Delta jars: Spark parses, and delta-rs writes in the Spark
    driver up to `$PLACSP_DELTA_RS_WRITE_MAX_MB` (512 MB of pages), Spark's MERGEs above. Either way
    the run summary (`ingest.summary.RunSummary`) goes to XCom.

    OpenLineage (docs/lineage.md): the task reports Bronze in and the lake's tables out, with the run
    summary's counts, whichever engine wrote; a Spark job runs the OpenLineage Spark listener, whose
    events name this task run as their parent.

    :param dataset: dataset key or syndication id.
    :param lake: lake root; defaults to `$PLACSP_LAKE`.
    :param manifest: extraction manifest(s) to ingest (templated; typically the extract task's
        XCom `manifest`); default: every manifest of the dataset not yet ingested.
    :param engine: `auto`, `spark`, `spark+delta-rs` or `delta-rs`; default `$PLACSP_INGEST_ENGINE`,
        else `auto`.
    :param conn_id: the Spark connection (e.g. `spark://host:7077`); absent: `local[*]`.
    :param spark_conf: extra Spark conf for the job (over the provider's defaults).
    :param spark_submit_kwargs: extra `SparkSubmitHook` arguments (`executor_memory`, `num_executors`...).
    """

    template_fields: Sequence[str] = ("dataset", "lake", "manifest")
    ui_color = "#d7ecf7"
    operator_extra_links = (SparkUILink(), LineageJobLink())

    def __init__(
        self,
        *,
        dataset: str,
        lake: str | None = None,
        manifest: str | None = None,
        engine: str | None = None,
        conn_id: str = SPARK_CONN_DEFAULT,
        application: str | None = None,
        spark_conf: dict[str, Any] | None = None,
        spark_submit_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        with_spark_task_defaults(kwargs, lake)
        super().__init__(**kwargs)
        self.dataset = dataset
        self.lake = lake
        self.manifest = manifest
        self.engine = engine
        self.spark_conn_id = conn_id
        self.application = application or default_application("silver_job.py")
        self.spark_conf = spark_conf
        self.spark_submit_kwargs = spark_submit_kwargs or {}
        self._hook: SparkSubmitHook | None = None
        self._summary: RunSummary | None = None  # what execute returned, for the lineage events
        self._complete_lineage: OperatorLineage | None = None

    def execute(self, context: Context) -> RunSummary:
        from placsp_provider.bronze.manifest import Manifest
        from placsp_provider.ingest.engines import choose_engine, needs_spark
        from placsp_provider.ingest.request import IngestRequest
        from placsp_provider.ingest.run import ingest
        from placsp_provider.ingest.summary import empty_summary, finish

        ds = get_dataset(self.dataset)
        lake = LakeHook().lake(self.lake)
        run_id = context["run_id"]
        if str(self.manifest).strip() == "None" or (
            self.manifest and not Manifest.load(lake_path(self.manifest)).pages
        ):
            # An upstream task returned no manifest (e.g. a completeness check that recovered nothing),
            # or nothing landed for this interval: nothing to ingest, and no reason to start a JVM. The
            # summary goes where the gate reads it: the task's own lake (an explicit `lake=` included).
            self.log.info("dataset %s: no pages to ingest (manifest %s)", ds.key, self.manifest)
            self._summary = finish(empty_summary(ds.key, run_id, 0, 0), lake)
            self._complete_lineage = silver_lineage.on_complete(
                self,
                self._summary,
                run_id,
                # Read now: the lake's reads do not work in the fork where OpenLineage asks (lake_storage).
            )
            record_versions(context, lake)
            return self._summary
        request = IngestRequest(ds, lake, run_id, (lake_path(self.manifest),) if self.manifest else ())
        engine = choose_engine(request, self.engine, spark_cluster=partial(spark_cluster, self.spark_conn_id))
        self.log.info("dataset %s: Silver ingest of %s, engine %s (run %s)", ds.key, lake, engine, run_id)
        summary = self._submit(request, engine, context) if needs_spark(engine) else ingest(request, engine)
        self.log.info("dataset %s: Silver run summary:\n%s", ds.key, json.dumps(summary, indent=2, sort_keys=True))
        self._summary = summary
        self._complete_lineage = silver_lineage.on_complete(
            self,
            summary,
            run_id,
            # Read now: the lake's reads do not work in the fork where OpenLineage asks (lake_storage).
        )
        record_versions(context, lake)
        return summary

    def _submit(self, request: Any, engine: str, context: Context) -> RunSummary:
        """The Spark job, submitted by the Spark provider's hook; its summary, as the job wrote it."""
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        ds, lake = request.dataset, request.lake
        args = ["--dataset", ds.key, "--lake", str(lake), "--run-id", request.run_id, "--engine", engine]
        args += [a for m in request.manifests for a in ("--manifest", str(m))]
        with tempfile.TemporaryDirectory(prefix="placsp-pyfiles-") as tmp:
            settings = spark_submit_settings(
                Path(tmp), context, app_name=f"placsp_silver_{ds.key}", conf=self.spark_conf
            )
            kwargs = {"name": f"placsp-silver-{ds.key}", **settings, **self.spark_submit_kwargs}
            with spark_connection_or_local(self.spark_conn_id, self.log):
                self._hook = SparkSubmitHook(conn_id=self.spark_conn_id, application_args=args, **kwargs)
                self._hook.submit(self.application)
        return json.loads(run_summary_path(lake, ds.key, request.run_id).read_text())

    def on_kill(self) -> None:
        if self._hook is not None:
            self._hook.on_kill()

    # -- OpenLineage (docs/lineage.md): Bronze in, Silver + dead letters + reconciliation out -------
    def get_openlineage_facets_on_start(self) -> OperatorLineage:
        return silver_lineage.on_start(self)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage:
        return self._complete_lineage or silver_lineage.on_complete(
            self, self._summary, getattr(task_instance, "run_id", None)
        )

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> OperatorLineage:
        return silver_lineage.on_failure(self, getattr(task_instance, "run_id", None))
