"""`GET /replay`: the "Replay these" form (ui/replay_form.py), prefilled from the query."""

from __future__ import annotations

import json

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from placsp_provider.ui.access import PlacspReader, may_run
from placsp_provider.ui.render import page
from placsp_provider.ui.replay_form import REPLAY_DAG_ID, api_root, form_fields, trigger_body, trigger_url

router = APIRouter()


@router.get("/replay", response_class=HTMLResponse)
def replay(request: Request, user: PlacspReader) -> HTMLResponse:
    from placsp_provider.ui.app import URL_PREFIX  # the app includes this router: imported when serving

    query = {key: request.query_params.getlist(key) for key in request.query_params}
    fields = form_fields(query)
    return page(
        request,
        "replay.html",
        dag_id=REPLAY_DAG_ID,
        fields=fields,
        request_json=json.dumps(trigger_body(fields)),
        api_url=trigger_url(api_root(request.scope.get("root_path", ""), URL_PREFIX)),
        may_trigger=may_run(user, REPLAY_DAG_ID, "POST"),  # Airflow checks again on the request
    )
