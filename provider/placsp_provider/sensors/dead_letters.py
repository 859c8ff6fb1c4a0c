"""DeadLetterThresholdSensor: fail (or warn) when too many records of a dataset went to the dead letters."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue
from airflow.sdk.exceptions import AirflowFailException, AirflowSensorTimeout

from placsp_provider import settings
from placsp_provider.datasets import get_dataset
from placsp_provider.dead_letters import stats
from placsp_provider.dead_letters.stats import DeadLetterCounts, DeadLetterQuery, ThresholdCheck
from placsp_provider.errors import PlacspError
from placsp_provider.hooks.lake import LakeHook
from placsp_provider.lake import resolve_lake, run_summary_path
from placsp_provider.lake_storage import LakePath
from placsp_provider.lineage import sensor as sensor_lineage
from placsp_provider.operators.links import RunbookLink

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

XCOM_KEY = "dead_letter_check"


class DeadLetterThresholdError(PlacspError, AirflowFailException):
    """A dead-letter threshold with severity `error` failed. Not retried: the data will not change.

    Its message is `stats.failure_message`: several lines, each already made printable.
    """

    multiline = True

    def __init__(self, message: str, checks: Sequence[Any]) -> None:
        self.checks = list(checks)
        super().__init__(message)


class DeadLetterThresholdSensor(BaseSensorOperator):
    """Check the dead letters of a dataset against a count and/or a ratio threshold.

    Scope `run` waits until this DAG run's Silver ingest of `dataset` has committed (its run summary
    `<lake>/runs/<dataset>/<run_id>.json` exists), then counts the dead-letter rows of this run. Scope
    `backlog` counts every row still `quarantined`, whatever run inserted it; deferred, it watches the
    backlog until it exceeds `max_count` or the sensor's `timeout` passes (then it passes), which is
    what an hourly monitor wants. In poke/reschedule mode a backlog check looks once.

    A check fails when the count exceeds `max_count`, or when dead letters / entries read (the run
    summary's `read.entries + read.tombstones`) exceeds `max_ratio`. Severity `error` fails the task
    (no retry) with a bounded message: counts, top error types, samples, the `placsp dead-letters
    stats` command and a query that lists every row. Severity `warn` logs that message as a WARNING and
    succeeds. Either way the checks go to XCom (`return_value` and key `dead_letter_check`).

    OpenLineage (docs/lineage.md): the dead-letter table is the input, with the checks as
    `dataQualityAssertions` and the counts as `dataQualityMetrics`, on COMPLETE and on FAIL.

    Counting reads the Delta table with delta-rs, no Spark (`dead_letters.stats`). On an S3 lake, a
    poke reads with the lake connection's credentials (`LakeHook`), and so does the trigger, which
    reads that connection in the triggerer: the trigger's stored arguments name it, never hold its secret.

    :param dataset: dataset key or syndication id (templated).
    :param scope: `run` (this DAG run's dead letters) or `backlog` (all quarantined ones).
    :param stages: count only these stages: `parse`, `validation`, `reconciliation` (templated).
    :param error_types: count only these error types, e.g. `["xml_syntax"]` (templated).
    :param max_count: the most dead letters allowed (0: none).
    :param max_ratio: the highest dead letters / entries read allowed, 0..1; scope `run` only.
    :param severity: `error` or `warn`.
    :param lake: lake root (templated); default `$PLACSP_LAKE` (`lake.resolve_lake`).
    :param deferrable: wait in the triggerer (`DeadLetterThresholdTrigger`) instead of a worker slot.
    :param settle_seconds: deferred, how long the trigger waits before its first look; default
        `$PLACSP_TRIGGER_SETTLE_SECONDS` or 10. Airflow 3.3 (apache/airflow#67287) fails a deferred
        task whose trigger fires before the scheduler has processed the worker's exit on `defer()`
        ("state mismatch", then a retry); the gate's answer is usually ready at once, so without a
        pause it would often win that race.
    """

    template_fields: Sequence[str] = ("dataset", "lake", "stages", "error_types")
    ui_color = "#f3d9d4"
    operator_extra_links = (RunbookLink(),)

    def __init__(
        self,
        *,
        dataset: str,
        scope: str = "run",
        stages: Sequence[str] | None = None,
        error_types: Sequence[str] | None = None,
        max_count: int | None = None,
        max_ratio: float | None = None,
        severity: str = "error",
        lake: str | None = None,
        deferrable: bool = True,
        settle_seconds: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        # Only the arguments that are not templated: the others are checked once rendered, in execute.
        stats.validate_thresholds(scope=scope, severity=severity, max_count=max_count, max_ratio=max_ratio)
        self.dataset = dataset
        self.scope = scope
        self.stages = stages
        self.error_types = error_types
        self.max_count = max_count
        self.max_ratio = max_ratio
        self.severity = severity
        self.lake = lake
        self.deferrable = deferrable
        self.settle_seconds = settings.trigger_settle_seconds() if settle_seconds is None else settle_seconds
        # What the check concluded, for the lineage events (set before a failing check raises).
        self._checks: tuple[ThresholdCheck, ...] = ()
        self._counts: DeadLetterCounts | None = None

    # -- deferrable path --------------------------------------------------------------------------
    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        from placsp_provider.triggers.dead_letters import DeadLetterThresholdTrigger

        query = self._query(context)
        assert query.dataset is not None
        trigger = DeadLetterThresholdTrigger(
            lake=query.lake,
            dataset=query.dataset,
            scope=self.scope,
            deadline=time.time() + self.timeout,
            run_id=query.run_id,
            stages=list(query.stages) or None,
            error_types=list(query.error_types) or None,
            max_count=self.max_count if self.scope == "backlog" else None,
            poke_interval=self.poke_interval,
            first_poll_after=self.settle_seconds,
            lake_conn_id=LakeHook().lake_conn_id,  # as resolved here: $PLACSP_LAKE_CONN_ID may be set on workers only
        )
        self.log.info("dataset %s: deferring the %s check (up to %s s)", query.dataset, self.scope, self.timeout)
        # The trigger fires `timeout` itself at its deadline; Airflow's own timeout is only a safety net.
        grace = max(60.0, 2 * self.poke_interval)
        self.defer(trigger=trigger, method_name="execute_complete", timeout=timedelta(seconds=self.timeout + grace))

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        query = self._query(context)
        status = event["status"]
        if status == "error":
            # The event may come from a triggerer of another provider version: PlacspError makes its
            # reason printable either way.
            raise PlacspError(f"dataset {query.dataset}: dead-letter check failed: {event['error']}")
        if status == "timeout" and self.scope == "run":
            raise AirflowSensorTimeout(
                f"dataset {query.dataset}: no Silver run summary at {_summary_file(query)} after {self.timeout:.0f} s: "
                f"the Silver ingest of run {query.run_id} has not committed, so its dead letters cannot be judged yet"
            )
        return self._conclude(context, query, DeadLetterCounts.from_dict(event["counts"]), event["entries_read"])

    # -- poke / reschedule path -------------------------------------------------------------------
    def poke(self, context: Context) -> bool | PokeReturnValue:
        query = self._query(context, LakeHook().lake(self.lake))  # an S3 lake's credentials, for this process
        looked = stats.look(query)
        if looked is None:
            self.log.info("dataset %s: waiting for the Silver run summary %s", query.dataset, _summary_file(query))
            return False
        return PokeReturnValue(True, self._conclude(context, query, *looked))

    # -- shared -----------------------------------------------------------------------------------
    def _query(self, context: Context, lake: LakePath | None = None) -> DeadLetterQuery:
        """The rendered arguments, validated (templated fields are only known now)."""
        return stats.scope_query(
            resolve_lake(self.lake) if lake is None else lake,
            dataset=get_dataset(self.dataset).key,
            scope=self.scope,
            run_id=context["run_id"],
            stages=self.stages or (),
            error_types=self.error_types or (),
        )

    def _conclude(
        self, context: Context, query: DeadLetterQuery, counts: DeadLetterCounts, read: int | None
    ) -> dict[str, Any]:
        assert query.dataset is not None
        checks = stats.evaluate(
            counts,
            max_count=self.max_count,
            max_ratio=self.max_ratio,
            read=read,
            severity=self.severity,
            scope=self.scope,
            dataset=query.dataset,
            run_id=query.run_id,
        )
        self._checks, self._counts = checks, counts
        passed = all(c.success for c in checks)
        message = None if passed else stats.failure_message(checks, counts)
        result = {
            "passed": passed,
            "checks": [c.to_dict() for c in checks],
            "counts": counts.to_dict(),
            "message": message,
        }
        context["ti"].xcom_push(key=XCOM_KEY, value=result)
        if message is None:
            self.log.info("dataset %s: %s", query.dataset, "; ".join(c.describe() for c in checks))
        elif self.severity == "warn":
            self.log.warning("%s", message)
        else:
            raise DeadLetterThresholdError(message, checks)
        return result

    # -- OpenLineage: the dead-letter table in, with the checks and counts as data quality ---------
    def get_openlineage_facets_on_start(self) -> OperatorLineage:
        return sensor_lineage.on_start(self)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage:
        return sensor_lineage.on_complete(self, self._checks, self._counts)

    # A threshold that failed is the reason the task failed: its assertion goes on the FAIL event.
    get_openlineage_facets_on_failure = get_openlineage_facets_on_complete


def _summary_file(query: DeadLetterQuery) -> LakePath:
    """The Silver run summary a scope `run` check waits for."""
    assert query.dataset is not None and query.run_id is not None
    return run_summary_path(resolve_lake(query.lake), query.dataset, query.run_id)
