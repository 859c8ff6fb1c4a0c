"""Delta commit conflicts are retried, other errors are not, and retrying gives up in the end.

The race itself runs for real in test_replay.py (an ingest and a replay on one lake at once);
whether the two collide there depends on timing, so the retry rule is pinned down here with
Delta's own exception classes raised by a stand-in write.
"""

from __future__ import annotations

import pytest
from delta.exceptions import ConcurrentAppendException

from placsp_provider.spark.silver_merge import is_commit_conflict, retry_on_conflict

pytestmark = pytest.mark.unit


def flaky(failures: list[Exception]):
    calls = []

    def write() -> str:
        calls.append(1)
        if failures:
            raise failures.pop(0)
        return "written"

    return write, calls


def test_a_conflict_is_written_again_until_it_succeeds() -> None:
    write, calls = flaky([ConcurrentAppendException("Files were added to partition [dataset=agregadas]")] * 2)
    slept: list[float] = []
    assert retry_on_conflict(write, what="test", sleep=slept.append) == "written"
    assert len(calls) == 3 and slept == [0.5, 1.0]


def test_other_errors_are_not_retried() -> None:
    write, calls = flaky([ValueError("a bug")])
    with pytest.raises(ValueError, match="a bug"):
        retry_on_conflict(write, what="test", sleep=lambda _: None)
    assert len(calls) == 1


def test_gives_up_after_the_last_attempt() -> None:
    write, calls = flaky([ConcurrentAppendException("again")] * 10)
    with pytest.raises(ConcurrentAppendException):
        retry_on_conflict(write, what="test", attempts=3, sleep=lambda _: None)
    assert len(calls) == 3


def test_conflicts_are_recognised_by_class_or_by_delta_error_class() -> None:
    assert is_commit_conflict(ConcurrentAppendException("x"))
    assert is_commit_conflict(RuntimeError("[DELTA_CONCURRENT_APPEND.WITHOUT_HINT] Files were added"))
    assert not is_commit_conflict(RuntimeError("[DELTA_MISSING_COLUMN] no such column"))
