"""Rendering the PLACSP view's pages: Jinja2 templates (ui/templates), autoescaped.

Everything the pages show from the lake is text from the feed (messages, file names, raw XML): it is
escaped by Jinja's autoescape, and no template marks any of it `|safe`. Every response says
`Cache-Control: no-store` (`NoStoreMiddleware`): nothing of the lake is kept outside it, not even in
a browser's or a proxy's cache.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

NO_STORE = "no-store"


@cache
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("placsp_provider.ui", "templates"),
        autoescape=True,  # every template, whatever its name: the lake's text is the feed's
        undefined=jinja2.StrictUndefined,  # a missing value is a bug, not a blank cell
        trim_blocks=True,
        lstrip_blocks=True,
    )


def view_root(request: Request) -> str:
    """The view's root URL path, ending with `/` (e.g. `/placsp/`, or `/airflow/placsp/` behind a base
    path): the pages' `<base href>`, so a relative link means the same on every page, `../dags/...`
    reaches the Airflow UI, and the page works both standalone and in the UI's iframe."""
    return str(request.scope.get("root_path") or "").rstrip("/") + "/"


def page(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    html = environment().get_template(template).render(base_href=view_root(request), **context)
    return HTMLResponse(html, status_code=status_code)


class NoStoreMiddleware:
    """`Cache-Control: no-store` on every response of the view, errors (401, 403, 404) included."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_no_store(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"cache-control"]
                message = {**message, "headers": [*headers, (b"cache-control", NO_STORE.encode())]}
            await send(message)

        await self.app(scope, receive, send_no_store)
