"""The PLACSP view's dead-letter pages: the overview (`/`), the browser (`/dead-letters`), one raw
record (`/dead-letters/{id}/raw`) and the overview's numbers as JSON (`/api/summary`).

Thin routes: the reads are `ui/queries.py`'s, the HTML `ui/templates`'. Every route depends on
`PlacspReader` (Airflow's login and auth manager; ui/access.py), raw records included.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse

from placsp_provider import settings
from placsp_provider.datasets import DATASETS
from placsp_provider.ui import queries
from placsp_provider.ui.access import PlacspReader, readable_dags
from placsp_provider.ui.render import page
from placsp_provider.ui.run_links import DEAD_LETTER_WRITERS, REPLAY_WRITERS, run_links
from placsp_provider.ui.view_state import ViewStateError, lake_root

router = APIRouter()

DEFAULT_DAYS = 30
DEFAULT_PAGE_SIZE = 50

Days = Annotated[int, Query(ge=1, le=366)]


def _dataset(key: str) -> str:
    if key not in DATASETS:
        raise HTTPException(404, f"Unknown dataset {key!r}; the datasets are {', '.join(DATASETS)}.")
    return key


def _message(request: Request, state: ViewStateError, title: str, **context: Any) -> HTMLResponse:
    return page(request, "message.html", state.status_code, title=title, message=state.message, **context)


# -- the overview ---------------------------------------------------------------------------------
@router.get("/", response_class=HTMLResponse)
def overview(request: Request, user: PlacspReader, days: Days = DEFAULT_DAYS) -> HTMLResponse:
    del user
    lake = lake_root()
    try:
        found = queries.summaries(lake, list(DATASETS), days)
    except ViewStateError as state:
        return _message(request, state, "Dead letters", lake=str(lake))
    charts = {key: daily_chart(s.daily, s.since, days) for key, s in found.items()}
    return page(
        request,
        "overview.html",
        lake=str(lake),
        days=days,
        summaries=found,
        charts=charts,
        titles={k: d.title for k, d in DATASETS.items()},
        gate_max_ratio=settings.dead_letter_max_ratio(),
    )


@router.get("/api/summary")
def api_summary(user: PlacspReader, dataset: str, days: Days = DEFAULT_DAYS) -> JSONResponse:
    del user
    try:
        found = queries.summaries(lake_root(), [_dataset(dataset)], days)[dataset]
    except ViewStateError as state:
        return JSONResponse({"message": state.message}, state.status_code)
    return JSONResponse(
        {"backlog": found.backlog, "daily": found.daily, "gate_max_ratio": settings.dead_letter_max_ratio()}
    )


CHART_WIDTH = 720  # pixels: the chart fits a laptop's screen whatever the number of days


def daily_chart(daily: list[dict[str, Any]], since: date, days: int, height: int = 120) -> dict:
    """Bars of dead letters per day, stacked by error type: the SVG's rectangles (x, y, w, h) and size."""
    from datetime import timedelta

    width = max(2, CHART_WIDTH // days)
    top = max((sum(r["count"] for r in daily if r["day"] == d["day"]) for d in daily), default=0)
    stacked: dict[str, int] = {}
    rects = []
    for row in daily:
        offset = (date.fromisoformat(row["day"]) - since).days
        h = max(1, round(row["count"] / top * height)) if top else 0
        below = stacked.get(row["day"], 0)
        stacked[row["day"]] = below + h
        rects.append({**row, "x": offset * width, "y": height - below - h, "w": max(1, width - 2), "h": h})
    last = since + timedelta(days=days - 1)
    return {"rects": rects, "width": days * width, "height": height, "top": top, "first": since, "last": last}


# -- the browser ----------------------------------------------------------------------------------
@router.get("/dead-letters", response_class=HTMLResponse)
def dead_letters(
    request: Request,
    user: PlacspReader,
    dataset: str,
    stage: Annotated[list[str], Query()] = [],  # noqa: B006 - FastAPI's way to say "repeatable"
    error_type: Annotated[list[str], Query()] = [],  # noqa: B006
    dead_letter_ids: Annotated[list[str], Query()] = [],  # noqa: B006
    status: str | None = None,
    day: date | None = None,
    since: date | None = None,
    until: date | None = None,
    page_number: Annotated[int, Query(alias="page", ge=1)] = 1,
    page_size: Annotated[int, Query(ge=1, le=queries.MAX_PAGE_SIZE)] = DEFAULT_PAGE_SIZE,
) -> HTMLResponse:
    selection = queries.DeadLetterFilter(
        dataset=_dataset(dataset),
        stages=tuple(s for s in stage if s),
        error_types=tuple(e for e in error_type if e),
        status=status or None,
        since=day or since,
        until=day or until,
        dead_letter_ids=tuple(i for i in dead_letter_ids if i),
    )
    context: dict[str, Any] = {"selection": selection, "statuses": queries.STATUSES, "datasets": list(DATASETS)}
    try:
        found = queries.browse(lake_root(), selection, page_number, page_size)
    except ViewStateError as state:
        return _message(request, state, "Dead letters", **context)
    return page(
        request,
        "dead_letters.html",
        found=found,
        rows=with_run_links(found.rows, readable_dags(user)),
        prev_href=_browse_href(request, page_number - 1) if page_number > 1 else None,
        next_href=_browse_href(request, page_number + 1) if found.has_next else None,
        replay_href=replay_href(selection),
        **context,
    )


def _browse_href(request: Request, page_number: int) -> str:
    params = [(k, v) for k, v in request.query_params.multi_items() if k != "page"]
    return "dead-letters?" + urlencode([*params, ("page", str(page_number))])


def replay_href(selection: queries.DeadLetterFilter) -> str:
    """The "Replay these" page (`/replay`) prefilled with the filter, in the replay DAG's param names."""
    params: list[tuple[str, str]] = [("dataset", selection.dataset)]
    params += [("stages", s) for s in selection.stages]
    params += [("error_types", e) for e in selection.error_types]
    params += [(k, v.isoformat()) for k, v in (("since", selection.since), ("until", selection.until)) if v]
    params += [("dead_letter_ids", i) for i in selection.dead_letter_ids]
    return "replay?" + urlencode(params)


def with_run_links(rows: list[dict[str, Any]], readable: set[str]) -> list[dict[str, Any]]:
    """Each row with `links`: the runs that wrote it (its insert, its last replay) and their task
    logs; one lookup per kind for the page."""
    kinds = (("inserted by", "run_id", DEAD_LETTER_WRITERS), ("replayed by", "replay_run_id", REPLAY_WRITERS))
    found = {
        column: run_links([(r[column], r["dataset"]) for r in rows], writers, readable) for _, column, writers in kinds
    }
    out = []
    for row in rows:
        links = []
        for kind, column, _ in kinds:
            link = found[column].get((row[column], row["dataset"]))
            if link:
                links.append({"kind": kind, "run_id": link.run_id, "run": link.run_href, "log": link.task_href})
        out.append({**row, "links": links})
    return out


# -- one raw record -------------------------------------------------------------------------------
@router.get("/dead-letters/{dead_letter_id}/raw", response_class=HTMLResponse)
def raw(request: Request, user: PlacspReader, dead_letter_id: str, dataset: str | None = None) -> HTMLResponse:
    del user
    try:
        found = queries.raw_record(lake_root(), dead_letter_id, _dataset(dataset) if dataset else None)
    except ViewStateError as state:
        return _message(request, state, "Raw record")
    if found is None:
        raise HTTPException(404, "No dead letter has this id.")
    return page(request, "raw.html", row=found)
