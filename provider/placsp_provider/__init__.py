"""Airflow provider for Spain's public procurement feeds (PLACSP): Bronze, Silver, dead letters.

Importing this package is cheap and never imports Airflow or Spark: the Spark job ships it to
executors, and Airflow reads `get_provider_info` through the `apache_airflow_provider` entry point.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def _field(label: str, kind: str, description: str, default: Any = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": [kind, "null"]}
    if default is not None:
        schema["default"] = default
    return {"label": label, "schema": schema, "description": description}


_CONN_FIELDS = {
    "ca_bundle": _field("CA bundle path", "string", "PEM file that includes the FNMT root CA the site chains to"),
    "verify": _field("Verify TLS", "boolean", "Leave on; turn off only to diagnose", True),
    "connect_timeout": _field("Connect timeout (s)", "number", "", 10),
    "read_timeout": _field("Read timeout (s)", "number", "", 60),
    "max_retries": _field("Retries per request", "integer", "On connection errors, 5xx and 429", 4),
    "backoff_base": _field("Backoff base (s)", "number", "Doubles per retry; Retry-After wins", 2),
    "max_consecutive_failures": _field("Max consecutive failures", "integer", "Per run, then stop", 8),
    "max_page_bytes": _field("Max page size (bytes)", "integer", "Larger pages are refused", 268435456),
    "max_archive_bytes": _field("Max archive size (bytes)", "integer", "As downloaded", 8589934592),
    "max_archive_inflated_bytes": _field(
        "Max archive inflated size (bytes)", "integer", "All members together, decompressed", 68719476736
    ),
    "max_compression_ratio": _field("Max compression ratio", "integer", "Per archive member (zip bombs)", 200),
    "page_deadline": _field("Page download deadline (s)", "number", "Total, whatever the server's pace", 600),
    "archive_deadline": _field("Archive download deadline (s)", "number", "Total, whatever the server's pace", 14400),
    "max_truncated_retries": _field("Re-downloads of a cut page", "integer", "Before landing it for quarantine", 2),
    "allowed_hosts": _field(
        "Extra trusted hosts",
        "string",
        "Comma-separated host or host:port; links and redirects elsewhere are refused; credentials stay on the site",
    ),
}


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-provider-placsp",
        "name": "PLACSP (Spanish public procurement)",
        "description": "Extracts PLACSP CODICE Atom feeds into a Delta Lake with dead-letter routing.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "PLACSP",
                "external-doc-url": "https://contrataciondelsectorpublico.gob.es/wps/portal/DatosAbiertos",
                "tags": ["software"],
            }
        ],
        "hooks": [
            {
                "integration-name": "PLACSP",
                "python-modules": ["placsp_provider.hooks.placsp", "placsp_provider.hooks.lake"],
            }
        ],
        "operators": [
            {
                "integration-name": "PLACSP",
                "python-modules": [
                    "placsp_provider.operators.extract",
                    "placsp_provider.operators.silver",
                    "placsp_provider.operators.completeness",
                    "placsp_provider.operators.quality",
                    "placsp_provider.operators.replay",
                    "placsp_provider.operators.approval",
                    "placsp_provider.operators.maintenance",
                ],
            }
        ],
        "extra-links": [
            "placsp_provider.operators.links.SparkUILink",
            "placsp_provider.operators.links.LineageJobLink",
            "placsp_provider.operators.links.RunbookLink",
        ],
        "sensors": [{"integration-name": "PLACSP", "python-modules": ["placsp_provider.sensors.dead_letters"]}],
        "notifications": ["placsp_provider.notifications.LogNotifier"],
        "triggers": [{"integration-name": "PLACSP", "python-modules": ["placsp_provider.triggers.dead_letters"]}],
        "connection-types": [
            {
                "connection-type": "placsp",
                "hook-name": "PLACSP feeds",
                "hook-class-name": "placsp_provider.hooks.placsp.PlacspHook",
                "conn-fields": _CONN_FIELDS,
                "ui-field-behaviour": {
                    "hidden-fields": ["schema", "port", "extra"],
                    "relabeling": {"host": "Base URL (…/sindicacion)"},
                    "placeholders": {"host": "https://contrataciondelsectorpublico.gob.es/sindicacion"},
                },
            }
        ],
    }
