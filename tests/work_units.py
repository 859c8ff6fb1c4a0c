"""How `make test` shares the suite between two pytest-xdist workers (decision 0056).

A unit of work goes whole to one worker: a module, so its module-scoped fixtures are made once; or
every module whose tests share a costly session fixture, so that fixture is made once in the run (a
second copy would cost its minute again, on a machine whose two cores the workers already share).
The long units are handed out first, so none starts last and runs alone at the end.

The units are named here by module because the controller that hands them out never collects: it
sees node ids only (pytest-xdist's own `xdist_group` marks no longer reach it on pytest 9.2:
pytest-dev/pytest-xdist#1386). `check` keeps this table true: a test that uses a shared fixture from
a module not listed under it stops the collection, in every run, with or without workers.
"""

from __future__ import annotations

import pytest
from xdist.scheduler import LoadScopeScheduling

# unit -> (the session fixture its tests share, the modules holding them)
SHARED: dict[str, tuple[str, tuple[str, ...]]] = {
    # A JVM (10-30 s) and the quality tests' real lake (two Spark ingests, ~30 s): tests/spark/conftest.py.
    "spark-session": (
        "spark",
        (
            "tests/quality/test_checks.py",
            "tests/quality/test_dag_quality.py",
            "tests/spark/test_commit_retry.py",
            "tests/spark/test_completeness_ingest.py",
            "tests/spark/test_delta_rs_ingest.py",
            "tests/spark/test_ingest_ties.py",
            "tests/spark/test_maintenance.py",
            "tests/spark/test_page_tasks.py",
            "tests/spark/test_replay.py",
            "tests/spark/test_replay_exact_bytes.py",
            "tests/spark/test_silver_ingest.py",
        ),
    ),
    # The clean runs every crash is compared with: two `placsp ingest` processes (~40 s).
    "reliability-reference": (
        "reference",
        (
            "tests/reliability/test_concurrent_ingests.py",
            "tests/reliability/test_delta_rs_ingest_killed.py",
            "tests/reliability/test_ingest_killed.py",
            "tests/reliability/test_replay_killed.py",
        ),
    ),
}
# The longest units (minutes each in a serial run), longest first; every other unit takes under one.
LONG_UNITS = ("spark-session", "tests/system/test_deployed.py", "reliability-reference")

_UNIT_OF_MODULE = {module: unit for unit, (_, modules) in SHARED.items() for module in modules}


def unit_of(nodeid: str) -> str:
    module = nodeid.split("::", 1)[0]
    return _UNIT_OF_MODULE.get(module, module)


def check(items: list[pytest.Item]) -> None:
    """Every test that uses a shared session fixture is in that fixture's unit."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        for unit, (fixture, _) in SHARED.items():
            if fixture in fixtures and unit_of(item.nodeid) != unit:
                module = item.nodeid.split("::", 1)[0]
                raise pytest.UsageError(
                    f"{item.nodeid} uses the session fixture `{fixture}`: add {module} to the unit "
                    f"{unit!r} in tests/work_units.py, so two workers do not each make it"
                )


def long_units_first(items: list[pytest.Item]) -> None:
    """The order the controller hands units out in (`--no-loadscope-reorder`); a unit's own tests
    keep the collection's order."""
    rank = {unit: i for i, unit in enumerate(LONG_UNITS)}
    items.sort(key=lambda item: rank.get(unit_of(item.nodeid), len(rank)))


class UnitScheduling(LoadScopeScheduling):
    """pytest-xdist's `loadscope` scheduling, with `unit_of` as the scope."""

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)
