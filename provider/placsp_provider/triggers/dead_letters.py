"""DeadLetterThresholdTrigger: wait, in the triggerer, until a dead-letter count can be judged.

Scope `run`: until this run's Silver summary (`<lake>/runs/<dataset>/<run_id>.json`) exists. The ingest
writes it after its last Delta commit, so from then on the run's dead letters are all visible.
Scope `backlog`: until the quarantined backlog exceeds `max_count` (the monitor watches its window).
Either way it stops at `deadline`. It yields exactly one event, whose payload (plain JSON) is:

    {"status": "summary_visible" | "threshold_crossed" | "timeout" | "error",
     "dataset", "scope", "run_id", "counts": DeadLetterCounts.to_dict() | None,
     "entries_read": int | None, "polls": int, "error": str | None}

The sensor's `execute_complete` evaluates the thresholds on it. Reads run in a thread
(`asyncio.to_thread`): delta-rs and file reads block, and the triggerer's event loop must not.

An S3 lake's credentials are not in the triggerer's environment (the task's `AWS_*` stay in the task's
process): each poll reads the lake connection (`lake_conn_id`) through the Task SDK from its thread,
which the triggerer answers from its event loop (`LakeHook.credentials`), and uses its values for
that poll's reads only (`lake_storage.credentials`). The stored arguments name the connection, never
hold its secret.

The keyword arguments are a persisted contract: Airflow stores `serialize()` in its database and a
triggerer (maybe of a newer provider version) rebuilds the trigger from it. Add arguments only with
defaults; never rename one.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from placsp_provider.errors import PlacspError
from placsp_provider.lake_storage import is_object_store_uri
from placsp_provider.untrusted import printable

CLASSPATH = "placsp_provider.triggers.dead_letters.DeadLetterThresholdTrigger"

SUMMARY_VISIBLE = "summary_visible"
THRESHOLD_CROSSED = "threshold_crossed"
TIMEOUT = "timeout"
ERROR = "error"


class DeadLetterThresholdTrigger(BaseTrigger):
    """Poll the lake every `poke_interval` seconds until the check can be decided or `deadline` passes.

    The sensor's rendered arguments (`scope_query`), and:

    :param max_count: scope `backlog`: fire as soon as the count exceeds it.
    :param deadline: UNIX time (seconds) after which the trigger fires `timeout`; at least one poll
        always happens first.
    :param first_poll_after: seconds to wait before the first poll (the sensor's `settle_seconds`).
    :param lake_conn_id: an S3 lake's connection (`hooks.lake`), as the task resolved it; None: the
        triggerer's `$PLACSP_LAKE_CONN_ID`, else `placsp_lake`.
    """

    def __init__(
        self,
        *,
        lake: str,
        dataset: str,
        scope: str,
        deadline: float,
        run_id: str | None = None,
        stages: Sequence[str] | None = None,
        error_types: Sequence[str] | None = None,
        max_count: int | None = None,
        poke_interval: float = 60.0,
        first_poll_after: float = 0.0,
        lake_conn_id: str | None = None,
    ) -> None:
        super().__init__()
        self.lake = str(lake)
        self.dataset = dataset
        self.scope = scope
        self.deadline = float(deadline)
        self.run_id = run_id
        self.stages = list(stages) if stages else None
        self.error_types = list(error_types) if error_types else None
        self.max_count = max_count
        self.poke_interval = float(poke_interval)
        self.first_poll_after = float(first_poll_after)
        self.lake_conn_id = lake_conn_id

    def serialize(self) -> tuple[str, dict[str, Any]]:
        # Every keyword argument of `__init__`, as the attribute of that name holds it (module docstring).
        names = list(inspect.signature(DeadLetterThresholdTrigger.__init__).parameters)[1:]
        return CLASSPATH, {name: getattr(self, name) for name in names}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        polls = 0
        if self.first_poll_after > 0:
            await asyncio.sleep(min(self.first_poll_after, max(0.0, self.deadline - time.time())))
        while True:
            polls += 1
            try:
                status, payload = await asyncio.to_thread(self._poll, polls == 1)
            except PlacspError as err:
                # A table that cannot be read will not heal by waiting: hand the reason to the task.
                # The event is stored in Airflow's database and shown in its UI: its reason is one
                # printable line from the start (idempotent on a PlacspError's already printable message).
                reason = printable(err)
                self.log.error("dataset %s: %s", self.dataset, reason)
                yield TriggerEvent(self._event(ERROR, polls, error=reason))
                return
            if status is not None:
                self.log.info("dataset %s: %s after %d poll(s)", self.dataset, status, polls)
                yield TriggerEvent(self._event(status, polls, **payload))
                return
            remaining = self.deadline - time.time()
            if remaining <= 0:
                self.log.info("dataset %s: deadline reached after %d poll(s)", self.dataset, polls)
                yield TriggerEvent(self._event(TIMEOUT, polls, **payload))
                return
            await asyncio.sleep(min(self.poke_interval, remaining))

    def _poll(self, first: bool) -> tuple[str | None, dict[str, Any]]:
        """One blocking look at the lake: (terminal status or None, counts so far)."""
        from placsp_provider.dead_letters import stats
        from placsp_provider.lake_storage import credentials

        query = stats.scope_query(
            self.lake,
            dataset=self.dataset,
            scope=self.scope,
            run_id=self.run_id,
            stages=self.stages or (),
            error_types=self.error_types or (),
        )
        with credentials(self._credentials(first)):
            looked = stats.look(query)
        if looked is None:
            return None, {}
        counts, read = looked
        if self.scope == "run":
            return SUMMARY_VISIBLE, {"counts": counts.to_dict(), "entries_read": read}
        crossed = self.max_count is not None and counts.total > self.max_count
        return (THRESHOLD_CROSSED if crossed else None), {"counts": counts.to_dict()}

    def _credentials(self, first: bool) -> dict[str, str]:
        """An S3 lake's `AWS_*` values from its connection, read at each poll (a rotated secret is
        picked up at the next one). Empty for a local lake, and when the connection does not exist
        (the triggerer's own environment or instance role then decides)."""
        if not is_object_store_uri(self.lake):
            return {}
        from placsp_provider.hooks.lake import LakeHook

        hook = LakeHook(self.lake_conn_id)
        try:
            given = hook.credentials()
        except Exception as err:
            # Only the error's type: a connection that cannot be parsed may quote its URI, secret included.
            raise PlacspError(
                f"lake {self.lake}: its connection {hook.lake_conn_id!r} cannot be read in the triggerer "
                f"({type(err).__name__}); check it with `airflow connections get {hook.lake_conn_id}`"
            ) from None
        if given is None and first:
            self.log.info(
                "dataset %s: no connection %r: the triggerer's own AWS_* environment or instance role reads %s",
                self.dataset,
                hook.lake_conn_id,
                self.lake,
            )
        return given or {}

    def _event(self, status: str, polls: int, **payload: Any) -> dict[str, Any]:
        """The event (module docstring); `payload`: `counts`, `entries_read` or `error`, None unless given."""
        head = {"status": status, "dataset": self.dataset, "scope": self.scope, "run_id": self.run_id}
        return {**head, "counts": None, "entries_read": None, "polls": polls, "error": None, **payload}
