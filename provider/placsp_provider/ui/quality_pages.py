"""`GET /quality` (the latest result of every contract rule, the daily volume against its band) and
`GET /completeness` (per month and dataset). Thin: the reads are ui/report_reads.py."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from placsp_provider.datasets import DATASETS
from placsp_provider.ui import report_reads as reads
from placsp_provider.ui.access import PlacspReader, readable_dags
from placsp_provider.ui.render import page
from placsp_provider.ui.run_links import COMPLETENESS_WRITERS, QUALITY_WRITERS, run_links
from placsp_provider.ui.view_state import ViewStateError, lake_root, require_lake

router = APIRouter()


def number(value: float | None) -> str:
    """A count or bound as the tables show it: whole numbers without a fraction, none as blank."""
    if value is None:
        return ""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.4g}"


@router.get("/quality", response_class=HTMLResponse)
def quality(
    request: Request,
    user: PlacspReader,
    dataset: str | None = None,
    days: Annotated[int, Query(ge=1, le=3660)] = 90,
) -> HTMLResponse:
    context: dict[str, Any] = {"datasets": list(DATASETS), "dataset": dataset, "number": number}
    if dataset is None:
        return page(request, "quality.html", message="Choose a dataset above.", **context)
    if dataset not in DATASETS:
        unknown = f"There is no dataset {dataset!r}: the datasets are {', '.join(DATASETS)}."
        return page(request, "quality.html", 404, message=unknown, **context)
    try:
        lake = lake_root()
        rules = reads.quality_rules(lake, dataset)
        volume = reads.volume_days(lake, dataset, days)
    except ViewStateError as state:
        return page(request, "quality.html", state.status_code, message=state.message, **context)
    runs = [(r.run_id, dataset) for r in rules] + [(v.run_id, dataset) for v in volume]
    links = run_links(runs, QUALITY_WRITERS, readable_dags(user))
    return page(request, "quality.html", rules=rules, volume=volume, links=links, **context)


@router.get("/completeness", response_class=HTMLResponse)
def completeness(
    request: Request, user: PlacspReader, months: Annotated[int, Query(ge=1, le=600)] = 24
) -> HTMLResponse:
    try:
        lake = lake_root()
        require_lake(lake)
        rows = reads.completeness_months(lake, DATASETS, months)
    except ViewStateError as state:
        return page(request, "completeness.html", state.status_code, message=state.message, months=months)
    links = run_links([(m.run_id, m.dataset) for m in rows], COMPLETENESS_WRITERS, readable_dags(user))
    return page(request, "completeness.html", rows=rows, links=links, months=months)
