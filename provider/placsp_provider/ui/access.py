"""Who may see what in the PLACSP view: Airflow's own authentication and auth manager, per request.

Airflow does not authenticate a plugin's routes: every route depends on `PlacspReader`. A request
without a token gets 401, a bad token 403 (Airflow's `get_user`), a user who may read none of the
PLACSP DAGs' runs 403, all with no data.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from airflow.api_fastapi.core_api.security import GetUserDep
from fastapi import Depends, HTTPException, status

from placsp_provider.dags import DAG_IDS


def may_run(user: Any, dag_id: str, method: Literal["GET", "POST"] = "GET") -> bool:
    """Whether the configured auth manager lets this user read (`GET`) or create (`POST`) runs of
    `dag_id`; asked at request time (the manager does not exist yet when the API server loads plugins)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails

    return get_auth_manager().is_authorized_dag(
        method=method, access_entity=DagAccessEntity.RUN, details=DagDetails(id=dag_id), user=user
    )


def readable_dags(user: Any, dag_ids: tuple[str, ...] = DAG_IDS) -> set[str]:
    """The PLACSP DAGs whose runs this user may read."""
    return {d for d in dag_ids if may_run(user, d)}


def _placsp_reader(user: GetUserDep) -> Any:
    if not readable_dags(user):
        raise HTTPException(status.HTTP_403_FORBIDDEN, "Forbidden")
    return user


PlacspReader = Annotated[Any, Depends(_placsp_reader)]
