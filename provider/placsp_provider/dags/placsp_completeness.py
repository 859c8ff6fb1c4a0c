"""placsp_completeness: once a month, prove last month complete against the site's own archive of it.

Per dataset with a live feed: read every entry and tombstone of the month from the month's archive and
from Bronze, land the archive pages holding what the daily walks missed (a manifest of their own),
then ingest them into Silver. The check is green when the archive confirms the month or the gap was
recovered, red when the archive cannot be read or the gap cannot be repaired. Reports per day go to
`<lake>/completeness/<dataset>/<YYYY-MM>.json` (see docs/runbook.md, "Completeness").

Scheduled by PLACSP_COMPLETENESS_SCHEDULE (default the 5th at 06:00 UTC, for the month before);
trigger it by hand with a month in the form to check any closed month.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG, CronTriggerTimetable, Param

from placsp_provider import run_policy, settings
from placsp_provider.datasets import live_datasets
from placsp_provider.operators.completeness import PlacspCompletenessOperator
from placsp_provider.operators.silver import PlacspSilverOperator

with DAG(
    dag_id="placsp_completeness",
    description="Monthly completeness of Bronze against the PLACSP monthly archives",
    schedule=CronTriggerTimetable(settings.completeness_schedule(), timezone="UTC"),
    start_date=datetime(2012, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    # Every failure fires LogNotifier; configuration errors are not retried (run_policy.py).
    default_args=run_policy.default_args(retries=2, retry_delay=timedelta(minutes=30)),
    tags=["placsp"],
    doc_md=__doc__,
    params={
        "month": Param(
            None,
            type=["null", "string"],
            pattern=r"^(19|20)\d{2}-(0[1-9]|1[0-2])$",
            description="YYYY-MM to check; empty: the month before the run's date",
        ),
    },
) as dag:
    for ds in live_datasets():
        check = PlacspCompletenessOperator(
            task_id=f"completeness_{ds.key}", dataset=ds.key, month="{{ params.month or '' }}"
        )

        # `manifest_path` is None for a confirmed month: the Silver task then ingests nothing and starts
        # no JVM (a short-circuit task would cost this file a third of its parse time).
        silver = PlacspSilverOperator(
            task_id=f"silver_{ds.key}",
            dataset=ds.key,
            manifest=f"{{{{ ti.xcom_pull(task_ids='completeness_{ds.key}')['manifest_path'] }}}}",
        )
        check >> silver  # type: ignore[arg-type]  # the XComArg is the summary dict at run time
