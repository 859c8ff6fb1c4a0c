"""Helpers for the dead-letter sensor tests: real Delta tables, written by delta-rs (no Spark).

Rows carry the exact schema of the table the Silver ingest creates
(`placsp_provider.ingest.tables.table_schema("dead_letters")`), partitioned by `dataset` like it.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

WHEN = datetime(2025, 8, 19, 3, 0, tzinfo=UTC)


def dead_letter_rows(
    n: int,
    *,
    dataset: str = "agregadas",
    run_id: str = "scheduled__2025-08-19T00:00:00+00:00",
    stage: str = "parse",
    error_type: str = "xml_syntax",
    status: str = "quarantined",
    processing_timestamp: datetime = WHEN,
    source_file: str | None = None,
    record_kind: str = "entry",
    first_offset: int = 0,
) -> list[dict[str, Any]]:
    """`n` dead letters of one kind, each with its own offset (and so its own id)."""
    source = source_file or f"bronze/{dataset}/pages/page_{run_id[-8:].replace(':', '')}.atom"
    rows = []
    for i in range(n):
        offset = first_offset + i * 1000
        key = f"{dataset}|{stage}|{source}|{offset}|{error_type}|{run_id}"
        rows.append(
            {
                "dataset": dataset,
                "source_file": source,
                "stage": stage,
                "error_type": error_type,
                "error_message": f"Dataset {dataset}, file {source}, offset {offset}: {error_type}",
                "raw_record": "<entry><id>broken</entry>",
                "namespace_context": 'xmlns="http://www.w3.org/2005/Atom"',
                "record_kind": record_kind,
                "entry_id": (
                    f"https://contrataciondelestado.es/sindicacion/datosAbiertosAgregados/{offset + 1}"
                    if record_kind == "entry"
                    else None
                ),
                "record_offset": offset,
                "dead_letter_id": hashlib.sha256(key.encode()).hexdigest(),
                "run_id": run_id,
                "processing_timestamp": processing_timestamp,
                "status": status,
                "attempts": 0,
                "last_attempt_at": None,
                "replayed_at": None,
                "replay_run_id": None,
            }
        )
    return rows


def write_dead_letters(lake: Path, rows: list[dict[str, Any]]) -> None:
    """Append one commit (one file per dataset) to `<lake>/dead_letters`, creating the table if needed."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from placsp_provider.ingest.tables import table_schema
    from placsp_provider.lake import table_path

    table = pa.Table.from_pylist(rows, schema=table_schema("dead_letters"))
    write_deltalake(str(table_path(lake, "dead_letters")), table, partition_by=["dataset"], mode="append")


def write_summary(lake: Path, dataset: str, run_id: str, entries: int, tombstones: int = 0) -> Path:
    """The part of a Silver run summary the sensor reads (`read`), where the ingest writes it."""
    from placsp_provider.ingest.summary import empty_summary
    from placsp_provider.lake import run_summary_path as summary_path

    summary = empty_summary(dataset, run_id, 1, 0)
    summary["read"] = {"entries": entries, "tombstones": tombstones}
    path = summary_path(lake, dataset, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary))
    return path


def dag_test(dag: Any, run_after: datetime | None = None) -> Any:
    """Register a DAG defined in a test (not in the DAG folder) the way the DAG processor would, then
    run it with `dag.test()` for 2025-08-19; `run_after` fixes the run id (`manual__<run_after>`)."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.collection import update_dag_parsing_results_in_db
    from airflow.serialization.serialized_objects import LazyDeserializedDAG
    from airflow.utils.session import create_session

    DagBundlesManager().sync_bundles_to_db()
    with create_session() as session:
        update_dag_parsing_results_in_db(
            "dags-folder", None, [LazyDeserializedDAG.from_dag(dag)], {}, None, set(), session=session
        )
    return dag.test(logical_date=datetime(2025, 8, 19, tzinfo=UTC), run_after=run_after)


def dag_outcome(run: Any) -> tuple[dict[str, str], dict[str, Any]]:
    """Task states, and each sensor's `dead_letter_check` XCom."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = session.query(TaskInstance).filter_by(dag_id=run.dag_id, run_id=run.run_id)
        states = {ti.task_id: str(ti.state).rsplit(".", 1)[-1].lower() for ti in tis}
        rows = session.query(XComModel).filter_by(dag_id=run.dag_id, run_id=run.run_id, key="dead_letter_check")
        checks = {x.task_id: x.value if isinstance(x.value, dict) else json.loads(x.value) for x in rows}
    return states, checks
