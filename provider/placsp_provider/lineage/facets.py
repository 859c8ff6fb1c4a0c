"""`placsp_deadLetters`: the custom run facet with the dead letters of a run, by stage and error type.

Its fields and why `_schemaURL` is a URN: docs/lineage.md ("Facet reference"). Its JSON Schema is
`DEAD_LETTERS_FACET_SCHEMA` below (a copy is `schemas/openlineage/placsp/PlacspDeadLettersRunFacet.json`,
kept equal by a test).

This module imports OpenLineage at module level on purpose (the facet must be a real attrs class): it
is only ever imported from inside the operators' `get_openlineage_facets_*` methods, never by a DAG
file or the Spark job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attr
from openlineage.client.facet_v2 import RunFacet  # noqa: TID253 - see the module docstring

FACET_KEY = "placsp_deadLetters"
SCHEMA_ID = "urn:placsp:openlineage:facets:1-0-0:PlacspDeadLettersRunFacet.json"
SCHEMA_URL = f"{SCHEMA_ID}#/$defs/PlacspDeadLettersRunFacet"
SCOPES = ("run", "backlog", "replay")

_COUNTS = {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}}
_OPTIONAL_COUNT = {"type": ["integer", "null"], "minimum": 0}

DEAD_LETTERS_FACET_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": SCHEMA_ID,
    "$defs": {
        "PlacspDeadLettersRunFacet": {
            "description": "Dead letters of one PLACSP dataset seen by this run, by stage and by error type "
            "(docs/dead-letters.md).",
            "allOf": [
                {"$ref": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunFacet"},
                {
                    "type": "object",
                    "required": ["dataset", "scope", "total", "byStage", "byErrorType"],
                    "properties": {
                        "dataset": {"type": "string", "description": "Dataset key, e.g. licitaciones."},
                        "scope": {
                            "type": "string",
                            "enum": list(SCOPES),
                            "description": "run: the dead letters this run produced or inserted; backlog: every "
                            "row still quarantined; replay: the dead letters this run replayed.",
                        },
                        "total": {"type": "integer", "minimum": 0, "description": "Dead letters counted."},
                        "byStage": {**_COUNTS, "description": "Counts by stage: parse, validation, reconciliation."},
                        "byErrorType": {**_COUNTS, "description": "Counts by error type, e.g. unbound_prefix."},
                        "inserted": {
                            **_OPTIONAL_COUNT,
                            "description": "New rows inserted into the dead-letter table (a rerun inserts none).",
                        },
                        "quarantinedFiles": {
                            **_OPTIONAL_COUNT,
                            "description": "Bronze files quarantined whole by this run.",
                        },
                    },
                },
            ],
            "type": "object",
        }
    },
    "type": "object",
    "properties": {FACET_KEY: {"$ref": "#/$defs/PlacspDeadLettersRunFacet"}},
}


@attr.define
class PlacspDeadLettersRunFacet(RunFacet):
    """Dead letters of one dataset seen by a run: total, by stage and by error type."""

    dataset: str
    scope: str
    total: int
    byStage: dict[str, int] = attr.field(factory=dict)  # noqa: N815 - OpenLineage fields are camelCase
    byErrorType: dict[str, int] = attr.field(factory=dict)  # noqa: N815
    inserted: int | None = attr.field(default=None)
    quarantinedFiles: int | None = attr.field(default=None)  # noqa: N815

    @staticmethod
    def _get_schema() -> str:
        return SCHEMA_URL


def dead_letters_facet(
    *,
    dataset: str,
    scope: str,
    by_stage: Mapping[str, int],
    by_error_type: Mapping[str, int],
    total: int | None = None,
    inserted: int | None = None,
    quarantined_files: int | None = None,
) -> PlacspDeadLettersRunFacet:
    """The facet from counts as the run summary and `DeadLetterCounts` hold them; `total` defaults to
    the sum by stage (by error type when no stage is given)."""
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}; got {scope!r}")
    stages = {str(k): int(v) for k, v in by_stage.items()}
    types = {str(k): int(v) for k, v in by_error_type.items()}
    if total is None:
        total = sum(stages.values()) if stages else sum(types.values())
    return PlacspDeadLettersRunFacet(
        dataset=dataset,
        scope=scope,
        total=int(total),
        byStage=stages,
        byErrorType=types,
        inserted=None if inserted is None else int(inserted),
        quarantinedFiles=None if quarantined_files is None else int(quarantined_files),
    )
