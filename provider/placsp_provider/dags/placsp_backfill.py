"""placsp_backfill: land the archives of past months or years of one dataset, then ingest them into Silver.

Trigger it by hand (Trigger DAG w/ config). Every dataset works, including the archive-only ones
(1383 encargos, 1403 consultas). Reruns land nothing twice.
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import DAG, Param, task

from placsp_provider import run_policy
from placsp_provider.datasets import DATASETS
from placsp_provider.operators.extract import PlacspExtractOperator
from placsp_provider.operators.silver import PlacspSilverOperator

_MONTH = r"^(19|20)\d{2}-(0[1-9]|1[0-2])$"

with DAG(
    dag_id="placsp_backfill",
    description="Land PLACSP archives for a range of months",
    schedule=None,
    start_date=datetime(2012, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    # Failures fire LogNotifier; a form that cannot work is not retried (run_policy.py).
    default_args=run_policy.default_args(),
    tags=["placsp"],
    doc_md=__doc__,
    params={
        "dataset": Param(
            "agregadas",
            type="string",
            enum=list(DATASETS),
            description="Which feed: " + ", ".join(f"{d.key} ({d.syndication_id})" for d in DATASETS.values()),
        ),
        "first_month": Param("2022-01", type="string", pattern=_MONTH, description="YYYY-MM, inclusive"),
        "last_month": Param("2022-01", type="string", pattern=_MONTH, description="YYYY-MM, inclusive"),
    },
) as dag:

    @task
    def plan(params: dict | None = None) -> dict[str, str]:
        """Turn the form's months into an interval; refuse a range that cannot work."""
        from placsp_provider.backfill import month_interval

        assert params is not None
        since, until = month_interval(params["dataset"], params["first_month"], params["last_month"])
        return {"since": since.isoformat(), "until": until.isoformat()}

    window = plan()
    land = PlacspExtractOperator(
        task_id="land_archives",
        dataset="{{ params.dataset }}",
        since="{{ ti.xcom_pull(task_ids='plan')['since'] }}",
        until="{{ ti.xcom_pull(task_ids='plan')['until'] }}",
        source="archives",
    )
    silver = PlacspSilverOperator(
        task_id="silver",
        dataset="{{ params.dataset }}",
        manifest="{{ ti.xcom_pull(task_ids='land_archives')['manifest'] }}",
    )
    window >> land >> silver
