"""placsp_daily: every day, land yesterday's PLACSP feed pages into Bronze, then parse them into Silver.

Per dataset with a live head feed (643 licitaciones, 1044 agregadas, 1143 menores): extraction
(HTTP -> Bronze pages + manifest), then the Silver ingest on Spark (Bronze -> Silver Delta tables,
with every entry that cannot be parsed or validated routed to the dead-letter table), then a
dead-letter threshold gate (PLACSP_DEAD_LETTER_MAX_RATIO, PLACSP_DEAD_LETTER_SEVERITY) and, next to it,
the data-contract check with the volume anomaly check (docs/data-quality.md).
Set PLACSP_LAKE for the lake root and the `placsp_default` connection for the site (see README).
Only `airflow.sdk` and the provider's thin operator modules are imported here: the file parses fast.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG, CronDataIntervalTimetable

from placsp_provider import run_policy, settings
from placsp_provider.datasets import live_datasets
from placsp_provider.operators.extract import PlacspExtractOperator
from placsp_provider.operators.quality import DataContractCheckOperator
from placsp_provider.operators.silver import PlacspSilverOperator
from placsp_provider.sensors.dead_letters import DeadLetterThresholdSensor

with DAG(
    dag_id="placsp_daily",
    description="Daily PLACSP extraction into Bronze and ingest into Silver with dead letters",
    # Data intervals, not trigger points: each run owns [midnight, next midnight) UTC.
    schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
    # Early enough for any logical date a user may test or backfill; catchup stays off so a new
    # deployment runs the latest interval only (history comes from placsp_backfill).
    start_date=datetime(2012, 1, 1, tzinfo=UTC),
    catchup=False,
    # Runs land into the same Bronze folders and, later, MERGE into the same Delta tables:
    # one at a time keeps commits simple and the manifests in order.
    max_active_runs=1,
    # Every failure fires LogNotifier; configuration errors are not retried (run_policy.py).
    default_args=run_policy.default_args(
        retries=3,
        retry_delay=timedelta(minutes=10),
        retry_exponential_backoff=True,
        max_retry_delay=timedelta(hours=1),
    ),
    # A run not finished PLACSP_DAILY_DEADLINE_MINUTES (default 6 h) after it was queued alerts.
    deadline=run_policy.daily_deadline_alert(),
    tags=["placsp"],
    doc_md=__doc__,
) as dag:
    for ds in live_datasets():
        extract = PlacspExtractOperator(task_id=f"extract_{ds.key}", dataset=ds.key)
        silver = PlacspSilverOperator(
            task_id=f"silver_{ds.key}",
            dataset=ds.key,
            manifest=f"{{{{ ti.xcom_pull(task_ids='extract_{ds.key}')['manifest'] }}}}",
        )
        # The gate: too many dead letters in this run turns the run red (severity "error") and
        # fires the notifiers (default_args); "warn" logs the same message and lets the run go on.
        gate = DeadLetterThresholdSensor(
            task_id=f"dead_letters_{ds.key}",
            dataset=ds.key,
            scope="run",
            max_ratio=settings.dead_letter_max_ratio(),
            severity=settings.dead_letter_severity(),
            poke_interval=30,
            timeout=timedelta(minutes=30),
            # A gate that fails for its data does not retry (DeadLetterThresholdError); a retry is for
            # an unreadable table or Airflow's deferral race (the sensor's settle_seconds): soon, once.
            retry_delay=timedelta(seconds=30),
            retry_exponential_backoff=False,
        )
        extract >> silver >> gate
        # Data contracts (placsp_provider/quality/contracts) on this run's rows and the whole tables, and the day's
        # volume against its Prophet forecast: an `error` rule turns the run red (docs/data-quality.md).
        # Its failure fires the notifier like every task (default_args).
        quality = DataContractCheckOperator(task_id=f"quality_{ds.key}", dataset=ds.key)
        silver >> quality
