"""The provider metadata Airflow reads: valid against Airflow's own schema, and complete."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
from importlib.metadata import entry_points, metadata
from pathlib import Path

import jsonschema
import pytest

import airflow
import placsp_provider

pytestmark = pytest.mark.unit

SCHEMA = Path(airflow.__file__).parent / "provider_info.schema.json"


def _provider_info() -> dict:
    (entry,) = [e for e in entry_points(group="apache_airflow_provider") if e.value.startswith("placsp_provider")]
    return entry.load()()


def test_the_provider_info_is_valid_against_airflows_schema() -> None:
    jsonschema.validate(_provider_info(), json.loads(SCHEMA.read_text()))


def _modules(info: dict, kind: str) -> set[str]:
    return {m for group in info.get(kind, []) for m in group["python-modules"]}


def _defined_in(package: str, base: type) -> set[str]:
    """Modules of `placsp_provider.<package>` that define a subclass of `base` (not merely import one)."""
    found = set()
    for module_info in pkgutil.iter_modules([str(Path(placsp_provider.__file__).parent / package)]):
        module = importlib.import_module(f"placsp_provider.{package}.{module_info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, base) and cls.__module__ == module.__name__:
                found.add(module.__name__)
    return found


def test_every_operator_sensor_trigger_hook_and_notifier_is_listed() -> None:
    from airflow.sdk import BaseHook, BaseNotifier, BaseOperator, BaseOperatorLink
    from airflow.sdk.bases.sensor import BaseSensorOperator
    from airflow.triggers.base import BaseTrigger

    info = _provider_info()
    assert _modules(info, "operators") == _defined_in("operators", BaseOperator)
    assert _modules(info, "sensors") == _defined_in("sensors", BaseSensorOperator)
    assert _modules(info, "triggers") == _defined_in("triggers", BaseTrigger)
    assert _modules(info, "hooks") == _defined_in("hooks", BaseHook)
    notifiers = {
        f"placsp_provider.notifications.{name}"
        for name, cls in inspect.getmembers(importlib.import_module("placsp_provider.notifications"), inspect.isclass)
        if issubclass(cls, BaseNotifier) and cls.__module__ == "placsp_provider.notifications"
    }
    assert set(info["notifications"]) == notifiers != set()
    links = {
        f"{module}.{name}"
        for module in _defined_in("operators", BaseOperatorLink)
        for name, cls in inspect.getmembers(importlib.import_module(module), inspect.isclass)
        if issubclass(cls, BaseOperatorLink) and cls.__module__ == module
    }
    # Airflow 3 only shows an operator's extra link when the provider info registers it.
    assert set(info["extra-links"]) == links != set()
    (conn,) = info["connection-types"]
    hook_module, hook_class = conn["hook-class-name"].rsplit(".", 1)
    assert hasattr(importlib.import_module(hook_module), hook_class)


def test_the_package_metadata_says_where_the_documentation_is() -> None:
    urls = dict(u.split(", ", 1) for u in metadata("airflow-provider-placsp").get_all("Project-URL") or [])
    assert urls["Documentation"].startswith("https://")
