"""Offline validation of OpenLineage events against the JSON Schemas copied into `schemas/openlineage`.

`validate_event(event)` checks a run event (a dict, as read from a file transport) twice over:

1. against the core spec (`spec/OpenLineage.json`, 2-0-2), whose refs are internal; there a facet
   is only checked for `_producer` and `_schemaURL`;
2. every facet (run, job, dataset, input and output facets) against the schema its own `_schemaURL`
   names. Facet schemas refer back to the core by full URL, so a `referencing.Registry` maps
   `https://openlineage.io/spec/<rest>` to `schemas/openlineage/website/static/spec/<rest>`; an URL
   that is not in the copy fails (nothing is fetched from the network).

Formats (`date-time`, `uri`, `uuid`) are checked (`jsonschema[format-nongpl]`).

Two schemas are supplied by hand:
- `placsp_deadLetters`, this project's custom facet: `placsp_provider.lineage.facets.DEAD_LETTERS_FACET_SCHEMA`;
- `facets/1-0-1/DataQualityMetricsDatasetFacet.json`: openlineage-python 1.54 stamps that version,
  which the copy lacks (it has 1-0-0). 1-0-1 only adds the optional `captureDate` (an ISO-8601
  date-time, per the 1.54 client's own generated class); that one schema is built from 1-0-0 plus
  `captureDate` as a `date-time` string, rather than skipping the facet.

Reusable: `validate_event`, `validate_facet`, `facets_of(event)`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource
from referencing.exceptions import NoSuchResource

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "schemas" / "openlineage"
PUBLISHED = SCHEMAS / "website" / "static" / "spec"
CORE = SCHEMAS / "spec" / "OpenLineage.json"
SPEC_URL = "https://openlineage.io/spec/"
DQ_METRICS_1_0_1 = f"{SPEC_URL}facets/1-0-1/DataQualityMetricsDatasetFacet.json"
DQ_METRICS_1_0_0 = f"{SPEC_URL}facets/1-0-0/DataQualityMetricsDatasetFacet.json"


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _published(uri: str) -> dict[str, Any]:
    path = PUBLISHED / uri.removeprefix(SPEC_URL)
    if not uri.startswith(SPEC_URL) or not path.is_file():
        raise NoSuchResource(uri)  # the registry reports it as unretrievable
    return _load(path)


def _dq_metrics_1_0_1() -> dict[str, Any]:
    schema = copy.deepcopy(_published(DQ_METRICS_1_0_0))
    schema["$id"] = DQ_METRICS_1_0_1
    body = schema["$defs"]["DataQualityMetricsDatasetFacet"]["allOf"][1]
    body["properties"]["captureDate"] = {"type": "string", "format": "date-time"}
    return schema


def _retrieve(uri: str) -> Resource:
    from placsp_provider.lineage import facets

    if uri == facets.SCHEMA_ID:
        return Resource.from_contents(facets.DEAD_LETTERS_FACET_SCHEMA)
    if uri == DQ_METRICS_1_0_1:
        return Resource.from_contents(_dq_metrics_1_0_1())
    return Resource.from_contents(_published(uri))


@cache
def registry() -> Registry:
    core = _load(CORE)
    return Registry(retrieve=_retrieve).with_resource(core["$id"], Resource.from_contents(core))  # type: ignore[call-arg]


@cache
def _validator(schema_url: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": schema_url}, registry=registry(), format_checker=FormatChecker())


def validate_facet(facet: dict[str, Any]) -> None:
    """Validate one facet against the schema at its `_schemaURL` (raises `jsonschema.ValidationError`)."""
    url = facet.get("_schemaURL")
    if not url:
        raise AssertionError(f"facet without _schemaURL: {facet}")
    _validator(url).validate(facet)


def facets_of(event: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, facet) for every facet of a run event, e.g. ('outputs[0].outputFacets.outputStatistics', {...})."""
    for key, facet in (event.get("run", {}).get("facets") or {}).items():
        yield f"run.facets.{key}", facet
    for key, facet in (event.get("job", {}).get("facets") or {}).items():
        yield f"job.facets.{key}", facet
    for side, extra in (("inputs", "inputFacets"), ("outputs", "outputFacets")):
        for i, dataset in enumerate(event.get(side) or []):
            for group in ("facets", extra):
                for key, facet in (dataset.get(group) or {}).items():
                    yield f"{side}[{i}].{group}.{key}", facet


def validate_event(event: dict[str, Any]) -> None:
    """The core schema, then every facet against its own schema; the error names the facet."""
    Draft202012Validator(_load_core(), registry=registry(), format_checker=FormatChecker()).validate(event)
    for where, facet in facets_of(event):
        try:
            validate_facet(facet)
        except Exception as err:
            job = event.get("job", {}).get("name")
            raise AssertionError(f"{event.get('eventType')} {job}: {where} is invalid: {err}") from err


@cache
def _load_core() -> dict[str, Any]:
    return _load(CORE)
