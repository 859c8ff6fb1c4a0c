"""placsp_maintenance: every week, compact the lake's Delta tables and remove the files no recent version uses.

Every daily ingest MERGE rewrites the data files it touches; the replaced files stay on disk until a
VACUUM, so without this a lake grows by about every touched table each day. One task: Delta
`OPTIMIZE` (Silver's tables in the order of their versions' time, in files of
`PLACSP_MAINTENANCE_FILE_MB`, so the next daily MERGEs rewrite only the files of the time they touch;
the others' small files into larger ones), then `VACUUM` with Delta's 7-day retention, on every lake
table (docs/runbook.md, "Table maintenance"). The rows do not change, so no consumer reruns.

It runs on Sunday at noon UTC, when the daily run (at midnight) is long done. A commit of an ingest or
replay in between fails the task with a one-line message and nothing lost; it retries an hour later.
Set PLACSP_SPARK_POOL to a one-slot pool to keep it from ever running beside an ingest.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG, CronTriggerTimetable

from placsp_provider import run_policy
from placsp_provider.operators.maintenance import PlacspMaintainOperator

with DAG(
    dag_id="placsp_maintenance",
    description="Weekly Delta OPTIMIZE and VACUUM of the PLACSP lake's tables",
    schedule=CronTriggerTimetable("0 12 * * 0", timezone="UTC"),
    start_date=datetime(2025, 1, 1, tzinfo=UTC),
    catchup=False,  # one maintenance now does what missed weeks would have
    max_active_runs=1,
    default_args=run_policy.default_args(retries=2, retry_delay=timedelta(hours=1)),
    tags=["placsp", "maintenance"],
    doc_md=__doc__,
) as dag:
    PlacspMaintainOperator(task_id="optimize_and_vacuum")
