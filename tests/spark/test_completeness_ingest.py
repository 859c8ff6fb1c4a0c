"""Completeness end to end on real Spark and Delta: daily walks that miss a page leave Silver short
of the month's archive; the completeness check recovers the page and the next ingest brings every
entry and tombstone of the archive to Silver; a second check and ingest change nothing.

Silver is counted from the Delta tables, against the archive counted by plain lxml in the test.
"""

from __future__ import annotations

from datetime import date

import pytest

from placsp_provider.bronze.completeness import CompletenessRequest, check_month
from placsp_provider.datasets import get_dataset
from placsp_provider.demo.loopback_site import LoopbackSite
from placsp_provider.feed.client import ClientConfig, FeedClient
from placsp_provider.feed.timestamps import isoformat, parse_rfc3339
from placsp_provider.ingest.request import IngestRequest
from placsp_provider.ingest.run import ingest as run_ingest
from placsp_provider.lake import table_path
from tests.hidden_page_site import AGR, archive_records, daily_runs, serve_hidden_page_site

pytestmark = [pytest.mark.spark, pytest.mark.http]


def _silver(spark, lake) -> dict[str, set[tuple[str, str]]]:
    """(id, time) of every row of entries and tombstones, and the dead-letter count."""
    entries = spark.read.format("delta").load(str(table_path(lake, "entries")))
    tombstones = spark.read.format("delta").load(str(table_path(lake, "tombstones")))
    return {
        "entry": {(r.entry_id, isoformat(r.updated)) for r in entries.select("entry_id", "updated").collect()},
        "tombstone": {
            (r.entry_id, isoformat(r.deleted_at)) for r in tombstones.select("entry_id", "deleted_at").collect()
        },
    }


def _normalised(records: dict[str, set[tuple[str, str]]]) -> dict[str, set[tuple[str, str]]]:
    return {kind: {(i, isoformat(parse_rfc3339(t))) for i, t in rs} for kind, rs in records.items()}


def _versions(spark, lake) -> dict[str, int]:
    from delta.tables import DeltaTable

    return {
        t: DeltaTable.forPath(spark, str(table_path(lake, t))).history(1).collect()[0].version
        for t in ("entries", "lots", "documents", "results", "tombstones", "dead_letters", "reconciliation")
    }


def test_completeness_makes_silver_whole(spark, lake) -> None:
    ds = get_dataset("agregadas")
    with LoopbackSite() as site:
        members = serve_hidden_page_site(site)
        expected = _normalised(archive_records(members))
        daily_runs(site, lake)
        run_ingest(IngestRequest(ds, lake, "daily"), "spark", spark=spark)
        before = _silver(spark, lake)
        assert before["entry"] < expected["entry"] and len(expected["entry"] - before["entry"]) == 2

        config = ClientConfig(base_url=site.base_url, backoff_base=0.0, max_retries=0)
        request = CompletenessRequest(AGR, date(2022, 1, 1), lake, "check-1", today=date(2026, 11, 29))
        with FeedClient(config, "agregadas") as client:
            report = check_month(client, request)
        assert report.recovered == 3
        run_ingest(IngestRequest(ds, lake, "after-check"), "spark", spark=spark)
        after = _silver(spark, lake)
        assert after == expected  # every entry and tombstone of the month, nothing more
        dead = spark.read.format("delta").load(str(table_path(lake, "dead_letters"))).count()
        assert dead == 0

        versions = _versions(spark, lake)
        second = CompletenessRequest(AGR, date(2022, 1, 1), lake, "check-2", today=date(2026, 11, 29))
        with FeedClient(config, "agregadas") as client:
            again = check_month(client, second)
        assert again.confirmed
        run_ingest(IngestRequest(ds, lake, "again"), "spark", spark=spark)
        assert _versions(spark, lake) == versions  # nothing left to ingest: no table changed
        assert _silver(spark, lake) == expected
