"""The wheel users install: built from the sources as `pip install` would build it (the `wheel`
fixture, tests/conftest.py), unpacked, and imported from a folder that is not the checkout. Its DAGs,
data contracts and Spark jobs must be found through the installed package (never a checkout path),
and its version must be the one the changelog and pyproject.toml name. Installed into a fresh
virtualenv and run as Airflow runs it: tests/test_wheel_install.py.

Real build (uv, in an isolated build environment from the package index), real import in a fresh
interpreter; nothing is mocked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import placsp_provider
from tests.airflow.conftest import DAG_NAMES
from tests.conftest import REPO

pytestmark = pytest.mark.unit

VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]

# What the fresh interpreter reports: where each part was found, and that the contracts load.
PROBE = """
import json, placsp_provider
from placsp_provider.operators.spark_submit import default_application
from placsp_provider.quality.contract import default_contracts_dir, load_contracts
print(json.dumps({
    "package": placsp_provider.__file__,
    "contracts": str(default_contracts_dir()),
    "loaded": [c.table for c in load_contracts()],
    "jobs": [default_application(m) for m in ("silver_job.py", "replay_job.py", "maintenance.py")],
}))
"""


def test_the_wheel_holds_the_dags_the_contracts_the_jobs_and_nothing_of_the_checkout(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"placsp_provider/dags/{name}.py" for name in DAG_NAMES} <= names
    contracts = {n for n in names if n.startswith("placsp_provider/quality/contracts/")}
    assert len(contracts) == 7 and all(n.endswith(".odcs.yaml") for n in contracts)
    jobs = {"silver_job.py", "replay_job.py", "maintenance.py"}
    assert {f"placsp_provider/spark/{j}" for j in jobs} <= names
    assert "placsp_provider/py.typed" in names
    dist_info = f"airflow_provider_placsp-{VERSION}.dist-info/"
    assert {n.split("/")[0] + "/" for n in names} == {"placsp_provider/", dist_info}
    entry_points = zipfile.ZipFile(wheel).read(dist_info + "entry_points.txt").decode()
    assert "placsp = placsp_provider.cli:main" in entry_points
    assert "provider_info = placsp_provider:get_provider_info" in entry_points


def test_installed_elsewhere_it_finds_its_contracts_and_jobs_inside_itself(wheel: Path, tmp_path: Path) -> None:
    site, elsewhere = tmp_path / "site-packages", tmp_path / "somewhere"
    zipfile.ZipFile(wheel).extractall(site)
    elsewhere.mkdir()
    # The unpacked wheel first on the path: it wins over the checkout's editable install.
    env = {**os.environ, "PYTHONPATH": str(site)}
    probe = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120
    )
    assert probe.returncode == 0, probe.stderr[-3000:]
    found = json.loads(probe.stdout.splitlines()[-1])
    inside = str(site / "placsp_provider")
    assert found["package"].startswith(inside)
    assert found["contracts"] == f"{inside}/quality/contracts"
    assert sorted(found["loaded"]) == sorted(p.name.split(".")[0] for p in Path(found["contracts"]).iterdir())
    assert all(job.startswith(f"{inside}/spark/") and Path(job).is_file() for job in found["jobs"]), found["jobs"]
    assert str(REPO) not in probe.stdout


def test_one_version_in_the_package_the_project_and_the_changelog() -> None:
    assert placsp_provider.__version__ == VERSION
    assert placsp_provider.get_provider_info()["versions"][0] == VERSION
    headings = [line for line in (REPO / "CHANGELOG.md").read_text().splitlines() if line.startswith("## ")]
    assert headings and headings[0].split()[1] == VERSION, headings[:1]
