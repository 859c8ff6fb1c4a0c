"""The Airflow REST API v2, as an operator's script would use it: a JWT from the login, then JSON."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

import requests


class AirflowApi:
    def __init__(self, base_url: str, username: str, password: str) -> None:
        self.base = base_url.rstrip("/")
        self.session = requests.Session()
        # SimpleAuthManager's login: POST /auth/token with the user of the compose file.
        reply = self.session.post(
            f"{self.base}/auth/token", json={"username": username, "password": password}, timeout=30
        )
        reply.raise_for_status()
        self.session.headers["Authorization"] = f"Bearer {reply.json()['access_token']}"

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        kwargs.setdefault("timeout", 60)
        reply = self.session.request(method, f"{self.base}/api/v2{path}", **kwargs)
        if not reply.ok:
            raise AssertionError(f"{method} {path}: HTTP {reply.status_code}: {reply.text[:2000]}")
        return reply.json() if reply.content and "json" in reply.headers.get("content-type", "") else reply.text

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params or None)

    # -- DAGs and runs --------------------------------------------------------------------------------
    def dag_ids(self) -> set[str]:
        return {d["dag_id"] for d in self.get("/dags", limit=100)["dags"]}

    def import_errors(self) -> list[dict[str, Any]]:
        return self.get("/importErrors")["import_errors"]

    def unpause(self, dag_id: str) -> None:
        self.request("PATCH", f"/dags/{dag_id}", json={"is_paused": False})

    def trigger(self, dag_id: str, *, conf: dict[str, Any] | None = None, **body: Any) -> dict[str, Any]:
        return self.request("POST", f"/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": conf or {}, **body})

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        return self.get(f"/dags/{dag_id}/dagRuns", limit=100)["dag_runs"]

    def run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return self.get(f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}")

    def fail_run(self, dag_id: str, run_id: str) -> None:
        """Mark a run failed (its running tasks are stopped), e.g. so that it can be deleted."""
        self.request("PATCH", f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}", json={"state": "failed"})

    def delete_run(self, dag_id: str, run_id: str) -> None:
        self.request("DELETE", f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}")

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        tis = self.get(f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances", limit=100)
        return {ti["task_id"]: ti["state"] for ti in tis["task_instances"]}

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> str:
        """The log as the UI shows it (JSON lines of events), flattened to text."""
        path = f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task_id}/logs/{try_number}"
        reply = self.session.get(
            f"{self.base}/api/v2{path}",
            params={"full_content": "true"},
            headers={"Accept": "application/json"},
            timeout=60,
        )
        reply.raise_for_status()
        content = reply.json().get("content")
        if isinstance(content, list):
            return "\n".join(
                " ".join(str(v) for k, v in item.items() if k in ("event", "error_detail", "level", "logger"))
                if isinstance(item, dict)
                else str(item)
                for item in content
            )
        return str(content)

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value") -> Any:
        path = f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task_id}/xcomEntries/{key}"
        return self.get(path, deserialize="true")["value"]

    def wait_run(self, dag_id: str, run_id: str, timeout: float, on_poll: Any = None, interval: float = 1.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.run(dag_id, run_id)["state"]
            if on_poll is not None:
                on_poll()
            if state in ("success", "failed"):
                return str(state)
            time.sleep(interval)
        raise AssertionError(
            f"{dag_id} {run_id} not finished after {timeout:.0f} s: {self.task_states(dag_id, run_id)}"
        )

    # -- pools ----------------------------------------------------------------------------------------
    def create_pool(self, name: str, slots: int, description: str) -> None:
        self.request("POST", "/pools", json={"name": name, "slots": slots, "description": description})
