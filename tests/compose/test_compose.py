"""docker-compose.yaml, its two Dockerfiles and .env.example, checked without Docker.

Docker does not run on the CI machines, so what would only fail at `docker compose up` is checked
here from the files: the Compose Specification (the schema copied in schemas/compose), the
variables, the mounts the images expect, the Spark master URL, published ports, pinned images,
versions equal to the lock, and the connections as Airflow's own hooks read them.

Each checker returns one sentence per problem. Every checker is also run on a copy of the real
stack with one deliberate break, and must complain: a check that cannot fail proves nothing.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import os
import re
import shlex
import stat
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from jsonschema.validators import validator_for

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yaml"
ENV_EXAMPLE = REPO / ".env.example"
AIRFLOW_DOCKERFILE = "Dockerfile"
SPARK_DOCKERFILE = "docker/spark/Dockerfile"
SCHEMA_DIR = REPO / "schemas" / "compose"
LOCK_FILE = REPO / "requirements" / "constraints.txt"
PYPROJECT = REPO / "pyproject.toml"
# The official Airflow image is built with its Python environment in a venv at this path (its
# Dockerfile: `python -m venv ~/.local`, user airflow, home /home/airflow).
AIRFLOW_IMAGE_VENV = "/home/airflow/.local"
SPARK_MASTER_CLASS = "org.apache.spark.deploy.master.Master"
SPARK_WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"

Doc = dict[str, Any]


# --- Compose interpolation (the subset of the Compose Specification's syntax that files use) -------

_REFERENCE = re.compile(r"\$(?:(?P<escaped>\$)|\{(?P<braced>[^}]*)\}|(?P<named>[A-Za-z_][A-Za-z0-9_]*))")
_BRACED = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>.*))?$", re.DOTALL)


@dataclass(frozen=True)
class VarRef:
    """One `${NAME}`, `${NAME:-default}`, `${NAME?error}`... in the compose file."""

    name: str
    op: str | None
    arg: str

    @property
    def default(self) -> str | None:
        return self.arg if self.op in (":-", "-") else None


def _parse(match: re.Match[str]) -> VarRef | None:
    if match["escaped"]:
        return None
    if match["named"]:
        return VarRef(match["named"], None, "")
    braced = _BRACED.match(match["braced"])
    if not braced:
        raise ValueError(f"invalid interpolation ${{{match['braced']}}}")
    return VarRef(braced["name"], braced["op"], braced["arg"] or "")


def var_refs(text: str) -> list[VarRef]:
    return [ref for match in _REFERENCE.finditer(text) if (ref := _parse(match))]


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """What Compose puts in place of each reference, `$$` being a literal `$`."""

    def value(match: re.Match[str]) -> str:
        ref = _parse(match)
        if ref is None:
            return "$"
        current = env.get(ref.name)
        non_empty = bool(current)
        if ref.op in (":?", "?") and not (non_empty if ref.op == ":?" else current is not None):
            raise ValueError(f"required variable {ref.name} is not set: {ref.arg}")
        if ref.op == ":-":
            return current if non_empty else ref.arg
        if ref.op == "-":
            return current if current is not None else ref.arg
        if ref.op in (":+", "+"):
            return ref.arg if (non_empty if ref.op == ":+" else current is not None) else ""
        return current or ""

    return _REFERENCE.sub(value, text)


def interpolate_tree(node: Any, env: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [interpolate_tree(item, env) for item in node]
    if isinstance(node, dict):
        return {key: interpolate_tree(item, env) for key, item in node.items()}
    return node


def strings(node: Any) -> Iterator[str]:
    """Every string value of a parsed YAML tree (comments are not values: Compose ignores them)."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, list):
        for item in node:
            yield from strings(item)
    elif isinstance(node, dict):
        for item in node.values():
            yield from strings(item)


def load_compose(text: str, env: Mapping[str, str] | None = None) -> Doc:
    """The file as Compose sees it: YAML (anchors and merge keys resolved), then interpolated."""
    return interpolate_tree(yaml.safe_load(text), env or {})


def read_env_file(text: str) -> dict[str, str]:
    values = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            values[name.strip()] = value.strip()
    return values


# --- Dockerfiles ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str


def instructions(dockerfile: str) -> list[Instruction]:
    """Instructions with continuation lines joined and comment lines dropped (as Docker does)."""
    result: list[Instruction] = []
    pending = ""
    for raw in dockerfile.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, args = (pending + line).partition(" ")
        result.append(Instruction(keyword.upper(), args.strip()))
        pending = ""
    return result


def env_values(dockerfile: str) -> dict[str, str]:
    values = {}
    for instruction in instructions(dockerfile):
        if instruction.keyword == "ENV":
            for pair in shlex.split(instruction.args):
                name, _, value = pair.partition("=")
                values[name] = value
    return values


def base_images(dockerfile: str) -> list[str]:
    """Images a Dockerfile pulls: FROM lines (not earlier stages) and `COPY --from=<image>`."""
    stages: set[str] = set()
    images = []
    for instruction in instructions(dockerfile):
        words = [w for w in shlex.split(instruction.args) if not w.startswith("--platform")]
        if instruction.keyword == "FROM":
            if words[0] not in stages and words[0] != "scratch":
                images.append(words[0])
            if len(words) == 3 and words[1].lower() == "as":
                stages.add(words[2])
        elif instruction.keyword == "COPY":
            for word in words:
                source = word.removeprefix("--from=")
                if word.startswith("--from=") and source not in stages and not source.isdigit():
                    images.append(source)
    return images


def copies(dockerfile: str) -> dict[str, str]:
    """Context path -> destination of every plain COPY (not from another stage or image)."""
    result = {}
    for instruction in instructions(dockerfile):
        if instruction.keyword != "COPY":
            continue
        words = shlex.split(instruction.args)
        if any(word.startswith("--from=") for word in words):
            continue
        *sources, destination = [word for word in words if not word.startswith("--")]
        for source in sources:
            # A file copied into a folder (`COPY a.txt /dir/`) lands as /dir/a.txt.
            into_folder = destination.endswith("/") and not source.endswith("/")
            target = destination + PurePosixPath(source).name if into_folder else destination
            result[source.rstrip("/")] = target.rstrip("/")
    return result


def runs(dockerfile: str) -> list[str]:
    return [i.args for i in instructions(dockerfile) if i.keyword == "RUN"]


# --- The stack's parts ------------------------------------------------------------------------------


def services_built_from(doc: Doc, dockerfile: str) -> dict[str, Doc]:
    return {
        name: service
        for name, service in doc["services"].items()
        if isinstance(service.get("build"), dict) and service["build"].get("dockerfile") == dockerfile
    }


def command_words(service: Doc) -> list[str]:
    command = service.get("command") or []
    return shlex.split(command) if isinstance(command, str) else [str(word) for word in command]


def services_running(doc: Doc, java_class: str) -> dict[str, Doc]:
    return {name: s for name, s in doc["services"].items() if java_class in command_words(s)}


def environment(service: Doc) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(item.partition("=")[::2] for item in env)
    return {key: "" if value is None else str(value) for key, value in env.items()}


@dataclass(frozen=True)
class Mount:
    source: str
    target: str


def mounts(service: Doc) -> list[Mount]:
    result = []
    for volume in service.get("volumes") or []:
        if isinstance(volume, dict):
            result.append(Mount(str(volume.get("source", "")), str(volume["target"])))
            continue
        source, _, rest = str(volume).partition(":")
        result.append(Mount(source, rest.split(":")[0]))
    return result


def flag_value(words: list[str], flag: str, default: str | None = None) -> str | None:
    return words[words.index(flag) + 1] if flag in words and words.index(flag) + 1 < len(words) else default


@dataclass(frozen=True)
class AirflowImage:
    """What the Airflow image expects where, read from its Dockerfile."""

    project_root: str
    dags_folder: str
    copies: dict[str, str]

    @property
    def include_folder(self) -> str:
        return f"{self.project_root}/include"


def airflow_image(dockerfile: str) -> AirflowImage:
    # `-e /opt/placsp` or `-e "/opt/placsp[all]"`: the folder, without quotes and extras.
    editable = [m.group(1) for run in runs(dockerfile) for m in re.finditer(r"\s-e\s+[\"']?([^\s\"'\[]+)", run)]
    env = env_values(dockerfile)
    return AirflowImage(
        project_root=editable[0].rstrip("/") if editable else "",
        dags_folder=env.get("AIRFLOW__CORE__DAGS_FOLDER", ""),
        copies=copies(dockerfile),
    )


# --- Checkers: each returns one sentence per problem ------------------------------------------------


def schema_errors(doc: Doc, schema: Doc) -> list[str]:
    validator_class = validator_for(schema)
    validator = validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)
    return sorted(f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in validator.iter_errors(doc))


def variable_problems(compose_text: str, env_example: Mapping[str, str]) -> list[str]:
    """Every variable has one default in the compose file and .env.example lists it with that value.

    Stricter than "defined or defaulted": `docker compose up` must work without any .env, and copying
    .env.example must change nothing until a line is edited.
    """
    problems = []
    defaults: dict[str, set[str]] = {}
    refs = sorted({ref for value in strings(yaml.safe_load(compose_text)) for ref in var_refs(value)}, key=str)
    for ref in refs:
        if ref.default is None:
            problems.append(f"${{{ref.name}}} has no default: without .env Compose would pass an empty value")
        else:
            defaults.setdefault(ref.name, set()).add(ref.default)
    for name, values in sorted(defaults.items()):
        if len(values) > 1:
            problems.append(f"{name} has different defaults in the compose file: {sorted(values)}")
        elif name not in env_example:
            problems.append(f"{name} is not in .env.example")
        elif env_example[name] not in values:
            problems.append(f".env.example sets {name}={env_example[name]!r}, the compose default is {values.pop()!r}")
    used = {ref.name for ref in refs}
    problems += [
        f".env.example sets {name}, which the compose file never uses" for name in env_example if name not in used
    ]
    return problems


def published_ports(service: Doc) -> list[int]:
    result = []
    for entry in service.get("ports") or []:
        if isinstance(entry, dict):
            if entry.get("published") is not None:
                result.append(int(entry["published"]))
            continue
        parts = str(entry).split("/")[0].split(":")
        if len(parts) < 2:
            continue  # container port only: Docker picks a free host port
        first, _, last = parts[-2].partition("-")
        result += list(range(int(first), int(last or first) + 1))
    return result


def port_clashes(doc: Doc) -> list[str]:
    owners: dict[int, list[str]] = {}
    for name, service in doc["services"].items():
        for port in published_ports(service):
            owners.setdefault(port, []).append(name)
    return [f"host port {port} is published by {', '.join(names)}" for port, names in owners.items() if len(names) > 1]


def is_pinned(image: str) -> bool:
    """A digest, or a tag that names at least major.minor (not `latest`, not a bare major)."""
    if "@sha256:" in image:
        return True
    name, _, tag = image.rpartition(":")
    if not name or "/" in tag:
        return False
    return bool(re.match(r"^v?\d+\.\d+", tag))


def unpinned_images(doc: Doc, dockerfiles: Mapping[str, str]) -> list[str]:
    problems = [
        f"service {name}: image {service['image']!r} is not pinned to a version"
        for name, service in doc["services"].items()
        if "image" in service and not is_pinned(service["image"])
    ]
    problems += [
        f"{path}: base image {image!r} is not pinned to a version"
        for path, text in dockerfiles.items()
        for image in base_images(text)
        if not is_pinned(image)
    ]
    return problems


def health_problems(doc: Doc) -> list[str]:
    """Long-running services have a health check; every dependency waits on a condition that can hold."""
    services = doc["services"]
    problems = []
    one_shot = {
        target
        for service in services.values()
        if isinstance(service.get("depends_on"), dict)
        for target, spec in service["depends_on"].items()
        if (spec or {}).get("condition") == "service_completed_successfully"
    }
    for name, service in services.items():
        depends_on = service.get("depends_on") or {}
        if isinstance(depends_on, list):
            problems.append(f"service {name}: depends_on is a list, so it waits for no condition")
            continue
        for target, spec in depends_on.items():
            condition = (spec or {}).get("condition")
            if target not in services:
                problems.append(f"service {name} depends on {target}, which does not exist")
            elif condition is None:
                problems.append(f"service {name}: dependency on {target} has no condition")
            elif condition == "service_healthy" and not _has_healthcheck(services[target]):
                problems.append(f"service {name} waits for {target} to be healthy, but {target} has no health check")
        if name in one_shot:
            if service.get("restart", "no") not in ("no", "on-failure"):
                problems.append(f"service {name} runs once, but restart {service['restart']!r} would rerun it forever")
        elif not _has_healthcheck(service):
            problems.append(f"service {name} has no health check")
    return problems


def _has_healthcheck(service: Doc) -> bool:
    check = service.get("healthcheck") or {}
    return bool(check.get("test")) and not check.get("disable") and check.get("test") != ["NONE"]


def mount_problems(doc: Doc, image: AirflowImage) -> list[str]:
    """DAGs and include/ are mounted where the Airflow image looks for them."""
    problems = []
    if image.copies.get("dags") != image.dags_folder:
        problems.append(
            f"the image bakes dags/ into {image.copies.get('dags')}, not its DAGS_FOLDER {image.dags_folder}"
        )
    if image.copies.get("include") != image.include_folder:
        problems.append(f"the image bakes include/ into {image.copies.get('include')}, not {image.include_folder}")
    for name, service in services_built_from(doc, AIRFLOW_DOCKERFILE).items():
        found = {m.target: m.source for m in mounts(service)}
        for source, target in (("./dags", image.dags_folder), ("./include", image.include_folder)):
            if found.get(target) != source:
                problems.append(f"service {name}: {source} is not mounted at {target}, where the image expects it")
        env = environment(service)
        if env.get("AIRFLOW__CORE__DAGS_FOLDER", image.dags_folder) != image.dags_folder:
            problems.append(
                f"service {name}: AIRFLOW__CORE__DAGS_FOLDER={env['AIRFLOW__CORE__DAGS_FOLDER']} "
                f"but the image uses {image.dags_folder}"
            )
    return problems


# --- The lake on S3: one bucket, one key pair, as LakeHook reads it ---------------------------------

LAKE_CONN_VARIABLE = "AIRFLOW_CONN_PLACSP_LAKE"
STORE_IMAGE = "chrislusf/seaweedfs"
S3_PORT_DEFAULT = "8333"  # `weed server -s3` without -s3.port


def lake_connection(env: Mapping[str, str]) -> Any:
    """The connection placsp_lake as Airflow builds it from the environment variable (JSON form)."""
    from airflow.sdk import Connection

    return Connection.from_json(env[LAKE_CONN_VARIABLE], conn_id="placsp_lake")


def lake_environment(doc: Doc) -> dict[str, str]:
    """The AWS_* environment LakeHook derives from the stack's connection placsp_lake (the scheduler's)."""
    from placsp_provider.hooks.lake import credential_environment

    conn = lake_connection(environment(doc["services"]["airflow-scheduler"]))
    return credential_environment(conn.login, conn.password, conn.extra_dejson)


def store_services(doc: Doc) -> dict[str, Doc]:
    return {n: s for n, s in doc["services"].items() if s.get("image", "").split(":")[0] == STORE_IMAGE}


def _expand(text: str, env: Mapping[str, str]) -> str:
    """A container shell's `${NAME}` (written `$${NAME}` in the compose file) from the service's environment."""
    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: env.get(m.group(1), ""), text)


def lake_problems(doc: Doc) -> list[str]:
    """Every Airflow service names one `s3://` lake and the connection placsp_lake; the processes that
    read credentials from their own environment (Spark workers, the triggerer) get exactly what
    LakeHook makes of that connection; the endpoint is the store's S3 port, the store accepts the key
    pair, and the lake's bucket is created before any Airflow service starts. Secrets are never
    quoted in a problem."""
    problems = []
    airflow = services_built_from(doc, AIRFLOW_DOCKERFILE)
    lakes = {name: environment(s).get("PLACSP_LAKE", "") for name, s in airflow.items()}
    for name, lake in lakes.items():
        if not lake.startswith("s3://"):
            problems.append(
                f"service {name}: PLACSP_LAKE={lake!r} is not an s3:// lake, which Spark executors in other "
                "containers could not reach"
            )
    if len(set(lakes.values())) > 1:
        problems.append(f"the Airflow services name different lakes: {sorted(set(lakes.values()))}")
    connections = {name: environment(s).get(LAKE_CONN_VARIABLE) for name, s in airflow.items()}
    problems += [f"service {n}: no {LAKE_CONN_VARIABLE}" for n, c in connections.items() if c is None]
    if len(set(connections.values())) > 1:
        problems.append(f"the Airflow services have different {LAKE_CONN_VARIABLE}")
    if problems or "airflow-scheduler" not in airflow:
        return problems
    bucket = urlsplit(lakes["airflow-scheduler"]).netloc
    expected = lake_environment(doc)
    from_own_env = dict(services_running(doc, SPARK_WORKER_CLASS))
    from_own_env.update({n: s for n, s in airflow.items() if command_words(s)[:1] == ["triggerer"]})
    for name, service in sorted(from_own_env.items()):
        own = {k: v for k, v in environment(service).items() if k.startswith("AWS_")}
        for key in sorted(set(own) | set(expected)):
            # Allowing plain HTTP changes nothing for an https:// endpoint (a store of your own).
            harmless = key == "AWS_ALLOW_HTTP" and key not in expected and own[key] == "true"
            if own.get(key) != expected.get(key) and not harmless:
                problems.append(f"service {name}: {key} is not the one of the connection placsp_lake (LakeHook)")
    endpoint = urlsplit(expected.get("AWS_ENDPOINT_URL", ""))
    store = doc["services"].get(endpoint.hostname or "")
    if store is None:
        return problems  # a store outside the stack (docker-compose.own-bucket.yaml)
    words = command_words(store)
    s3_port = next((w.split("=", 1)[1] for w in words if w.startswith("-s3.port=")), S3_PORT_DEFAULT)
    if "server" not in words or "-s3" not in words:
        problems.append(f"service {endpoint.hostname} runs {words}, not `weed server -s3`")
    if str(endpoint.port) != s3_port:
        problems.append(f"the lake's endpoint uses port {endpoint.port}, {endpoint.hostname} serves S3 on {s3_port}")
    store_env = environment(store)
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        if store_env.get(key) != expected.get(key):
            problems.append(f"service {endpoint.hostname}: its identity's {key} is not the connection's")
    creators = [
        n
        for n, s in doc["services"].items()
        if f"s3.bucket.create -name {bucket}" in _expand(" ".join(command_words(s)), environment(s))
        and (s.get("depends_on") or {}).get(endpoint.hostname, {}).get("condition") == "service_healthy"
    ]
    if not creators:
        problems.append(f"no service creates the bucket {bucket} once {endpoint.hostname} is healthy")
    init = doc["services"].get("airflow-init", {}).get("depends_on") or {}
    if creators and all(init.get(c, {}).get("condition") != "service_completed_successfully" for c in creators):
        problems.append(f"airflow-init does not wait for the bucket {bucket} ({', '.join(creators)})")
    return problems


def spark_master_problems(doc: Doc) -> list[str]:
    """The `spark_default` connection, the master's own address and the workers' all name one master;
    the driver (in the service that runs tasks) advertises a name the executors can resolve."""
    masters = services_running(doc, SPARK_MASTER_CLASS)
    if len(masters) != 1:
        return [f"expected one Spark master service, found {sorted(masters)}"]
    ((master_name, master),) = masters.items()
    words = command_words(master)
    master_url = f"spark://{flag_value(words, '--host', master_name)}:{flag_value(words, '--port', '7077')}"
    problems = []
    if flag_value(words, "--host", master_name) != master_name:
        problems.append(f"the master binds {flag_value(words, '--host')}, not its service name {master_name}")
    for name, worker in services_running(doc, SPARK_WORKER_CLASS).items():
        urls = [word for word in command_words(worker) if word.startswith("spark://")]
        if urls != [master_url]:
            problems.append(f"Spark worker {name} registers with {urls}, the master is {master_url}")
    for name, service in services_built_from(doc, AIRFLOW_DOCKERFILE).items():
        env = environment(service)
        connection = json.loads(env.get("AIRFLOW_CONN_SPARK_DEFAULT", "{}"))
        url = connection.get("host", "") + (f":{connection['port']}" if connection.get("port") else "")
        if url != master_url:
            problems.append(f"service {name}: spark_default points at {url!r}, the master is {master_url}")
        # LocalExecutor: tasks, and so the Spark drivers, run in the scheduler's container.
        runs_tasks = env.get("AIRFLOW__CORE__EXECUTOR") == "LocalExecutor" and command_words(service)[:1] == [
            "scheduler"
        ]
        if runs_tasks and env.get("SPARK_LOCAL_HOSTNAME") != name:
            problems.append(f"service {name} runs the Spark drivers but advertises {env.get('SPARK_LOCAL_HOSTNAME')!r}")
    return problems


def lineage_problems(doc: Doc) -> list[str]:
    """The OpenLineage HTTP transport of every Airflow service reaches the Marquez API."""
    problems = []
    for name, service in services_built_from(doc, AIRFLOW_DOCKERFILE).items():
        transport = json.loads(environment(service).get("AIRFLOW__OPENLINEAGE__TRANSPORT", "{}"))
        url = urlsplit(transport.get("url", ""))
        target = doc["services"].get(url.hostname or "")
        if transport.get("type") != "http" or transport.get("endpoint") != "api/v1/lineage":
            problems.append(f"service {name}: transport {transport} is not Marquez's OpenLineage HTTP endpoint")
        elif target is None:
            problems.append(f"service {name}: lineage goes to {url.hostname!r}, which is no service of the stack")
        elif environment(target).get("MARQUEZ_PORT") != str(url.port):
            problems.append(
                f"service {name}: lineage goes to port {url.port}, Marquez listens on "
                f"{environment(target).get('MARQUEZ_PORT')}"
            )
    return problems


def interpreter_problems(doc: Doc, spark_dockerfile: str, python_minor: str) -> list[str]:
    """Executors run the driver's Python minor version, at the path PYSPARK_PYTHON names."""
    installs = re.findall(r"\bpython(3\.\d+)\b", " ".join(runs(spark_dockerfile)))
    venvs = re.findall(r"python(3\.\d+) -m venv ([^\s;&|]+)", " ".join(runs(spark_dockerfile)))
    problems = [f"the Spark image uses Python {v}, the driver {python_minor}" for v in set(installs) - {python_minor}]
    if not venvs:
        return [*problems, "the Spark image creates no venv for the executors"]
    executor_python = venvs[0][1].rstrip("/") + "/bin/python"
    for name, service in services_built_from(doc, AIRFLOW_DOCKERFILE).items():
        configured = environment(service).get("PYSPARK_PYTHON")
        if configured != executor_python:
            problems.append(f"service {name}: PYSPARK_PYTHON={configured}, the executors' Python is {executor_python}")
        elif not configured.startswith(AIRFLOW_IMAGE_VENV + "/bin/"):
            problems.append(f"{configured} is not the Airflow image's interpreter ({AIRFLOW_IMAGE_VENV})")
    return problems


def read_lock() -> dict[str, str]:
    return check_lock.read_lock(LOCK_FILE.read_text())


def python_minor(pyproject: Doc) -> str:
    found = re.search(r">=\s*(3\.\d+)", pyproject["project"]["requires-python"])
    assert found, "requires-python names no minimum"
    return found.group(1)


def version_problems(dockerfiles: Mapping[str, str], lock: Mapping[str, str], pyproject: Doc) -> list[str]:
    """The Dockerfiles install exactly the lock's versions, which pyproject.toml's pins agree with."""
    problems = []
    airflow_from = re.fullmatch(r"apache/airflow:(\S+)-python(3\.\d+)", base_images(dockerfiles[AIRFLOW_DOCKERFILE])[0])
    spark_from = re.fullmatch(r"apache/spark:(\d+\.\d+\.\d+)-scala\S+", base_images(dockerfiles[SPARK_DOCKERFILE])[0])
    if not airflow_from or airflow_from.groups() != (lock.get("apache-airflow"), python_minor(pyproject)):
        problems.append(
            f"Airflow base image {base_images(dockerfiles[AIRFLOW_DOCKERFILE])[0]} is not "
            f"apache-airflow {lock.get('apache-airflow')} on Python {python_minor(pyproject)}"
        )
    if not spark_from or spark_from.group(1) != lock.get("pyspark"):
        problems.append(
            f"Spark base image {base_images(dockerfiles[SPARK_DOCKERFILE])[0]} is not pyspark {lock.get('pyspark')}"
        )
    for path, text in dockerfiles.items():
        problems += _install_problems(path, text, lock)
    problems += _pin_problems(pyproject, lock)
    return problems


def _install_problems(path: str, dockerfile: str, lock: Mapping[str, str]) -> list[str]:
    """Every `pip install` is constrained by the copied lock and checked against it afterwards."""
    lock_in_image = copies(dockerfile).get("requirements/constraints.txt")
    problems = [] if lock_in_image else [f"{path} does not copy requirements/constraints.txt"]
    for run in runs(dockerfile):
        if "pip install" not in run:
            continue
        if f"-c {lock_in_image}" not in run:
            problems.append(f"{path}: a pip install is not constrained by the lock ({lock_in_image})")
        if "check_lock.py" not in run:
            problems.append(f"{path}: a pip install is not followed by check_lock.py")
        for name, version in re.findall(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\"'$]+)", run):
            if lock.get(check_lock.normalize(name)) != version:
                problems.append(f"{path} pins {name}=={version}, the lock says {lock.get(check_lock.normalize(name))}")
    return problems


def _pin_problems(pyproject: Doc, lock: Mapping[str, str]) -> list[str]:
    from packaging.requirements import Requirement

    problems = []
    extras = ("volume", "report", "spark")
    optional = [r for extra in extras for r in pyproject["project"]["optional-dependencies"][extra]]
    for text in [*pyproject["project"]["dependencies"], *optional]:
        requirement = Requirement(text)
        locked = lock.get(check_lock.normalize(requirement.name))
        if locked is None or locked not in requirement.specifier:
            problems.append(f"pyproject.toml asks for {text}, the lock has {requirement.name} {locked}")
    return problems


def jar_problems(dockerfile: str) -> list[str]:
    """The jars are fetched at build time into PLACSP_SPARK_JARS, which stays set at run time."""
    order = [i for i in instructions(dockerfile) if i.keyword in ("ENV", "RUN")]
    fetch = [n for n, i in enumerate(order) if i.keyword == "RUN" and "placsp_provider.spark.jars fetch" in i.args]
    sets_jars = [n for n, i in enumerate(order) if i.keyword == "ENV" and "PLACSP_SPARK_JARS=" in i.args]
    if not fetch:
        return ["the Airflow image never runs `python -m placsp_provider.spark.jars fetch`"]
    if not sets_jars or sets_jars[0] > fetch[0]:
        return ["PLACSP_SPARK_JARS is not set (ENV) before the jars are fetched, so tasks would look elsewhere"]
    return []


def dockerignore_problems(dockerignore: str, dockerfiles: Mapping[str, str]) -> list[str]:
    patterns = [line.strip() for line in dockerignore.splitlines() if line.strip() and not line.startswith("#")]
    return [
        f"{path} copies {source}, which .dockerignore keeps out of the build context"
        for path, text in dockerfiles.items()
        for source in copies(text)
        if not sent_to_build(source, patterns)
    ]


def sent_to_build(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parent folders decides."""
    parts = PurePosixPath(path).parts
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    sent = True
    for pattern in patterns:
        negated = pattern.startswith("!")
        glob = pattern.lstrip("!").strip("/")
        if any(fnmatch(c, glob) or fnmatch(c, glob.replace("**/", "")) for c in candidates):
            sent = negated
    return sent


def external_urls(text: str, services: set[str]) -> list[str]:
    """URLs that leave the stack. Downloads go through package managers by package name only."""
    hosts = {"localhost", *services}
    return [url for url in re.findall(r"https?://[^\s'\"]+", text) if urlsplit(url).hostname not in hosts]


# --- Fixtures -----------------------------------------------------------------------------------------


def _import_check_lock():
    spec = importlib.util.spec_from_file_location("check_lock", REPO / "docker" / "check_lock.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_lock = _import_check_lock()


@pytest.fixture(scope="module")
def compose_text() -> str:
    return COMPOSE_FILE.read_text()


@pytest.fixture(scope="module")
def env_example() -> dict[str, str]:
    return read_env_file(ENV_EXAMPLE.read_text())


@pytest.fixture
def stack(compose_text: str) -> Doc:
    """The compose file as `docker compose up` sees it with no .env (every default)."""
    return load_compose(compose_text)


@pytest.fixture(scope="module")
def dockerfiles() -> dict[str, str]:
    return {path: (REPO / path).read_text() for path in (AIRFLOW_DOCKERFILE, SPARK_DOCKERFILE)}


@pytest.fixture(scope="module")
def image(dockerfiles: dict[str, str]) -> AirflowImage:
    return airflow_image(dockerfiles[AIRFLOW_DOCKERFILE])


@pytest.fixture(scope="module")
def pyproject() -> Doc:
    return tomllib.loads(PYPROJECT.read_text())


def broken(doc: Doc, change: Callable[[Doc], None]) -> Doc:
    doc = copy.deepcopy(doc)
    change(doc)
    return doc


# --- The schema --------------------------------------------------------------------------------------


def test_schema_copy_is_the_one_its_sources_name() -> None:
    data = (SCHEMA_DIR / "compose-spec.json").read_bytes()
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # git's blob id
    assert blob in (SCHEMA_DIR / "SOURCES.txt").read_text(), "schemas/compose/compose-spec.json was edited"


def test_compose_file_follows_the_compose_specification(stack: Doc) -> None:
    schema = json.loads((SCHEMA_DIR / "compose-spec.json").read_text())
    assert schema_errors(stack, schema) == []


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d["services"]["spark-master"].update(dependson=["spark-worker"]),
        lambda d: d["services"]["airflow-db"]["healthcheck"].update(interval=10),
        lambda d: d["services"]["marquez"]["depends_on"]["marquez-db"].update(condition="service_ready"),
    ],
    ids=["unknown-key", "wrong-type", "unknown-condition"],
)
def test_schema_check_rejects_a_broken_file(stack: Doc, change: Callable[[Doc], None]) -> None:
    schema = json.loads((SCHEMA_DIR / "compose-spec.json").read_text())
    assert schema_errors(broken(stack, change), schema)


# --- Variables -----------------------------------------------------------------------------------


def test_interpolation_follows_compose_rules() -> None:
    env = {"SET": "x", "EMPTY": ""}
    assert interpolate("${SET:-d} ${EMPTY:-d} ${EMPTY-d} ${UNSET-d} $$HOME $${X} $SET", env) == "x d  d $HOME ${X} x"
    assert interpolate("${SET:+alt}|${EMPTY:+alt}|${EMPTY+alt}", env) == "alt||alt"
    with pytest.raises(ValueError, match="REQUIRED"):
        interpolate("${REQUIRED:?set it}", env)


def test_every_variable_is_defaulted_and_listed_in_env_example(compose_text: str, env_example: dict[str, str]) -> None:
    assert variable_problems(compose_text, env_example) == []


def test_env_example_changes_nothing_until_edited(compose_text: str, env_example: dict[str, str]) -> None:
    assert load_compose(compose_text, env_example) == load_compose(compose_text)


def test_variable_check_catches_missing_defaults_and_drift(compose_text: str, env_example: dict[str, str]) -> None:
    no_default = compose_text.replace("${SPARK_WORKER_CORES:-2}", "${SPARK_WORKER_CORES}")
    assert variable_problems(no_default, env_example) == [
        "${SPARK_WORKER_CORES} has no default: without .env Compose would pass an empty value"
    ]
    commented = compose_text + "\n# a comment is no value: ${NOT_A_REFERENCE}\n"
    assert variable_problems(commented, env_example) == []
    drifted = {**env_example, "AIRFLOW_PORT": "9999", "NEVER_USED": "1"}
    assert variable_problems(compose_text, drifted) == [
        ".env.example sets AIRFLOW_PORT='9999', the compose default is '8080'",
        ".env.example sets NEVER_USED, which the compose file never uses",
    ]
    two_defaults = compose_text.replace("${AIRFLOW_PORT:-8080}", "${AIRFLOW_PORT:-8080} ${AIRFLOW_PORT:-8081}", 1)
    assert "AIRFLOW_PORT has different defaults" in variable_problems(two_defaults, env_example)[0]


def test_compose_defaults_equal_the_providers_own(stack: Doc, monkeypatch: pytest.MonkeyPatch) -> None:
    from placsp_provider import settings

    readers: dict[str, Callable[[], object]] = {
        "PLACSP_OVERLAP_HOURS": settings.overlap,
        "PLACSP_MAX_PAGES": settings.max_pages,
        "PLACSP_DEAD_LETTER_MAX_RATIO": settings.dead_letter_max_ratio,
        "PLACSP_DEAD_LETTER_SEVERITY": settings.dead_letter_severity,
    }
    env = environment(stack["services"]["airflow-scheduler"])
    for variable, read in readers.items():
        monkeypatch.delenv(variable, raising=False)
        built_in = read()
        monkeypatch.setenv(variable, env[variable])
        assert read() == built_in, f"{variable}: the stack's default {env[variable]} is not the provider's {built_in}"


def unknown_airflow_options(variables: set[str], described: Mapping[str, Any]) -> list[str]:
    """`AIRFLOW__SECTION__KEY` variables that name no option: Airflow ignores them without a word."""
    options = [name.lower().split("__")[1:] for name in sorted(variables) if name.startswith("AIRFLOW__")]
    return [f"[{s}] {k}" for s, k in options if k not in described.get(s, {}).get("options", {})]


def test_airflow_settings_name_real_airflow_options(stack: Doc) -> None:
    from airflow.configuration import conf

    described = conf.configuration_description  # core and the installed providers' (openlineage)
    variables = {n for s in services_built_from(stack, AIRFLOW_DOCKERFILE).values() for n in environment(s)}
    assert len([v for v in variables if v.startswith("AIRFLOW__")]) >= 10
    assert unknown_airflow_options(variables, described) == []
    typo = {"AIRFLOW__CORE__EXECUTER", "AIRFLOW__OPENLINEAGE__TRANSPORT"}
    assert unknown_airflow_options(typo, described) == ["[core] executer"]


# --- Ports, images, health ------------------------------------------------------------------------


def test_no_two_services_publish_the_same_port(stack: Doc) -> None:
    assert port_clashes(stack) == []
    assert sorted(p for s in stack["services"].values() for p in published_ports(s)) == [3000, 5050, 8080, 8090]


def test_port_check_catches_a_clash(stack: Doc) -> None:
    clash = broken(stack, lambda d: d["services"]["marquez-web"].update(ports=["127.0.0.1:8080:3000"]))
    assert port_clashes(clash) == ["host port 8080 is published by airflow-apiserver, marquez-web"]

    # A published range in short syntax against one port in long syntax.
    def range_and_long_syntax(doc: Doc) -> None:
        doc["services"]["marquez-web"]["ports"] = ["127.0.0.1:3000-3001:3000"]
        doc["services"]["spark-master"]["ports"] = [{"target": 8080, "published": "3001"}]

    assert port_clashes(broken(stack, range_and_long_syntax)) == [
        "host port 3001 is published by spark-master, marquez-web"
    ]


def test_published_ports_listen_on_the_configured_interface_only(stack: Doc) -> None:
    entries = [str(p) for s in stack["services"].values() for p in s.get("ports", [])]
    assert entries and all(entry.startswith("127.0.0.1:") for entry in entries)


def test_every_image_is_pinned(stack: Doc, dockerfiles: dict[str, str]) -> None:
    assert unpinned_images(stack, dockerfiles) == []


@pytest.mark.parametrize("image", ["postgres", "postgres:16", "marquezproject/marquez:latest", "localhost:5000/spark"])
def test_image_check_catches_moving_tags(stack: Doc, dockerfiles: dict[str, str], image: str) -> None:
    moving = broken(stack, lambda d: d["services"]["marquez-db"].update(image=image))
    assert unpinned_images(moving, dockerfiles) == [f"service marquez-db: image {image!r} is not pinned to a version"]
    stage = "FROM python:3.11 AS build\nFROM build\nCOPY --from=build /a /b\n"
    assert unpinned_images(stack, {"x": f"FROM {image}\n{stage}COPY --from=eclipse-temurin:17 /a /b\n"}) == [
        f"x: base image {image!r} is not pinned to a version",
        "x: base image 'eclipse-temurin:17' is not pinned to a version",
    ]


def test_built_images_carry_the_provider_version(stack: Doc, pyproject: Doc) -> None:
    built = {s["image"] for s in stack["services"].values() if "build" in s}
    assert built == {
        f"placsp/airflow:{pyproject['project']['version']}",
        f"placsp/spark:{pyproject['project']['version']}",
    }


def test_every_dependency_waits_for_a_condition_that_can_hold(stack: Doc) -> None:
    assert health_problems(stack) == []


def test_health_check_catches_unhealthy_wiring(stack: Doc) -> None:
    no_check = broken(stack, lambda d: d["services"]["spark-master"].pop("healthcheck"))
    assert health_problems(no_check) == [
        "service airflow-scheduler waits for spark-master to be healthy, but spark-master has no health check",
        "service spark-master has no health check",
        "service spark-worker waits for spark-master to be healthy, but spark-master has no health check",
    ]
    looping_init = broken(stack, lambda d: d["services"]["airflow-init"].update(restart="unless-stopped"))
    assert health_problems(looping_init) == [
        "service airflow-init runs once, but restart 'unless-stopped' would rerun it forever"
    ]
    no_condition = broken(stack, lambda d: d["services"]["marquez-web"].update(depends_on=["marquez"]))
    assert health_problems(no_condition) == ["service marquez-web: depends_on is a list, so it waits for no condition"]


# --- Mounts, Spark, lineage -----------------------------------------------------------------------


def test_dags_and_include_are_mounted_where_the_image_expects_them(stack: Doc, image: AirflowImage) -> None:
    assert (image.project_root, image.dags_folder) == ("/opt/placsp", "/opt/placsp/dags")
    assert mount_problems(stack, image) == []
    assert len(services_built_from(stack, AIRFLOW_DOCKERFILE)) == 5
    assert list(services_running(stack, SPARK_WORKER_CLASS)) == ["spark-worker"]


def test_no_service_mounts_a_lake_folder(stack: Doc) -> None:
    # The lake is a bucket: what Airflow containers share is the task logs, and the Spark worker nothing.
    shared = {
        name: sorted(m.source for m in mounts(s) if not m.source.startswith("./"))
        for name, s in stack["services"].items()
    }
    assert {n: v for n, v in shared.items() if n.startswith(("airflow-", "spark-"))} == {
        "airflow-apiserver": ["airflow-logs"],
        "airflow-dag-processor": ["airflow-logs"],
        "airflow-db": ["airflow-db-data"],
        "airflow-init": ["airflow-logs"],
        "airflow-scheduler": ["airflow-logs"],
        "airflow-triggerer": ["airflow-logs"],
        "spark-master": [],
        "spark-worker": [],
    }
    assert set(stack["volumes"]) == {"airflow-db-data", "airflow-logs", "marquez-db-data", "seaweedfs-data"}


def _dags_elsewhere(doc: Doc) -> None:
    doc["services"]["airflow-triggerer"]["volumes"][0] = "./dags:/opt/airflow/dags:ro"


def _no_include_in_scheduler(doc: Doc) -> None:
    doc["services"]["airflow-scheduler"]["volumes"].pop(1)


def _scheduler_dags_variable(doc: Doc) -> None:
    doc["services"]["airflow-scheduler"]["environment"]["AIRFLOW__CORE__DAGS_FOLDER"] = "/tmp/dags"


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            _dags_elsewhere,
            "service airflow-triggerer: ./dags is not mounted at /opt/placsp/dags, where the image expects it",
        ),
        (
            _no_include_in_scheduler,
            "service airflow-scheduler: ./include is not mounted at /opt/placsp/include, where the image expects it",
        ),
        (
            _scheduler_dags_variable,
            "service airflow-scheduler: AIRFLOW__CORE__DAGS_FOLDER=/tmp/dags but the image uses /opt/placsp/dags",
        ),
    ],
    ids=["dags-target", "include-missing", "dags-variable"],
)
def test_mount_check_catches_misplaced_mounts(
    stack: Doc, image: AirflowImage, change: Callable[[Doc], None], problem: str
) -> None:
    assert mount_problems(broken(stack, change), image) == [problem]


# --- The lake: bucket, credentials, store ---------------------------------------------------------


def test_lake_is_one_bucket_reached_with_the_connections_credentials(stack: Doc) -> None:
    assert lake_problems(stack) == []
    assert {environment(s)["PLACSP_LAKE"] for s in services_built_from(stack, AIRFLOW_DOCKERFILE).values()} == {
        "s3://placsp-lake/lake"
    }
    assert lake_environment(stack) == {
        "AWS_ACCESS_KEY_ID": "placsp",
        "AWS_SECRET_ACCESS_KEY": "placsp-local-s3-secret-change-me",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": "http://seaweedfs:8333",
        "AWS_ALLOW_HTTP": "true",
    }


def test_lake_hook_reads_the_stacks_connection(stack: Doc, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a task in the scheduler does with the compose environment: LakeHook resolves the lake and
    loads the connection into the process's AWS_* environment (the Spark driver inherits it)."""
    from placsp_provider.hooks.lake import LakeHook
    from placsp_provider.lake_storage import uri

    env = environment(stack["services"]["airflow-scheduler"])
    for name in [*lake_environment(stack), "AWS_SESSION_TOKEN", "PLACSP_LAKE_CONN_ID"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PLACSP_LAKE", env["PLACSP_LAKE"])
    monkeypatch.setenv(LAKE_CONN_VARIABLE, env[LAKE_CONN_VARIABLE])
    assert uri(LakeHook().lake()) == "s3://placsp-lake/lake"
    assert {k: os.environ[k] for k in lake_environment(stack)} == lake_environment(stack)


def test_lake_check_holds_for_a_bucket_of_your_own(stack: Doc) -> None:
    own = {
        "PLACSP_LAKE_BUCKET": "my-placsp-lake",
        "PLACSP_S3_ACCESS_KEY": "AKIAEXAMPLE",
        "PLACSP_S3_SECRET_KEY": "abc/def+ghi",
        "PLACSP_S3_REGION": "eu-south-2",
        "PLACSP_S3_ENDPOINT_URL": "https://s3.eu-south-2.amazonaws.com",
    }
    assert set(own) == {
        name for name in read_env_file(ENV_EXAMPLE.read_text()) if name.startswith(("PLACSP_LAKE", "PLACSP_S3"))
    }
    doc = load_compose(COMPOSE_FILE.read_text(), own)
    assert lake_problems(doc) == []
    assert environment(doc["services"]["spark-worker"])["AWS_SECRET_ACCESS_KEY"] == "abc/def+ghi"
    assert lake_environment(doc)["AWS_ENDPOINT_URL"] == "https://s3.eu-south-2.amazonaws.com"


def _set_everywhere(doc: Doc, key: str, value: str) -> None:
    for service in services_built_from(doc, AIRFLOW_DOCKERFILE).values():
        service["environment"][key] = value


@pytest.mark.parametrize(
    ("change", "problems"),
    [
        (
            lambda d: d["services"]["spark-worker"]["environment"].update(AWS_SECRET_ACCESS_KEY="other"),
            ["service spark-worker: AWS_SECRET_ACCESS_KEY is not the one of the connection placsp_lake (LakeHook)"],
        ),
        (
            lambda d: [
                d["services"]["airflow-triggerer"]["environment"].pop(k) for k in ("AWS_REGION", "AWS_ALLOW_HTTP")
            ],
            [
                "service airflow-triggerer: AWS_ALLOW_HTTP is not the one of the connection placsp_lake (LakeHook)",
                "service airflow-triggerer: AWS_REGION is not the one of the connection placsp_lake (LakeHook)",
            ],
        ),
        (
            lambda d: d["services"]["airflow-apiserver"]["environment"].update(PLACSP_LAKE="/data/placsp-lake"),
            [
                "service airflow-apiserver: PLACSP_LAKE='/data/placsp-lake' is not an s3:// lake, which Spark "
                "executors in other containers could not reach",
                "the Airflow services name different lakes: ['/data/placsp-lake', 's3://placsp-lake/lake']",
            ],
        ),
        (
            lambda d: d["services"]["airflow-dag-processor"]["environment"].pop(LAKE_CONN_VARIABLE),
            [
                f"service airflow-dag-processor: no {LAKE_CONN_VARIABLE}",
                f"the Airflow services have different {LAKE_CONN_VARIABLE}",
            ],
        ),
        (
            lambda d: d["services"]["seaweedfs"].update(command=["server", "-ip=seaweedfs", "-s3", "-s3.port=8334"]),
            ["the lake's endpoint uses port 8333, seaweedfs serves S3 on 8334"],
        ),
        (
            lambda d: d["services"]["seaweedfs"]["environment"].update(AWS_SECRET_ACCESS_KEY="other"),
            ["service seaweedfs: its identity's AWS_SECRET_ACCESS_KEY is not the connection's"],
        ),
        (
            lambda d: _set_everywhere(d, "PLACSP_LAKE", "s3://another-bucket/lake"),
            ["no service creates the bucket another-bucket once seaweedfs is healthy"],
        ),
        (
            lambda d: d["services"]["airflow-init"]["depends_on"].pop("seaweedfs-init"),
            ["airflow-init does not wait for the bucket placsp-lake (seaweedfs-init)"],
        ),
    ],
    ids=[
        "worker-secret",
        "triggerer-env",
        "local-lake",
        "no-connection",
        "s3-port",
        "store-key",
        "bucket",
        "init-order",
    ],
)
def test_lake_check_catches_a_broken_contract(stack: Doc, change: Callable[[Doc], None], problems: list[str]) -> None:
    found = lake_problems(broken(stack, change))
    assert found == problems
    assert not [p for p in found if "placsp-local-s3-secret" in p], "a problem quotes the secret"


def test_own_bucket_override_drops_exactly_the_local_store(stack: Doc) -> None:
    """docker-compose.own-bucket.yaml disables the store's services and keeps every other dependency
    of airflow-init (checked with compose-go v2.16.0 when written: the merged model had neither)."""

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!override", lambda loader, node: loader.construct_mapping(node, deep=True))
    override = yaml.load((REPO / "docker-compose.own-bucket.yaml").read_text(), Loader=Loader)["services"]
    disabled = {name for name, service in override.items() if service.get("profiles")}
    assert disabled == set(store_services(stack)) == {"seaweedfs", "seaweedfs-init"}
    kept = {k: v for k, v in stack["services"]["airflow-init"]["depends_on"].items() if k not in disabled}
    assert override["airflow-init"]["depends_on"] == kept
    assert not any(
        disabled & set(s.get("depends_on") or {})
        for n, s in stack["services"].items()
        if n not in disabled | {"airflow-init"}
    )


def test_store_services_run_one_image(stack: Doc) -> None:
    # Pinned like every image (test_every_image_is_pinned); test_lake_store.py checks the tag is the
    # release of the server tests/s3 builds.
    assert len({s["image"] for s in store_services(stack).values()}) == 1


def test_mount_check_catches_an_image_that_bakes_dags_elsewhere(stack: Doc, dockerfiles: dict[str, str]) -> None:
    moved = dockerfiles[AIRFLOW_DOCKERFILE].replace("dags/ /opt/placsp/dags/", "dags/ /opt/airflow/dags/")
    assert mount_problems(stack, airflow_image(moved)) == [
        "the image bakes dags/ into /opt/airflow/dags, not its DAGS_FOLDER /opt/placsp/dags"
    ]


def test_spark_master_url_is_the_one_of_the_connection(stack: Doc) -> None:
    assert spark_master_problems(stack) == []


def test_spark_connection_resolves_to_the_master_in_airflows_hook(stack: Doc, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    env = environment(stack["services"]["airflow-scheduler"])
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", env["AIRFLOW_CONN_SPARK_DEFAULT"])
    connection = SparkSubmitHook(conn_id="spark_default")._connection
    assert (connection["master"], connection["deploy_mode"]) == ("spark://spark-master:7077", "client")


def test_placsp_connection_defaults_to_the_live_site_with_tls_verified(
    stack: Doc, monkeypatch: pytest.MonkeyPatch
) -> None:
    from placsp_provider.datasets import LIVE_BASE_URL
    from placsp_provider.hooks.placsp import PlacspHook

    env = environment(stack["services"]["airflow-scheduler"])
    monkeypatch.setenv("AIRFLOW_CONN_PLACSP_DEFAULT", env["AIRFLOW_CONN_PLACSP_DEFAULT"])
    config = PlacspHook().client_config()
    assert (config.base_url, config.verify) == (LIVE_BASE_URL, True)


def test_spark_check_catches_a_master_mismatch(stack: Doc) -> None:
    def wrong_port(doc: Doc) -> None:
        doc["services"]["spark-worker"]["command"][-1] = "spark://spark-master:7078"

    def wrong_connection(doc: Doc) -> None:
        doc["services"]["airflow-dag-processor"]["environment"]["AIRFLOW_CONN_SPARK_DEFAULT"] = json.dumps(
            {"conn_type": "spark", "host": "spark://master", "port": 7077}
        )

    def unreachable_driver(doc: Doc) -> None:
        del doc["services"]["airflow-scheduler"]["environment"]["SPARK_LOCAL_HOSTNAME"]

    assert spark_master_problems(broken(stack, wrong_port)) == [
        "Spark worker spark-worker registers with ['spark://spark-master:7078'], the master is spark://spark-master:7077"
    ]
    assert spark_master_problems(broken(stack, wrong_connection)) == [
        "service airflow-dag-processor: spark_default points at 'spark://master:7077', the master is spark://spark-master:7077"
    ]
    assert spark_master_problems(broken(stack, unreachable_driver)) == [
        "service airflow-scheduler runs the Spark drivers but advertises None"
    ]


def test_lineage_goes_to_marquez(stack: Doc) -> None:
    assert lineage_problems(stack) == []


def test_lineage_check_catches_a_wrong_port(stack: Doc) -> None:
    def wrong_port(doc: Doc) -> None:
        doc["services"]["airflow-triggerer"]["environment"]["AIRFLOW__OPENLINEAGE__TRANSPORT"] = json.dumps(
            {"type": "http", "url": "http://marquez:5001", "endpoint": "api/v1/lineage"}
        )

    assert lineage_problems(broken(stack, wrong_port)) == [
        "service airflow-triggerer: lineage goes to port 5001, Marquez listens on 5000"
    ]


def test_executors_run_the_drivers_python(stack: Doc, dockerfiles: dict[str, str], pyproject: Doc) -> None:
    assert interpreter_problems(stack, dockerfiles[SPARK_DOCKERFILE], python_minor(pyproject)) == []


def test_interpreter_check_catches_another_python(stack: Doc, dockerfiles: dict[str, str]) -> None:
    older = dockerfiles[SPARK_DOCKERFILE].replace("python3.11", "python3.10")
    assert interpreter_problems(stack, older, "3.11") == ["the Spark image uses Python 3.10, the driver 3.11"]
    elsewhere = broken(
        stack, lambda d: d["services"]["airflow-scheduler"]["environment"].update(PYSPARK_PYTHON="python3")
    )
    assert interpreter_problems(elsewhere, dockerfiles[SPARK_DOCKERFILE], "3.11") == [
        "service airflow-scheduler: PYSPARK_PYTHON=python3, the executors' Python is /home/airflow/.local/bin/python"
    ]


# --- Versions, jars, build context --------------------------------------------------------------


def test_dockerfiles_install_the_locked_versions(dockerfiles: dict[str, str], pyproject: Doc) -> None:
    assert version_problems(dockerfiles, read_lock(), pyproject) == []


def test_version_check_catches_drift(dockerfiles: dict[str, str], pyproject: Doc) -> None:
    lock = read_lock()
    newer_airflow = {
        **dockerfiles,
        AIRFLOW_DOCKERFILE: dockerfiles[AIRFLOW_DOCKERFILE].replace("3.3.2-python3.11", "3.3.1-python3.12"),
    }
    airflow = lock["apache-airflow"]
    assert version_problems(newer_airflow, lock, pyproject) == [
        f"Airflow base image apache/airflow:3.3.1-python3.12 is not apache-airflow {airflow} on Python 3.11"
    ]
    unconstrained = dockerfiles[SPARK_DOCKERFILE].replace("-c /tmp/placsp/constraints.txt lxml", "lxml==5.0.0")
    assert version_problems({**dockerfiles, SPARK_DOCKERFILE: unconstrained}, lock, pyproject) == [
        f"{SPARK_DOCKERFILE}: a pip install is not constrained by the lock (/tmp/placsp/constraints.txt)",
        f"{SPARK_DOCKERFILE} pins lxml==5.0.0, the lock says {lock['lxml']}",
    ]
    assert version_problems(dockerfiles, {**lock, "pyspark": "4.1.0"}, pyproject) == [
        f"Spark base image {base_images(dockerfiles[SPARK_DOCKERFILE])[0]} is not pyspark 4.1.0",
        "pyproject.toml asks for pyspark==4.2.0, the lock has pyspark 4.1.0",
    ]


def test_jars_are_fetched_at_build_time_into_the_runtime_folder(dockerfiles: dict[str, str]) -> None:
    assert jar_problems(dockerfiles[AIRFLOW_DOCKERFILE]) == []
    late_env = "RUN python -m placsp_provider.spark.jars fetch\nENV PLACSP_SPARK_JARS=/opt/placsp/spark-jars\n"
    assert jar_problems(late_env) == [
        "PLACSP_SPARK_JARS is not set (ENV) before the jars are fetched, so tasks would look elsewhere"
    ]
    assert jar_problems("FROM x:1.0\n") == ["the Airflow image never runs `python -m placsp_provider.spark.jars fetch`"]


def test_build_context_sends_every_copied_file(dockerfiles: dict[str, str]) -> None:
    dockerignore = (REPO / ".dockerignore").read_text()
    assert dockerignore_problems(dockerignore, dockerfiles) == []
    for source in {s for text in dockerfiles.values() for s in copies(text)}:
        assert (REPO / source).exists(), f"a Dockerfile copies {source}, which the repository does not have"
    patterns = [line for line in dockerignore.splitlines() if line and not line.startswith("#")]
    assert not sent_to_build(".venv/bin/python", patterns)
    assert not sent_to_build("docker/certs/placsp-ca.pem", patterns)
    assert dockerignore_problems(dockerignore.replace("!provider/\n", ""), dockerfiles) == [
        "Dockerfile copies provider, which .dockerignore keeps out of the build context"
    ]


def test_nothing_is_downloaded_from_a_hard_coded_host(stack: Doc) -> None:
    owned = [
        COMPOSE_FILE,
        REPO / "docker-compose.own-bucket.yaml",
        ENV_EXAMPLE,
        REPO / ".dockerignore",
        *sorted((REPO / "docker").rglob("*")),
        REPO / AIRFLOW_DOCKERFILE,
    ]
    texts = {path: path.read_text() for path in owned if path.is_file()}
    found = {
        str(path.relative_to(REPO)): urls
        for path, text in texts.items()
        if (urls := external_urls(text, set(stack["services"])))
    }
    assert found == {}
    assert external_urls("RUN curl -fsSL https://example.org/x.jar", {"marquez"}) == ["https://example.org/x.jar"]


# --- The scripts the images run ----------------------------------------------------------------------


def test_check_lock_reports_each_kind_of_drift() -> None:
    lock = check_lock.read_lock("lxml==6.1.3\nPyArrow==26.0.1\n# comment\n")
    installed = {"lxml": "6.1.3", "pyarrow": "25.0.0"}.get
    assert check_lock.mismatches(["lxml", "py_arrow", "pyarrow", "pandas"], lock, installed) == [
        "py-arrow: not in the lock; add it to requirements/constraints.txt",
        "pyarrow: installed 25.0.0, the lock says 26.0.1",
        "pandas: not in the lock; add it to requirements/constraints.txt",
    ]
    assert check_lock.mismatches(["LXML"], lock, {}.get) == ["lxml: not installed (the lock says 6.1.3)"]
    with pytest.raises(ValueError, match="not `name==version`"):
        check_lock.read_lock("lxml>=6\n")


def test_check_lock_reads_the_projects_dependencies(pyproject: Doc) -> None:
    names = check_lock.project_dependencies(PYPROJECT.read_text())
    assert {"apache-airflow", "apache-airflow-providers-openlineage", "deltalake"} <= set(names)
    assert not {"pyspark", "delta-spark"} & set(names), "Spark is the `spark` extra (decision 0042)"
    assert len(names) == len(pyproject["project"]["dependencies"])
    assert set(names) <= set(read_lock()), "a dependency of pyproject.toml is missing from the lock"
    # The image installs the `all` extra, which names the project's own `volume`, `report` and `spark`.
    with_all = check_lock.project_dependencies(PYPROJECT.read_text(), ["all"])
    assert set(with_all) - set(names) == {"prophet", "holidays", "matplotlib", "pyspark", "delta-spark"}
    assert set(with_all) <= set(read_lock()), "a dependency of an extra is missing from the lock"
    with pytest.raises(ValueError, match="extra 'volumes' is not in"):
        check_lock.project_dependencies(PYPROJECT.read_text(), ["volumes"])


def _run_ui_login(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return subprocess.run(
        ["bash", str(REPO / "docker" / "airflow" / "with-ui-login.sh"), "echo", "started"],
        env={
            "PATH": path,
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(tmp_path / "passwords.json"),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_ui_login_script_writes_the_password_file_then_starts(tmp_path: Path) -> None:
    result = _run_ui_login(tmp_path, AIRFLOW_ADMIN_USER="admin", AIRFLOW_ADMIN_PASSWORD='p"w d')
    assert (result.returncode, result.stdout) == (0, "started\n"), result.stderr
    passwords = tmp_path / "passwords.json"
    assert json.loads(passwords.read_text()) == {"admin": 'p"w d'}
    assert stat.S_IMODE(passwords.stat().st_mode) == 0o600


def test_ui_login_script_names_a_missing_setting(tmp_path: Path) -> None:
    result = _run_ui_login(tmp_path, AIRFLOW_ADMIN_USER="admin")
    assert result.returncode != 0 and "started" not in result.stdout
    assert "set AIRFLOW_ADMIN_PASSWORD (see .env.example)" in result.stderr
    assert "Traceback" not in result.stderr


def _compose_services_in_docs() -> Iterator[str]:
    yield from re.findall(r"^\| `([a-z-]+)` \|", (REPO / "docs" / "docker-compose.md").read_text(), re.MULTILINE)


def test_guide_lists_every_service(stack: Doc) -> None:
    assert sorted(_compose_services_in_docs()) == sorted(stack["services"])


def test_guide_lists_every_variable(env_example: dict[str, str]) -> None:
    guide = (REPO / "docs" / "docker-compose.md").read_text()
    assert [name for name in env_example if f"`{name}`" not in guide] == []


def test_published_ports_are_the_guides(stack: Doc) -> None:
    guide = (REPO / "docs" / "docker-compose.md").read_text()
    ports = {p for s in stack["services"].values() for p in published_ports(s)}
    assert [port for port in sorted(ports) if f"localhost:{port}" not in guide] == []
