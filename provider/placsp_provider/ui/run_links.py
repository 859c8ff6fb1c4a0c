"""Links from what the view shows to the Airflow runs, and task logs, that wrote it.

A table row holds the `run_id` of the run that wrote it, not its DAG: the DAG is found by looking
the run id up in Airflow's own `dag_run` table among the DAGs whose tasks write that table (and
that the user may read), so a link never points at a run that does not exist; a run id no such run
has (a CLI run, a pruned metadata DB) gets no link.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote

# Which task of which DAG writes a table's rows: DAG id -> task id (`{dataset}`: the row's dataset).
# Listed in the order a run id found in two of them is linked (the first).
DEAD_LETTER_WRITERS = {
    "placsp_daily": "silver_{dataset}",
    "placsp_completeness": "silver_{dataset}",
    "placsp_backfill": "silver",
}
REPLAY_WRITERS = {"placsp_dead_letter_replay": "replay", "placsp_dead_letter_reprocess": "replay"}
QUALITY_WRITERS = {
    "placsp_daily": "quality_{dataset}",
    "placsp_dead_letter_replay": "quality",
    "placsp_dead_letter_reprocess": "quality",
}
COMPLETENESS_WRITERS = {"placsp_completeness": "completeness_{dataset}"}


@dataclass(frozen=True)
class RunLink:
    """The DAG run that wrote a row, and its task: relative to the view's root (`<base href>`
    `/placsp/`), so `../dags/...` is the Airflow UI's page."""

    dag_id: str
    run_id: str
    task_id: str

    @property
    def run_href(self) -> str:
        return f"../dags/{quote(self.dag_id, safe='')}/runs/{quote(self.run_id, safe='')}"

    @property
    def task_href(self) -> str:
        return f"{self.run_href}/tasks/{quote(self.task_id, safe='')}"


def run_links(
    rows: Iterable[tuple[str | None, str]], writers: dict[str, str], readable: set[str]
) -> dict[tuple[str, str], RunLink]:
    """For each (run_id, dataset): the run of a writing DAG with that run id, among the DAGs this
    user may read, and its task for that dataset. One query for the whole page."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    wanted = {(run_id, dataset) for run_id, dataset in rows if run_id}
    dags = [d for d in writers if d in readable]
    if not wanted or not dags:
        return {}
    with create_session() as session:
        found = session.execute(
            select(DagRun.run_id, DagRun.dag_id).where(
                DagRun.run_id.in_(sorted({r for r, _ in wanted})), DagRun.dag_id.in_(dags)
            )
        ).all()
    dag_of: dict[str, str] = {}
    for run_id, dag_id in sorted(found, key=lambda r: dags.index(r[1])):
        dag_of.setdefault(run_id, dag_id)
    return {
        (run_id, dataset): RunLink(dag_of[run_id], run_id, writers[dag_of[run_id]].format(dataset=dataset))
        for run_id, dataset in wanted
        if run_id in dag_of
    }
