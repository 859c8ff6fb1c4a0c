"""The deployed stack, once for the system tests (tests/system/stack.py), and where they keep artifacts.

Package-scoped, not session: the stack stops when the last system test ends, so its services' polling
does not share the two cores with the tests collected after tests/system.

Output folder: `$PLACSP_SYSTEM_TEST_OUT`, default `<repo>/.system-test/` (emptied at the start):
the services' logs, the OpenLineage events received, the browser's screenshots, and `timings.json`.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.system.deployment import REPO

# Short on purpose: the daily run takes longer, so its Deadline Alert fires during the test.
DEADLINE_MINUTES = "0.25"


@pytest.fixture(scope="package")
def out() -> Path:
    folder = Path(os.environ.get("PLACSP_SYSTEM_TEST_OUT") or REPO / ".system-test")
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "screenshots").mkdir(parents=True)
    return folder


@pytest.fixture(scope="package")
def timings(out: Path) -> Iterator[dict[str, float]]:
    values: dict[str, float] = {}
    start = time.monotonic()
    yield values
    values["total"] = time.monotonic() - start
    (out / "timings.json").write_text(json.dumps({k: round(v, 1) for k, v in values.items()}, indent=2))
    print(f"\nsystem test timings (s): {json.dumps({k: round(v, 1) for k, v in values.items()})}")


@pytest.fixture(scope="package")
def stack(out: Path, timings: dict[str, float]) -> Iterator:
    from tests.system.stack import Stack

    start = time.monotonic()
    # The store's key pair is the run's own: test_deployed greps everything the run wrote for the secret.
    variables = {"PLACSP_DAILY_DEADLINE_MINUTES": DEADLINE_MINUTES, "PLACSP_S3_SECRET_KEY": secrets.token_hex(16)}
    with Stack(out, variables=variables) as running:
        timings["stack up"] = time.monotonic() - start
        timings.update({f"  {k}": v for k, v in running.timings.items()})
        yield running
        stop = time.monotonic()
    timings["stack down"] = time.monotonic() - stop


@pytest.fixture(scope="package")
def api(stack):
    from tests.system.api import AirflowApi
    from tests.system.deployment import COMPOSE_VARIABLES

    return AirflowApi(stack.api, COMPOSE_VARIABLES["AIRFLOW_ADMIN_USER"], COMPOSE_VARIABLES["AIRFLOW_ADMIN_PASSWORD"])
