"""Fixtures of the PLACSP view's tests: a real Airflow API app, real logins, a real small lake.

- `ui_lake`: the bundled real licitaciones pages (3 pages with lots, results, documents; the
  `fragment_not_wellformed` sample gives 3 real `unbound_prefix` dead letters) and a small agregadas
  page of real entries, 3 of them broken (2 `invalid_amount`, 1 `invalid_timestamp`), landed the way
  extraction lands them and ingested by the provider's delta-rs Silver job (no JVM). `PLACSP_LAKE`
  names it for the module's requests (the view reads `LakeHook().lake(None)`).
- `ui_client`: a `TestClient` of Airflow's own API app (`create_app`), which mounts the PLACSP plugin
  at `/placsp`, with SimpleAuthManager's users admin, viewer (role viewer) and outsider, the auth
  manager `tests.ui.outsider_auth.OutsiderAuthManager` (outsider may read no PLACSP DAG).
- `tokens`: user -> a JWT from `POST /auth/token`, Airflow's real login.

Module-scoped: Airflow caches its app and its auth manager per process, so one app per module; the
settings are put back, and the cached auth manager dropped, when the module ends.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.airflow.conftest import airflow_db  # noqa: F401 - the session's migrated SQLite DB
from tests.pages import day, entry, licitaciones_samples, page
from tests.spark.bronze import land

USERS = {"admin": "admin", "viewer": "viewer", "outsider": "viewer"}  # user -> SimpleAuthManager role
PASSWORDS = {"admin": "admin-pw", "viewer": "viewer-pw", "outsider": "outsider-pw"}
UI_RUN_ID = "scheduled__2026-01-05T00:00:00+00:00"  # an Airflow run id of placsp_daily

# Broken copies of a real entry: an amount the parser refuses, a timestamp without an offset.
_BAD_AMOUNT = (b"</cbc:EstimatedOverallContractAmount>", b"x</cbc:EstimatedOverallContractAmount>")


def _agregadas_page() -> bytes:
    good = page([(1, day(5, 10)), (2, day(5, 11))])
    bad_amount = page([(3, day(5, 12)), (4, day(5, 13))]).replace(*_BAD_AMOUNT)
    bad_time = page([(5, day(5, 14))]).replace(day(5, 14).encode(), b"2022-01-05 14:00")
    # One page: the good entries, then the broken ones, each a record of its own.
    body = good.replace(b"</feed>", b"")
    for broken in (bad_amount, bad_time):
        start = broken.index(b"<entry>")
        body += broken[start : broken.rindex(b"</feed>")]
    assert entry(1, day(5, 10)) in body
    return body + b"</feed>"


@pytest.fixture(scope="module")
def ui_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from placsp_provider.datasets import get_dataset
    from placsp_provider.ingest.request import IngestRequest
    from placsp_provider.ingest.run import ingest

    lake = tmp_path_factory.mktemp("ui") / "lake"
    land(lake, "licitaciones", licitaciones_samples("version7.atom", "fragment.atom"))
    land(lake, "agregadas", {"broken.atom": _agregadas_page()})
    for dataset in ("licitaciones", "agregadas"):
        ingest(IngestRequest(get_dataset(dataset), lake, UI_RUN_ID), "delta-rs")
    return lake


@pytest.fixture(scope="module")
def ui_app_env(ui_lake: Path, tmp_path_factory: pytest.TempPathFactory, airflow_db: None) -> Iterator[None]:  # noqa: F811
    """Airflow's settings for the view's app (logins, auth manager) and the lake, for this module only."""
    from airflow.api_fastapi.app import _AuthManagerState

    passwords = tmp_path_factory.mktemp("auth") / "passwords.json"
    passwords.write_text(json.dumps(PASSWORDS), encoding="utf-8")
    env = {
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{r}" for u, r in USERS.items()),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        "AIRFLOW__CORE__AUTH_MANAGER": "tests.ui.outsider_auth.OutsiderAuthManager",
        # What signs the logins' JWTs: a deployment sets it (docker-compose.yaml); Airflow makes one
        # only in some code paths, which tests run before this module may or may not have taken.
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(16),
        "PLACSP_LAKE": str(ui_lake),
    }
    before = _AuthManagerState.instance
    with pytest.MonkeyPatch.context() as mp:
        for name, value in env.items():
            mp.setenv(name, value)
        _AuthManagerState.instance = None
        yield
    _AuthManagerState.instance = before  # the next module's app builds its own from its settings
    assert os.environ.get("PLACSP_LAKE") != str(ui_lake)


@pytest.fixture(scope="module")
def ui_daily_run(airflow_db: None) -> str:  # noqa: F811
    """The placsp_daily run whose id the lake's rows carry, in Airflow's metadata DB (what the
    scheduler would have written), so the view can link it; inserted once per session."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState
    from airflow.utils.types import DagRunType

    with create_session() as session:
        if not session.query(DagRun).filter_by(dag_id="placsp_daily", run_id=UI_RUN_ID).count():
            session.add(
                DagRun(
                    dag_id="placsp_daily",
                    run_id=UI_RUN_ID,
                    run_type=DagRunType.SCHEDULED,
                    logical_date=datetime(2026, 1, 5, tzinfo=UTC),
                    state=DagRunState.SUCCESS,
                )
            )
    return UI_RUN_ID


@pytest.fixture(scope="module")
def ui_client(ui_app_env: None, ui_daily_run: str) -> Iterator:
    from airflow.api_fastapi.app import create_app
    from fastapi.testclient import TestClient

    with TestClient(create_app()) as client:
        yield client


@pytest.fixture(scope="module")
def tokens(ui_client) -> dict[str, str]:
    out = {}
    for user, password in PASSWORDS.items():
        response = ui_client.post("/auth/token", json={"username": user, "password": password})
        assert response.status_code == 201, response.text
        out[user] = response.json()["access_token"]
    return out
