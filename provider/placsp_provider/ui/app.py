"""The PLACSP view's FastAPI app (mounted by the API server at `URL_PREFIX`, ui/plugin.py)."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import HTMLResponse

from placsp_provider.ui.access import PlacspReader
from placsp_provider.ui.render import NoStoreMiddleware

URL_PREFIX = "/placsp"

# No OpenAPI pages: every route is behind Airflow's login (ui/access.py).
app = FastAPI(title="PLACSP view", docs_url=None, redoc_url=None, openapi_url=None)
app.add_middleware(NoStoreMiddleware)  # nothing of the lake cached outside it (ui/render.py)


@app.get("/", response_class=HTMLResponse)
def overview(user: PlacspReader) -> str:
    del user
    return "<!doctype html><title>PLACSP</title><h1>PLACSP</h1>"
