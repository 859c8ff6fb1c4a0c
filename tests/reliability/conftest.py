"""The clean runs every crash is compared with, made once per session by real `placsp ingest` processes.

`reference.day1`: a fresh lake after the day-1 ingest; `reference.day2`: the same lake after the
day-2 ingest (a daily run into an existing lake), with the commits that run made, in order. Tests
copy them; nobody writes to them.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conservation import assert_conserved_with_delta_rs
from tests.reliability import corpus, harness

DAY1_RUN, DAY2_RUN = "day-1", "day-2"


@dataclass(frozen=True)
class Reference:
    day1: Path
    day2: Path
    day2_changes: tuple[harness.Commit, ...]  # the commits of the clean daily run that changed rows, in order
    seconds: dict[str, float]


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    root = tmp_path_factory.mktemp("clean")
    lake = root / "lake"
    corpus.land_day1(lake)
    first = harness.run(harness.ingest_args(lake, corpus.DATASET, DAY1_RUN), workdir=root, name="day1").ok()
    assert_conserved_with_delta_rs(lake, corpus.DATASET, DAY1_RUN, corpus.records(corpus.day1_pages()))
    day1 = root / "day1"
    shutil.copytree(lake, day1)

    corpus.land_day2(lake)
    recorder = harness.Recorder(lake)
    second = harness.run(
        harness.ingest_args(lake, corpus.DATASET, DAY2_RUN), trigger=recorder, workdir=root, name="day2"
    ).ok()
    assert_conserved_with_delta_rs(lake, corpus.DATASET, DAY2_RUN, corpus.records(corpus.day2_pages()))
    harness.assert_nothing_twice(lake)
    changes = tuple(c for c in recorder.order if harness.changes_rows(lake, c))
    return Reference(day1, lake, changes, {"day1": first.seconds, "day2": second.seconds})


def copy_lake(source: Path, to: Path) -> Path:
    shutil.copytree(source, to)
    return to
