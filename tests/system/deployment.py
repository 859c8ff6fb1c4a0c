"""The deployed shape, as local processes: derived from docker-compose.yaml, so the two cannot drift.

docker-compose.yaml is the one definition of how the product runs: which Airflow services, with
which commands and environment, and how the Spark master and worker start. The system test runs the
same services as processes on 127.0.0.1, and this module computes each one's command line and
environment from the compose file itself:

- the compose file is read with its own defaults, plus the variables a user would put in `.env`
  (`COMPOSE_VARIABLES`: the loopback PLACSP site as `PLACSP_BASE_URL`, a small Spark worker...);
- every `host:port` of a compose service (`airflow-db:5432`, `spark-master:7077`, `marquez:5000`...)
  becomes the loopback address of the local process that plays it;
- the few values that are paths inside the images (`/opt/...`, `/data/...`, `/home/airflow/...`)
  become local paths (`CONTAINER_PATHS`), and the few settings a container gets from its image or
  from Docker (AIRFLOW_HOME, the DAGs folder, ports) are added (`LOCAL_ONLY`).

tests/compose checks that every other value is exactly the compose file's.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yaml"

AIRFLOW_SERVICES = ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer")
SPARK_SERVICES = ("spark-master", "spark-worker")
STORE_SERVICE, STORE_INIT = "seaweedfs", "seaweedfs-init"  # the lake's S3 store, and its bucket's creation
# What the store image's /entrypoint.sh puts before the arguments of `server` (docker/entrypoint.sh of
# SeaweedFS 4.53: `weed -logtostderr=true server -dir=/data -volume.max=0 -master.volumeSizeLimitMB=1024`).
STORE_ENTRYPOINT_ARGS = ["-logtostderr=true", "server", "-dir=/data", "-volume.max=0", "-master.volumeSizeLimitMB=1024"]

# What a user would write in .env to run the stack against the loopback site on a small machine.
COMPOSE_VARIABLES = {
    "SPARK_WORKER_MEMORY": "1g",
    "AIRFLOW_ADMIN_USER": "airflow",
    "AIRFLOW_ADMIN_PASSWORD": "airflow",
}

# Environment variables whose compose value is a path inside an image, and what plays it here. (The
# lake is not one: it is compose's own `s3://` prefix, in the store played by a local `weed`.)
CONTAINER_PATHS = (
    "PYSPARK_PYTHON",
    "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE",
    "SPARK_LOCAL_HOSTNAME",  # a Docker service name, advertised by the Spark driver
)
# Settings a container gets from its image or from Docker rather than from the compose file.
LOCAL_ONLY = (
    "AIRFLOW_HOME",
    "AIRFLOW__CORE__DAGS_FOLDER",
    "AIRFLOW__API__HOST",
    "AIRFLOW__API__PORT",
    "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_PORT",
    "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT",
    "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT",
    "PATH",
    "PYTHONPATH",
    "HOME",
    "LANG",
    "JAVA_HOME",
    "SPARK_HOME",
    "PLACSP_SPARK_JARS",
)


@dataclass
class Ports:
    """A free loopback port for each listening process."""

    postgres: int
    api: int
    spark_master: int
    spark_master_ui: int
    spark_worker_ui: int
    lineage: int
    scheduler_health: int
    worker_logs: int
    trigger_logs: int
    s3: int  # the store's S3 API, master, volume server and filer
    s3_master: int
    s3_volume: int
    s3_filer: int

    @classmethod
    def free(cls) -> Ports:
        """Free ports whose port + 10000 is free too (the store's gRPC twins; harmless for the others)."""
        from tests.s3.seaweedfs import _free_ports

        return cls(*_free_ports(len(cls.__dataclass_fields__)))


@dataclass
class LocalPaths:
    home: Path  # AIRFLOW_HOME
    store: Path  # the S3 store's data folder (compose's volume seaweedfs-data)
    spark_work: Path

    @property
    def passwords_file(self) -> Path:
        return self.home / "simple_auth_manager_passwords.json"


@dataclass
class Service:
    name: str
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)


def load_stack(variables: Mapping[str, str]) -> dict[str, Any]:
    """docker-compose.yaml as Compose sees it with these variables (tests/compose's interpreter)."""
    from tests.compose.test_compose import load_compose

    return load_compose(COMPOSE_FILE.read_text(), variables)


def compose_words(service: dict[str, Any]) -> list[str]:
    command = service.get("command") or []
    return shlex.split(command) if isinstance(command, str) else [str(w) for w in command]


def compose_env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    return {k: "" if v is None else str(v) for k, v in env.items()}


def host_map(ports: Ports) -> dict[str, str]:
    """Each compose service address and the loopback address of the process that plays it."""
    return {
        "airflow-db:5432": f"127.0.0.1:{ports.postgres}",
        "airflow-apiserver:8080": f"127.0.0.1:{ports.api}",
        "spark-master:7077": f"127.0.0.1:{ports.spark_master}",
        "marquez:5000": f"127.0.0.1:{ports.lineage}",
        "seaweedfs:8333": f"127.0.0.1:{ports.s3}",
        "seaweedfs:9333": f"127.0.0.1:{ports.s3_master}",
        "seaweedfs:8888": f"127.0.0.1:{ports.s3_filer}",
    }


def relocate(value: str, hosts: Mapping[str, str]) -> str:
    for compose_address, local_address in hosts.items():
        value = value.replace(compose_address, local_address)
    return value


def airflow_services(
    stack: dict[str, Any], ports: Ports, paths: LocalPaths, base_env: Mapping[str, str]
) -> list[Service]:
    """The four Airflow services: compose's command after `airflow` (the image's entrypoint adds it),
    compose's environment relocated to loopback, plus the local-only settings."""
    hosts = host_map(ports)
    venv_bin = Path(sys.executable).parent
    container_paths = {
        "PYSPARK_PYTHON": sys.executable,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(paths.passwords_file),
        "SPARK_LOCAL_HOSTNAME": "127.0.0.1",
    }
    local_only = {
        "AIRFLOW_HOME": str(paths.home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(ports.api),
        "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_PORT": str(ports.scheduler_health),
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(ports.worker_logs),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(ports.trigger_logs),
        "PATH": f"{venv_bin}{os.pathsep}{base_env.get('PATH', '/usr/bin:/bin')}",
    }
    services = []
    for name in AIRFLOW_SERVICES:
        spec = stack["services"][name]
        env = {k: relocate(v, hosts) for k, v in compose_env(spec).items()}
        env.update({k: v for k, v in container_paths.items() if k in env})
        env = {**base_env, **env, **local_only}
        services.append(Service(name, local_command(compose_words(spec)), env))
    return services


def local_command(words: list[str]) -> list[str]:
    """Compose's command as run here: the image's scripts from the checkout, `airflow` from the venv."""
    airflow = str(Path(sys.executable).with_name("airflow"))
    scripts = {"/opt/placsp/bin/with-ui-login.sh": str(REPO / "docker" / "airflow" / "with-ui-login.sh")}
    words = [scripts.get(w, w) for w in words]
    if words and words[0] not in ("bash", "airflow"):
        words = ["airflow", *words]  # the image's entrypoint runs a bare subcommand with airflow
    return [airflow if w == "airflow" else w for w in words]


def spark_services(
    stack: dict[str, Any], ports: Ports, paths: LocalPaths, base_env: Mapping[str, str]
) -> list[Service]:
    """Master and worker with compose's class, flags and worker environment; the pip pyspark's spark-class."""
    import pyspark

    spark_home = Path(pyspark.__file__).resolve().parent
    hosts = host_map(ports)
    flags = {
        "spark-master": {
            "--host": "127.0.0.1",
            "--port": str(ports.spark_master),
            "--webui-port": str(ports.spark_master_ui),
        },
        "spark-worker": {"--webui-port": str(ports.spark_worker_ui), "--work-dir": str(paths.spark_work)},
    }
    services = []
    for name in SPARK_SERVICES:
        spec = stack["services"][name]
        words = [relocate(w, hosts) for w in compose_words(spec)]
        words = [str(spark_home / "bin" / "spark-class") if w.endswith("/bin/spark-class") else w for w in words]
        for flag, value in flags[name].items():
            words[words.index(flag) + 1] = value
        env = {
            **base_env,
            **{k: relocate(v, hosts) for k, v in compose_env(spec).items()},  # the lake's store, on loopback
            "SPARK_HOME": str(spark_home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(paths.spark_work / "logs"),
            "PYSPARK_PYTHON": sys.executable,
        }
        services.append(Service(name, words, env))
    return services


def store_service(stack: dict[str, Any], ports: Ports, paths: LocalPaths, weed: Path) -> Service:
    """The lake's store: compose's `weed server -s3` command after the image's entrypoint arguments,
    its data folder, and loopback with free ports for the fixed ones (the compose file leaves master,
    volume and filer at their defaults). Its environment is compose's: the key pair it requires."""
    spec = stack["services"][STORE_SERVICE]
    words = compose_words(spec)
    if words[:1] != ["server"]:
        raise ValueError(f"the compose file's {STORE_SERVICE} command changed: {words}")
    local = {
        "-dir=/data": f"-dir={paths.store}",
        "-ip=seaweedfs": "-ip=127.0.0.1",
        "-ip.bind=0.0.0.0": "-ip.bind=127.0.0.1",
        "-s3.port=8333": f"-s3.port={ports.s3}",
    }
    args = [*STORE_ENTRYPOINT_ARGS, *words[1:]]
    if missing := sorted(set(local) - set(args)):
        raise ValueError(f"the compose file's {STORE_SERVICE} command changed: {missing} not in {words}")
    args = [local.get(w, w) for w in args]
    args += [f"-master.port={ports.s3_master}", f"-volume.port={ports.s3_volume}", f"-filer.port={ports.s3_filer}"]
    return Service(STORE_SERVICE, [str(weed), *args], {"PATH": "/usr/bin:/bin", **compose_env(spec)})


def store_healthcheck(stack: dict[str, Any], ports: Ports) -> list[str]:
    """The store's compose health check (run inside its container, where localhost is the store)."""
    words = [str(w) for w in stack["services"][STORE_SERVICE]["healthcheck"]["test"][1:]]  # after "CMD"
    return [relocate(w, {"localhost:8333": f"127.0.0.1:{ports.s3}", **host_map(ports)}) for w in words]


def store_init(stack: dict[str, Any], ports: Ports, bin_dir: Path) -> Service:
    """seaweedfs-init as its container runs it: `/bin/sh -c <script>`, `weed` on the PATH."""
    spec = stack["services"][STORE_INIT]
    if spec.get("entrypoint") != ["/bin/sh", "-c"] or len(spec.get("command") or []) != 1:
        raise ValueError(f"the compose file's {STORE_INIT} is no longer one /bin/sh -c script")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", **compose_env(spec)}
    return Service(STORE_INIT, ["/bin/sh", "-c", relocate(spec["command"][0], host_map(ports))], env)


def compose_doc() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text())
