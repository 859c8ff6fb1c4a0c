"""The Airflow plugin that adds the PLACSP view, registered through the `airflow.plugins` entry point
(pyproject.toml), so an installed provider shows it without copying files into a plugins folder.

The API server loads plugins on start (scheduler and workers may too): this module imports only
FastAPI and the app's module, never the lake's libraries (they are imported per request).
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from placsp_provider.ui.app import URL_PREFIX, app


class PlacspPlugin(AirflowPlugin):
    name = "placsp"
    # Mounted by the API server itself: no extra service. Airflow authenticates nothing under a
    # plugin's prefix: every route of `app` checks the user (ui/access.py).
    # Class attributes, lists: Airflow's plugin API (`AirflowPlugin` declares them so).
    fastapi_apps = [  # noqa: RUF012
        {"app": app, "url_prefix": URL_PREFIX, "name": "PLACSP view"}
    ]
    # An iframe of the UI at /plugin/placsp; `href` relative so a base URL with a path keeps working.
    external_views = [  # noqa: RUF012
        {"name": "PLACSP", "href": URL_PREFIX.lstrip("/") + "/", "destination": "nav", "url_route": "placsp"}
    ]
