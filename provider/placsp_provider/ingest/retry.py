"""A write done again when a concurrent writer won the commit race: the one retry rule of every
writer (Spark's MERGEs, delta-rs's, the replay's status update)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

CONFLICT_ATTEMPTS = 5

log = logging.getLogger(__name__)
T = TypeVar("T")


def retry_on_conflict(
    write: Callable[[], T],
    *,
    what: str,
    attempts: int = CONFLICT_ATTEMPTS,
    sleep: Callable[[float], None] = time.sleep,
    conflict: Callable[[BaseException], bool],
) -> T:
    """Run an idempotent write again when a concurrent writer won the commit race.

    Every write of ours is a MERGE that is safe to repeat (newest wins, insert-only, conditional
    status updates), and the whole `write` is repeated, not the failed MERGE alone: what it decided
    from the table's old snapshot (which versions are newest) is decided again from the new one.
    `conflict`: how the writing engine says so (its own exceptions).
    """
    for attempt in range(1, attempts + 1):
        try:
            return write()
        except Exception as err:
            if not conflict(err) or attempt == attempts:
                raise
            delay = min(0.5 * 2 ** (attempt - 1), 8.0)
            first_line = str(err).strip().splitlines()[0][:300] if str(err).strip() else type(err).__name__
            log.warning(
                "%s: a concurrent writer committed first (%s); writing again in %.1f s (attempt %d of %d)",
                what,
                first_line,
                delay,
                attempt + 1,
                attempts,
            )
            sleep(delay)
    raise AssertionError("unreachable")


def is_delta_rs_conflict(err: BaseException) -> bool:
    """delta-rs refused a commit because another writer committed first."""
    from deltalake.exceptions import CommitFailedError

    return isinstance(err, CommitFailedError)
