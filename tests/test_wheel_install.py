"""The wheel deployed as the README says, in a fresh virtualenv: the plain wheel, WITHOUT extras
(`pip install airflow-provider-placsp`: no Spark, no Prophet, no matplotlib), installed under the
lock's constraints (`uv pip install`, from uv's cache), and a DAG folder holding the repository's
one-line DAG files. From a folder that is not the checkout, with no PYTHONPATH, Airflow parses that
folder, `placsp_daily` runs through `dag.test()` against the bundled pages (its first ingest, into a
fresh lake, would go to Spark: without the `spark` extra it runs on delta-rs and says so, decision
0042), `placsp quality check` checks what it wrote and `placsp quality volume` says which extra it
lacks. About 30 s on a 2-core machine, most of it the run.

What the run did is read here, from Airflow's metadata DB and the Delta tables, not from the
pipeline's own summaries. The bundled pages live in the checkout's include/, not in the wheel: this
process serves them on loopback, as `make demo` does.

The extras are installed in the test environment itself (`make install`: `.[dev,all]` under the same
lock), where every other test runs them: Spark, Prophet and matplotlib from a wheel add nothing a
second fresh virtualenv (~20-40 s more) would catch that tests/test_wheel.py (the Spark jobs inside the
wheel) and tests/compose (every extra's pins against the lock) do not.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from placsp_provider.demo.loopback_site import LoopbackSite
from placsp_provider.demo.run import placsp_connection
from placsp_provider.demo.samples import DEMO_DATE, demo_routes
from tests.airflow.conftest import DAG_NAMES
from tests.conftest import REPO, SAMPLES, uv

pytestmark = pytest.mark.airflow

# Run by the fresh virtualenv's Python: parse the DAG folder as the DAG processor does (safe mode),
# run the daily DAG found there, say where everything was imported from and which Spark it has.
_CHILD = """
import importlib.metadata, importlib.util, json, sys
from datetime import UTC, datetime
import airflow, placsp_provider
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1], safe_mode=True)
dag = bag.dags["placsp_daily"]
for task in dag.tasks:
    task.retries = 0  # dag.test() would wait out real retry delays
run = dag.test(logical_date=datetime.fromisoformat(sys.argv[2]).replace(tzinfo=UTC))
print("PLACSP_WHEEL " + json.dumps({
    "provider": placsp_provider.__file__,
    "airflow": airflow.__file__,
    "import_errors": bag.import_errors,
    "filelocs": {d.dag_id: d.fileloc for d in bag.dags.values()},
    "run_id": run.run_id,
    "spark": {  # the Spark provider's pyspark-client brings a `pyspark` module: no JVM, no spark-submit
        "pyspark_dist": [d.version for d in importlib.metadata.distributions() if d.metadata["Name"] == "pyspark"],
        "delta": importlib.util.find_spec("delta") is not None,
        "pyspark_module": importlib.util.find_spec("pyspark") is not None,
    },
}))
"""


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the plain wheel (no extras) installed under the lock's constraints."""
    folder = tmp_path_factory.mktemp("fresh") / "venv"
    made = subprocess.run([uv(), "venv", "--python", "3.11", str(folder)], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr[-3000:]
    install = [
        uv(), "pip", "install", "--python", str(folder / "bin" / "python"),
        "-c", str(REPO / "requirements" / "constraints.txt"), str(wheel),
    ]  # fmt: skip
    # uv's cache (hard links) makes this about a second; a cache that lacks a package fills it online.
    done = subprocess.run([*install, "--offline"], capture_output=True, text=True)
    if done.returncode != 0:
        done = subprocess.run(install, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder


def _clean_env(venv: Path, **settings: str) -> dict[str, str]:
    """No PYTHONPATH and no trace of this test's virtualenv: the child sees only the fresh one."""
    path = [str(venv / "bin"), *(p for p in os.environ["PATH"].split(os.pathsep) if not p.startswith(sys.prefix))]
    kept = {k: os.environ[k] for k in ("HOME", "LANG", "LC_ALL", "TZ", "JAVA_HOME", "TMPDIR") if k in os.environ}
    return {**kept, "PATH": os.pathsep.join(path), **settings}


def test_the_installed_wheel_runs_the_daily_dag_from_a_one_line_dag_file(venv: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    dags, lake, home = elsewhere / "dags", elsewhere / "lake", elsewhere / "airflow"
    dags.mkdir(parents=True)
    for name in DAG_NAMES:  # the user's DAG folder: the repository's files, as the README says
        shutil.copy2(REPO / "dags" / f"{name}.py", dags)
    env = _clean_env(
        venv,
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        PLACSP_LAKE=str(lake),
        # As `make demo`: the bundled 643 pages are 3 dead letters in 5 entries by design, and dag.test()
        # runs neither a Deadline Alert nor a scheduler for the gates' triggers to race.
        PLACSP_DEAD_LETTER_SEVERITY="warn",
        PLACSP_DAILY_DEADLINE_MINUTES="0",
        PLACSP_TRIGGER_SETTLE_SECONDS="0",
    )
    migrated = subprocess.run(
        [str(venv / "bin" / "airflow"), "db", "migrate"], cwd=elsewhere, env=env, capture_output=True, text=True
    )
    assert migrated.returncode == 0, migrated.stderr[-3000:]
    with LoopbackSite(demo_routes(SAMPLES)) as site:
        env["AIRFLOW_CONN_PLACSP_DEFAULT"] = placsp_connection(site.base_url, max_retries=1)
        child = subprocess.run(
            [str(venv / "bin" / "python"), "-c", _CHILD, str(dags), DEMO_DATE],
            cwd=elsewhere,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    marker = [line for line in child.stdout.splitlines() if line.startswith("PLACSP_WHEEL ")]
    assert child.returncode == 0 and marker, (child.stdout + child.stderr)[-4000:]
    found = json.loads(marker[-1].removeprefix("PLACSP_WHEEL "))

    # Everything came from the fresh virtualenv; Airflow found every DAG in its one-line file.
    site_packages = venv / "lib" / "python3.11" / "site-packages"
    assert Path(found["provider"]).is_relative_to(site_packages), found["provider"]
    assert Path(found["airflow"]).is_relative_to(site_packages), found["airflow"]
    assert found["import_errors"] == {}
    assert found["filelocs"] == {name: str(dags / f"{name}.py") for name in DAG_NAMES}
    # A plain install: no pyspark distribution, no delta-spark (only pyspark-client's `pyspark` module).
    assert found["spark"] == {"pyspark_dist": [], "delta": False, "pyspark_module": True}, found["spark"]
    assert not list(site_packages.glob("pyspark/bin/spark-submit")) and not (venv / "bin" / "spark-submit").exists()
    # The first ingest, into a fresh lake, is a first load: delta-rs in the task, Spark or not (decision
    # 0053), so nothing says Spark was missed; tests/test_extras.py has the warning of a batch that was.
    output = child.stdout + child.stderr
    assert "dataset licitaciones: Silver ingest of" in output and "engine delta-rs" in output, output[-4000:]
    assert "would go to Spark" not in output

    # Every task of the run succeeded, says Airflow's metadata DB.
    with sqlite3.connect(home / "airflow.db") as db:
        states = dict(
            db.execute(
                "SELECT task_id, state FROM task_instance WHERE dag_id = 'placsp_daily' AND run_id = ?",
                (found["run_id"],),
            )
        )
    assert len(states) == 12 and set(states.values()) == {"success"}, states

    # What the run wrote, read from the Delta tables: the bundled day's 643 entries are 2 rows in
    # Silver and 3 dead letters (tests/airflow/test_dags.py accounts for every record).
    from deltalake import DeltaTable

    from placsp_provider.lake import table_path

    entries = DeltaTable(str(table_path(lake, "entries"))).to_pyarrow_table(columns=["dataset", "_ingest_run_id"])
    dead = DeltaTable(str(table_path(lake, "dead_letters"))).to_pyarrow_table(columns=["dataset", "run_id"])
    assert sorted(zip(*entries.to_pydict().values(), strict=True)) == [("licitaciones", found["run_id"])] * 2
    assert sorted(zip(*dead.to_pydict().values(), strict=True)) == [("licitaciones", found["run_id"])] * 3

    # The installed CLI checks the lake against the contracts inside the installed package.
    check = subprocess.run(
        [str(venv / "bin" / "placsp"), "quality", "check", "--dataset", "licitaciones", "--lake", str(lake), "--json"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert check.returncode == 0, (check.stdout + check.stderr)[-3000:]
    report, _ = json.JSONDecoder().raw_decode(check.stdout[check.stdout.index("{") :])
    shipped = (site_packages / "placsp_provider" / "quality" / "contracts").glob("*.odcs.yaml")
    contracts = {p.name.removesuffix(".odcs.yaml") for p in shipped}
    assert report["passed"] and {r["table"] for r in report["results"]} == contracts == set(report["tables"])

    # The volume check needs Prophet (the `volume` extra): asked for a day with enough history, it is
    # skipped and says which extra to install, never a failure.
    updated = DeltaTable(str(table_path(lake, "entries"))).to_pyarrow_table(columns=["updated"])
    day = max(u.date() for u in updated.column("updated").to_pylist()) + timedelta(days=2)
    volume = subprocess.run(
        [str(venv / "bin" / "placsp"), "quality", "volume", "--dataset", "licitaciones", "--lake", str(lake),
         "--day", day.isoformat(), "--min-history-days", "2", "--json"],
        cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert volume.returncode == 0, (volume.stdout + volume.stderr)[-3000:]
    verdict = json.loads(volume.stdout[volume.stdout.index("{") :])
    assert (verdict["status"], verdict["reason"], verdict["day"]) == (
        "skipped",
        "prophet is not installed: pip install 'airflow-provider-placsp[volume]'",
        day.isoformat(),
    ), verdict
