"""`placsp_completeness` through a real `dag.test()` (child process, OpenLineage file transport) on a
loopback site whose daily chain hid a page: the check recovers it, Silver ingests the recovery manifest,
Silver ingests exactly the recovered records (counted from the Delta tables against the archive,
read by plain lxml), and every event validates against the OpenLineage spec, the completeness
assertion on the feed saying expected = published, actual = landed before.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from placsp_provider.demo.loopback_site import LoopbackSite
from placsp_provider.feed.timestamps import isoformat, parse_rfc3339
from tests.airflow.conftest import set_connection
from tests.hidden_page_site import HIDDEN_DAY, archive_records, daily_runs, empty_archives, serve_hidden_page_site
from tests.lineage.capture import LineageFiles, run_dag_test
from tests.lineage.ol_schema import validate_event

pytestmark = pytest.mark.airflow


def test_the_completeness_dag_recovers_a_hidden_page_into_silver(airflow_db: None, tmp_path: Path) -> None:
    from deltalake import DeltaTable

    lake = (tmp_path / "lake").resolve()
    files = LineageFiles.in_folder(tmp_path / "openlineage")
    with pytest.MonkeyPatch.context() as mp, LoopbackSite() as site:
        members = serve_hidden_page_site(site)
        empty_archives(site)
        daily_runs(site, lake)
        mp.setenv("PLACSP_LAKE", str(lake))
        set_connection(mp, site.base_url, max_retries=0)
        run = run_dag_test(
            "placsp_completeness",
            datetime(2022, 2, 5, 6, tzinfo=UTC),
            files,
            tasks=("silver_agregadas",),
            conf={"month": "2022-01"},
        )
    assert run.succeeded, run.output[-3000:]
    assert run.task_states == {"completeness_agregadas": "success", "silver_agregadas": "success"}

    # Silver holds exactly the records of the hidden page: the daily runs' pages were never ingested here.
    expected = archive_records(members)
    hidden = {
        kind: {(i, isoformat(parse_rfc3339(t))) for i, t in rs if t.startswith(f"2022-01-{HIDDEN_DAY:02d}")}
        for kind, rs in expected.items()
    }
    entries = DeltaTable(str(lake / "silver" / "entries")).to_pyarrow_table(columns=["entry_id", "updated"])
    tombstones = DeltaTable(str(lake / "silver" / "tombstones")).to_pyarrow_table(columns=["entry_id", "deleted_at"])
    assert {(r["entry_id"], isoformat(r["updated"])) for r in entries.to_pylist()} == hidden["entry"]
    assert {(r["entry_id"], isoformat(r["deleted_at"])) for r in tombstones.to_pylist()} == hidden["tombstone"]

    for event in run.files.airflow_events() + run.files.spark_events():
        validate_event(event)
    complete = run.events_of("completeness_agregadas")[-1]
    assert complete["eventType"] == "COMPLETE"
    feed, archive = complete["inputs"]
    assert feed["name"] == "/sindicacion/sindicacion_1044"
    assert archive["name"] == "/sindicacion/sindicacion_1044/PlataformasAgregadasSinMenores_2022.zip"
    (assertion,) = feed["inputFacets"]["dataQualityAssertions"]["assertions"]
    published = len(expected["entry"]) + len(expected["tombstone"])
    assert (assertion["assertion"], assertion["success"]) == ("completeness", False)
    assert (assertion["expected"], assertion["actual"]) == (str(published), str(published - 3))
    recovered_page = next(o for o in complete["outputs"] if o["name"].endswith(".atom"))
    assert recovered_page["outputFacets"]["outputStatistics"]["rowCount"] == 3
    # (An empty archive against an empty Bronze is no confirmation: tests/bronze/test_completeness_archive.py.)
