"""A test-only auth manager: Airflow's SimpleAuthManager, except that the user `outsider` may read no
PLACSP DAG (`placsp_*`), whatever its role. SimpleAuthManager has no per-DAG permissions, and a real
deployment's FAB or Keycloak roles cannot run here; the login, the tokens and every other decision
are SimpleAuthManager's own. Set with AIRFLOW__CORE__AUTH_MANAGER=tests.ui.outsider_auth.OutsiderAuthManager
(the repository's root on PYTHONPATH)."""

from __future__ import annotations

from typing import Any

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

OUTSIDER = "outsider"


class OutsiderAuthManager(SimpleAuthManager):
    def is_authorized_dag(self, *, method: Any, user: Any, access_entity: Any = None, details: Any = None) -> bool:
        if user.get_name() == OUTSIDER and details is not None and str(details.id or "").startswith("placsp"):
            return False
        return super().is_authorized_dag(method=method, user=user, access_entity=access_entity, details=details)
