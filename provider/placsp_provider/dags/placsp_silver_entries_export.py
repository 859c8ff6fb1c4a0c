"""placsp_silver_entries_export: an example of a DAG downstream of the lake, run on each Silver update.

Scheduled on the Silver `entries` Asset (`file://<lake>/silver/entries`, or `s3://...` on S3: the name OpenLineage
gives the table): every successful Silver ingest or replay that writes the table emits an Asset
event, and this DAG runs once after it. It writes a small export a dashboard or another team can
poll without Spark: `<lake>/exports/silver_entries.json`, the table's Delta version and its entries
per dataset (read with delta-rs, two columns), at the version the triggering event announced (its
`extra["delta_version"]`, with `rows`: every outlet event of the provider carries them). Replace the
task with your own refresh (a BI extract, a cache warm-up, a notification) and keep the schedule.
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import DAG, task

from placsp_provider import run_policy
from placsp_provider.assets import silver_asset

with DAG(
    dag_id="placsp_silver_entries_export",
    description="Example consumer: export Silver entry counts after each update of the entries table",
    schedule=[silver_asset("entries")],
    start_date=datetime(2025, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    default_args=run_policy.default_args(retries=1),
    tags=["placsp", "example"],
    doc_md=__doc__,
) as dag:

    @task
    def export_entry_counts(triggering_asset_events: dict | None = None) -> dict:
        """Write `<lake>/exports/silver_entries.json`: Delta version and entries per dataset."""
        import json
        from collections import Counter

        from placsp_provider.bronze.landing import write_text_atomically
        from placsp_provider.hooks.lake import LakeHook
        from placsp_provider.lake import table_path
        from placsp_provider.lake_storage import open_table, uri
        from placsp_provider.table_files import table_files

        lake = LakeHook().lake()  # an S3 lake's credentials from its connection, as every operator's
        path = uri(table_path(lake, "entries"))
        triggers = [e for events in (triggering_asset_events or {}).values() for e in events]
        # The version the newest event announced (assets.record_versions), not whatever is latest now:
        # a Silver run that commits while this task runs does not change what it exports. Triggered
        # by hand (no event): the latest version.
        announced = [(e.extra or {}).get("delta_version") for e in triggers]
        version = max((v for v in announced if isinstance(v, int)), default=None)
        if triggers and version is None and all("delta_version" in (e.extra or {}) for e in triggers):
            # Every event says the table did not exist yet (a Silver task with nothing to write on a
            # fresh lake): nothing to export.
            return {"table": path, "version": None, "entries_by_dataset": {}, "triggered_by": []}
        table = open_table(table_path(lake, "entries"), version)
        datasets = table_files(table).to_table(columns=["dataset"]).column("dataset").to_pylist()
        events = [
            {
                "source_run_id": getattr(e, "source_run_id", None),
                "timestamp": str(getattr(e, "timestamp", "")),
                "delta_version": (e.extra or {}).get("delta_version"),
            }
            for e in triggers
        ]
        export = {
            "table": path,
            "version": table.version(),
            "entries_by_dataset": dict(sorted(Counter(datasets).items())),
            "triggered_by": events,
        }
        # Readers never see half a file (a rename on local disk; one PUT on S3).
        write_text_atomically(lake / "exports" / "silver_entries.json", json.dumps(export, indent=2, sort_keys=True))
        return export

    export_entry_counts()
