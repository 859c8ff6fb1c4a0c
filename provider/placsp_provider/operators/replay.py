"""DeadLetterReplayOperator: replay dead letters into Silver on Spark via spark-submit."""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Context

from placsp_provider.assets import record_versions
from placsp_provider.datasets import get_dataset
from placsp_provider.errors import ConfigError
from placsp_provider.extras import require_spark
from placsp_provider.hooks.lake import LakeHook
from placsp_provider.lineage.guard import never_fails
from placsp_provider.lineage.replay import replay_lineage
from placsp_provider.lineage.silver import rows_written
from placsp_provider.operators.links import LineageJobLink, SparkUILink
from placsp_provider.operators.spark_submit import (
    SPARK_CONN_DEFAULT,
    default_application,
    submit,
    with_spark_task_defaults,
)
from placsp_provider.settings import REPLAY_MAX_ATTEMPTS, REPLAY_MAX_RECORDS

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage


class DeadLetterReplayOperator(SparkSubmitOperator):
    """Replay the dead letters of one dataset that match the filters, once their cause is fixed.

    Selects dead letters with status `quarantined` or `fixed`, re-parses them with the ingest's own
    code, MERGEs what now passes into Silver (newest wins) and marks each one `replayed`, or gives
    it one more attempt and its new error, or `abandoned` past `max_attempts`. Whole-file dead
    letters (stage `reconciliation`) reprocess their Bronze file through the normal ingest.
    Returns (XCom) the summary: selected, recovered, still failing, abandoned, by error type.
    When nothing matches (read by delta-rs first), it returns the empty summary without starting
    Spark and writes nothing.

    Every filter is templated; with the DAG's `render_template_as_native_obj=True` the form's lists,
    numbers and booleans arrive as such.

    The request and the summary travel as files in a temporary folder of the task: the Spark driver
    must run where the task runs (deploy mode `client`, spark-submit's default and the docker
    compose stack's).

    :param dataset: dataset key or syndication id.
    :param lake: lake root; defaults to `$PLACSP_LAKE`.
    :param stages: only these stages (`parse`, `validation`, `reconciliation`); empty: all.
    :param error_types: only these error types (e.g. `invalid_amount`); empty: all.
    :param since: first UTC day (`YYYY-MM-DD`) of `processing_timestamp` to include.
    :param until: last UTC day to include.
    :param dead_letter_ids: only these ids; empty: all that match the other filters.
    :param max_records: at most this many dead letters, oldest first.
    :param max_attempts: a dead letter still failing at this many attempts becomes `abandoned`.
    :param dry_run_only: report what would be recovered; write nothing (`dry_run` is taken by BaseOperator).
    :param unattended: select only what needs no person: `fixed` dead letters and those an older
        parser version rejected (the scheduled `placsp_dead_letter_reprocess`).
    """

    template_fields: Sequence[str] = (
        *SparkSubmitOperator.template_fields,
        "dataset",
        "lake",
        "stages",
        "error_types",
        "since",
        "until",
        "dead_letter_ids",
        "max_records",
        "max_attempts",
        "dry_run_only",
    )
    ui_color = "#f7d7d7"
    operator_extra_links = (SparkUILink(), LineageJobLink())

    def __init__(
        self,
        *,
        dataset: str,
        lake: str | None = None,
        stages: Sequence[str] | str = (),
        error_types: Sequence[str] | str = (),
        since: str | None = None,
        until: str | None = None,
        dead_letter_ids: Sequence[str] | str = (),
        max_records: int | str = REPLAY_MAX_RECORDS,
        max_attempts: int | str = REPLAY_MAX_ATTEMPTS,
        dry_run_only: bool | str = False,
        unattended: bool | str = False,
        conn_id: str = SPARK_CONN_DEFAULT,
        application: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("name", f"placsp-replay-{dataset}")
        with_spark_task_defaults(kwargs, lake)
        super().__init__(
            application=application or default_application("replay_job.py"),
            conn_id=conn_id,
            **kwargs,
        )
        self.spark_conn_id = conn_id
        self.dataset = dataset
        self.lake = lake
        self.stages = stages
        self.error_types = error_types
        self.since = since
        self.until = until
        self.dead_letter_ids = dead_letter_ids
        self.max_records = max_records
        self.max_attempts = max_attempts
        self.dry_run_only = dry_run_only
        self.unattended = unattended
        self._summary: dict[str, Any] | None = None  # what execute returned, for the lineage events

    def replay_request(self, run_id: str) -> Any:
        """The typed request, validated before any JVM starts (a bad filter fails in a second)."""
        from placsp_provider.spark.replay_job import ReplayRequest

        return ReplayRequest(
            dataset=self.dataset,
            lake=LakeHook().lake(self.lake),
            run_id=run_id,
            stages=_strings(self.stages),
            error_types=_strings(self.error_types),
            since=_day(self.since, "since", self.dataset),
            until=_day(self.until, "until", self.dataset),
            dead_letter_ids=_strings(self.dead_letter_ids),
            max_records=int(self.max_records),
            max_attempts=int(self.max_attempts),
            dry_run=_boolean(self.dry_run_only),
            unattended=_boolean(self.unattended),
        )

    def execute(self, context: Context) -> dict[str, Any]:  # type: ignore[override]
        from placsp_provider.spark.replay_job import describe, nothing_selected_summary, selects_nothing

        request = self.replay_request(context["run_id"])
        # An install without Spark fails here whatever the lake holds (decision 0042): the same task
        # must not succeed today and fail tomorrow for want of an extra.
        require_spark(f"replay of {request.dataset}: the dead-letter replay")
        if selects_nothing(request):
            self.log.info(
                "dataset %s: no dead letter matches %s: nothing to replay, no Spark application started, "
                "nothing written",
                request.dataset,
                json.dumps(request.filters()),
            )
            self._summary = nothing_selected_summary(request)
            record_versions(context, request.lake)
            return self._summary
        with tempfile.TemporaryDirectory(prefix="placsp-replay-") as tmp:
            request_file, summary_file = Path(tmp) / "request.json", Path(tmp) / "summary.json"
            request_file.write_text(request.to_json())
            self.application_args = ["--request", str(request_file), "--summary-file", str(summary_file)]
            self.log.info(
                "dataset %s: replaying dead letters on Spark (run %s%s), filters %s",
                request.dataset,
                request.run_id,
                ", dry run" if request.dry_run else "",
                json.dumps(request.filters()),
            )
            submit(self, Path(tmp), context, app_name=f"placsp_replay_{request.dataset}")
            summary: dict[str, Any] = json.loads(summary_file.read_text())
        self.log.info("%s", describe(summary))
        self.log.info("replay summary:\n%s", json.dumps(summary, indent=2, sort_keys=True))
        self._summary = summary
        record_versions(context, request.lake)
        return summary

    # -- OpenLineage (docs/lineage.md): dead letters in; Silver rows and dead-letter statuses out ----
    def get_openlineage_facets_on_start(self) -> OperatorLineage:
        return self._lineage(None)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage:
        return self._lineage(self._summary)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> OperatorLineage:
        return self._lineage(None)

    def _lineage(self, summary: dict[str, Any] | None) -> OperatorLineage:
        def build() -> OperatorLineage:
            lake = LakeHook().lake(self.lake)
            dataset = get_dataset(str(self.dataset)).key
            if summary is None:
                return replay_lineage(lake=lake, dataset=dataset)
            return replay_lineage(
                lake=lake,
                dataset=dataset,
                selected=summary["selected"],
                rows_written=replay_rows_written(summary),
                dead_letters_updated=0 if summary["dry_run"] else summary["selected"],
                by_stage=summary.get("by_stage") or {},
                by_error_type={t: c["selected"] for t, c in summary["by_error_type"].items()},
            )

        return never_fails("replay", build)


def _strings(value: Sequence[str] | str | None) -> tuple[str, ...]:
    """A list from the form, or a comma/space/newline separated string (CLI, templated text)."""
    if not value:
        return ()
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    return tuple(str(v).strip() for v in value if str(v).strip())


def _day(value: Any, name: str, dataset: str) -> date | None:
    if not value:
        return None
    try:
        return date.fromisoformat(str(value))
    except ValueError:
        raise ConfigError(f"replay of {dataset}: {name} must be a day (YYYY-MM-DD), not {value!r}") from None


def _boolean(value: bool | str) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def replay_rows_written(summary: dict[str, Any]) -> dict[str, int]:
    """Rows each lake table received from a replay: its record MERGE plus its file reprocessing."""
    silver = summary.get("silver") or {}
    files = {"ingested": len(summary.get("files_reprocessed") or [])}
    total = Counter(rows_written({"merge": silver.get("records") or {}}))
    total.update(rows_written({"merge": silver.get("files") or {}, "files": files}))
    return {t: n for t, n in total.items() if n}


def recovery_report(summaries: Sequence[dict[str, Any]], sample: int = 5) -> str | None:
    """One line of what replays recovered: per dataset the count, what is still failing or was
    abandoned, and at most `sample` entry ids (made printable by the notifier); None when nothing was."""
    parts = []
    for s in summaries:
        if not s or not s.get("recovered"):
            continue
        entries = list(s.get("recovered_entries") or [])[:sample]
        more = s["recovered"] - len(entries)
        ids = ", ".join(entries) + (f" and {more} more" if more > 0 else "")
        parts.append(
            f"{s['dataset']}: {s['recovered']} of {s['selected']} dead letters recovered into Silver "
            f"({s.get('still_failing', 0)} still failing, {s.get('abandoned', 0)} abandoned; run {s['run_id']}"
            + (f"; entries {ids}" if entries else "")
            + ")"
        )
    return "; ".join(parts) or None
