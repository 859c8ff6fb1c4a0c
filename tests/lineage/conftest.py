"""Fixtures of the lineage tests: the Airflow metadata DB (shared with tests/airflow)."""

from __future__ import annotations

from tests.airflow.conftest import airflow_db  # noqa: F401 - re-exported as a fixture of this folder
