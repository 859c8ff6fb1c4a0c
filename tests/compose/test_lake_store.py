"""The stack's lake store, run for real: docker-compose.yaml's `seaweedfs` and `seaweedfs-init` services
with the `weed` binary tests/s3 builds (no Docker engine here), then the lake written and read with
the stack's own connection and the Spark worker's own environment.

Only what Docker would do is played here: the image's entrypoint arguments (`deployment.STORE_ENTRYPOINT_ARGS`),
the data folder, and the service names and fixed ports replaced by 127.0.0.1 and free ports. Every
other word of the commands, the health check and the environments is the compose file's.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.compose.test_compose import (
    COMPOSE_FILE,
    LAKE_CONN_VARIABLE,
    Doc,
    environment,
    lake_environment,
    load_compose,
    store_services,
)
from tests.s3 import seaweedfs
from tests.system.deployment import LocalPaths, Ports, host_map, store_service

pytestmark = [pytest.mark.s3, pytest.mark.http]

READY_SECONDS = 90


@dataclass
class LocalStore:
    process: subprocess.Popen
    hosts: dict[str, str]  # compose address -> the loopback address playing it
    log: Path
    bin_dir: Path  # holds `weed`, as the image's PATH does
    stop_seconds: float = 0.0

    def relocate(self, text: str) -> str:
        for compose_address, local in self.hosts.items():
            text = text.replace(compose_address, local)
        return text


@pytest.fixture(scope="module")
def stack() -> Doc:
    return load_compose(COMPOSE_FILE.read_text())


def _grace_seconds(spec: Doc) -> float:
    found = re.fullmatch(r"(\d+)s", str(spec.get("stop_grace_period", "10s")))
    assert found, spec.get("stop_grace_period")
    return float(found.group(1))


@pytest.fixture(scope="module")
def store(stack: Doc, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStore]:
    spec = stack["services"]["seaweedfs"]
    work = tmp_path_factory.mktemp("compose-seaweedfs")
    bin_dir = work / "bin"
    bin_dir.mkdir()
    (bin_dir / "weed").symlink_to(seaweedfs.binary())
    # The system test's own rule for playing compose's store here (tests/system/deployment.py).
    ports = Ports.free()
    paths = LocalPaths(home=work / "airflow", store=work / "data", spark_work=work / "spark")
    server = store_service(stack, ports, paths, bin_dir / "weed")
    paths.store.mkdir()
    log = work / "weed.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            server.command, stdout=out, stderr=subprocess.STDOUT, env=server.env, start_new_session=True
        )
    hosts = {**host_map(ports), "localhost:8333": f"127.0.0.1:{ports.s3}"}
    running = LocalStore(process, hosts, log, bin_dir)
    healthcheck = [running.relocate(w) for w in spec["healthcheck"]["test"][1:]]  # after "CMD"
    deadline = time.monotonic() + READY_SECONDS
    while subprocess.run(healthcheck, capture_output=True, timeout=30).returncode != 0:
        assert process.poll() is None, f"weed server exited ({process.returncode}):\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"compose's health check still fails after {READY_SECONDS} s"
        time.sleep(0.5)
    yield running
    started = time.monotonic()
    process.terminate()
    try:
        process.wait(timeout=_grace_seconds(spec))
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        pytest.fail(f"weed server took longer than stop_grace_period ({_grace_seconds(spec)} s) to stop")
    running.stop_seconds = time.monotonic() - started


def _create_bucket(stack: Doc, store: LocalStore, **env: str) -> subprocess.CompletedProcess[str]:
    """seaweedfs-init's command as its container runs it: `/bin/sh -c <script>`, `weed` on the PATH."""
    spec = stack["services"]["seaweedfs-init"]
    assert spec["entrypoint"] == ["/bin/sh", "-c"] and len(spec["command"]) == 1
    return subprocess.run(
        ["/bin/sh", "-c", store.relocate(spec["command"][0])],
        env={"PATH": f"{store.bin_dir}:/usr/bin:/bin", **environment(spec), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def bucket(stack: Doc, store: LocalStore) -> str:
    created = _create_bucket(stack, store)
    assert created.returncode == 0, created.stdout + created.stderr
    return environment(stack["services"]["seaweedfs-init"])["PLACSP_LAKE_BUCKET"]


@pytest.fixture
def task_environment(stack: Doc, store: LocalStore, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process as a task of the scheduler: the compose environment's lake and connection (its
    endpoint on loopback), and no AWS_* of its own."""
    from placsp_provider import lake_storage

    scheduler = environment(stack["services"]["airflow-scheduler"])
    for name in [*lake_environment(stack), "AWS_SESSION_TOKEN", "PLACSP_LAKE_CONN_ID"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PLACSP_LAKE", scheduler["PLACSP_LAKE"])
    monkeypatch.setenv(LAKE_CONN_VARIABLE, store.relocate(scheduler[LAKE_CONN_VARIABLE]))
    lake_storage._s3_store.cache_clear()  # a store is made from the environment it first saw
    lake_storage._filesystem.cache_clear()
    yield
    lake_storage._s3_store.cache_clear()
    lake_storage._filesystem.cache_clear()


def test_image_tag_is_the_release_of_the_server_tests_build(stack: Doc) -> None:
    (tag,) = {s["image"].rpartition(":")[2] for s in store_services(stack).values()}
    printed = subprocess.run([str(seaweedfs.binary()), "version"], capture_output=True, text=True, check=True).stdout
    assert re.search(r"\b(\d+\.\d+)\b", printed)[1] == tag, f"`weed version` of {seaweedfs.VERSION}: {printed}"


def test_bucket_creation_is_repeatable_and_checked(stack: Doc, store: LocalStore, bucket: str) -> None:
    again = _create_bucket(stack, store)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"bucket {bucket} already exists" in again.stderr  # found, not created twice
    refused = _create_bucket(stack, store, PLACSP_LAKE_BUCKET="Not_A_Bucket")
    assert refused.returncode != 0, "the init's final check passed for a bucket that was never created"


def _write_as_task(name: str) -> str:
    """A page object and a Delta table written as a task does, LakeHook first; the lake's URI."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from placsp_provider.hooks.lake import LakeHook
    from placsp_provider.lake_storage import delta_options, put_new, read_object, uri
    from placsp_provider.table_files import read_table

    lake = LakeHook().lake()
    page = lake / "bronze" / name / "page.atom"
    assert put_new(page, b"<feed/>") and not put_new(page, b"<other/>")  # written once, never over
    table = lake / "silver" / name
    write_deltalake(uri(table), pa.table({"n": [1, 2, 3]}), mode="overwrite", storage_options=delta_options(table))
    assert read_object(uri(page)) == b"<feed/>"
    assert read_table(table).column("n").to_pylist() == [1, 2, 3]
    return uri(lake)


def test_a_task_writes_the_lake_with_the_stacks_connection(bucket: str, task_environment: None) -> None:
    assert _write_as_task("task-check") == f"s3://{bucket}/lake"


def test_the_spark_worker_environment_reads_the_lake(
    stack: Doc, store: LocalStore, bucket: str, task_environment: None
) -> None:
    """An executor's Python worker inherits the worker's environment, and has nothing else of the lake's."""
    lake = _write_as_task("worker-check")
    worker = {k: store.relocate(v) for k, v in environment(stack["services"]["spark-worker"]).items()}
    code = (
        "from placsp_provider.lake_storage import read_object, object_store_lake\n"
        "from placsp_provider.table_files import read_table\n"
        f"lake = object_store_lake({lake!r})\n"
        "print(read_object(str(lake / 'bronze/worker-check/page.atom')).decode())\n"
        "print(read_table(lake / 'silver/worker-check').num_rows)\n"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.environ.get("PYTHONPATH", ""), **worker}
    read = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert (read.returncode, read.stdout) == (0, "<feed/>\n3\n"), read.stderr[-2000:]
    other = {**env, "AWS_SECRET_ACCESS_KEY": "not-the-secret"}
    refused = subprocess.run([sys.executable, "-c", code], env=other, capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "PermissionDenied" in refused.stderr, "the store let another key pair in"


def test_the_store_requires_the_key_pair_and_logs_no_secret(stack: Doc, store: LocalStore, bucket: str) -> None:
    unsigned = subprocess.run(
        [
            "curl",
            "--silent",
            "--output",
            "/dev/null",
            "--write-out",
            "%{http_code}",
            "-X",
            "PUT",
            f"http://{store.hosts['seaweedfs:8333']}/{bucket}/anonymous",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert unsigned.stdout == "403"
    secret = lake_environment(stack)["AWS_SECRET_ACCESS_KEY"]
    assert "Added admin identity from AWS environment variables" in store.log.read_text()
    assert secret not in store.log.read_text()


def test_the_cli_runs_in_the_triggerer_container(stack: Doc, store: LocalStore, bucket: str) -> None:
    """docs/docker-compose.md's `docker compose exec airflow-triggerer ... placsp dead-letters stats`:
    the CLI with that container's environment (AWS_* included), on the stack's lake."""
    triggerer = {k: store.relocate(v) for k, v in environment(stack["services"]["airflow-triggerer"]).items()}
    placsp = Path(sys.executable).with_name("placsp")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.environ.get("PYTHONPATH", ""), **triggerer}
    stats = subprocess.run(
        ["bash", "-c", f'{placsp} dead-letters stats --lake "$PLACSP_LAKE" --dataset agregadas --json'],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert stats.returncode == 0, stats.stderr[-2000:]
    assert json.loads(stats.stdout)["total"] == 0  # a fresh lake: no dead-letter table yet
    denied = subprocess.run(
        ["bash", "-c", f'{placsp} dead-letters stats --lake "$PLACSP_LAKE" --dataset agregadas --json'],
        env={**env, "AWS_SECRET_ACCESS_KEY": "not-the-secret"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert denied.returncode == 2, "with another key pair the CLI found an empty lake instead of failing"
    assert "Traceback" not in denied.stderr, denied.stderr[-2000:]  # one line says what failed and where to look
    assert "placsp dead-letters: error: the lake's object store failed the request" in denied.stderr
