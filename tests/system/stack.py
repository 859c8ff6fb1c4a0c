"""Start the deployed shape on 127.0.0.1 and always take it down again.

`Stack(out)` is a context manager. On enter it starts, in this order, each as its own process (or
thread, for the two small HTTP servers) with its log in `<out>/logs/`:

1. a private PostgreSQL cluster (Debian's `initdb`/`pg_ctl`) in a temp folder: Airflow's database,
   user/password/database `airflow` as in the compose file;
2. the lake's S3 store (compose's `seaweedfs`: the `weed` binary tests/s3 builds, with the key pair
   it requires) and its bucket (compose's `seaweedfs-init`), then the Spark standalone master and
   one worker (`spark-class` of the pip-installed pyspark), which shares no folder with Airflow: it
   reads and writes the lake over S3 with the credentials in its own environment;
3. the bundled PLACSP pages on the loopback site, and an OpenLineage HTTP receiver that validates
   every event it is sent against the spec (tests/lineage/ol_schema.py) and keeps them;
4. `airflow db migrate` (compose's `airflow-init`), then the API server, scheduler, DAG processor
   and triggerer with compose's commands and environment (deployment.py).

On exit, even after a failure half-way, everything started is stopped (process groups: SIGTERM,
then SIGKILL) and the temp folder removed; the logs and screenshots stay in `out`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import requests

from tests.system import deployment
from tests.system.deployment import LocalPaths, Ports, Service

PG_USER = PG_PASSWORD = PG_DATABASE = "airflow"  # the compose file's airflow-db


class StackError(RuntimeError):
    pass


def wait_for(
    what: str, check: Callable[[], Any], timeout: float, interval: float = 1.0, log: Path | None = None
) -> Any:
    """Poll `check` until it returns something truthy; name `what` (and the log's tail) on timeout."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except Exception as err:  # not up yet
            last_error = err
        time.sleep(interval)
    tail = ""
    if log is not None and log.is_file():
        tail = (
            "\n--- last lines of " + str(log) + " ---\n" + "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        )
    raise StackError(f"{what}: not ready after {timeout:.0f} s (last error: {last_error}){tail}")


def pg_bin(tool: str) -> str:
    found = shutil.which(tool)
    if found:
        return found
    candidates = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{tool}"))
    if not candidates:
        raise StackError(f"PostgreSQL's {tool} not found: `make system-test` installs the postgresql package")
    return str(candidates[-1])


class LineageReceiver:
    """An OpenLineage HTTP endpoint (POST /api/v1/lineage, Marquez's path) that validates every event."""

    def __init__(self, port: int, log: Path) -> None:
        from tests.lineage.ol_schema import validate_event

        self.events: list[dict[str, Any]] = []
        self.invalid: list[str] = []
        receiver = self

        class _Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    event = json.loads(body)
                    validate_event(event)
                except Exception as err:
                    receiver.invalid.append(f"{self.path}: {type(err).__name__}: {str(err)[:500]}")
                    event = None
                if event is not None:
                    receiver.events.append(event)
                with log.open("a") as f:
                    f.write(body.decode(errors="replace").replace("\n", " ") + "\n")
                self.send_response(201 if self.path.rstrip("/") == "/api/v1/lineage" else 404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class Stack:
    """Everything `make system-test` runs; see the module docstring."""

    def __init__(self, out: Path, *, variables: dict[str, str] | None = None, extra_env: dict[str, str] | None = None):
        self.out = out
        self.logs = out / "logs"
        self.variables = variables or {}
        self.extra_env = extra_env or {}
        self.ports = Ports.free()
        self._exit = contextlib.ExitStack()
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self.timings: dict[str, float] = {}

    # -- lifecycle ----------------------------------------------------------------------------------
    def __enter__(self) -> Stack:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        # Every service told to stop at once; each is then waited for in turn (`_stop`), so their
        # shutdowns overlap (one at a time, the stack took 45 s to stop).
        for proc in self._procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        self._exit.close()

    def _start(self) -> None:
        from placsp_provider.demo.loopback_site import LoopbackSite
        from placsp_provider.demo.samples import demo_routes

        self.logs.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix="placsp-system-"))
        self._exit.callback(shutil.rmtree, self.tmp, True)
        self.paths = LocalPaths(
            home=self.tmp / "airflow", store=self.tmp / "seaweedfs", spark_work=self.tmp / "spark-work"
        )
        for folder in (self.paths.home, self.paths.store, self.paths.spark_work / "logs"):
            folder.mkdir(parents=True)
        # Runs after every process has stopped, before the temp folder goes: task logs are artifacts.
        self._exit.callback(self._keep_task_logs)

        t = time.monotonic()
        self.site = LoopbackSite(demo_routes())
        self._exit.callback(self.site.close)
        self.lineage = LineageReceiver(self.ports.lineage, self.logs / "openlineage-events.jsonl")
        self._exit.callback(self.lineage.close)
        self._start_postgres()
        self.timings["postgres"] = time.monotonic() - t

        variables = {
            "PLACSP_BASE_URL": self.site.base_url,
            # The UIs the task pages link to, on the ports they listen on here.
            "SPARK_MASTER_UI_PORT": str(self.ports.spark_master_ui),
            **deployment.COMPOSE_VARIABLES,
            **self.variables,
        }
        stack = deployment.load_stack(variables)
        base_env = _base_env()
        t = time.monotonic()
        self._start_store(stack)
        self.timings["s3 store"] = time.monotonic() - t
        t = time.monotonic()
        for service in deployment.spark_services(stack, self.ports, self.paths, base_env):
            self._spawn(service)
        self.spark_ui = f"http://127.0.0.1:{self.ports.spark_master_ui}"
        wait_for(
            "Spark worker registered with the master", self._spark_worker_alive, 120, log=self.logs / "spark-worker.log"
        )
        self.timings["spark"] = time.monotonic() - t

        self.airflow = deployment.airflow_services(stack, self.ports, self.paths, base_env)
        for service in self.airflow:
            service.env.update(self.extra_env)
        t = time.monotonic()
        scheduler = next(s for s in self.airflow if s.name == "airflow-scheduler")
        self._run("airflow-init", [str(Path(sys.executable).with_name("airflow")), "db", "migrate"], scheduler.env, 600)
        self.timings["db migrate"] = time.monotonic() - t
        t = time.monotonic()
        for service in self.airflow:
            self._spawn(service)
        self.api = f"http://127.0.0.1:{self.ports.api}"
        wait_for(
            "Airflow API server health",
            lambda: requests.get(f"{self.api}/api/v2/monitor/health", timeout=5).ok,
            300,
            log=self.logs / "airflow-apiserver.log",
        )
        self.timings["airflow up"] = time.monotonic() - t

    # -- the lake's S3 store -------------------------------------------------------------------------
    def _start_store(self, stack: dict[str, Any]) -> None:
        """Compose's store and its bucket; then this process reads the lake as a task does: compose's
        `PLACSP_LAKE` and the `AWS_*` LakeHook makes of compose's connection (put back on exit)."""
        from tests.s3 import seaweedfs

        bin_dir = self.tmp / "bin"
        bin_dir.mkdir()
        (bin_dir / "weed").symlink_to(seaweedfs.binary())
        # Its data folder is thrown away, and a graceful stop takes it 12 s or more (tests/s3): 5 s, then kill.
        self._spawn(deployment.store_service(stack, self.ports, self.paths, bin_dir / "weed"), grace=5)
        healthcheck = deployment.store_healthcheck(stack, self.ports)
        wait_for(
            "the S3 store's health check",
            lambda: subprocess.run(healthcheck, capture_output=True, timeout=30).returncode == 0,
            90,
            interval=0.5,
            log=self.logs / f"{deployment.STORE_SERVICE}.log",
        )
        init = deployment.store_init(stack, self.ports, bin_dir)
        self._run(init.name, init.command, init.env, 120)

        from placsp_provider import lake_storage
        from placsp_provider.hooks.lake import credential_environment
        from placsp_provider.lake import resolve_lake

        scheduler = next(
            s for s in deployment.airflow_services(stack, self.ports, self.paths, {}) if "scheduler" in s.name
        )
        conn = json.loads(scheduler.env["AIRFLOW_CONN_PLACSP_LAKE"])
        self.lake_env = credential_environment(conn["login"], conn["password"], conn["extra"])
        self.secret = conn["password"]
        saved = {k: os.environ.get(k) for k in self.lake_env}
        self._exit.callback(_restore_env, saved)
        os.environ.update(self.lake_env)
        lake_storage._s3_store.cache_clear()  # a store is made from the environment it first saw
        lake_storage._filesystem.cache_clear()
        self.lake = resolve_lake(scheduler.env["PLACSP_LAKE"])

    # -- PostgreSQL ---------------------------------------------------------------------------------
    def _start_postgres(self) -> None:
        data = self.tmp / "pgdata"
        run_as = "postgres" if os.geteuid() == 0 else None  # initdb refuses to run as root
        pwfile = self.tmp / "pgpass"
        pwfile.write_text(PG_PASSWORD + "\n")
        data.mkdir()
        if run_as:
            shutil.chown(self.tmp, run_as)
            shutil.chown(data, run_as)
            shutil.chown(pwfile, run_as)
        # The server's own log lives in the temp folder (the checkout may not be readable by the
        # `postgres` user) and is copied next to the other logs when the cluster stops.
        log = self.tmp / "postgres.log"
        self._exit.callback(lambda: log.is_file() and shutil.copyfile(log, self.logs / "postgres.log"))
        self._run(
            "initdb",
            [
                pg_bin("initdb"),
                "-D",
                str(data),
                "-U",
                PG_USER,
                f"--pwfile={pwfile}",
                "--auth=scram-sha-256",
                "-E",
                "UTF8",
                "--no-locale",
            ],
            _base_env(),
            120,
            user=run_as,
        )
        options = f"-c listen_addresses=127.0.0.1 -p {self.ports.postgres} -k {data} -c fsync=off"
        self._run(
            "pg_ctl start",
            [pg_bin("pg_ctl"), "-D", str(data), "-o", options, "-l", str(log), "-w", "start"],
            _base_env(),
            120,
            user=run_as,
        )
        self._exit.callback(
            lambda: subprocess.run(
                [pg_bin("pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                user=run_as,
                capture_output=True,
                timeout=60,
                check=False,
            )
        )
        env = {**_base_env(), "PGPASSWORD": PG_PASSWORD}
        self._run(
            "createdb",
            [pg_bin("createdb"), "-h", "127.0.0.1", "-p", str(self.ports.postgres), "-U", PG_USER, PG_DATABASE],
            env,
            60,
        )

    # -- processes ----------------------------------------------------------------------------------
    def _run(self, name: str, command: list[str], env: dict[str, str], timeout: float, user: str | None = None) -> None:
        log = self.logs / f"{name.replace(' ', '-')}.log"
        with log.open("ab") as f:
            result = subprocess.run(
                command, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=timeout, user=user, check=False
            )
        if result.returncode != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
            raise StackError(f"{name} failed (exit {result.returncode}); {log}:\n{tail}")

    def _spawn(self, service: Service, grace: float = 20) -> None:
        log = (self.logs / f"{service.name}.log").open("ab")
        self._exit.callback(log.close)
        proc = subprocess.Popen(
            service.command,
            env=service.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: stopping it stops its children too
            cwd=self.tmp,
        )
        self._procs[service.name] = proc
        self._exit.callback(_stop, proc, grace)

    def _keep_task_logs(self) -> None:
        for source, target in ((self.paths.home / "logs", "airflow-tasks"), (self.paths.spark_work, "spark-work")):
            if source.is_dir():
                shutil.copytree(
                    source, self.logs / target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.jar", "*.zip")
                )

    def log_text(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace") if path.is_file() else ""

    def alive(self) -> dict[str, bool]:
        return {name: proc.poll() is None for name, proc in self._procs.items()}

    # -- Spark --------------------------------------------------------------------------------------
    def spark_master_state(self) -> dict[str, Any]:
        return requests.get(f"{self.spark_ui}/json/", timeout=5).json()

    def _spark_worker_alive(self) -> bool:
        return any(w.get("state") == "ALIVE" for w in self.spark_master_state().get("workers", []))


def _stop(proc: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM to its process group, `grace` seconds to exit, then SIGKILL."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def _restore_env(saved: dict[str, str | None]) -> None:
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _base_env() -> dict[str, str]:
    """What every process gets from the machine: nothing of the test session's own Airflow settings."""
    # PYTHONPATH: a worktree's code rather than the venv's editable install (unset in CI).
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "JAVA_HOME", "TZ", "PLACSP_SPARK_JARS", "PYTHONPATH")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.setdefault("LANG", "C.UTF-8")
    from placsp_provider.spark.jars import jar_dir

    env["PLACSP_SPARK_JARS"] = str(jar_dir())
    return env


@contextlib.contextmanager
def stack(out: Path, **kwargs: Any) -> Iterator[Stack]:
    with Stack(out, **kwargs) as s:
        yield s
