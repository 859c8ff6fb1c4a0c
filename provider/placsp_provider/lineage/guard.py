"""Lineage never fails a task: a builder that raises logs one warning and gives empty lineage."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

log = logging.getLogger("placsp_provider.lineage")


def never_fails(what: str, build: Callable[[], OperatorLineage]) -> OperatorLineage:
    """`build()`, or an empty `OperatorLineage` (and a warning naming `what`) if it raises.

    The OpenLineage provider also catches exceptions from `get_openlineage_facets_*`, but it then
    drops the whole event's task metadata; here the event still goes out, with the run facets the
    listener adds (parent, error message), and the reason is logged where the task's log shows it.
    """
    try:
        return build()
    except Exception as err:  # any lineage problem: report it, never raise into the task
        log.warning("OpenLineage: no %s lineage for this event (%s: %s)", what, type(err).__name__, err)
        log.debug("OpenLineage: %s lineage failure", what, exc_info=True)
        from airflow.providers.openlineage.extractors import OperatorLineage

        return OperatorLineage()
