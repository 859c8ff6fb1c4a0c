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
                status, payload = await asyncio.to_thread(self._poll)
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

    def _poll(self) -> tuple[str | None, dict[str, Any]]:
        """One blocking look at the lake: (terminal status or None, counts so far)."""
        from placsp_provider.dead_letters import stats

        query = stats.scope_query(
            self.lake,
            dataset=self.dataset,
            scope=self.scope,
            run_id=self.run_id,
            stages=self.stages or (),
            error_types=self.error_types or (),
        )
        looked = stats.look(query)
        if looked is None:
            return None, {}
        counts, read = looked
        if self.scope == "run":
            return SUMMARY_VISIBLE, {"counts": counts.to_dict(), "entries_read": read}
        crossed = self.max_count is not None and counts.total > self.max_count
        return (THRESHOLD_CROSSED if crossed else None), {"counts": counts.to_dict()}

    def _event(self, status: str, polls: int, **payload: Any) -> dict[str, Any]:
        """The event (module docstring); `payload`: `counts`, `entries_read` or `error`, None unless given."""
        head = {"status": status, "dataset": self.dataset, "scope": self.scope, "run_id": self.run_id}
        return {**head, "counts": None, "entries_read": None, "polls": polls, "error": None, **payload}
