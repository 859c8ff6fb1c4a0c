"""PlacspSilverOperator: run the Silver ingest of one dataset on Spark via spark-submit."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Context

from placsp_provider.operators.links import LineageJobLink, SparkUILink
from placsp_provider.operators.spark_submit import (
    SPARK_CONN_DEFAULT,
    default_application,
    prepare_spark_submit,
    spark_connection_or_local,
    with_spark_task_defaults,
)

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage


class PlacspSilverOperator(SparkSubmitOperator):
    """Parse the Bronze pages of one dataset into the Silver Delta tables and the dead letters.

    A small batch into a lake whose tables exist (what a daily run brings: up to
    `$PLACSP_DELTA_RS_MAX_MB`, default 64 MB of pages) is ingested in the task itself, by delta-rs,
    without a JVM (`engine="auto"`, the default; docs/architecture.md). Otherwise it is a thin
    `SparkSubmitOperator` (Spark parses; up to `$PLACSP_DELTA_RS_WRITE_MAX_MB`, default 512 MB of
    pages, delta-rs writes in the Spark driver, and with `engine="spark"` or above that Spark's Delta
    MERGEs write): it ships the provider package
    (`--py-files`) and the pinned Delta jars, passes the lake, the run id and the extraction
    manifest, then reads the job's run summary (rows by table, dead letters by stage and error
    type, reconciliation). Either way the summary is returned to XCom.

    OpenLineage (docs/lineage.md): the task reports Bronze in and the lake's tables out, with the run
    summary's counts, whichever engine wrote; a Spark job runs the OpenLineage Spark listener, whose
    events name this task run as their parent.

    Master: the Spark connection (`conn_id`, default `spark_default`, e.g. `spark://host:7077`); when
    that connection does not exist, `local[*]` with the pip-installed Spark.

    :param dataset: dataset key or syndication id.
    :param lake: lake root; defaults to `$PLACSP_LAKE`.
    :param manifest: extraction manifest(s) to ingest (templated; typically the extract task's
        XCom `manifest`); default: every manifest of the dataset not yet ingested.
    :param engine: `auto`, `spark`, `spark+delta-rs` or `delta-rs`; default `$PLACSP_INGEST_ENGINE`,
        else `auto`.
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "dataset", "lake", "manifest")
    ui_color = "#d7ecf7"
    operator_extra_links = (SparkUILink(), LineageJobLink())

    def __init__(
        self,
        *,
        dataset: str,
        lake: str | None = None,
        manifest: str | None = None,
        conn_id: str = SPARK_CONN_DEFAULT,
        application: str | None = None,
        engine: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("name", f"placsp-silver-{dataset}")
        with_spark_task_defaults(kwargs, lake)
        super().__init__(
            application=application or default_application("silver_ingest.py", "silver_job.py"),
            conn_id=conn_id,
            **kwargs,
        )
        self.spark_conn_id = conn_id
        self.dataset = dataset
        self.lake = lake
        self.manifest = manifest
        self.engine = engine
        self._summary: dict[str, Any] | None = None  # what execute returned, for the lineage events

    def execute(self, context: Context) -> dict[str, Any]:  # type: ignore[override]
        from placsp_provider.datasets import get_dataset
        from placsp_provider.lake import resolve_lake, run_summary_path

        ds = get_dataset(self.dataset)
        lake = resolve_lake(self.lake)
        run_id = context["run_id"]
        if str(self.manifest).strip() == "None":
            # An upstream task returned no manifest (e.g. a completeness check that recovered nothing).
            self.log.info("dataset %s: no manifest given by the upstream task; nothing to ingest", ds.key)
            self._summary = _nothing_to_do(ds.key, run_id, lake)
            return self._summary
        if self.manifest and not _manifest_pages(Path(self.manifest)):
            # Nothing landed for this interval: no reason to start a JVM.
            self.log.info("dataset %s: the manifest %s lists no pages; nothing to ingest", ds.key, self.manifest)
            self._summary = _nothing_to_do(ds.key, run_id, lake)
            return self._summary
        engine, summary = self._ingest_without_spark(ds, lake, run_id)
        if summary is not None:
            return summary
        args = ["--dataset", ds.key, "--lake", str(lake), "--run-id", run_id, "--engine", engine]
        if self.manifest:
            args += ["--manifest", str(self.manifest)]
        self.application_args = args
        with tempfile.TemporaryDirectory(prefix="placsp-pyfiles-") as tmp:
            prepare_spark_submit(self, Path(tmp), context, app_name=f"placsp_silver_{ds.key}")
            self.log.info("dataset %s: Silver ingest of %s on Spark, engine %s (run %s)", ds.key, lake, engine, run_id)
            with spark_connection_or_local(self.spark_conn_id, self.log):
                super().execute(context)
        summary = json.loads(run_summary_path(lake, ds.key, run_id).read_text())
        self.log.info("dataset %s: Silver run summary:\n%s", ds.key, json.dumps(summary, indent=2, sort_keys=True))
        self._summary = summary
        return summary

    def _ingest_without_spark(self, ds: Any, lake: Path, run_id: str) -> tuple[str, dict[str, Any] | None]:
        """The engine chosen, and the summary when it is delta-rs: ingested here (None: Spark's turn)."""
        from placsp_provider.delta_rs import silver_job as delta_rs_job
        from placsp_provider.spark.silver_job import IngestRequest

        manifests = (Path(self.manifest),) if self.manifest else ()
        request = IngestRequest(ds, lake, run_id, manifests)
        engine = delta_rs_job.choose_engine(request, self.engine)
        if engine != delta_rs_job.DELTA_RS:
            return engine, None
        self.log.info("dataset %s: Silver ingest of %s with delta-rs, in this task (run %s)", ds.key, lake, run_id)
        summary = delta_rs_job.run_ingest(request)
        self.log.info("dataset %s: Silver run summary:\n%s", ds.key, json.dumps(summary, indent=2, sort_keys=True))
        self._summary = summary
        return engine, summary

    # -- OpenLineage (docs/lineage.md): Bronze in, Silver + dead letters + reconciliation out -------
    def get_openlineage_facets_on_start(self) -> OperatorLineage:
        from placsp_provider.lineage import silver

        return silver.on_start(self)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage:
        from placsp_provider.lineage import silver

        return silver.on_complete(self, self._summary, getattr(task_instance, "run_id", None))

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> OperatorLineage:
        from placsp_provider.lineage import silver

        return silver.on_failure(self, getattr(task_instance, "run_id", None))


def _manifest_pages(path: Path) -> int:
    from placsp_provider.bronze.manifest import Manifest

    return len(Manifest.load(path).pages)


def _nothing_to_do(dataset: str, run_id: str, lake: Path) -> dict[str, Any]:
    """The summary of an ingest with nothing to do, written where the gate reads it: under the task's
    own lake (an explicit `lake=` included)."""
    from placsp_provider.spark.silver_job import empty_summary, finish

    return finish(empty_summary(dataset, run_id, 0, 0), lake)
