"""How the provider's DAGs alert, retry and wait: one definition shared by every DAG file.

Only `airflow.sdk` is imported: DAG files import this at parse time.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

# airflow.sdk exports these lazily; mypy does not see the three deadline names there.
from airflow.sdk import (  # type: ignore[attr-defined]
    AsyncCallback,
    DeadlineAlert,
    DeadlineReference,
    ExceptionRetryPolicy,
    RetryAction,
    RetryRule,
)

from placsp_provider import settings
from placsp_provider.errors import ConfigError
from placsp_provider.notifications import LOGGER, LogNotifier

# Raised before any network or Spark work, on input that will be the same on the next try.
NOT_RETRIED: list[type[BaseException] | str] = [ConfigError, "airflow.sdk.exceptions.ParamValidationError"]


def retry_policy() -> ExceptionRetryPolicy:
    """Fail configuration and validation errors without retrying (they cannot succeed on a retry);
    leave every other error (network, Spark, the site) to the task's `retries` and backoff."""
    return ExceptionRetryPolicy(
        rules=[
            RetryRule(
                exception=list(NOT_RETRIED),
                action=RetryAction.FAIL,
                reason="a configuration or validation error: a retry would fail the same way",
            )
        ],
        default=RetryAction.DEFAULT,
    )


def alert_notifiers(event: str = "failed") -> list[Any]:
    """Who is told, for each event: a task failed (`failed`), a replay waits for approval
    (`approval`), the scheduled reprocessing recovered dead letters (`recovered`). One list for all
    three, so an approval reaches whoever a failure reaches: add a notifier here (notifications.py)."""
    return [LogNotifier(event=event)]


def default_args(**overrides: Any) -> dict[str, Any]:
    """The `default_args` of every PLACSP DAG: the failure notifier and the retry policy, plus `overrides`."""
    return {"on_failure_callback": alert_notifiers("failed"), "retry_policy": retry_policy(), **overrides}


def daily_deadline_alert(interval: timedelta | None = None) -> DeadlineAlert | None:
    """`placsp_daily`'s Deadline Alert (Airflow 3's replacement for SLAs): `LogNotifier`, run in the
    triggerer, for a run still not finished `PLACSP_DAILY_DEADLINE_MINUTES` after it was queued; None
    when that is 0.

    The reference is the time the run was queued: for a scheduled run that is when its data
    interval ended, and a manual run (or a rerun of an old day) is judged from when it was asked for.
    """
    interval = interval if interval is not None else settings.daily_deadline()
    if interval is None:
        return None
    return DeadlineAlert(
        reference=DeadlineReference.DAGRUN_QUEUED_AT,
        interval=interval,
        callback=AsyncCallback(LogNotifier, kwargs={"logger_name": LOGGER}),
        name="placsp_daily not finished in time",
    )


def spark_pool_args() -> dict[str, Any]:
    """`pool=` for the Spark operators when `PLACSP_SPARK_POOL` names one (settings.spark_pool)."""
    pool = settings.spark_pool()
    return {"pool": pool} if pool else {}
