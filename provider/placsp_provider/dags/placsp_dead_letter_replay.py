"""placsp_dead_letter_replay: bring dead letters back into Silver once their cause is fixed.

Trigger it by hand (Trigger DAG, the form below). It selects the dataset's dead letters with status
`quarantined` or `fixed` that match the filters, re-parses them with the ingest's own code, MERGEs
what passes into Silver (newest wins, never twice) and records on every selected dead letter what
became of it: `replayed`, one more attempt with its new error, or `abandoned` past max_attempts.

Every run starts with a dry run (`dry_run`: what would be recovered, nothing written); then the
`approve` step waits for a person to read that summary and *Approve* (the `replay` task writes) or
*Reject* (the run ends, nothing written) in the UI. When it parks it alerts through the failure
notifiers (`approval awaited: ...`); with no answer within `approval_timeout_hours` it is rejected.
A dry run that selects nothing ends the run green, asking nobody. Form flags: `dry_run` stops after
the report; `skip_approval` approves at once (automation).
Dead letters that need no person (`fixed`, or rejected by an older parser version) are also replayed
every day by `placsp_dead_letter_reprocess`.
How to fix a record by hand and other recipes: docs/runbook.md.
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import DAG, Param

from placsp_provider import run_policy
from placsp_provider.datasets import DATASETS
from placsp_provider.dead_letters.lifecycle import STAGES
from placsp_provider.operators.approval import ReplayApprovalOperator
from placsp_provider.operators.quality import DataContractCheckOperator
from placsp_provider.operators.replay import DeadLetterReplayOperator
from placsp_provider.settings import (
    REPLAY_MAX_ATTEMPTS,
    REPLAY_MAX_RECORDS,
    REPLAY_MAX_RECORDS_LIMIT,
    replay_approval_timeout,
    replay_approvers,
)

with DAG(
    dag_id="placsp_dead_letter_replay",
    description="Replay PLACSP dead letters into Silver (manual, form)",
    schedule=None,
    start_date=datetime(2012, 1, 1, tzinfo=UTC),
    catchup=False,
    # Two replays of the same dead letters at once would both count an attempt; one at a time.
    # Against placsp_daily, Delta's commit conflicts are retried (every write is idempotent).
    max_active_runs=1,
    # The form's lists, numbers and booleans reach the operator as such, not as their text.
    render_template_as_native_obj=True,
    # Failures fire LogNotifier; a form that cannot work is not retried (run_policy.py).
    default_args=run_policy.default_args(),
    tags=["placsp", "dead-letters"],
    doc_md=__doc__,
    params={
        "dataset": Param(
            "licitaciones",
            type="string",
            enum=list(DATASETS),
            values_display={k: f"{k} ({d.syndication_id})" for k, d in DATASETS.items()},
            description="Which dataset's dead letters",
        ),
        "stages": Param(
            [],
            type=["array", "null"],
            items={"type": "string", "enum": list(STAGES)},
            uniqueItems=True,
            description="Only these stages; empty: all",
        ),
        "error_types": Param(
            [],
            type=["array", "null"],
            items={"type": "string", "pattern": r"^[a-z_]+$"},
            description="Only these error types, one per line (e.g. invalid_amount); empty: all",
        ),
        "since": Param(
            None, type=["null", "string"], format="date", description="First UTC day the dead letter was recorded"
        ),
        "until": Param(
            None, type=["null", "string"], format="date", description="Last UTC day the dead letter was recorded"
        ),
        "dead_letter_ids": Param(
            [],
            type=["array", "null"],
            items={"type": "string", "pattern": r"^[0-9a-f]{64}$"},
            description="Only these dead_letter_id values, one per line; empty: all that match",
        ),
        # Outcomes are gathered on the Spark driver: a larger backlog is replayed in several runs.
        "max_records": Param(
            REPLAY_MAX_RECORDS,
            type="integer",
            minimum=1,
            maximum=REPLAY_MAX_RECORDS_LIMIT,
            description="At most this many, oldest first",
        ),
        "max_attempts": Param(
            REPLAY_MAX_ATTEMPTS,
            type="integer",
            minimum=1,
            maximum=100,
            description="Still failing at this many attempts: abandoned",
        ),
        "dry_run": Param(False, type="boolean", description="Report what would be recovered; write nothing"),
        "skip_approval": Param(
            False, type="boolean", description="Replay right after the dry run, without waiting for approval"
        ),
        "approvers": Param(
            replay_approvers(),
            type=["array", "null"],
            items={"type": "string", "minLength": 1},
            description="Airflow user ids who may approve, one per line; empty: anyone allowed on this DAG",
        ),
        "approval_timeout_hours": Param(
            replay_approval_timeout().total_seconds() / 3600,
            type="number",
            exclusiveMinimum=0,
            maximum=24 * 30,
            description="No answer within this many hours: rejected, nothing written",
        ),
    },
) as dag:
    filters = {
        "dataset": "{{ params.dataset }}",
        "stages": "{{ params.stages }}",
        "error_types": "{{ params.error_types }}",
        "since": "{{ params.since }}",
        "until": "{{ params.until }}",
        "dead_letter_ids": "{{ params.dead_letter_ids }}",
        "max_records": "{{ params.max_records }}",
        "max_attempts": "{{ params.max_attempts }}",
    }
    # Writes nothing, so it declares no outlets.
    dry_run = DeadLetterReplayOperator(task_id="dry_run", dry_run_only=True, outlets=[], **filters)
    approve = ReplayApprovalOperator(
        task_id="approve",
        dry_run_task_id="dry_run",
        dry_run_only="{{ params.dry_run }}",
        skip_approval="{{ params.skip_approval }}",
        timeout_hours="{{ params.approval_timeout_hours }}",
        approvers="{{ params.approvers }}",
        # Parked: whoever a failure reaches is told (run_policy.alert_notifiers).
        notifiers=run_policy.alert_notifiers("approval"),
    )
    replay = DeadLetterReplayOperator(task_id="replay", **filters)
    # The replayed rows (this run's) and the whole tables against the data contracts; no volume check:
    # a replay does not ingest a day.
    quality = DataContractCheckOperator(task_id="quality", dataset="{{ params.dataset }}", volume=False)
    dry_run >> approve >> replay >> quality
