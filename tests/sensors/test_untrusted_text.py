"""Text from the records reaches the gate's alert, the logs and the notifiers printable (issue 31, F5).

A dead-letter table whose entry ids, error messages and source files hold an ESC sequence, a bare
CR + newline that would forge an `INFO` line, a bidi override and an HTML payload: the gate's message
(poke path, and the deferred path through the real trigger), the dead-letter stats message, the
LogNotifier's line and every log record show them escaped, one line per line the provider wrote,
while the table keeps them as they were. The documented e-mail and Slack templates, rendered with
Airflow's own Jinja environment, escape the markup.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from placsp_provider import notifications
from placsp_provider.dead_letters import stats
from placsp_provider.errors import BronzePageError, FeedError, PlacspError
from placsp_provider.notifications import LogNotifier
from placsp_provider.sensors.dead_letters import DeadLetterThresholdError, DeadLetterThresholdSensor
from placsp_provider.triggers.dead_letters import DeadLetterThresholdTrigger
from tests.sensors import dead_letter_rows, write_dead_letters, write_summary

pytestmark = pytest.mark.unit

RUN = "scheduled__2025-08-19T00:00:00+00:00"
ESC = "\x1b[31m"
FORGED = "\r\nINFO forged line"
BIDI = "\u202e"
IMG = '"><img src=x onerror=alert(1)>'
HOSTILE = f"{IMG}{ESC}red{FORGED}{BIDI}gpj.exe"
# What the escaped payload looks like: visible, so a reader still sees that it was there.
SHOWN = '"><img src=x onerror=alert(1)>\\x1b[31mred\\r\\nINFO forged line\\u202egpj.exe'

# Written here, not imported from the code under test: C0 (newline included), DEL, C1, bidi controls.
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
# The lines the gate's message is made of (stats.failure_message); a forged line starts otherwise.
GATE_LINES = ("dead letters ", "top error types: ", "samples (", "  - ", "details: ", "list them all ", "(Spark SQL: ")


def hostile_rows(n: int = 3) -> list[dict[str, Any]]:
    rows = dead_letter_rows(n, run_id=RUN, source_file=f"bronze/agregadas/pages/{HOSTILE}.atom")
    for row in rows:
        row["entry_id"] = f"{row['entry_id']}/{HOSTILE}"
        row["error_message"] = f"Opening and ending tag mismatch: {HOSTILE}"
    return rows


@pytest.fixture
def hostile_lake(lake: Path) -> Path:
    write_dead_letters(lake, hostile_rows())
    write_summary(lake, "agregadas", RUN, entries=10)
    return lake


def assert_one_line(text: str) -> None:
    assert not CONTROL.search(text), repr(text)


def assert_gate_message(message: str) -> None:
    """Only the message's own line breaks; every line one the provider writes; the payload escaped."""
    lines = message.split("\n")
    for line in lines:
        assert_one_line(line)
        assert line.startswith(GATE_LINES), repr(line)
    assert SHOWN in message and "\nINFO" not in message


def assert_logs_printable(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str], *, expect: str | None
) -> None:
    """What was logged, as records (stdlib loggers) and as rendered lines (the task and trigger loggers
    are structlog's, which print rather than reach `caplog`): no raw control character from the data,
    no forged line, and the line `expect` names is there (so the check did look at something)."""
    rendered = capfd.readouterr()
    texts = [r.getMessage() for r in caplog.records] + [rendered.out, rendered.err]
    for text in texts:
        for line in text.split("\n"):  # a provider message may keep its own lines (the gate's warning)
            assert_one_line(line)
            assert not line.lstrip().startswith("INFO forged"), repr(text)
    assert expect is None or any(expect in text for text in texts), texts


class _TaskInstance:
    """Airflow's TaskInstance is the only stand-in: the sensor pushes its check to XCom."""

    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


def _context() -> Any:
    return {"run_id": RUN, "ti": _TaskInstance()}


# -- the gate -------------------------------------------------------------------------------------
def test_the_gate_message_from_poke_is_printable(hostile_lake: Path) -> None:
    sensor = DeadLetterThresholdSensor(
        task_id="gate", dataset="agregadas", lake=str(hostile_lake), max_count=0, deferrable=False
    )
    context = _context()
    with pytest.raises(DeadLetterThresholdError) as failed:
        sensor.poke(context)
    assert_gate_message(str(failed.value))
    assert context["ti"].pushed["dead_letter_check"]["message"] == str(failed.value)
    assert str(failed.value).count("\n  - ") == 3  # three samples, three lines


def test_the_gate_warning_is_logged_printable(
    hostile_lake: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    sensor = DeadLetterThresholdSensor(
        task_id="gate", dataset="agregadas", lake=str(hostile_lake), max_count=0, severity="warn", deferrable=False
    )
    with caplog.at_level(logging.DEBUG):
        done = sensor.poke(_context())
    assert done and done.xcom_value["passed"] is False
    assert_gate_message(done.xcom_value["message"])
    assert_logs_printable(caplog, capfd, expect="dead letters over threshold: dataset agregadas")


def _deferred_event(sensor: DeadLetterThresholdSensor, context: Any) -> dict[str, Any]:
    """The sensor's real `execute` defers; its trigger's real `run()` yields the event."""
    from airflow.sdk.exceptions import TaskDeferred

    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute(context)
    trigger = deferred.value.trigger
    assert isinstance(trigger, DeadLetterThresholdTrigger)

    async def first() -> dict[str, Any]:
        event = await anext(trigger.run())
        return event.payload

    return asyncio.run(first())


@pytest.mark.parametrize("severity", ["error", "warn"])
def test_the_gate_message_from_the_trigger_path_is_printable(
    severity: str, hostile_lake: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    sensor = DeadLetterThresholdSensor(
        task_id="gate", dataset="agregadas", lake=str(hostile_lake), max_count=0, severity=severity, settle_seconds=0
    )
    context = _context()
    with caplog.at_level(logging.DEBUG):
        event = _deferred_event(sensor, context)
        assert event["status"] == "summary_visible"
        # The event carries the samples as the table holds them: data, not a message.
        assert all(HOSTILE in s["entry_id"] for s in event["counts"]["samples"])
        if severity == "error":
            with pytest.raises(DeadLetterThresholdError) as failed:
                sensor.execute_complete(context, event)
            assert_gate_message(str(failed.value))
        else:
            assert sensor.execute_complete(context, event)["passed"] is False  # logged as a WARNING
    assert_gate_message(context["ti"].pushed["dead_letter_check"]["message"])
    assert_logs_printable(caplog, capfd, expect="dead letters over threshold" if severity == "warn" else None)


def test_an_error_event_carries_one_printable_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    # A table that cannot be read, and delta-rs's reason quotes its path (here, one holding the payload).
    lake = tmp_path / f"lake{ESC}{FORGED}"
    (lake / "dead_letters" / "_delta_log").mkdir(parents=True)
    (lake / "dead_letters" / "_delta_log" / "00000000000000000000.json").write_text("not json")
    trigger = DeadLetterThresholdTrigger(
        lake=str(lake), dataset="menores", scope="backlog", max_count=0, deadline=time.time() + 10
    )

    async def first() -> dict[str, Any]:
        return (await anext(trigger.run())).payload

    with caplog.at_level(logging.DEBUG):
        event = asyncio.run(first())
    assert event["status"] == "error"
    assert_one_line(event["error"])
    assert event["error"].startswith("dead-letter table ") and "lake\\x1b[31m" in event["error"]
    sensor = DeadLetterThresholdSensor(task_id="gate", dataset="menores", scope="backlog", lake=str(lake), max_count=0)
    with pytest.raises(PlacspError) as failed:
        sensor.execute_complete(_context(), event)
    assert_one_line(str(failed.value))
    assert_logs_printable(caplog, capfd, expect="dataset menores: dead-letter table ")


# -- the dead-letter stats ------------------------------------------------------------------------
def test_the_stats_failure_message_is_printable_and_the_table_is_unchanged(hostile_lake: Path) -> None:
    from deltalake import DeltaTable

    query = stats.scope_query(hostile_lake, dataset="agregadas", scope="run", run_id=RUN)
    counts = stats.count(query)
    checks = stats.evaluate(counts, max_count=0, scope="run", dataset="agregadas", run_id=RUN)
    message = stats.failure_message(checks, counts)
    assert_gate_message(message)
    # One character less drops a whole sample, not half an escape: the message still fits, printable.
    short = stats.failure_message(checks, counts, limit=len(message) - 1)
    assert len(short) < len(message) and short.count("\n  - ") == 2
    assert_gate_message(short)
    # The data is never changed: the samples and the table hold the payload as it was.
    assert {s.source_file for s in counts.samples} == {f"bronze/agregadas/pages/{HOSTILE}.atom"}
    table = DeltaTable(str(hostile_lake / "dead_letters")).to_pyarrow_table(columns=["entry_id", "error_message"])
    assert all(HOSTILE in v for v in table.column("entry_id").to_pylist())
    assert all(v.endswith(HOSTILE) for v in table.column("error_message").to_pylist())


# -- the notifiers --------------------------------------------------------------------------------
def _failure_context(error: BaseException) -> dict[str, Any]:
    ti = SimpleNamespace(dag_id="placsp_daily", task_id="dead_letters_agregadas", run_id=RUN, try_number=1)
    return {"ti": ti, "run_id": RUN, "exception": error}


def test_the_log_notifier_writes_one_printable_line(
    hostile_lake: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    sensor = DeadLetterThresholdSensor(
        task_id="gate", dataset="agregadas", lake=str(hostile_lake), max_count=0, deferrable=False
    )
    with pytest.raises(DeadLetterThresholdError) as failed:
        sensor.poke(_context())
    errors: list[BaseException] = [failed.value, ValueError(f"entry {HOSTILE}")]  # the gate's and a foreign one
    with caplog.at_level(logging.ERROR, logger="placsp_provider.alerts"):
        for error in errors:
            LogNotifier()(_failure_context(error))
    lines = [r.getMessage() for r in caplog.records if r.name == "placsp_provider.alerts"]
    assert len(lines) == 2
    for line in lines:
        assert_one_line(line)  # the gate's own lines too: one alert, one line
        assert line.startswith("failed: dag placsp_daily, task dead_letters_agregadas, run ") and SHOWN in line
    assert "\\n  - bronze/agregadas/pages/" in lines[0]
    assert_logs_printable(caplog, capfd, expect="failed: dag placsp_daily")


def test_the_log_notifier_clips_then_escapes() -> None:
    # max_chars counts the message's own characters, so no escape is cut in half.
    line = LogNotifier(max_chars=20).describe(_failure_context(ValueError(ESC * 10)))
    assert_one_line(line)
    assert line.endswith(": ValueError: \\x1b[31m\\x1b[…")


# -- PlacspError: the one place every provider message is made printable --------------------------
def test_every_provider_error_message_is_one_printable_line() -> None:
    feed = FeedError("agregadas", "https://contrataciondelestado.es/x.atom", f"HTTP 500 {HOSTILE}")
    assert str(feed) == f"dataset agregadas: https://contrataciondelestado.es/x.atom: HTTP 500 {SHOWN}"
    assert feed.reason == f"HTTP 500 {HOSTILE}"  # the attribute is the data; the message is what is shown
    page = BronzePageError("agregadas", f"bronze/{HOSTILE}.atom", f"lxml: {HOSTILE}, line 1")
    assert_one_line(str(page))
    assert str(page).endswith(f"stage parse: lxml: {SHOWN}, line 1")
    # Wrapping a message does not escape it twice (an escape is itself printable).
    wrapped = PlacspError(f"extraction failed: {feed}")
    assert str(wrapped) == f"extraction failed: {feed}" and "\\\\x1b" not in str(wrapped)


def test_a_multiline_error_keeps_its_own_lines_only() -> None:
    error = DeadLetterThresholdError(f"dead letters over threshold\n  - {ESC}x\rINFO forged{BIDI}", [])
    assert str(error) == "dead letters over threshold\n  - \\x1b[31mx\\rINFO forged\\u202e"


# -- the documented e-mail and Slack templates, rendered by Airflow --------------------------------
def _documented(field: str) -> str:
    """The template of `field` exactly as the notifications module's docstring shows it."""
    assert notifications.__doc__ is not None
    (template,) = re.findall(rf'\b{field}="([^"]*)"', notifications.__doc__)
    return template


def _errors() -> list[BaseException]:
    return [PlacspError(f"entry {HOSTILE}"), ValueError(f"entry {HOSTILE}")]


@pytest.mark.parametrize("with_dag", [False, True], ids=["no-dag", "dag-env"])
def test_the_documented_email_escapes_the_exception(with_dag: bool) -> None:
    from airflow.providers.smtp.notifications.smtp import SmtpNotifier
    from airflow.sdk import DAG

    template = _documented("html_content")
    for error in _errors():
        notifier = SmtpNotifier(to="dq@example.org", from_email="airflow@example.org", html_content=template)
        context: dict[str, Any] = {"exception": error}
        if with_dag:  # a failure callback's context holds the DAG: its template environment renders
            context["dag"] = DAG(dag_id="placsp_alerts", schedule=None)
        notifier.render_template_fields(context)
        html = notifier.html_content
        assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
        assert html.startswith("<pre>") and html.endswith("</pre>")
        if isinstance(error, PlacspError):  # the provider's messages: no control character at all
            assert_one_line(html)
        # (A foreign exception's control characters stay: `| e` escapes markup only. Harmless in HTML
        # but for the bidi override; the LogNotifier's line escapes them all.)
    # Airflow's Jinja does not escape by itself: the unescaped template lets the tag through.
    raw = SmtpNotifier(to="dq@example.org", from_email="airflow@example.org", html_content="{{ exception }}")
    raw.render_template_fields({"exception": _errors()[0]})
    assert "<img" in raw.html_content


def test_the_documented_slack_text_escapes_links_and_mentions() -> None:
    from airflow.sdk.definitions._internal.templater import Templater

    env = Templater().get_template_env()  # what a notifier renders with when the context has no DAG
    template = env.from_string(_documented("text"))
    for error in [*_errors(), PlacspError("<!channel> & <https://evil.example|Airflow>")]:
        text = template.render(ti=SimpleNamespace(task_id="gate"), exception=error)
        assert "<" not in text and ">" not in text
        assert not re.search(r"&(?!amp;|lt;|gt;)", text)
