"""The PLACSP view's FastAPI app (mounted by the API server at `URL_PREFIX`, ui/plugin.py)."""

from __future__ import annotations

from fastapi import FastAPI

from placsp_provider.ui import dead_letter_pages, quality_pages, replay_page
from placsp_provider.ui.render import NoStoreMiddleware

URL_PREFIX = "/placsp"

# No OpenAPI pages: every route is behind Airflow's login (ui/access.py).
app = FastAPI(title="PLACSP view", docs_url=None, redoc_url=None, openapi_url=None)
app.add_middleware(NoStoreMiddleware)  # nothing of the lake cached outside it (ui/render.py)

app.include_router(dead_letter_pages.router)  # /, /dead-letters, /dead-letters/{id}/raw, /api/summary
app.include_router(replay_page.router)  # /replay: "Replay these", the replay DAG's form prefilled
app.include_router(quality_pages.router)  # /quality, /completeness
