"""The lake as the PLACSP view reads it, and the states it cannot show numbers for.

Every page reads the lake the tasks write (`LakeHook`: an S3 lake's credentials through its
connection), fresh on every request (nothing cached outside the lake). A state with no numbers to
show raises `ViewStateError`, whose sentence is the page: no lake, no table, a lake that cannot be
reached (503), a table another run is committing to (read once more, then said).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from placsp_provider.lake_storage import LakePath, is_local

log = logging.getLogger(__name__)
T = TypeVar("T")


class ViewStateError(Exception):
    """The lake cannot give the numbers asked for; `message` says why, as one sentence for a person."""

    def __init__(self, message: str, status_code: int = 200) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code


def lake_root() -> LakePath:
    from placsp_provider.hooks.lake import LakeHook

    return LakeHook().lake(None)


def require_lake(lake: LakePath) -> None:
    exists = read_once(lambda: lake.is_dir(), what=f"the lake {lake}") if is_local(lake) else True
    if not exists:
        raise ViewStateError(
            f"There is no lake at {lake}: no PLACSP run has written to it yet, or PLACSP_LAKE (or the lake "
            "connection) of the API server names another place than the tasks write."
        )


def require_table(lake: LakePath, path: LakePath, name: str, why: str) -> None:
    """`why`: what creates the table, said when it does not exist yet."""
    require_lake(lake)
    if not read_once(lambda: (path / "_delta_log").is_dir(), what=name):
        raise ViewStateError(f"The lake {lake} has no {name} table yet: {why}")


def read_once(read: Callable[[], T], *, what: str) -> T:
    """`read()`; a failure of the lake's object store is the 503 sentence (never a trace)."""
    from placsp_provider.lake_storage import storage_problem

    try:
        return read()
    except Exception as err:
        problem = storage_problem(err)
        if problem is None:
            raise
        raise ViewStateError(f"The lake cannot be reached while reading {what}: {problem}.", 503) from err


def read_twice(read: Callable[[], T], *, what: str) -> T:
    """`read()`, once more if it fails: a run committing to the table (or a VACUUM after it) can
    remove a file between the log's listing and the read. Failing again, the page says so."""
    import duckdb
    import pyarrow as pa
    from deltalake.exceptions import DeltaError

    failure: Exception | None = None
    for attempt in (1, 2):
        try:
            return read_once(read, what=what)
        except (DeltaError, pa.ArrowException, duckdb.Error, FileNotFoundError) as err:
            log.warning("reading %s failed (attempt %d): %s", what, attempt, err)
            failure = err
    raise ViewStateError(
        f"{what} could not be read twice in a row ({type(failure).__name__}); another run may be writing "
        "to it right now. Reload the page in a moment."
    ) from failure
