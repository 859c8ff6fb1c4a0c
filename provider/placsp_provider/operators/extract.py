"""PlacspExtractOperator: land the run's data interval of one dataset into Bronze."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator, Context

from placsp_provider import settings
from placsp_provider.datasets import get_dataset
from placsp_provider.errors import PlacspError
from placsp_provider.hooks.lake import LakeHook
from placsp_provider.lake import manifest_path
from placsp_provider.lineage import extract
from placsp_provider.settings import CONN_ID_DEFAULT, DEFAULT_STOP_AFTER_OLD_PAGES
from placsp_provider.untrusted import printable

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage


class PlacspExtractOperator(BaseOperator):
    """Land every feed page that may hold entries updated in the data interval (minus `overlap`).

    Writes pages to `<lake>/bronze/<dataset>/pages/` and a manifest to
    `<lake>/bronze/<dataset>/manifests/`; returns (XCom) a compact summary with the manifest path.
    Rerunning an interval lands nothing new. Pages that are not well-formed are landed and
    flagged, never skipped.

    :param dataset: dataset key or syndication id (`licitaciones` / `643`, ...).
    :param lake: lake root; defaults to `$PLACSP_LAKE`.
    :param overlap: how far before the interval start to reach (late publications).
    :param max_pages: page cap per run; beyond it the interval is served from archives.
    :param since: ISO date/time overriding the data interval start (backfills); with `until`.
    :param until: ISO date/time overriding the data interval end (exclusive).
    :param source: `auto` (live chain, archives for what it cannot reach) or `archives`.
    :param stop_after_old_pages: the walk stops after this many consecutive pages entirely older than
        the window (default 2): one out-of-order page does not end it.
    """

    template_fields: Sequence[str] = ("dataset", "lake", "since", "until", "source")
    ui_color = "#f5e6c8"

    def __init__(
        self,
        *,
        dataset: str,
        lake: str | None = None,
        placsp_conn_id: str = CONN_ID_DEFAULT,
        overlap: timedelta | None = None,
        max_pages: int | None = None,
        since: str | None = None,
        until: str | None = None,
        source: str = "auto",
        stop_after_old_pages: int = DEFAULT_STOP_AFTER_OLD_PAGES,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.dataset = dataset
        self.lake = lake
        self.placsp_conn_id = placsp_conn_id
        self.overlap = overlap
        self.max_pages = max_pages
        self.since = since
        self.until = until
        self.source = source
        self.stop_after_old_pages = stop_after_old_pages
        self._summary: dict[str, Any] | None = None  # what execute returned, for the lineage events
        self._complete_lineage: OperatorLineage | None = None

    def execute(self, context: Context) -> dict[str, Any]:
        from placsp_provider.bronze.extract import ExtractRequest, extract_interval
        from placsp_provider.hooks.placsp import PlacspHook

        ds = get_dataset(self.dataset)
        start: datetime | None = context.get("data_interval_start")
        end: datetime | None = context.get("data_interval_end")
        if self.since and self.until:
            start, end = _aware(self.since), _aware(self.until)
        if start is None or end is None:
            raise ValueError("PlacspExtractOperator needs a data interval; use a timetable that sets one")
        lake = LakeHook().lake(self.lake)
        request = ExtractRequest(
            dataset=ds,
            start=start,
            end=end,
            lake=lake,
            run_id=context["run_id"],
            overlap=self._overlap(settings.overlap()),
            max_pages=self.max_pages or settings.max_pages(),
            source=self.source,
            stop_after_old_pages=self.stop_after_old_pages,
        )
        try:
            with PlacspHook(self.placsp_conn_id).get_client(ds.key) as client:
                manifest = extract_interval(client, request)
        except PlacspError as err:
            # The reason first, in one line; Airflow prints the (short) traceback after it.
            self.log.error("extraction failed: %s", err)
            raise err.with_traceback(None) from None  # its class kept: a ConfigError is not retried
        summary = manifest.summary()
        summary |= {"manifest": str(manifest_path(lake, ds.key, start, end)), "lake": str(lake)}
        if summary["not_well_formed"]:
            self.log.warning(
                "dataset %s: %d page(s) are not well-formed; landed for quarantine: %s",
                ds.key,
                summary["not_well_formed"],
                # Bronze file names keep a page's or archive member's name as the server gave it.
                printable(", ".join(summary["not_well_formed_files"])),
            )
        self._summary = summary
        self._complete_lineage = extract.on_complete(
            self,
            summary,
            # Read now: the lake's reads do not work in the fork where OpenLineage asks (lake_storage).
        )
        return summary

    # -- OpenLineage (docs/lineage.md): the feed in, the Bronze pages and the manifest out ----------
    def get_openlineage_facets_on_start(self) -> OperatorLineage:
        return extract.on_start(self)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage:
        return self._complete_lineage or extract.on_complete(self, self._summary)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> OperatorLineage:
        # A failed extraction wrote no manifest; pages it landed are reported by the run that succeeds.
        return extract.on_start(self)

    def _overlap(self, default: timedelta) -> timedelta:
        if self.overlap is not None:
            return self.overlap
        # Archive backfills cover whole months exactly; the overlap is for late live publications.
        return timedelta(0) if self.source == "archives" else default


def _aware(text: str) -> datetime:
    value = datetime.fromisoformat(str(text))
    return value if value.tzinfo else value.replace(tzinfo=UTC)
