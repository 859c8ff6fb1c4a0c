"""Optional parts of the provider, installed as pip extras: what is missing, said the same way everywhere.

A plain `pip install airflow-provider-placsp` runs the daily DAG; the Prophet volume check needs the
`volume` extra and the quality report's chart the `report` extra. Without them those parts step
aside with this sentence (a skipped check, a report without its chart), never a failed task.
"""

from __future__ import annotations

import importlib

PACKAGE = "airflow-provider-placsp"


def missing(module: str, extra: str) -> str | None:
    """None when `module` imports; else why not and how to install it."""
    try:
        importlib.import_module(module)
    except ImportError:
        return f"{module} is not installed: pip install '{PACKAGE}[{extra}]'"
    return None
