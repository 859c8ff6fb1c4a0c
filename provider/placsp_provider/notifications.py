"""LogNotifier: the provider's default failure notifier; it logs one line, and nothing else. It needs
no connection, so the DAGs can use it everywhere; a log-based alert rule, or one of the notifiers
below next to it, turns it into a page. It is also the `placsp_daily` Deadline Alert's callback
(`run_policy.daily_deadline_alert`), run by the triggerer.

The same notifiers also say when a replay's approval step waits for a person (`approval`, from
the step itself when it parks) and what the scheduled reprocessing recovered (`recovered`): one list
per event, `run_policy.alert_notifiers`; add yours there.

Route failures elsewhere by adding notifiers to the same callback list. The exception's message can
quote what a record holds (an entry id, a file name, an lxml message): every message the provider
raises is already printable (`errors.PlacspError`), but Airflow's Jinja does not escape HTML or Slack
markup, so the templates below escape it themselves. Keep the exception in the template
(`{{ exception | e }}`): never format it into a template field in Python, because the notifier renders
its fields as Jinja and would then render the record's text as a template.

- **Email**: `SmtpNotifier` from apache-airflow-providers-smtp (installed with Airflow itself), with
  an SMTP connection (`smtp_default`, e.g. `AIRFLOW_CONN_SMTP_DEFAULT='smtp://user:pass@mail:587'`)::

      from airflow.providers.smtp.notifications.smtp import SmtpNotifier

      on_failure_callback=[
          LogNotifier(),
          SmtpNotifier(
              to="data-quality@example.org",
              from_email="airflow@example.org",
              subject="[placsp] {{ dag.dag_id }}.{{ ti.task_id }} failed ({{ run_id }})",
              html_content="<pre>{{ exception | e }}</pre>",
          ),
      ]

- **Slack**: install apache-airflow-providers-slack and add a `SlackWebhookNotifier` to the same list.
  Slack reads `<...>` as links and mentions (`<!channel>`) and wants exactly `&`, `<` and `>` escaped::

      from airflow.providers.slack.notifications.slack_webhook import SlackWebhookNotifier

      SlackWebhookNotifier(
          slack_webhook_conn_id="slack_default",
          text="{{ ti.task_id }}: {{ exception | replace('&','&amp;') | replace('<','&lt;') | replace('>','&gt;') }}",
      )
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import BaseNotifier

from placsp_provider.untrusted import printable

LOGGER = "placsp_provider.alerts"


class LogNotifier(BaseNotifier):
    """Log an ERROR line naming the DAG, task, run and try, with the exception's message made
    printable (`untrusted.printable`: a message quoting a record cannot forge a second log line or
    repaint a terminal); for a missed deadline, one `deadline missed: ...` line naming the DAG run.
    With `event="approval"` a WARNING `approval awaited: ...` line (the approval step's subject, its
    first body line and when it times out); with `event="recovered"` a WARNING `recovered: ...` line
    (the context's `reason`: what the scheduled reprocessing recovered).

    Use as `on_failure_callback=LogNotifier()` (task or DAG level; a list mixes it with other notifiers).

    :param logger_name: the stdlib logger to write to (route it with Airflow's logging config).
    :param max_chars: longest exception message logged (counted before its control characters are
        escaped); longer ones end in `…`.
    :param event: `failed` (default), `approval` or `recovered`.
    """

    EVENTS = ("failed", "approval", "recovered")

    def __init__(
        self, *, logger_name: str = LOGGER, max_chars: int = 4000, event: str = "failed", context: Any = None
    ) -> None:
        # `context`: a Deadline Alert's AsyncCallback builds the notifier with it, then awaits it.
        super().__init__(context)
        if event not in self.EVENTS:
            raise ValueError(f"LogNotifier: event must be one of {self.EVENTS}, not {event!r}")
        self.logger_name = logger_name
        self.max_chars = max_chars
        self.event = event

    def notify(self, context: Any) -> None:
        level = logging.ERROR if self.event == "failed" else logging.WARNING
        logging.getLogger(self.logger_name).log(level, "%s", self.describe(context))

    async def async_notify(self, context: Any) -> None:
        self.notify(context)

    def describe(self, context: Any) -> str:
        if "deadline" in context:
            return self._describe_deadline(context)
        ti = context.get("ti") or context.get("task_instance")
        dag = context.get("dag")
        dag_id = getattr(dag, "dag_id", None) or getattr(ti, "dag_id", None) or "?"
        task_id = getattr(ti, "task_id", None) or getattr(context.get("task"), "task_id", None) or "(dag)"
        run_id = context.get("run_id") or getattr(ti, "run_id", None) or "?"
        if self.event == "approval":
            return f"approval awaited: dag {dag_id}, task {task_id}, run {run_id}: {self._awaited(context)}"
        if self.event == "recovered":
            what = printable(str(context.get("reason") or "nothing"), self.max_chars)
            return f"recovered: dag {dag_id}, run {run_id}: {what}"
        try_number = getattr(ti, "try_number", None)
        error = context.get("exception") or context.get("reason") or "no exception in the context"
        text = f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else str(error)
        attempt = f", try {try_number}" if try_number else ""
        # One line whatever the exception: the gate's message keeps its lines as `\n`.
        return f"failed: dag {dag_id}, task {task_id}, run {run_id}{attempt}: {printable(text, self.max_chars)}"

    def _awaited(self, context: Any) -> str:
        """An approval step's question: subject, the body's first line, when it times out and to what."""
        task = context.get("task")
        subject = getattr(task, "subject", None) or "a response"
        first_line = (getattr(task, "body", None) or "").strip().splitlines()[:1]
        timeout = getattr(task, "response_timeout", None)
        defaults = getattr(task, "defaults", None) or []
        when = (
            f"; without a response in {timeout}, {' / '.join(defaults) or 'it fails'}"
            if timeout
            else "; it waits until someone responds"
        )
        text = " ".join([subject, *first_line]) + when
        return printable(text, self.max_chars) + " (Required Actions in the Airflow UI)"

    def _describe_deadline(self, context: Any) -> str:
        """A missed Deadline Alert: the triggerer passes the DAG run (as the REST API shows it) and the deadline."""
        run = context.get("dag_run") or {}
        deadline = context.get("deadline") or {}
        return (
            f"deadline missed: dag {run.get('dag_id', '?')}, run {run.get('dag_run_id') or run.get('run_id', '?')} "
            f"(state {run.get('state', '?')}, queued at {run.get('queued_at', '?')}) was not finished by "
            f"{deadline.get('deadline_time', '?')}"
        )
