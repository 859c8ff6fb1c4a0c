"""Shared test setup.

Airflow reads its configuration when first imported, so its home (SQLite) is set here, before any
test module imports it. Spark tests share one SparkSession (tests/spark/conftest.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import work_units

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "include" / "placsp_samples"

_AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="placsp-airflow-"))
os.environ.setdefault("AIRFLOW_HOME", str(_AIRFLOW_HOME))
if os.environ.get("PYTEST_XDIST_WORKER"):
    # A pytest-xdist worker (`make test`) inherits the controller's environment, this home with it:
    # each worker gets its own, so two never share (and migrate at once) one SQLite metadata DB.
    os.environ["AIRFLOW_HOME"] = str(_AIRFLOW_HOME)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(REPO / "dags"))
os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")
# No Deadline Alert on placsp_daily under dag.test(): in Airflow 3.3.2, a successful dag.test() run of
# a DAG with a deadline fails in DagRun.update_state (it looks the alert up by id and gets the
# alert's definition). The alert is tested in tests/airflow/test_run_policy.py and, firing in a
# real triggerer, in tests/system (whose services get their own environment).
os.environ.setdefault("PLACSP_DAILY_DEADLINE_MINUTES", "0")
# dag.test() runs triggers in-process, with no scheduler to race (the sensor's settle_seconds).
os.environ.setdefault("PLACSP_TRIGGER_SETTLE_SECONDS", "0")


@pytest.fixture(scope="session")
def samples() -> Path:
    return SAMPLES


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    path = tmp_path / "lake"
    path.mkdir()
    return path


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built with uv (in an isolated build environment from the package index, as `pip
    install` builds it) from a copy of the tracked sources: a build leaves `build/` behind."""
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("dist")
    shutil.copy2(REPO / "pyproject.toml", src)
    shutil.copy2(REPO / "README.md", src)
    shutil.copytree(REPO / "provider", src / "provider", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    built = subprocess.run([uv(), "build", "--wheel", "--out-dir", str(out), str(src)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    (path,) = out.glob("*.whl")
    return path


def uv() -> str:
    """The uv of this environment (`make install` puts it next to Python), else the one on PATH."""
    return shutil.which("uv", path=str(Path(sys.executable).parent)) or "uv"


@pytest.fixture
def site() -> Iterator:
    """An empty loopback site; tests add routes to `site.routes`."""
    from placsp_provider.demo.loopback_site import LoopbackSite

    with LoopbackSite() as server:
        yield server


_SUITE_MARKERS = {"unit", "http", "spark", "airflow", "system"}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--reverse",
        action="store_true",
        help="run the selected tests in reverse order (proves they do not depend on it)",
    )


@pytest.hookimpl(tryfirst=True)  # every test collected, before `-m` and `-k` deselect any
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test says what it needs (registered markers are also strict: see pyproject.toml), and
    is in the work unit of the shared session fixture it uses (tests/work_units.py)."""
    unmarked = [item.nodeid for item in items if not _SUITE_MARKERS & {m.name for m in item.iter_markers()}]
    if unmarked:
        raise pytest.UsageError(f"tests without one of the markers {sorted(_SUITE_MARKERS)}: {unmarked[:5]}")
    work_units.check(items)
    if config.getoption("--reverse"):
        items.reverse()
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: its order is the order units are handed out in
        work_units.long_units_first(items)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook, in the controller (`make test`: `--dist loadscope`)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Units of work as tests/work_units.py draws them, not one per module."""
    if config.getoption("dist") != "loadscope":
        return None
    return work_units.UnitScheduling(config, log)


@pytest.fixture(autouse=True)
def _lake_credentials_stay_in_their_test() -> Iterator[None]:
    """`LakeHook` puts an S3 lake's credentials into this process's `AWS_*` environment, as it does in
    a task's process; a task run in-process by a test (`dag.test`) would leave them to the tests after
    it (and to the S3 servers they start). Put back as they were (session fixtures' included)."""
    before = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    yield
    for name in [k for k in os.environ if k.startswith("AWS_") and k not in before]:
        del os.environ[name]
    os.environ.update(before)


_WORKER_REPORTS: list[dict] = []  # what each pytest-xdist worker's reliability tests ran


def pytest_sessionfinish(session: pytest.Session) -> None:
    if hasattr(session.config, "workeroutput"):  # a worker: its report goes to the controller
        from tests.reliability import harness

        session.config.workeroutput["reliability"] = harness.cost_report()


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: the controller, as each worker ends
def pytest_testnodedown(node: object, error: object) -> None:
    if report := getattr(node, "workeroutput", {}).get("reliability"):
        _WORKER_REPORTS.append(report)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The reliability tests' `placsp` processes: how many, and what they cost (tests/reliability)."""
    from tests.reliability import harness

    for line in harness.summary_lines([harness.cost_report(), *_WORKER_REPORTS]):
        terminalreporter.write_line(line)
