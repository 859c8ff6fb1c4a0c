"""The PLACSP view's dead-letter pages: the overview (`/`), the browser (`/dead-letters`), one raw
record (`/dead-letters/{id}/raw`) and the overview's numbers as JSON (`/api/summary`).

Thin routes: the reads are `ui/queries.py`'s, the HTML `ui/templates`'. Every route depends on
`PlacspReader` (Airflow's login and auth manager; ui/access.py), raw records included.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse

from placsp_provider import settings
from placsp_provider.datasets import DATASETS
from placsp_provider.ui import queries
from placsp_provider.ui.access import PlacspReader
from placsp_provider.ui.render import page

router = APIRouter()

DEFAULT_DAYS = 30
DEFAULT_PAGE_SIZE = 50
# Which DAG and task wrote a dead letter: the table holds the run id, not the DAG. Airflow's runs of
# the Silver ingest are placsp_daily's task `silver_<dataset>`; a replay is placsp_dead_letter_replay's
# task `replay`. The CLI's runs (`cli__...`) have no Airflow page.
INGEST_DAG, REPLAY_DAG, REPLAY_TASK = "placsp_daily", "placsp_dead_letter_replay", "replay"
CLI_RUN_PREFIX = "cli__"

Days = Annotated[int, Query(ge=1, le=366)]


def _lake() -> Any:
    from placsp_provider.hooks.lake import LakeHook

    return LakeHook().lake(None)


def _dataset(key: str) -> str:
    if key not in DATASETS:
        raise HTTPException(404, f"Unknown dataset {key!r}; the datasets are {', '.join(DATASETS)}.")
    return key


def _message(request: Request, state: queries.ViewStateError, title: str, **context: Any) -> HTMLResponse:
    return page(request, "message.html", state.status_code, title=title, message=state.message, **context)


# -- the overview ---------------------------------------------------------------------------------
@router.get("/", response_class=HTMLResponse)
def overview(request: Request, user: PlacspReader, days: Days = DEFAULT_DAYS) -> HTMLResponse:
    del user
    lake = _lake()
    try:
        found = queries.summaries(lake, list(DATASETS), days)
    except queries.ViewStateError as state:
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
        found = queries.summaries(_lake(), [_dataset(dataset)], days)[dataset]
    except queries.ViewStateError as state:
        return JSONResponse({"message": state.message}, state.status_code)
    return JSONResponse(
        {"backlog": found.backlog, "daily": found.daily, "gate_max_ratio": settings.dead_letter_max_ratio()}
    )


def daily_chart(daily: list[dict[str, Any]], since: date, days: int, width: int = 12, height: int = 120) -> dict:
    """Bars of dead letters per day, stacked by error type: the SVG's rectangles (x, y, w, h) and size."""
    from datetime import timedelta

    top = max((sum(r["count"] for r in daily if r["day"] == d["day"]) for d in daily), default=0)
    stacked: dict[str, int] = {}
    rects = []
    for row in daily:
        offset = (date.fromisoformat(row["day"]) - since).days
        h = max(1, round(row["count"] / top * height)) if top else 0
        below = stacked.get(row["day"], 0)
        stacked[row["day"]] = below + h
        rects.append({**row, "x": offset * width, "y": height - below - h, "w": width - 2, "h": h})
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
    del user
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
        found = queries.browse(_lake(), selection, page_number, page_size)
    except queries.ViewStateError as state:
        return _message(request, state, "Dead letters", **context)
    return page(
        request,
        "dead_letters.html",
        found=found,
        rows=[{**row, "links": run_links(row)} for row in found.rows],
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


def run_links(row: dict[str, Any]) -> list[dict[str, str]]:
    """Links to the Airflow runs (and task logs) that wrote this row: the insert, and the replay."""
    links = []
    for kind, run_id, dag_id, task_id in (
        ("inserted by", row.get("run_id"), INGEST_DAG, f"silver_{row['dataset']}"),
        ("replayed by", row.get("replay_run_id"), REPLAY_DAG, REPLAY_TASK),
    ):
        if not run_id or run_id.startswith(CLI_RUN_PREFIX):
            continue
        run = f"../dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"
        links.append({"kind": kind, "run_id": run_id, "run": run, "log": f"{run}/tasks/{quote(task_id, safe='')}"})
    return links


# -- one raw record -------------------------------------------------------------------------------
@router.get("/dead-letters/{dead_letter_id}/raw", response_class=HTMLResponse)
def raw(request: Request, user: PlacspReader, dead_letter_id: str, dataset: str | None = None) -> HTMLResponse:
    del user
    try:
        found = queries.raw_record(_lake(), dead_letter_id, _dataset(dataset) if dataset else None)
    except queries.ViewStateError as state:
        return _message(request, state, "Raw record")
    if found is None:
        raise HTTPException(404, "No dead letter has this id.")
    return page(request, "raw.html", row=found)
