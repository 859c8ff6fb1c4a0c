"""PlacspCompletenessOperator: prove a closed month complete against the site's archive of it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator, Context

from placsp_provider.datasets import get_dataset
from placsp_provider.errors import PlacspError
from placsp_provider.hooks.lake import LakeHook
from placsp_provider.lineage import completeness
from placsp_provider.settings import CONN_ID_DEFAULT

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage


class PlacspCompletenessOperator(BaseOperator):
    """Compare one month of a dataset with the month's archive and land what the daily runs missed.

    Reads every entry and tombstone (id, updated) of the month from the archive and from Bronze (the
    manifests' pages, never Spark), lands the archive pages holding what Bronze lacks into
    `<lake>/bronze/<dataset>/manifests/<YYYY-MM>.completeness.json`, checks they now hold it, and
    writes the per-day report to `<lake>/completeness/<dataset>/<YYYY-MM>.json`. Green when the archive
    confirms the month or the gap was recovered; fails (a bounded message naming the days and counts)
    when the archive cannot be read, the gap cannot be repaired, or the archive cannot account for the
    month (`ArchiveIncompleteError`: Bronze holds records of the month the archive lacks; the report
    then says `archive_incomplete`, and what the archive held that Bronze lacked is already landed in
    the recovery manifest, for the next ingest). Returns the summary to XCom, with `manifest_path`
    (absolute) when pages were recovered, for the Silver task that follows.

    :param dataset: dataset key or syndication id.
    :param month: `YYYY-MM` (templated); default: the month before the run's logical date.
    :param lake: lake root; defaults to `$PLACSP_LAKE`.
    """

    template_fields: Sequence[str] = ("dataset", "month", "lake")
    ui_color = "#e3ecd5"

    def __init__(
        self,
        *,
        dataset: str,
        month: str | None = None,
        lake: str | None = None,
        placsp_conn_id: str = CONN_ID_DEFAULT,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.dataset = dataset
        self.month = month
        self.lake = lake
        self.placsp_conn_id = placsp_conn_id
        self._summary: dict[str, Any] | None = None
        self._complete_lineage: OperatorLineage | None = None

    def execute(self, context: Context) -> dict[str, Any]:
        from placsp_provider.bronze.completeness import CompletenessRequest, check_month, parse_month
        from placsp_provider.hooks.placsp import PlacspHook

        ds = get_dataset(self.dataset)
        month = parse_month(self.month) if self.month and str(self.month) != "None" else previous_month(context)
        lake = LakeHook().lake(self.lake)
        request = CompletenessRequest(ds, month, lake, run_id=context["run_id"])
        try:
            with PlacspHook(self.placsp_conn_id).get_client(ds.key) as client:
                report = check_month(client, request)
        except PlacspError as err:
            self.log.error("completeness check failed: %s", err)
            raise err.with_traceback(None) from None  # its class kept: a ConfigError is not retried
        summary = report.summary()
        summary["lake"] = str(lake)
        summary["manifest_path"] = str(lake / report.manifest) if report.recovered and report.manifest else None
        if report.recovered:
            self.log.warning(
                "dataset %s %s: the daily runs missed %d of %d items (days %s); recovered %d pages from the "
                "archive into %s",
                ds.key,
                report.month,
                report.recovered,
                report.published,
                ", ".join(report.gap_days()[:10]),
                report.members_recovered,
                summary["manifest_path"],
            )
        else:
            self.log.info(
                "dataset %s %s: the archive confirms the month: %d entries and tombstones, all in Bronze",
                ds.key,
                report.month,
                report.published,
            )
        self._summary = summary
        self._complete_lineage = completeness.on_complete(
            self,
            summary,
            # Read now: the lake's reads do not work in the fork where OpenLineage asks (lake_storage).
        )
        return summary

    # -- OpenLineage (docs/lineage.md): the archive in, recovered Bronze pages out, an assertion -----
    def get_openlineage_facets_on_start(self) -> OperatorLineage:
        return completeness.on_start(self)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage:
        return self._complete_lineage or completeness.on_complete(self, self._summary)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> OperatorLineage:
        return completeness.on_start(self)


def previous_month(context: Context) -> date:
    """The month before the run's logical date (a manual run may have none: then today's)."""
    when: datetime = context.get("logical_date") or context.get("data_interval_end") or datetime.now(UTC)
    return (when.astimezone(UTC).date().replace(day=1) - timedelta(days=1)).replace(day=1)
