"""Extra links on the task pages: the Spark UI, the lineage UI's job page, the runbook.

Each link is computed by the API server when a user opens a task instance, from settings read
there (the same environment as every Airflow service; settings.py). A link whose setting is
unset returns "" and the UI shows it disabled:

- `Spark UI` (Silver, replay): the Spark master's web UI, `PLACSP_SPARK_UI_URL`; the task's
  application is the newest one named `placsp-silver-ingest` / `placsp-dead-letter-replay` there.
- `Lineage (Marquez)` (Silver, replay): the task's job in the Marquez web UI,
  `PLACSP_LINEAGE_UI_URL` + `/lineage/job/<namespace>/<dag_id>.<task_id>` (the OpenLineage
  provider's job name and `[openlineage] namespace`).
- `Runbook` (dead-letter gate): the runbook's section on alerts and dead letters, `PLACSP_RUNBOOK_URL`.

Registered in the provider info (`extra-links`), as Airflow 3 requires for operator links.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import quote

from airflow.sdk import BaseOperatorLink

from placsp_provider import settings

RUNBOOK_SECTION = "alerting"


class SparkUILink(BaseOperatorLink):
    name = "Spark UI"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        return settings.spark_ui_url() or ""


class LineageJobLink(BaseOperatorLink):
    name = "Lineage (Marquez)"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        base = settings.lineage_ui_url()
        if not base:
            return ""
        namespace = os.environ.get("AIRFLOW__OPENLINEAGE__NAMESPACE") or "default"
        job = f"{ti_key.dag_id}.{ti_key.task_id}"
        return f"{base.rstrip('/')}/lineage/job/{quote(namespace, safe='')}/{quote(job, safe='')}"


class RunbookLink(BaseOperatorLink):
    name = "Runbook"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        base = settings.runbook_url()
        return f"{base.split('#')[0]}#{RUNBOOK_SECTION}" if base else ""
