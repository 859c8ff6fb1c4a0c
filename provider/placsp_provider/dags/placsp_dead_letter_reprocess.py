"""placsp_dead_letter_reprocess: replay, every day and without a person, the dead letters that need none.

Those are the dead letters a person marked `fixed` (`placsp dead-letters fix`) and the `quarantined`
ones an older parser version rejected (`parser_version` below the installed one, or null: written
before the column existed). Everything else still waits for a person: placsp_dead_letter_replay.

`backlog` counts them per dataset with delta-rs (no Spark) for all five datasets; only the datasets
with some get a `dry_run` (its report in the log and XCom), a `replay` (the same operator and the
same selection as the manual DAG's, within `max_records` and `max_attempts`) and a `quality` check.
A run with nothing to do ends green in seconds after `backlog`. `report` tells the notifiers what was
recovered (dataset, count, a few entry ids). Schedule: `PLACSP_DEAD_LETTER_REPROCESS_SCHEDULE`
(default daily 04:00 UTC). Runbook: docs/runbook.md, "Scheduled reprocessing".
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from airflow.sdk import DAG, Param, task
from airflow.timetables.trigger import CronTriggerTimetable

from placsp_provider import run_policy, settings
from placsp_provider.datasets import DATASETS
from placsp_provider.operators.quality import DataContractCheckOperator
from placsp_provider.operators.replay import DeadLetterReplayOperator
from placsp_provider.settings import REPLAY_MAX_ATTEMPTS, REPLAY_MAX_RECORDS, REPLAY_MAX_RECORDS_LIMIT

with DAG(
    dag_id="placsp_dead_letter_reprocess",
    description="Replay PLACSP dead letters that need no person (fixed, or rejected by an older parser)",
    schedule=CronTriggerTimetable(settings.dead_letter_reprocess_schedule(), timezone="UTC"),
    start_date=datetime(2012, 1, 1, tzinfo=UTC),
    catchup=False,
    # One at a time. Against a manual replay of the same dataset, the status update applies only to a
    # dead letter still as it was selected (ingest.rules.STATUS_UNCHANGED) and the Silver MERGE is
    # idempotent: the second replay to reach a dead letter changes nothing on it.
    max_active_runs=1,
    render_template_as_native_obj=True,
    default_args=run_policy.default_args(),
    tags=["placsp", "dead-letters"],
    doc_md=__doc__,
    params={
        "max_records": Param(
            REPLAY_MAX_RECORDS,
            type="integer",
            minimum=1,
            maximum=REPLAY_MAX_RECORDS_LIMIT,
            description="At most this many per dataset, oldest first",
        ),
        "max_attempts": Param(
            REPLAY_MAX_ATTEMPTS,
            type="integer",
            minimum=1,
            maximum=100,
            description="Still failing at this many attempts: abandoned",
        ),
    },
) as dag:

    @task
    def backlog(params: dict[str, Any] | None = None) -> list[str]:
        """The datasets with dead letters to reprocess, counted by delta-rs in the task (no Spark)."""
        import logging

        from placsp_provider.dead_letters.selection import unattended_backlog
        from placsp_provider.hooks.lake import LakeHook

        counts = unattended_backlog(LakeHook().lake(None), list(DATASETS), int((params or {})["max_records"]))
        logging.getLogger(__name__).info(
            "dead letters to reprocess (fixed, or rejected by an older parser version): %s",
            ", ".join(f"{k}={n}" for k, n in counts.items()),
        )
        return [k for k, n in counts.items() if n]

    datasets = backlog()
    limits = {"max_records": "{{ params.max_records }}", "max_attempts": "{{ params.max_attempts }}"}
    # The same operator as the manual DAG's, told to select only what needs no person.
    dry_run = DeadLetterReplayOperator.partial(
        task_id="dry_run", dry_run_only=True, unattended=True, outlets=[], **limits
    ).expand(dataset=datasets)
    replay = DeadLetterReplayOperator.partial(task_id="replay", unattended=True, **limits).expand(dataset=datasets)
    quality = DataContractCheckOperator.partial(task_id="quality", volume=False).expand(dataset=datasets)

    @task
    def report(summaries: Any, **context: Any) -> str | None:
        """What was recovered, per dataset, to the notifiers (run_policy.alert_notifiers("recovered"))."""
        from placsp_provider.operators.replay import recovery_report

        text = recovery_report(list(summaries))
        if text:
            for notifier in run_policy.alert_notifiers("recovered"):
                notifier({**context, "reason": text})
        return text

    # The replays' summaries, one per dataset, once their rows passed the contracts.
    dry_run >> replay >> quality >> report(replay.output)
