"""Spark is the `spark` extra (decision 0042): without it, every path that would start Spark says so
in one line naming the extra, and `auto` ingests with delta-rs instead.

pyspark cannot be uninstalled from the shared test environment, so its absence is made the way Python
reports a module that is not installed: a None in `sys.modules` makes `import` raise ImportError. The
child blocks `delta` (delta-spark), `pyspark` and `py4j`, which is stricter than a plain install (there
the Spark provider's pyspark-client brings a `pyspark` module without a JVM); tests/test_wheel_install.py
runs the real plain install. Everything else is real: the lake on disk, the operators' `execute`, the
CLI's `main`, the ingest that the fallback runs, whose tables are read back here with delta-rs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from placsp_provider.extras import missing_spark
from tests.pages import day, page
from tests.spark.bronze import land

pytestmark = pytest.mark.unit

INSTALL = "pyspark and delta-spark are not installed: pip install 'airflow-provider-placsp[spark]'"

# Each case in one child (one interpreter start for all): what it returned, or the error it raised.
_CHILD = """
import contextlib, io, json, logging, os, sys
for name in ("delta", "pyspark", "py4j"):
    sys.modules[name] = None
from pathlib import Path
lake, manifest = Path(sys.argv[1]), Path(sys.argv[2])
found = {}

def case(name, call):
    try:
        found[name] = {"returned": call()}
    except Exception as err:
        found[name] = {"raised": type(err).__name__, "message": str(err)}

from placsp_provider import extras
from placsp_provider.datasets import get_dataset
from placsp_provider.ingest.engines import choose_engine
from placsp_provider.ingest.request import IngestRequest
request = IngestRequest(get_dataset("agregadas"), lake, "scheduled__2022-01-05", (manifest,))
case("missing_spark", extras.missing_spark)
case("explicit", lambda: choose_engine(request, "spark"))
os.environ["PLACSP_INGEST_ENGINE"] = "spark+delta-rs"
case("explicit_env", lambda: choose_engine(request))
del os.environ["PLACSP_INGEST_ENGINE"]
case("asked_delta_rs", lambda: choose_engine(request, "delta-rs"))

from placsp_provider.spark.session import get_session
from placsp_provider.spark.jars import main as jars_main, spark_env
case("session", lambda: get_session("placsp-test"))
case("spark_env", spark_env)
err = io.StringIO()
with contextlib.redirect_stderr(err):
    case("jars_fetch", lambda: jars_main(["fetch"]))
found["jars_fetch"]["stderr"] = err.getvalue()

from placsp_provider.operators.replay import DeadLetterReplayOperator
from placsp_provider.operators.maintenance import PlacspMaintainOperator
context = {"run_id": "manual__2022-01-05"}
replay = DeadLetterReplayOperator(task_id="replay", dataset="agregadas", lake=str(lake))
case("replay_operator", lambda: replay.execute(context))
case("maintain_operator", lambda: PlacspMaintainOperator(task_id="maintain", lake=str(lake)).execute(context))

from placsp_provider import cli
for name, argv in {
    "cli_maintain": ["maintain", "--lake", str(lake)],
    "cli_replay": ["dead-letters", "replay", "--lake", str(lake), "--dataset", "agregadas", "--dry-run"],
}.items():
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        case(name, lambda: cli.main(argv))
    found[name]["stderr"] = err.getvalue()

# Last: `auto` on this fresh lake would give the batch to Spark on the connection's cluster; the Silver
# operator ingests it with delta-rs.
os.environ["AIRFLOW_CONN_SPARK_DEFAULT"] = json.dumps({"conn_type": "spark", "host": "spark://spark-master:7077"})
from placsp_provider.operators.silver import PlacspSilverOperator
log = io.StringIO()  # on the package's logger itself: importing Airflow reconfigured the root logger
handler = logging.StreamHandler(log)
handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
logging.getLogger("placsp_provider").addHandler(handler)
silver = PlacspSilverOperator(task_id="silver", dataset="agregadas", lake=str(lake), manifest=str(manifest))
case("silver_operator", lambda: silver.execute(context)["engine"])
found["log"] = log.getvalue()
found["heavy"] = sorted(m for m in sys.modules if m.split(".")[0] in ("delta", "pyspark", "py4j") and sys.modules[m])
print("PLACSP_EXTRAS " + json.dumps(found))
"""


def test_without_spark_every_spark_path_names_the_extra_and_auto_ingests_with_delta_rs(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    manifest = land(lake, "agregadas", {"p.atom": page([(1, day(4)), (2, day(4))], tombstones=[(3, day(4))])})
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(lake), str(manifest)], capture_output=True, text=True, timeout=300
    )
    marker = [line for line in child.stdout.splitlines() if line.startswith("PLACSP_EXTRAS ")]
    assert child.returncode == 0 and marker, (child.stdout + child.stderr)[-4000:]
    found = json.loads(marker[-1].removeprefix("PLACSP_EXTRAS "))

    def config_error(message: str) -> dict[str, str]:
        return {"raised": "ConfigError", "message": message}

    assert found["missing_spark"] == {"returned": INSTALL}
    # An engine asked for by name (argument or $PLACSP_INGEST_ENGINE) is a configuration error...
    assert found["explicit"] == config_error(
        f"dataset agregadas: ingest engine 'spark' needs Spark, but {INSTALL}; or use delta-rs"
    )
    assert found["explicit_env"] == config_error(
        f"dataset agregadas: ingest engine 'spark+delta-rs' needs Spark, but {INSTALL}; or use delta-rs"
    )
    assert found["asked_delta_rs"] == {"returned": "delta-rs"}
    # ...and so is everything only Spark does, each in one line naming what stopped.
    assert found["session"] == config_error(f"Spark session 'placsp-test' needs Spark, but {INSTALL}")
    assert found["spark_env"] == config_error(f"spark-submit needs Spark, but {INSTALL}")
    assert found["jars_fetch"] == {"returned": 2, "stderr": f"fetching the Spark jars needs Spark, but {INSTALL}\n"}
    replay = f"replay of agregadas: the dead-letter replay needs Spark, but {INSTALL}"
    assert found["replay_operator"] == config_error(replay)
    assert found["maintain_operator"] == config_error(f"lake {lake}: table maintenance needs Spark, but {INSTALL}")
    assert found["cli_maintain"] == {
        "returned": 2,
        "stderr": f"placsp maintain: error: lake {lake}: table maintenance needs Spark, but {INSTALL}\n",
    }
    # The CLI's replay first needs a dead-letter table, which the ingest below had not written yet.
    assert found["cli_replay"]["returned"] == 2 and "no dead-letter table" in found["cli_replay"]["stderr"]

    # `auto` on a fresh lake would have submitted to the Spark cluster; it warned, naming the extra, and
    # delta-rs ingested.
    assert found["silver_operator"] == {"returned": "delta-rs"}
    assert (
        "WARNING dataset agregadas: 0.0 MB of pages (a fresh lake) would go to Spark (engine spark+delta-rs), "
        f"but {INSTALL}; ingesting with delta-rs in this process instead"
    ) in found["log"]
    assert found["heavy"] == []
    from deltalake import DeltaTable

    from placsp_provider.lake import table_path

    entries = DeltaTable(str(table_path(lake, "entries"))).to_pyarrow_table(columns=["dataset", "entry_id"])
    tombstones = DeltaTable(str(table_path(lake, "tombstones"))).to_pyarrow_table(columns=["entry_id"])
    assert sorted(entries.column("entry_id").to_pylist()) == sorted(_entry_ids(lake, manifest, "entry"))
    assert tombstones.column("entry_id").to_pylist() == _entry_ids(lake, manifest, "tombstone")


def _entry_ids(lake: Path, manifest: Path, kind: str) -> list[str]:
    """The ids the landed page holds, read from its bytes with lxml (not from the pipeline)."""
    from lxml import etree

    from placsp_provider.bronze.manifest import Manifest

    (landed,) = Manifest.load(manifest).pages
    root = etree.parse(str(lake / landed.file)).getroot()
    if kind == "entry":
        return [e.text for e in root.iterfind("{http://www.w3.org/2005/Atom}entry/{http://www.w3.org/2005/Atom}id")]
    return [t.get("ref") for t in root.iter("{http://purl.org/atompub/tombstones/1.0}deleted-entry")]


def test_with_spark_installed_nothing_is_missing() -> None:
    """The shared environment has the `spark` extra: the check must say so, or every Spark test would fail."""
    assert missing_spark() is None
