"""The system test (tests/system) runs what docker-compose.yaml declares: same services, commands, settings.

tests/system/deployment.py derives each local process from the compose file; this checks the
result against the file, value by value, so an edit to either side that makes them differ fails
here (in seconds, without starting anything). Every checker is also run on a deliberate break.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.system import deployment
from tests.system.deployment import LocalPaths, Ports

pytestmark = pytest.mark.unit

PORTS = Ports(*range(41001, 41001 + len(Ports.__dataclass_fields__)))
PATHS = LocalPaths(home=Path("/tmp/st/airflow"), store=Path("/tmp/st/seaweedfs"), spark_work=Path("/tmp/st/spark"))
BASE_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/root", "LANG": "C.UTF-8"}
IMAGE_PATHS = ("/opt/", "/data/", "/home/airflow/")
STORE_ADDRESS = "seaweedfs:8333"  # the lake's S3 endpoint in the compose file


def drift(stack: dict[str, Any], local: list[deployment.Service]) -> list[str]:
    """One sentence per difference between compose's Airflow services and the local processes."""
    problems = []
    hosts = deployment.host_map(PORTS)
    compose_airflow = {
        name
        for name, s in stack["services"].items()
        if s.get("image", "").startswith("placsp/airflow") and name != "airflow-init"
    }
    if compose_airflow != {s.name for s in local}:
        problems.append(f"compose runs {sorted(compose_airflow)}, the system test {sorted(s.name for s in local)}")
    for service in local:
        spec = stack["services"].get(service.name)
        if spec is None:
            continue
        words = deployment.compose_words(spec)
        expected = deployment.local_command(words)
        if service.command != expected:
            problems.append(f"{service.name}: command {service.command}, compose says {words}")
        compose_env = deployment.compose_env(spec)
        for key, value in compose_env.items():
            if key not in service.env:
                problems.append(f"{service.name}: {key} is not set")
            elif key in deployment.CONTAINER_PATHS:
                if not (value.startswith(IMAGE_PATHS) or value in stack["services"]):
                    problems.append(f"{service.name}: {key}={value!r} is not an image path, yet replaced")
            elif service.env[key] != deployment.relocate(value, hosts):
                problems.append(f"{service.name}: {key}={service.env[key]!r}, compose says {value!r}")
        for key in set(service.env) - set(compose_env) - set(deployment.LOCAL_ONLY) - set(BASE_ENV):
            problems.append(f"{service.name}: {key} is set only in the system test")
    for address in hosts:
        if address.split(":")[0] not in stack["services"]:
            problems.append(f"{address} is not a compose service")
    return problems


@pytest.fixture(scope="module")
def stack() -> dict[str, Any]:
    return deployment.load_stack({"PLACSP_BASE_URL": "http://127.0.0.1:1/sindicacion", **deployment.COMPOSE_VARIABLES})


def local(stack: dict[str, Any]) -> list[deployment.Service]:
    return deployment.airflow_services(stack, PORTS, PATHS, BASE_ENV)


def test_system_test_runs_the_compose_airflow_services_with_their_settings(stack: dict[str, Any]) -> None:
    services = local(stack)
    assert drift(stack, services) == []
    by_name = {s.name: s for s in services}
    # Spot checks of what the relocation must give, in case the rule above is itself wrong.
    scheduler = by_name["airflow-scheduler"].env
    assert scheduler["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    assert scheduler["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == (
        f"postgresql+psycopg2://airflow:airflow@127.0.0.1:{PORTS.postgres}/airflow"
    )
    assert scheduler["AIRFLOW_CONN_SPARK_DEFAULT"].count(f"spark://127.0.0.1:{PORTS.spark_master}") == 1
    assert f"http://127.0.0.1:{PORTS.lineage}" in scheduler["AIRFLOW__OPENLINEAGE__TRANSPORT"]
    assert scheduler["SPARK_LOCAL_HOSTNAME"] == "127.0.0.1"
    assert by_name["airflow-apiserver"].command[:2] == [
        "bash",
        str(deployment.REPO / "docker/airflow/with-ui-login.sh"),
    ]
    assert by_name["airflow-triggerer"].command[1:] == ["triggerer"]


def test_drift_is_found(stack: dict[str, Any]) -> None:
    services = local(stack)
    services[1].env["AIRFLOW__CORE__EXECUTOR"] = "SequentialExecutor"
    services[2].env.pop("PLACSP_LAKE")
    services[3].command = [*services[3].command, "--capacity", "1"]
    services[0].env["AIRFLOW__CORE__PARALLELISM"] = "4"
    assert sorted(drift(stack, services)) == sorted(
        [
            "airflow-apiserver: AIRFLOW__CORE__PARALLELISM is set only in the system test",
            "airflow-scheduler: AIRFLOW__CORE__EXECUTOR='SequentialExecutor', compose says 'LocalExecutor'",
            "airflow-dag-processor: PLACSP_LAKE is not set",
            f"airflow-triggerer: command {services[3].command}, compose says ['triggerer']",
        ]
    )
    extra = copy.deepcopy(stack)
    extra["services"]["airflow-worker"] = {**stack["services"]["airflow-scheduler"], "command": "celery worker"}
    assert drift(extra, local(stack))[0].startswith("compose runs ['airflow-apiserver', 'airflow-dag-processor'")


def test_spark_master_and_worker_are_compose_commands_on_loopback(stack: dict[str, Any]) -> None:
    master, worker = deployment.spark_services(stack, PORTS, PATHS, BASE_ENV)
    assert master.command[0].endswith("pyspark/bin/spark-class")
    assert master.command[1:] == [
        "org.apache.spark.deploy.master.Master",
        "--host",
        "127.0.0.1",
        "--port",
        str(PORTS.spark_master),
        "--webui-port",
        str(PORTS.spark_master_ui),
    ]
    assert worker.command[1:] == [
        "org.apache.spark.deploy.worker.Worker",
        "--webui-port",
        str(PORTS.spark_worker_ui),
        "--work-dir",
        str(PATHS.spark_work),
        f"spark://127.0.0.1:{PORTS.spark_master}",
    ]
    # The worker's size comes from compose's variables: its cores, and less memory for the test.
    assert (worker.env["SPARK_WORKER_CORES"], worker.env["SPARK_WORKER_MEMORY"]) == ("2", "1g")


def test_system_test_keeps_the_lake_in_the_stacks_s3_store(stack: dict[str, Any]) -> None:
    """Compose's lake contract, as the system test must play it: the s3:// lake itself, the connection
    placsp_lake and the AWS_* of the Spark worker and the triggerer pointing at the local store."""
    store = "http://" + deployment.host_map(PORTS)[STORE_ADDRESS]
    by_name = {s.name: s for s in local(stack)}
    assert {s.env["PLACSP_LAKE"] for s in by_name.values()} == {"s3://placsp-lake/lake"}
    connection = json.loads(by_name["airflow-scheduler"].env["AIRFLOW_CONN_PLACSP_LAKE"])
    assert connection["extra"]["endpoint_url"] == store
    triggerer = by_name["airflow-triggerer"].env
    _, worker = deployment.spark_services(stack, PORTS, PATHS, BASE_ENV)
    for env in (triggerer, worker.env):
        assert env["AWS_ENDPOINT_URL"] == store
        assert (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]) == (connection["login"], connection["password"])
