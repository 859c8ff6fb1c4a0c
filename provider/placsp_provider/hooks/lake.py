"""LakeHook: where the lake is and the credentials to reach it (an S3 lake), from Airflow's config.

The credentials of an S3 lake come from the connection `placsp_lake` (or `$PLACSP_LAKE_CONN_ID`):
the Amazon provider's `aws` type or any type with the same fields: login = access key id, password =
secret access key, extras `endpoint_url` (an S3-compatible store) and `region_name`. They are put in
this task process's `AWS_*` environment, which obstore, delta-rs and Arrow read
(`lake_storage`), and nowhere else: never logged, never in a path, URI, summary, XCom or lineage.
Without the connection, the process's own `AWS_*` environment (or an instance role) is used.

The dead-letter trigger runs in the triggerer, which serves every DAG's triggers from one process:
it reads the connection itself (`credentials`, through the Task SDK, from its reading thread) and
uses the values for its own reads only (`lake_storage.credentials`). The triggerer's environment is
never changed, and the trigger's stored arguments name the connection, never hold its secret.
"""

from __future__ import annotations

import os
from typing import Any

from airflow.sdk import BaseHook

from placsp_provider.lake import resolve_lake
from placsp_provider.lake_storage import LakePath, is_local

LAKE_CONN_ENV = "PLACSP_LAKE_CONN_ID"
LAKE_CONN_DEFAULT = "placsp_lake"


class LakeHook(BaseHook):
    """The lake of a task: `lake()` resolves it and, for an S3 lake, loads its connection's credentials."""

    conn_name_attr = "lake_conn_id"
    default_conn_name = LAKE_CONN_DEFAULT
    conn_type = "aws"
    hook_name = "PLACSP lake (S3)"

    def __init__(self, lake_conn_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lake_conn_id = lake_conn_id or os.environ.get(LAKE_CONN_ENV) or LAKE_CONN_DEFAULT

    def lake(self, explicit: str | LakePath | None = None) -> LakePath:
        lake = resolve_lake(explicit)
        if not is_local(lake):
            self.export_credentials()
        return lake

    def export_credentials(self) -> bool:
        """The connection's credentials into this process's `AWS_*` environment; False when there is
        no such connection (the environment or an instance role then decides)."""
        values = self.credentials()
        if values is None:
            return False
        os.environ.update(values)
        return True

    def credentials(self) -> dict[str, str] | None:
        """The connection's `AWS_*` values (`credential_environment`); None when there is no such
        connection. It blocks: in a trigger, call it from a thread (`asyncio.to_thread`), never on the
        triggerer's event loop, which answers the request."""
        from airflow.sdk.exceptions import AirflowNotFoundException

        try:
            conn = self.get_connection(self.lake_conn_id)
        except AirflowNotFoundException:
            return None
        return credential_environment(conn.login, conn.password, conn.extra_dejson or {})


def credential_environment(key: str | None, secret: str | None, extras: dict[str, Any]) -> dict[str, str]:
    """The `AWS_*` variables a connection's fields stand for (only those it sets)."""
    endpoint = extras.get("endpoint_url") or (extras.get("service_config") or {}).get("s3", {}).get("endpoint_url")
    values = {
        "AWS_ACCESS_KEY_ID": key or extras.get("aws_access_key_id"),
        "AWS_SECRET_ACCESS_KEY": secret or extras.get("aws_secret_access_key"),
        "AWS_SESSION_TOKEN": extras.get("aws_session_token"),
        "AWS_REGION": extras.get("region_name"),
        "AWS_ENDPOINT_URL": endpoint,
        # An http:// endpoint (an S3-compatible store on premises) must be allowed explicitly.
        "AWS_ALLOW_HTTP": "true" if str(endpoint or "").startswith("http://") else None,
    }
    return {name: str(value) for name, value in values.items() if value}
