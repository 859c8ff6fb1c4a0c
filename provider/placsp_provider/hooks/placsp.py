"""PlacspHook: the connection to the PLACSP site. Owns the HTTP client; operators never do I/O."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from airflow.sdk import BaseHook

from placsp_provider.datasets import LIVE_BASE_URL, live_datasets
from placsp_provider.errors import PlacspError
from placsp_provider.feed.client import ClientConfig, FeedClient, client_config_from_extras, redact
from placsp_provider.settings import CONN_ID_DEFAULT


class PlacspHook(BaseHook):
    """Reads connection `placsp_default` (type `placsp`).

    `host` is the base URL (`…/sindicacion`); empty means the live site. Extras carry the client
    settings (timeouts, retries, size limits, `ca_bundle`). Login/password, if a proxy in front of
    the site needs them, are passed as basic auth and never logged.
    """

    conn_name_attr = "placsp_conn_id"
    default_conn_name = CONN_ID_DEFAULT
    conn_type = "placsp"
    hook_name = "PLACSP feeds"

    def __init__(self, placsp_conn_id: str = CONN_ID_DEFAULT, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.placsp_conn_id = placsp_conn_id

    def client_config(self) -> ClientConfig:
        conn = self.get_connection(self.placsp_conn_id)
        config = client_config_from_extras(_base_url(conn.host, conn.schema), conn.extra_dejson or {})
        if conn.login:
            config = replace(config, auth=(conn.login, conn.password or ""))
        return config

    def get_client(self, dataset: str) -> FeedClient:
        """A new client for one dataset; close it (or use `with`) when done."""
        return FeedClient(self.client_config(), dataset)

    def test_connection(self) -> tuple[bool, str]:
        """The UI's Test button: the first live dataset's head feed is asked for (status and headers
        only) with the connection's TLS settings, credentials and URL rules. Never raises."""
        dataset = live_datasets()[0]
        try:
            config = self.client_config()
            with FeedClient(config, dataset.key) as client:
                status = client.probe(dataset.head_url(config.base_url))
        except PlacspError as err:
            return False, str(err)
        return True, f"{redact(dataset.head_url(config.base_url))}: {status}"


def _base_url(host: str | None, schema: str | None) -> str:
    if not host:
        return LIVE_BASE_URL
    if "://" in host:
        return host
    # A URI-style connection (placsp://host/path) splits the URL; put it back together.
    return f"https://{host}" + (f"/{schema}" if schema else "")
