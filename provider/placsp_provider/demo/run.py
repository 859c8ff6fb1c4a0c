"""`make demo`: run the daily DAG end to end through Airflow's `dag.test()` on an embedded setup.

Spark local, Delta on local disk, Airflow on SQLite, and the bundled real pages served on
loopback. `--live` points the same run at the live PLACSP site for yesterday instead.
OpenLineage events go to a file (`.demo/openlineage/events.jsonl`, Spark's next to it) unless an
OpenLineage transport is configured already (docs/lineage.md).
Environment is set before Airflow is imported, so this module imports it lazily.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from placsp_provider.demo.samples import DEMO_DATE


def _repo_root() -> Path:
    for parent in Path(__file__).resolve().parents:
        if (parent / "dags").is_dir() and (parent / "include").is_dir():
            return parent
    return Path.cwd()


def prepare_airflow(home: Path, dags: Path) -> None:
    """A SQLite Airflow home with our DAGs; `airflow db migrate` is idempotent (and quick)."""
    os.environ["AIRFLOW_HOME"] = str(home)
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(dags)
    os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "False")
    home.mkdir(parents=True, exist_ok=True)
    airflow = Path(sys.executable).with_name("airflow")
    subprocess.run([str(airflow), "db", "migrate"], check=True, stdout=subprocess.DEVNULL)


def configure_lineage(folder: Path) -> Path | None:
    """File transport for the demo's OpenLineage events, appended run after run; None when the user
    configured OpenLineage already (e.g. HTTP to Marquez) and the events go there."""
    namespace = os.environ.setdefault("AIRFLOW__OPENLINEAGE__NAMESPACE", "placsp")
    configured = ("AIRFLOW__OPENLINEAGE__TRANSPORT", "AIRFLOW__OPENLINEAGE__CONFIG_PATH", "OPENLINEAGE_URL")
    if any(os.environ.get(k) for k in configured) or any(k.startswith("OPENLINEAGE__TRANSPORT") for k in os.environ):
        print(f"OpenLineage: namespace {namespace}, your configured transport")
        return None
    folder.mkdir(parents=True, exist_ok=True)
    events = folder / "events.jsonl"
    transport = {"type": "file", "log_file_path": str(events), "append": True}
    os.environ["AIRFLOW__OPENLINEAGE__TRANSPORT"] = json.dumps(transport)
    print(f"OpenLineage: namespace {namespace}, events appended to {events} (Spark's: {_spark_file(events)})")
    return events


def _spark_file(events: Path) -> Path:
    from placsp_provider.lineage.spark import spark_events_file

    return Path(spark_events_file(str(events)))


def placsp_connection(base_url: str, **extras: Any) -> str:
    return json.dumps({"conn_type": "placsp", "host": base_url, "extra": extras})


def run_dag(name: str, logical_date: datetime, conf: dict[str, Any] | None = None) -> Any:
    """Run one DagRun of `placsp_provider.dags.<name>` in-process; return the DagRun."""
    module = importlib.import_module(f"placsp_provider.dags.{name}")
    return module.dag.test(logical_date=logical_date, run_conf=conf)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--live", action="store_true", help="read the live PLACSP site (yesterday)")
    parser.add_argument("--date", help="logical date (YYYY-MM-DD) of the run")
    parser.add_argument("--workdir", type=Path, default=_repo_root() / ".demo")
    args = parser.parse_args(argv)

    workdir = args.workdir.resolve()
    os.environ.setdefault("PLACSP_LAKE", str(workdir / "lake"))
    # The bundled 643 pages are 3 dead letters in 5 entries by design (a real broken page): the
    # dead-letter gate warns in the demo instead of turning it red. Set it to "error" to see that.
    os.environ.setdefault("PLACSP_DEAD_LETTER_SEVERITY", "warn")
    # dag.test() has no triggerer to run a Deadline Alert, and Airflow 3.3.2's dag.test() fails at the
    # end of a successful run of a DAG that has one: the demo runs without it (make system-test shows it).
    os.environ.setdefault("PLACSP_DAILY_DEADLINE_MINUTES", "0")
    # dag.test() runs the gates' triggers in-process: no scheduler to race, no reason to pause.
    os.environ.setdefault("PLACSP_TRIGGER_SETTLE_SECONDS", "0")
    events = configure_lineage(workdir / "openlineage")
    prepare_airflow(workdir / "airflow", _repo_root() / "dags")

    site = None
    if args.live:
        date = args.date or (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%d")
        os.environ.setdefault("AIRFLOW_CONN_PLACSP_DEFAULT", placsp_connection(""))
    else:
        from placsp_provider.demo.loopback_site import LoopbackSite
        from placsp_provider.demo.samples import demo_routes

        date = args.date or DEMO_DATE
        site = LoopbackSite(demo_routes())
        os.environ["AIRFLOW_CONN_PLACSP_DEFAULT"] = placsp_connection(site.base_url, max_retries=1)
        print(f"serving the bundled real PLACSP pages on {site.base_url}")
    logical = datetime.fromisoformat(date).replace(tzinfo=UTC)
    print(f"running placsp_daily for {date}; lake: {os.environ['PLACSP_LAKE']}")
    try:
        dag_run = run_dag("placsp_daily", logical)
        backfill = None
        if site is not None:
            # The bundled real 1044 archive pages (Jan 2022, ~950 entries) through the backfill DAG,
            # so the demo's Silver tables hold more than a handful of rows.
            print("running placsp_backfill for agregadas 2022-01 (bundled real archive pages)")
            backfill = run_dag(
                "placsp_backfill",
                datetime.now(UTC).replace(microsecond=0),
                {"dataset": "agregadas", "first_month": "2022-01", "last_month": "2022-01"},
            )
    finally:
        if site is not None:
            site.close()
    lake = Path(os.environ["PLACSP_LAKE"])
    status = report(dag_run, lake)
    if backfill is not None:
        status |= report(backfill, lake, "placsp_backfill")
    if events is not None:
        report_lineage(events)
    return status


def report_lineage(events: Path) -> None:
    """Where the OpenLineage events are, and how many each side wrote (both files are JSON Lines)."""
    spark = _spark_file(events)
    counts = {p: sum(1 for _ in p.open(encoding="utf-8")) if p.is_file() else 0 for p in (events, spark)}
    print(f"OpenLineage events (appended run after run; docs/lineage.md): {events} ({counts[events]} from Airflow)")
    if counts[spark]:  # a Spark job ran (a first load ingests without one: decision 0053)
        print(f"  and {spark} ({counts[spark]} from the Spark jobs, each naming its Airflow task run as parent)")


def report(dag_run: Any, lake: Path, dag_id: str = "placsp_daily") -> int:
    state = str(getattr(dag_run, "state", "unknown"))
    run_id = getattr(dag_run, "run_id", None)
    print(f"\n{dag_id} {run_id}: {state}")
    for manifest in sorted(lake.glob("bronze/*/manifests/*.json")):
        data = json.loads(manifest.read_text())
        if data.get("run_id") != run_id:
            continue
        pages = data["pages"]
        bad = sum(not p["well_formed"] for p in pages)
        print(
            f"  {data['dataset']:<13} {data['interval_start'][:10]}: {len(pages)} pages, "
            f"{sum(p['entries'] for p in pages)} entries, {sum(p['tombstones'] for p in pages)} tombstones, "
            f"{bad} not well-formed  ({manifest.relative_to(lake)})"
        )
    for summary_file in sorted(lake.glob("runs/*/*.json")):
        data = json.loads(summary_file.read_text())
        if data.get("run_id") != run_id:
            continue
        c, d = data["conservation"], data["dead_letters"]
        print(
            f"  {data['dataset']:<13} Silver: read {c['read']} = {c['silver']} in Silver + "
            f"{c['dead_letter_records']} dead letters + {c['in_quarantined_files']} in quarantined files "
            f"({'balanced' if c['balanced'] else 'NOT BALANCED'}); dead letters by type: {d['by_error_type']}"
        )
    print(f"\nSilver tables: {lake / 'silver'}; dead letters: {lake / 'dead_letters'}")
    return 0 if state.endswith("success") else 1


if __name__ == "__main__":
    raise SystemExit(main())
