"""DataContractCheckOperator: a dataset's Silver tables against their data contracts, and its volume."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowFailException

from placsp_provider.assets import quality_outlets, record_versions, static_lake
from placsp_provider.datasets import get_dataset
from placsp_provider.errors import PlacspError
from placsp_provider.hooks.lake import LakeHook
from placsp_provider.lake import LAKE_TABLES, run_summary_path, table_path
from placsp_provider.lake_storage import LakePath
from placsp_provider.lineage import quality as quality_lineage
from placsp_provider.quality.contract import CONTRACT_TABLES, ContractError
from placsp_provider.quality.run import check_dataset
from placsp_provider.quality.volume import VolumeConfig

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

    from placsp_provider.quality.run import DatasetCheck

XCOM_KEY = "quality_check"


class DataQualityError(PlacspError, AirflowFailException):
    """An `error` rule failed, or a contract cannot be used. Not retried: the data will not change.

    Its failure message (`quality.engine.failure_message`) is several lines: they are kept.
    """

    multiline = True


class DataContractCheckOperator(BaseOperator):
    """Check one dataset of the lake against its ODCS contracts, shipped in the package (docs/data-quality.md).

    Rules of scope `run` check the rows this DAG run wrote (`_ingest_run_id` / `run_id` = the Airflow
    run id), rules of scope `table` the dataset's whole partition. With `volume`, the day of the data
    interval's start is judged against a Prophet forecast of the dataset's daily entry count.

    Every result is appended to the `quality_results` Delta table. A failing `error` rule fails the task
    (no retry) with a bounded message: the failing rules with expected vs actual and the command that
    lists the offending rows. A failing `warn` rule (and a volume anomaly, `warn` by default) logs that
    message as a WARNING and the task succeeds. A contract that is not valid ODCS, names an unknown
    column, or holds a sql rule that does not run fails the task at its start, naming file and rule.

    OpenLineage: every checked table is an input with `dataQualityAssertions` (one per rule) and
    `dataQualityMetrics`; `quality_results` is the output.

    :param dataset: dataset key or syndication id (templated).
    :param tables: the tables to check; default all seven (templated).
    :param lake: lake root (templated); default `$PLACSP_LAKE`.
    :param contracts_dir: folder of `<table>.odcs.yaml` (templated); default the contracts shipped in the package.
    :param volume: also run the volume check of the data interval's first day.
    :param volume_severity: `warn` (default) or `error` for a volume anomaly.
    :param volume_min_history_days: fewer days of history: the volume check is skipped (logged).
    :param volume_interval_width: Prophet's interval, e.g. 0.99.
    """

    template_fields: Sequence[str] = ("dataset", "lake", "tables", "contracts_dir")
    ui_color = "#d9ead3"

    def __init__(
        self,
        *,
        dataset: str,
        tables: Sequence[str] | None = None,
        lake: str | None = None,
        contracts_dir: str | None = None,
        volume: bool = True,
        volume_severity: str = "warn",
        volume_min_history_days: int = 28,
        volume_interval_width: float = 0.99,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("outlets", quality_outlets(static_lake(lake)))
        super().__init__(**kwargs)
        # Not templated, so checked now (a bad value never reaches a run).
        self.volume_config = VolumeConfig(
            interval_width=volume_interval_width, min_history_days=volume_min_history_days, severity=volume_severity
        )
        self.dataset = dataset
        self.tables = tables
        self.lake = lake
        self.contracts_dir = contracts_dir
        self.volume = volume
        self._check: DatasetCheck | None = None

    def execute(self, context: Context) -> dict[str, Any]:
        dataset = get_dataset(self.dataset).key
        lake = LakeHook().lake(self.lake)
        if nothing_to_check(lake, dataset, context["run_id"]):
            self.log.warning(
                "dataset %s: this run ingested nothing and the lake %s has no table yet (a fresh lake, "
                "no dataset ingested so far): no data contract to check",
                dataset,
                lake,
            )
            # The keys of `DatasetCheck.summary()`, plus `skipped`.
            summary = {"dataset": dataset, "run_id": context["run_id"], "passed": True, "rules": 0, "failed_error": []}
            summary |= {"failed_warn": [], "failures": [], "volume": None, "rows": {}, "recorded": 0, "skipped": True}
            context["ti"].xcom_push(key=XCOM_KEY, value=summary)
            return summary
        start = context.get("data_interval_start")
        day = start.date() if self.volume and start is not None else None
        try:
            check = check_dataset(
                lake,
                dataset,
                run_id=context["run_id"],
                tables=tuple(self.tables or CONTRACT_TABLES),
                contracts_dir=self.contracts_dir,
                volume_day=day,
                volume_config=self.volume_config,
            )
        except ContractError as err:
            raise DataQualityError(f"dataset {dataset}: {err}") from err
        self._check = check
        summary = check.summary()
        context["ti"].xcom_push(key=XCOM_KEY, value=summary)
        if check.volume is not None:
            level = self.log.warning if check.volume.status == "anomaly" else self.log.info
            level("volume: %s", check.volume.message())
        message = check.message()
        if check.passed:
            if message:
                self.log.warning("%s", message)
            self.log.info(
                "dataset %s: %d rules checked, every error rule passed; %d results in quality_results",
                dataset,
                len(check.report.results),
                check.recorded,
            )
            record_versions(context, lake)
            return summary
        assert message is not None
        raise DataQualityError(message)

    # -- OpenLineage: the checked tables in, with their assertions; quality_results out --------------
    def get_openlineage_facets_on_start(self) -> OperatorLineage:
        return quality_lineage.on_event(self, None)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage:
        return quality_lineage.on_event(self, self._check)

    # The failing assertions are why the task failed: they go on the FAIL event.
    get_openlineage_facets_on_failure = get_openlineage_facets_on_complete


def nothing_to_check(lake: LakePath, dataset: str, run_id: str) -> bool:
    """This run's Silver task ingested nothing for `dataset` (its run summary says so) and no table of
    the lake exists yet: a fresh lake on a day without pages for this dataset.

    Then there is nothing to check, and the outcome must not depend on whether another dataset's
    Silver task (which creates the tables) happened to run first. A lake path without this run's
    summary (a wrong path, a Silver task that did not run) is checked as usual, and fails.
    """
    try:
        summary = json.loads(run_summary_path(lake, dataset, run_id).read_text())
    except (OSError, ValueError):
        return False
    if summary.get("files", {}).get("ingested", 1) != 0 or summary.get("read", {}).get("entries", 1) != 0:
        return False
    return not any((table_path(lake, t) / "_delta_log").is_dir() for t in LAKE_TABLES)
