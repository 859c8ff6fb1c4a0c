"""placsp_dead_letter_monitor: every hour, alert when a dataset's dead-letter backlog grows too large.

Per dataset with a live feed (643 licitaciones, 1044 agregadas, 1143 menores), one
`DeadLetterThresholdSensor` with scope `backlog` counts the dead letters still `quarantined`,
whatever run inserted them. It waits in the triggerer (no worker slot) for most of the hour: it fails
as soon as the backlog exceeds `MAX_QUARANTINED`, with a message naming the top error types, a few
samples, the `placsp dead-letters stats` command and a query listing them all, and `LogNotifier`
logs the alert; it passes when the hour ends below the threshold.

Until replay exists nothing moves a dead letter out of `quarantined`, so a crossed backlog stays
crossed and every hour fails again: raise the threshold or fix the records (docs/dead-letters.md).
Counting reads the dead-letter Delta table with delta-rs (partition `dataset`, four columns): no Spark.
Set PLACSP_LAKE for the lake root.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG, CronTriggerTimetable

from placsp_provider import run_policy
from placsp_provider.datasets import live_datasets
from placsp_provider.sensors.dead_letters import DeadLetterThresholdSensor

# Dead letters still quarantined, per dataset, above which the monitor fails.
MAX_QUARANTINED = 1000

with DAG(
    dag_id="placsp_dead_letter_monitor",
    description="Hourly check of the quarantined dead-letter backlog of each live PLACSP dataset",
    schedule=CronTriggerTimetable("0 * * * *", timezone="UTC"),
    start_date=datetime(2025, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    default_args=run_policy.default_args(retries=0),  # an alert, not a job: the next hour looks again
    tags=["placsp", "data-quality"],
    doc_md=__doc__,
) as dag:
    for ds in live_datasets():
        DeadLetterThresholdSensor(
            task_id=f"backlog_{ds.key}",
            dataset=ds.key,
            scope="backlog",
            max_count=MAX_QUARANTINED,
            severity="error",
            poke_interval=timedelta(minutes=5),
            timeout=timedelta(minutes=55),  # ends before the next hourly run starts
        )
