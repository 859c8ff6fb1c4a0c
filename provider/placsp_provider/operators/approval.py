"""ReplayApprovalOperator: a person approves a replay after reading what its dry run found."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk import Context

from placsp_provider.operators.replay import _boolean, _strings


class ReplayApprovalOperator(ApprovalOperator):
    """Airflow's `ApprovalOperator` (human in the loop), its body the dry run's summary.

    The task waits for *Approve* or *Reject* in the UI (the task's page, or *Required Actions*),
    showing what the dry run selected, would recover and would leave failing, by error type.
    *Approve* lets the downstream replay run; *Reject* skips it and the run ends green, nothing
    written. When it parks it calls its `notifiers` (the DAG gives it the failure notifiers'); with
    no answer within `timeout_hours` the scheduler answers *Reject* for it (`defaults`), so nothing is
    written. It asks nobody when there is nothing to approve, and three cases decide without a person:

    - the dry run selected nothing: nothing to approve; the replay is skipped, the run ends green.
    - `dry_run_only` true: the user asked for the report only; the replay is skipped.
    - `skip_approval` true: automation; approved at once (the summary is logged all the same).

    :param dry_run_task_id: the task whose XCom is the dry-run summary (`DeadLetterReplayOperator`).
    :param dry_run_only: templated boolean: stop after the dry run.
    :param skip_approval: templated boolean: approve without asking.
    :param timeout_hours: templated number: how long to wait for an answer before *Reject*; overrides
        `response_timeout`.
    :param approvers: templated list of Airflow user ids (or a comma-separated string) who may answer;
        empty: anyone allowed to act on the DAG. Airflow's human-in-the-loop assigns users, not roles.
    """

    template_fields: Sequence[str] = (
        *ApprovalOperator.template_fields,
        "dry_run_only",
        "skip_approval",
        "timeout_hours",
        "approvers",
    )
    ui_color = "#fff2cc"

    def __init__(
        self,
        *,
        dry_run_task_id: str,
        dry_run_only: bool | str = False,
        skip_approval: bool | str = False,
        timeout_hours: float | str | None = None,
        approvers: Sequence[str] | str = (),
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("subject", "Replay these dead letters into Silver?")
        # No answer in time: Reject, the one outcome that writes nothing.
        kwargs.setdefault("defaults", [self.REJECT])
        super().__init__(**kwargs)
        self.dry_run_task_id = dry_run_task_id
        self.dry_run_only = dry_run_only
        self.skip_approval = skip_approval
        self.timeout_hours = timeout_hours
        self.approvers = approvers

    def execute(self, context: Context) -> Any:
        summary = context["ti"].xcom_pull(task_ids=self.dry_run_task_id)
        self.body = approval_body(summary)
        self.log.info("dry run:\n%s", self.body)
        if summary and not summary.get("selected"):
            return self._skip_replay(context, "the dry run selected no dead letter: nothing to approve or write")
        if _boolean(self.dry_run_only):
            return self._skip_replay(context, "dry run only (form field dry_run): the replay is skipped")
        if _boolean(self.skip_approval):
            self.log.info("approval skipped (form field skip_approval): the replay runs")
            return {"chosen_options": [self.APPROVE], "params_input": {}, "responded_by_user": None}
        if self.timeout_hours not in (None, ""):
            self.response_timeout = timedelta(hours=float(self.timeout_hours))  # type: ignore[arg-type]
        users = _strings(self.approvers)
        self.assigned_users = [{"id": u, "name": u} for u in users] or None
        self.log.info(
            "waiting for Approve or Reject from %s; Reject by default after %s",
            ", ".join(users) or "anyone allowed to act on this DAG",
            self.response_timeout or "no timeout",
        )
        return super().execute(context)

    def _skip_replay(self, context: Context, why: str) -> None:
        self.log.info("%s; nothing is written", why)
        self.skip(ti=context["ti"], tasks=list(context["task"].get_direct_relatives(upstream=False)))


def approval_body(summary: dict[str, Any] | None) -> str:
    """The dry run as Markdown: totals, then one row per error type."""
    if not summary:
        return "The dry run returned no summary: check its log before approving."
    lines = [
        f"Dataset **{summary['dataset']}**, dry run `{summary['run_id']}`: "
        f"**{summary['selected']}** dead letters selected, **{summary['recovered']}** would be recovered, "
        f"**{summary['still_failing']}** still failing, **{summary['abandoned']}** would be abandoned.",
        "",
        "| error type | selected | would recover | still failing | abandoned |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {error_type} | {c.get('selected', 0)} | {c.get('recovered', 0)} | {c.get('still_failing', 0)} | "
        f"{c.get('abandoned', 0)} |"
        for error_type, c in sorted(summary.get("by_error_type", {}).items())
    ]
    if summary.get("files_reprocessed"):
        lines += ["", f"Bronze files to reprocess: {len(summary['files_reprocessed'])}"]
    left_out = (summary.get("needs_fix") or {}).get("count", 0)
    if left_out:
        lines += [
            "",
            f"Left out: **{left_out}** dead letters written before `raw_bytes` whose exact bytes are unknown; "
            "they need a person's fix (`placsp dead-letters fix`, docs/runbook.md).",
        ]
    lines += ["", "Approve to write these outcomes; Reject ends the run and writes nothing."]
    return "\n".join(lines)
