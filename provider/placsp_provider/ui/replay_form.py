"""The "Replay these" form: the replay DAG's own params, prefilled from the view's filter.

Airflow 3.3's UI cannot open its trigger form prefilled from a URL (apache/airflow#54800), so the
view renders one field per param of `placsp_dead_letter_replay` (names, defaults and kinds read from
the DAG's `params`: a param added there appears here), and the page's script sends Airflow's own
`POST /api/v2/dags/<id>/dagRuns` (Airflow checks the user may trigger, and validates the conf
against the same params). `trigger_body` is the request as the page renders it; the script changes
only the conf's values the person edited, by the field kinds given here (`KIND_OF`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

REPLAY_DAG_ID = "placsp_dead_letter_replay"
NOTE = "from the PLACSP view"
# What separates the items of a list field, in the query and in the form (one per line): item
# values (error types, ids, user ids) hold none of these. The page's script splits the same way.
ITEM_SEPARATORS = r"[\s,]+"


@dataclass(frozen=True)
class Field:
    """One param of the replay DAG as a form field."""

    name: str
    kind: str  # choice | lines | date | integer | number | boolean | text
    value: Any  # as the conf holds it
    description: str
    choices: tuple[str, ...] = ()
    nullable: bool = False

    @property
    def text(self) -> str:
        """The value as the field shows it."""
        if self.value is None:
            return ""
        if self.kind == "lines":
            return "\n".join(str(v) for v in self.value)
        return str(self.value)


def replay_params() -> dict[str, Any]:
    """The replay DAG's params (name -> airflow.sdk Param), as its module defines them."""
    from placsp_provider.dags.placsp_dead_letter_replay import dag

    return {name: dag.params.get_param(name) for name in dag.params}


def kind_of(schema: Mapping[str, Any]) -> str:
    types = schema.get("type")
    names = set(types) if isinstance(types, list) else {types}
    if "enum" in schema and names <= {"string", "null"}:
        return "choice"
    if "array" in names:
        return "lines"
    if schema.get("format") == "date":
        return "date"
    for name in ("integer", "number", "boolean"):
        if name in names:
            return name
    return "text"


def form_fields(query: Mapping[str, Sequence[str]], params: Mapping[str, Any] | None = None) -> list[Field]:
    """One field per param: the query's value where it names the param, else the param's default."""
    params = replay_params() if params is None else params
    fields = []
    for name, param in params.items():
        schema = param.schema
        kind = kind_of(schema)
        types = schema.get("type")
        nullable = isinstance(types, list) and "null" in types
        value = param.value
        given = [v for v in query.get(name, ()) if v is not None]
        if given:
            value = from_text(kind, given)
        fields.append(
            Field(
                name=name,
                kind=kind,
                value=value,
                description=param.description or "",
                choices=tuple(schema.get("enum") or ()),
                nullable=nullable,
            )
        )
    return fields


def from_text(kind: str, texts: Sequence[str]) -> Any:
    """A query's values (repeated or comma-separated for a list) as the conf holds them. A value that
    does not convert is kept as text: Airflow's validation then names it when the form is sent."""
    if kind == "lines":
        return [item for text in texts for item in re.split(ITEM_SEPARATORS, text) if item]
    text = texts[-1].strip()
    if kind == "boolean":
        return text.lower() in ("1", "true", "yes", "on")
    if text == "":
        return None
    try:
        if kind == "integer":
            return int(text)
        if kind == "number":
            return float(text)
        if kind == "date":
            return date.fromisoformat(text).isoformat()
    except ValueError:
        return text
    return text


def trigger_body(fields: Sequence[Field]) -> dict[str, Any]:
    """The JSON the page's script POSTs to Airflow for these fields, unedited. `logical_date` is
    required and may be null: the run is a manual one, its time now."""
    return {"logical_date": None, "conf": {f.name: f.value for f in fields}, "note": NOTE}


def api_root(root_path: str, url_prefix: str) -> str:
    """The API server's root path as seen by a route of the view's app, mounted at `url_prefix`
    under any base path of the server (`request.scope["root_path"]`)."""
    return root_path.removesuffix(url_prefix).rstrip("/")


def trigger_url(root: str) -> str:
    return f"{root}/api/v2/dags/{REPLAY_DAG_ID}/dagRuns"
