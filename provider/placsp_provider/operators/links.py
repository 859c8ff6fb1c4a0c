"""Extra links on the task pages: the Spark UI (Silver, replay), the task's job in the Marquez
lineage UI (Silver, replay; the OpenLineage provider's job name and `[openlineage] namespace`), the
runbook's section on alerts (dead-letter gate).

Each link is computed by the API server when a user opens a task instance, from settings read
there (settings.py). A link whose setting is unset returns "" and the UI shows it disabled.
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
