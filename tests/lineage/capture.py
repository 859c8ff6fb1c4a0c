"""Run a DAG through `dag.test()` with OpenLineage's file transport and read the events back.

Reusable for any DAG of the project (the replay DAG's test calls `run_dag_test` the same way):

    files = LineageFiles.in_folder(tmp_path)
    run = run_dag_test("placsp_daily", datetime(2025, 8, 19, tzinfo=UTC), files)
    run.events_of("extract_licitaciones")      # that task's Airflow events, in order
    files.spark_events()                        # the Spark listener's events of every Spark job

The DAG runs in a fresh interpreter on purpose. The OpenLineage plugin decides at import whether it
is enabled (`conf.is_disabled()` in its class body) and the listener caches its client: in a pytest
process where another test already loaded Airflow's plugins without a transport, the listener would
silently be missing. A child process started with `AIRFLOW__OPENLINEAGE__*` set behaves like a
deployed worker. It inherits the test's environment (AIRFLOW_HOME with the migrated SQLite DB, the
lake, connections), so loopback servers of the test process are reachable from it.

Each task's events are written before the task finishes: the listener forks a child per event and
waits for it, up to `[openlineage] execution_timeout`, raised here so a slow machine loses none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

NAMESPACE = "placsp-test"
# Module run in the child: import the DAG's module, optionally keep some tasks (and their upstream),
# run it, report the task states.
_CHILD = """
import json, sys, importlib
from datetime import datetime
name, logical, subset, conf = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
dag = importlib.import_module(f"placsp_provider.dags.{name}").dag
if subset:
    dag = dag.partial_subset(task_ids=subset, include_upstream=True)
for task in dag.tasks:
    task.retries = 0  # dag.test() would wait out real retry delays
run = dag.test(logical_date=datetime.fromisoformat(logical), run_conf=conf or None)
from airflow.models.taskinstance import TaskInstance
from airflow.utils.session import create_session
with create_session() as session:
    tis = session.query(TaskInstance).filter_by(dag_id=dag.dag_id, run_id=run.run_id)
    states = {ti.task_id: str(ti.state) for ti in tis}
report = {"dag_id": dag.dag_id, "run_id": run.run_id, "state": str(run.state), "tasks": states}
print("PLACSP_DAG_TEST " + json.dumps(report))
"""


@dataclass(frozen=True)
class LineageFiles:
    """Where Airflow's file transport writes, and where the Spark listener writes (lineage.spark)."""

    airflow: Path
    namespace: str = NAMESPACE

    @classmethod
    def in_folder(cls, folder: Path, namespace: str = NAMESPACE) -> LineageFiles:
        folder.mkdir(parents=True, exist_ok=True)
        return cls(folder / "openlineage.jsonl", namespace)

    @property
    def spark(self) -> Path:
        from placsp_provider.lineage.spark import spark_events_file

        return Path(spark_events_file(str(self.airflow)))

    def env(self) -> dict[str, str]:
        """The OpenLineage configuration of the child process."""
        transport = {"type": "file", "log_file_path": str(self.airflow), "append": True}
        return {
            "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport),
            "AIRFLOW__OPENLINEAGE__NAMESPACE": self.namespace,
            "AIRFLOW__OPENLINEAGE__EXECUTION_TIMEOUT": "120",
            "AIRFLOW__OPENLINEAGE__DISABLED": "False",
        }

    def airflow_events(self) -> list[dict[str, Any]]:
        return read_events(self.airflow)

    def spark_events(self) -> list[dict[str, Any]]:
        return read_events(self.spark)


def read_events(path: Path) -> list[dict[str, Any]]:
    """One JSON event per line (both transports write JSON Lines in append mode)."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@dataclass
class DagTestRun:
    dag_id: str
    run_id: str
    state: str
    task_states: dict[str, str]
    files: LineageFiles
    output: str = field(repr=False, default="")

    @property
    def succeeded(self) -> bool:
        return self.state.endswith("success")

    def events_of(self, task_id: str) -> list[dict[str, Any]]:
        """The Airflow events of one task of this DAG (job name `<dag_id>.<task_id>`), in file order."""
        job = f"{self.dag_id}.{task_id}"
        return [e for e in self.files.airflow_events() if e.get("job", {}).get("name") == job]


def run_dag_test(
    dag_name: str,
    logical_date: datetime,
    files: LineageFiles,
    *,
    tasks: Sequence[str] = (),
    conf: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 600,
) -> DagTestRun:
    """`dag.test()` of `placsp_provider.dags.<dag_name>` in a child process with the file transport;
    `tasks` (task ids) runs only those and their upstream tasks (`partial_subset`; the same dag_id and run)."""
    child_env = {**os.environ, **files.env(), **(env or {})}
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            _CHILD,
            dag_name,
            logical_date.isoformat(),
            json.dumps(list(tasks)),
            json.dumps(conf or {}),
        ],
        env=child_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    marker = [line for line in result.stdout.splitlines() if line.startswith("PLACSP_DAG_TEST ")]
    if result.returncode != 0 or not marker:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-40:])
        raise AssertionError(f"dag.test() of {dag_name} did not finish (exit {result.returncode}):\n{tail}")
    report = json.loads(marker[-1].removeprefix("PLACSP_DAG_TEST "))
    return DagTestRun(
        dag_id=report["dag_id"],
        run_id=report["run_id"],
        state=report["state"],
        task_states=report["tasks"],
        files=files,
        output=result.stdout + result.stderr,
    )
