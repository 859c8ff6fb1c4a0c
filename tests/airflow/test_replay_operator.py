"""DeadLetterReplayOperator turns the form's values (native or templated text) into a typed request,
and refuses what cannot work before any JVM starts. The Spark run itself: test_dags.py, tests/spark."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from placsp_provider.errors import ConfigError
from placsp_provider.operators.replay import DeadLetterReplayOperator

pytestmark = pytest.mark.unit


def test_form_values_become_a_typed_request(tmp_path: Path) -> None:
    op = DeadLetterReplayOperator(
        task_id="replay",
        dataset="1044",
        lake=str(tmp_path),
        stages="parse, validation",  # text, as a template without native rendering gives it
        error_types=["invalid_amount"],
        since="2025-01-01",
        until=None,
        dead_letter_ids=["a" * 64],
        max_records="50",
        max_attempts=2,
        dry_run_only="True",
    )
    request = op.replay_request("manual__1")
    assert request.dataset == "agregadas" and request.lake == tmp_path.resolve()
    assert request.stages == ("parse", "validation") and request.error_types == ("invalid_amount",)
    assert (request.since, request.until) == (date(2025, 1, 1), None)
    assert (request.max_records, request.max_attempts, request.dry_run) == (50, 2, True)
    assert Path(op.application).name == "replay_job.py" and Path(op.application).is_file()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dataset": "nope"}, "unknown PLACSP dataset 'nope'"),
        ({"dataset": "643", "since": "2025-13-01"}, "since must be a day (YYYY-MM-DD), not '2025-13-01'"),
        ({"dataset": "643", "since": "2025-02-01", "until": "2025-01-01"}, "since (2025-02-01) is after until"),
        ({"dataset": "643", "max_attempts": 0}, "max_attempts must be at least 1"),
    ],
)
def test_what_cannot_work_is_refused_with_a_clear_message(kwargs: dict, message: str) -> None:
    op = DeadLetterReplayOperator(task_id="replay", **kwargs)
    with pytest.raises(ConfigError) as err:
        op.replay_request("manual__1")
    assert message in str(err.value)
