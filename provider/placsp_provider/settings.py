"""The provider's settings read from the environment (the lake root is `lake.resolve_lake`; the
Spark ones are read where Spark starts: `spark/session.py`, `spark/jars.py`).

Airflow users set these as environment variables (or in the DAG's `default_args`); the CLI takes
the same names as flags. Nothing here imports Airflow.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

from placsp_provider.errors import ConfigError

# Defaults, once: the operators, the CLI, the request objects and the DAG forms all take them from here.
DEFAULT_OVERLAP_HOURS = 6.0
DEFAULT_MAX_PAGES = 300
DEFAULT_STOP_AFTER_OLD_PAGES = 2
REPLAY_MAX_RECORDS = 10_000  # per replay run, by default
REPLAY_MAX_RECORDS_LIMIT = 100_000  # the form's maximum: outcomes are gathered on the Spark driver
REPLAY_MAX_ATTEMPTS = 3

CONN_ID_DEFAULT = "placsp_default"

N = TypeVar("N", int, float)


def _number(name: str, default: N, kind: Callable[[str], N]) -> N:
    """`$name` as a number, else `default`; a value that is no number is a ConfigError naming it."""
    value = os.environ.get(name)
    try:
        return default if value is None else kind(value)
    except ValueError:
        raise ConfigError(f"{name} must be a number, not {value!r}") from None


def overlap() -> timedelta:
    return timedelta(hours=_number("PLACSP_OVERLAP_HOURS", DEFAULT_OVERLAP_HOURS, float))


def max_pages() -> int:
    return _number("PLACSP_MAX_PAGES", DEFAULT_MAX_PAGES, int)


def completeness_schedule() -> str:
    """Cron of the monthly completeness check (UTC). Default: the 5th at 06:00, for the month before,
    a few days after it ended so the site has published its archive. Read when the DAG is parsed."""
    return os.environ.get("PLACSP_COMPLETENESS_SCHEDULE", "0 6 5 * *")


# Silver files after table maintenance (decision 0051): about a month of the busiest dataset's
# versions, so a daily MERGE rewrites a file or two of that size, and few files for a reader.
DEFAULT_MAINTENANCE_FILE_MB = 64.0


def maintenance_file_bytes() -> int:
    """The size table maintenance cuts Silver's files at (`PLACSP_MAINTENANCE_FILE_MB`, in MiB)."""
    mb = _number("PLACSP_MAINTENANCE_FILE_MB", DEFAULT_MAINTENANCE_FILE_MB, float)
    if not mb > 0:
        raise ConfigError(f"PLACSP_MAINTENANCE_FILE_MB must be more than 0, not {mb}")
    return max(1, int(mb * 1024 * 1024))


def dead_letter_max_ratio() -> float:
    """Dead letters / entries read above which the daily gate trips (default 5%)."""
    return _number("PLACSP_DEAD_LETTER_MAX_RATIO", 0.05, float)


def dead_letter_severity() -> str:
    """`error` (the run turns red) or `warn` (a warning, the run goes on). Read when the DAG is parsed."""
    return os.environ.get("PLACSP_DEAD_LETTER_SEVERITY", "error")


def dead_letter_reprocess_schedule() -> str:
    """Cron (UTC) of `placsp_dead_letter_reprocess`, the scheduled replay of dead letters that need no
    person. Default: daily at 04:00, after placsp_daily's midnight run. Read when the DAG is parsed."""
    return os.environ.get("PLACSP_DEAD_LETTER_REPROCESS_SCHEDULE", "0 4 * * *")


def replay_approval_timeout() -> timedelta:
    """How long a replay's approval step waits for a person before it answers Reject (default 24
    hours; the form's default). Read when the DAG is parsed."""
    hours = _number("PLACSP_REPLAY_APPROVAL_TIMEOUT_HOURS", 24.0, float)
    if hours <= 0:
        raise ConfigError(f"PLACSP_REPLAY_APPROVAL_TIMEOUT_HOURS must be a positive number of hours, not {hours}")
    return timedelta(hours=hours)


def replay_approvers() -> list[str]:
    """Airflow user ids a replay's approval is assigned to by default (`PLACSP_REPLAY_APPROVERS`,
    comma-separated; empty: anyone who may act on the DAG). Read when the DAG is parsed."""
    return [u.strip() for u in os.environ.get("PLACSP_REPLAY_APPROVERS", "").split(",") if u.strip()]


def trigger_settle_seconds() -> float:
    """How long a dead-letter trigger waits before its first look (see DeadLetterThresholdSensor)."""
    return _number("PLACSP_TRIGGER_SETTLE_SECONDS", 10.0, float)


def daily_deadline() -> timedelta | None:
    """How long after it is queued a `placsp_daily` run may take before its Deadline Alert fires
    (default 6 hours; `0` turns the alert off). Read when the DAG file is parsed."""
    minutes = _number("PLACSP_DAILY_DEADLINE_MINUTES", 360.0, float)
    if minutes < 0:
        raise ConfigError(f"PLACSP_DAILY_DEADLINE_MINUTES must be 0 (off) or a number of minutes, not {minutes}")
    return timedelta(minutes=minutes) if minutes else None


def spark_pool() -> str | None:
    """The Airflow pool of the Spark tasks (e.g. `placsp_spark`), or None for the default pool.

    Opt-in on purpose: Airflow never schedules a task whose pool does not exist, so naming a pool
    by default would stall every deployment that has not created it (docs/runbook.md, Pools).
    """
    return os.environ.get("PLACSP_SPARK_POOL") or None


def lineage_ui_url() -> str | None:
    """Base URL of a Marquez web UI (e.g. `http://localhost:3000`): the Spark tasks link to their job there."""
    return os.environ.get("PLACSP_LINEAGE_UI_URL") or None


def spark_ui_url() -> str | None:
    """The Spark master's web UI (e.g. `http://localhost:8090`): the Spark tasks link to it."""
    return os.environ.get("PLACSP_SPARK_UI_URL") or None


def runbook_url() -> str | None:
    """Where docs/runbook.md is published (e.g. the repository's file on its forge): the gate links to
    its section for the failing error type. Unset: the link is not shown."""
    return os.environ.get("PLACSP_RUNBOOK_URL") or None


# Size limits of a page's XML tree (issue 31): what a hostile page may make the parsers build.
# Counted in nodes: elements, attributes and processing instructions (comments are never kept; text
# is bounded by them and by libxml2's 10 MB per text node). Measured on the real pages bundled in
# include/placsp_samples: at most 39,944 nodes in a page (3.3 MB, 500 records), 3,472 in one record,
# 389 namespace declarations in a page, depth 12, no PI. A page of real-shaped records at the
# 256 MiB page cap would hold about 3.2 million nodes. A node takes 100-350 bytes in libxml2.
# - A record (or any other child of the feed root, or the PIs before or after the root) holding more
#   nodes than this, or a stretch without `<` holding more `=` (a start tag with that many attributes:
#   libxml2 builds them all at once): the extraction's streaming scan stops building the tree and
#   counts the page by bytes ("not well-formed for this pipeline"); Silver dead-letters that record
#   (stage parse, `tree_too_large`) before building it. ~70x the largest real record; the scan finds
#   a growing record over it before it holds about twice it (~70 MB).
MAX_NODES_PER_RECORD = 250_000
# - The whole page: beyond it the streaming scan stops and counts the page by bytes. Memory does not
#   depend on it (every ended child of the root is freed); it bounds the work, ~250x a real page.
MAX_NODES_PER_PAGE = 10_000_000
# - Namespace declarations (`xmlns`, `xmlns:p`; lxml keeps each, and no XPath counts them): per page in
#   the streaming scan, per record (with the page root's, which wrap it) in Silver. ~130x the real
#   maximum; at the limit they take ~15 MB.
MAX_NAMESPACE_DECLARATIONS = 50_000
# - Nesting depth: libxml2's own limit without XML_PARSE_HUGE (`huge_tree=False`, feed/xml.py), in
#   every path; deeper is a syntax error ("Excessive depth in document: 256"). Not configurable here:
#   the constant documents it, and the tests check libxml2 still enforces it.
XML_MAX_DEPTH = 256
