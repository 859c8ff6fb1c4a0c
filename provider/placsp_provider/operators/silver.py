"""PlacspSilverOperator: run the Silver ingest of one dataset on Spark via spark-submit."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Context

SPARK_CONN_DEFAULT = "spark_default"


def default_application() -> str:
    """include/spark/silver_ingest.py from a checkout, else the job module inside the package."""
    import placsp_provider

    package = Path(placsp_provider.__file__).resolve().parent
    checkout = package.parents[1] / "include" / "spark" / "silver_ingest.py"
    return str(checkout if checkout.is_file() else package / "spark" / "silver_job.py")


class PlacspSilverOperator(SparkSubmitOperator):
    """Parse the Bronze pages of one dataset into the Silver Delta tables and the dead letters.

    A thin `SparkSubmitOperator`: it ships the provider package (`--py-files`) and the pinned Delta
    jars, passes the lake, the run id and the extraction manifest, then reads the job's run summary
    (rows by table, dead letters by stage and error type, reconciliation) and returns it to XCom.

    Master: the Spark connection (`conn_id`, default `spark_default`, e.g. `spark://host:7077`); when
    that connection does not exist, `local[*]` with the pip-installed Spark.

    :param dataset: dataset key or syndication id.
    :param lake: lake root; defaults to `$PLACSP_LAKE`.
    :param manifest: extraction manifest(s) to ingest (templated; typically the extract task's
        XCom `manifest`); default: every manifest of the dataset not yet ingested.
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "dataset", "lake", "manifest")
    ui_color = "#d7ecf7"

    def __init__(
        self,
        *,
        dataset: str,
        lake: str | None = None,
        manifest: str | None = None,
        conn_id: str = SPARK_CONN_DEFAULT,
        application: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("name", f"placsp-silver-{dataset}")
        super().__init__(application=application or default_application(), conn_id=conn_id, **kwargs)
        self.dataset = dataset
        self.lake = lake
        self.manifest = manifest

    def execute(self, context: Context) -> dict[str, Any]:  # type: ignore[override]
        from placsp_provider import settings
        from placsp_provider.datasets import get_dataset
        from placsp_provider.spark.jars import jar_paths, spark_env
        from placsp_provider.spark.session import DELTA_CONF
        from placsp_provider.spark.silver_job import summary_path

        ds = get_dataset(self.dataset)
        lake = Path(self.lake).resolve() if self.lake else settings.lake_path()
        run_id = context["run_id"]
        if self.manifest and not _manifest_pages(Path(self.manifest)):
            # Nothing landed for this interval: no reason to start a JVM.
            self.log.info("dataset %s: the manifest %s lists no pages; nothing to ingest", ds.key, self.manifest)
            return _nothing_to_do(ds.key, run_id)
        args = ["--dataset", ds.key, "--lake", str(lake), "--run-id", run_id]
        if self.manifest:
            args += ["--manifest", str(self.manifest)]
        self.application_args = args
        self.conf = {**DELTA_CONF, **(self.conf or {})}
        self.jars = ",".join([*(str(p) for p in jar_paths()), *([self.jars] if self.jars else [])])
        # Only what spark-submit needs: the hook turns env vars into --conf flags that it logs,
        # so the task's whole environment (connection URIs, tokens) must never be passed.
        env = {k: v for k, v in spark_env().items() if k in ("SPARK_HOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        self.env_vars = {**env, **(self.env_vars or {})}
        with tempfile.TemporaryDirectory(prefix="placsp-pyfiles-") as tmp:
            self.py_files = _package_zip(Path(tmp))
            self.log.info("dataset %s: Silver ingest of %s on Spark (run %s)", ds.key, lake, run_id)
            super().execute(context)
        summary = json.loads(summary_path(lake, ds.key, run_id).read_text())
        self.log.info("dataset %s: Silver run summary:\n%s", ds.key, json.dumps(summary, indent=2, sort_keys=True))
        return summary

    def _get_hook(self) -> Any:
        hook = super()._get_hook()
        if not _connection_exists(self._conn_id):
            hook._connection["master"] = "local[*]"
        return hook


def _manifest_pages(path: Path) -> int:
    from placsp_provider.bronze.manifest import Manifest

    return len(Manifest.load(path).pages)


def _nothing_to_do(dataset: str, run_id: str) -> dict[str, Any]:
    from placsp_provider import settings
    from placsp_provider.spark.silver_job import empty_summary, finish

    return finish(empty_summary(dataset, run_id, 0, 0), settings.lake_path())


def _connection_exists(conn_id: str) -> bool:
    from airflow.sdk import BaseHook

    try:
        BaseHook.get_connection(conn_id)
    except Exception:  # AirflowNotFoundException moved between versions; any lookup failure means no
        return False
    return True


def _package_zip(folder: Path) -> str:
    """The provider package as a zip for --py-files: executors on a cluster import it from there."""
    import placsp_provider

    package = Path(placsp_provider.__file__).resolve().parent
    base = folder / "placsp_provider"
    shutil.copytree(package, base / "placsp_provider", ignore=shutil.ignore_patterns("__pycache__"))
    return shutil.make_archive(str(base), "zip", root_dir=base)
