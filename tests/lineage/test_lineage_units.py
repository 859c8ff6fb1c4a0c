"""The lineage package without a DAG run: names, the custom facet, the Spark conf, never failing a task."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.lineage.ol_schema import DQ_METRICS_1_0_1, validate_event, validate_facet

pytestmark = pytest.mark.unit


# -- names --------------------------------------------------------------------------------------
def test_lake_table_names_are_the_table_paths_the_spark_job_writes(tmp_path: Path) -> None:
    from placsp_provider import lake as layout
    from placsp_provider.lineage import naming

    assert (*layout.SILVER_TABLES, "dead_letters", "reconciliation") == layout.LAKE_TABLES
    for table in layout.LAKE_TABLES:
        name = naming.lake_table(tmp_path / "lake", table)
        assert (name.namespace, name.name) == ("file", str(layout.table_path((tmp_path / "lake").resolve(), table)))
    with pytest.raises(ValueError, match="unknown lake table"):
        naming.lake_table(tmp_path, "silver")


def test_local_names_resolve_symlinks_as_spark_sees_the_resolved_lake(tmp_path: Path) -> None:
    from placsp_provider.lineage.naming import bronze_file, storage_path

    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert storage_path(tmp_path / "link" / "x/").name == str((tmp_path / "real" / "x").resolve())
    assert bronze_file(tmp_path / "link", "bronze/a/pages/p.atom").name == str(
        tmp_path.resolve() / "real/bronze/a/pages/p.atom"
    )


def test_the_feed_is_named_by_host_and_folder_without_credentials_or_query() -> None:
    from placsp_provider.lineage.naming import placsp_feed

    name = placsp_feed("https://user:secret@contrataciondelsectorpublico.gob.es/sindicacion/?t=1", "sindicacion_643")
    assert (name.namespace, name.name) == (
        "https://contrataciondelsectorpublico.gob.es",
        "/sindicacion/sindicacion_643",
    )
    assert placsp_feed("http://127.0.0.1:8080/sindicacion", "x").namespace == "http://127.0.0.1:8080"
    with pytest.raises(ValueError, match="absolute"):
        placsp_feed("/sindicacion", "x")


# -- the custom facet ---------------------------------------------------------------------------
def test_the_published_facet_schema_is_the_one_in_the_code() -> None:
    from placsp_provider.lineage.facets import DEAD_LETTERS_FACET_SCHEMA

    published = REPO / "schemas" / "openlineage" / "placsp" / "PlacspDeadLettersRunFacet.json"
    assert json.loads(published.read_text()) == DEAD_LETTERS_FACET_SCHEMA


def test_the_dead_letters_facet_serialises_to_its_schema() -> None:
    from openlineage.client.serde import Serde

    from placsp_provider.lineage.facets import dead_letters_facet

    facet = dead_letters_facet(
        dataset="agregadas",
        scope="run",
        by_stage={"parse": 2, "reconciliation": 1},
        by_error_type={"xml_syntax": 2, "count_mismatch": 1},
        inserted=3,
    )
    data = json.loads(Serde.to_json(facet))
    validate_facet(data)
    assert data["total"] == 3 and "quarantinedFiles" not in data  # None is left out
    with pytest.raises(Exception, match="-1"):
        validate_facet({**data, "byStage": {"parse": -1}})
    with pytest.raises(ValueError, match="scope"):
        dead_letters_facet(dataset="x", scope="daily", by_stage={}, by_error_type={})


def test_the_validator_checks_formats_and_treats_dq_metrics_1_0_1_explicitly() -> None:
    facet = {
        "_producer": "https://example.org/p",
        "_schemaURL": f"{DQ_METRICS_1_0_1}#/$defs/DataQualityMetricsDatasetFacet",
        "rowCount": 3,
        "columnMetrics": {},
        "captureDate": "2025-08-19T00:00:00Z",
    }
    validate_facet(facet)
    with pytest.raises(Exception, match="date-time"):
        validate_facet({**facet, "captureDate": "yesterday"})
    # a schema outside the copy is never fetched: it fails
    with pytest.raises(Exception, match="Unresolvable"):
        validate_facet({**facet, "_schemaURL": "https://openlineage.io/spec/facets/9-9-9/X.json#/$defs/X"})
    event = {
        "eventType": "START",
        "eventTime": "not a time",
        "producer": "https://example.org/p",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": "0198bfa0-2400-743f-9119-a53189d3afd8"},
        "job": {"namespace": "n", "name": "j"},
    }
    with pytest.raises(Exception, match=r"date-time|not a time"):
        validate_event(event)


# -- never fail a task --------------------------------------------------------------------------
def test_a_lineage_problem_gives_empty_lineage_and_a_warning(tmp_path: Path) -> None:
    from placsp_provider.operators.silver import PlacspSilverOperator

    broken = tmp_path / "manifest.json"
    broken.write_text("{not json")
    op = PlacspSilverOperator(task_id="silver", dataset="licitaciones", lake=str(tmp_path), manifest=str(broken))
    with _warnings("placsp_provider.lineage") as records:
        lineage = op.get_openlineage_facets_on_start()
        on_complete = op.get_openlineage_facets_on_complete(None)
    assert (lineage.inputs, lineage.outputs, lineage.run_facets) == ([], [], {})
    assert on_complete.outputs == []
    assert [r.levelno for r in records] == [logging.WARNING, logging.WARNING]
    assert records[0].getMessage().startswith("OpenLineage: no Silver lineage for this event (JSONDecodeError")


@contextmanager
def _warnings(logger: str) -> Iterator[list[logging.LogRecord]]:
    """Records of one logger, caught on the logger itself (Airflow's logging setup may not propagate)."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(logging.WARNING)
    log = logging.getLogger(logger)
    log.addHandler(handler)
    try:
        yield records
    finally:
        log.removeHandler(handler)


def test_the_extract_operator_reports_the_feed_before_it_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from placsp_provider.operators.extract import PlacspExtractOperator

    monkeypatch.setenv("AIRFLOW_CONN_PLACSP_DEFAULT", json.dumps({"conn_type": "placsp", "host": "https://h.test/s"}))
    op = PlacspExtractOperator(task_id="extract", dataset="1044", lake=str(tmp_path))
    (feed,) = op.get_openlineage_facets_on_start().inputs
    assert (feed.namespace, feed.name) == ("https://h.test", "/s/sindicacion_1044")
    assert op.get_openlineage_facets_on_failure(None).outputs == []


# -- the Spark conf -----------------------------------------------------------------------------
def test_spark_events_go_to_a_file_of_their_own_next_to_airflows() -> None:
    from openlineage.client.transport.console import ConsoleConfig, ConsoleTransport
    from openlineage.client.transport.file import FileConfig, FileTransport

    from placsp_provider.lineage.spark import mirror_transport, spark_events_file

    assert spark_events_file("/x/events.jsonl") == "/x/events.spark.jsonl"
    assert spark_events_file("/x/events") == "/x/events.spark"
    file_transport = FileTransport(FileConfig(log_file_path="/x/ol.jsonl", append=True))
    assert mirror_transport(file_transport, {}) == {
        "spark.openlineage.transport.type": "file",
        "spark.openlineage.transport.location": "/x/ol.spark.jsonl",
    }
    assert mirror_transport(FileTransport(FileConfig(log_file_path="s3://b/ol.jsonl")), {}) is None
    assert mirror_transport(ConsoleTransport(ConsoleConfig()), {}) == {"spark.openlineage.transport.type": "console"}


def test_spark_conf_is_left_alone_when_openlineage_is_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    from placsp_provider.lineage.spark import with_spark_lineage

    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__DISABLED", "True")
    conf = {"spark.extraListeners": "com.example.Listener", "spark.sql.shuffle.partitions": "4"}
    assert with_spark_lineage(conf, {}) == conf  # no context needed: nothing is looked up


def test_http_transport_is_mirrored_by_the_providers_function_with_the_key_masked() -> None:
    # A fresh interpreter: the OpenLineage listener builds its client once per process.
    transport = {
        "type": "http",
        "url": "http://marquez.test:5000",
        "endpoint": "api/v1/lineage",
        "auth": {"type": "api_key", "apiKey": "s3cr3t-key"},
    }
    code = (
        "import json, logging\n"
        "from placsp_provider.lineage.spark import transport_conf\n"
        "conf = transport_conf({})\n"
        "from airflow.sdk.log import _secrets_masker\n"
        "print(json.dumps({'conf': conf, 'redacted': _secrets_masker().redact('key=s3cr3t-key')}))\n"
    )
    env = {"AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport), "AIRFLOW__OPENLINEAGE__DISABLED": "False"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(env), check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["conf"] == {
        "spark.openlineage.transport.type": "http",
        "spark.openlineage.transport.url": "http://marquez.test:5000",
        "spark.openlineage.transport.endpoint": "api/v1/lineage",
        "spark.openlineage.transport.timeoutInMillis": "5000",
        "spark.openlineage.transport.auth.type": "api_key",
        # bare: the listener adds `Bearer ` itself (the provider's value would give `Bearer Bearer ...`)
        "spark.openlineage.transport.auth.apiKey": "s3cr3t-key",
    }
    assert "s3cr3t-key" not in result["redacted"]


def _env(extra: dict[str, str]) -> dict[str, str]:
    import os

    return {**os.environ, **extra}


# -- replay (for the replay operator) -----------------------------------------------------------
def test_replay_lineage_reads_dead_letters_and_writes_silver_with_counts(tmp_path: Path) -> None:
    from placsp_provider.lineage.replay import replay_lineage

    lineage = replay_lineage(
        lake=tmp_path,
        dataset="agregadas",
        selected=4,
        rows_written={"entries": 2, "lots": 1},
        dead_letters_updated=4,
        by_error_type={"invalid_amount": 3, "count_mismatch": 1},
    )
    event = as_event(lineage)
    validate_event(event)
    (dead_letters,) = event["inputs"]
    assert dead_letters["name"] == str(tmp_path.resolve() / "dead_letters")
    assert dead_letters["inputFacets"]["inputStatistics"]["rowCount"] == 4
    rows = {Path(o["name"]).name: o["outputFacets"]["outputStatistics"]["rowCount"] for o in event["outputs"]}
    assert rows == {"entries": 2, "lots": 1, "dead_letters": 4}
    facet = event["run"]["facets"]["placsp_deadLetters"]
    assert (facet["scope"], facet["total"], facet["byStage"]) == ("replay", 4, {})
    with pytest.raises(ValueError, match="unknown tables"):
        replay_lineage(lake=tmp_path, dataset="agregadas", rows_written={"silver": 1})


def as_event(lineage: object) -> dict:
    """A COMPLETE run event around an `OperatorLineage`, as the listener would wrap it (for validation)."""
    from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
    from openlineage.client.serde import Serde
    from openlineage.client.uuid import generate_new_uuid

    event = RunEvent(
        eventType=RunState.COMPLETE,
        eventTime="2025-08-19T00:00:00+00:00",
        run=Run(runId=str(generate_new_uuid()), facets=lineage.run_facets),  # type: ignore[attr-defined]
        job=Job(namespace="placsp-test", name="placsp_dead_letter_replay.replay"),
        inputs=lineage.inputs,  # type: ignore[attr-defined]
        outputs=lineage.outputs,  # type: ignore[attr-defined]
        producer="https://github.com/apache/airflow/tree/providers-openlineage/2.20.3",
    )
    return json.loads(Serde.to_json(event))


# -- what the DAG test does not reach: a gate that passes, a dataset with nothing to ingest --------
def test_a_passing_gate_reports_its_assertion_and_metrics(tmp_path: Path) -> None:
    from placsp_provider.dead_letters.stats import DeadLetterCounts, evaluate, scope_query
    from placsp_provider.lineage.sensor import threshold_lineage

    query = scope_query(tmp_path, dataset="agregadas", scope="run", run_id="r1")
    counts = DeadLetterCounts(query=query)  # a lake with no dead letters
    checks = evaluate(counts, max_count=10, max_ratio=0.05, read=951, scope="run", dataset="agregadas", run_id="r1")
    event = as_event(threshold_lineage(lake=tmp_path, dataset="agregadas", scope="run", checks=checks, counts=counts))
    validate_event(event)
    (table,) = event["inputs"]
    assertions = table["inputFacets"]["dataQualityAssertions"]["assertions"]
    assert [(a["assertion"], a["success"], a["expected"], a["actual"]) for a in assertions] == [
        ("dead_letter_count", True, "10", "0"),
        ("dead_letter_ratio", True, "0.05", "0"),
    ]
    assert table["inputFacets"]["dataQualityMetrics"]["rowCount"] == 0
    assert event["run"]["facets"]["placsp_deadLetters"]["total"] == 0


def test_nothing_landed_reports_the_manifest_and_empty_writes(tmp_path: Path) -> None:
    from placsp_provider.bronze.manifest import Manifest
    from placsp_provider.ingest.summary import empty_summary
    from placsp_provider.lineage.extract import extract_lineage
    from placsp_provider.lineage.silver import silver_lineage

    manifest = tmp_path / "bronze" / "menores" / "manifests" / "20250818T000000Z__20250819T000000Z.json"
    manifest.parent.mkdir(parents=True)
    empty = Manifest("menores", 1143, "r1", "2025-08-18T00:00:00Z", "2025-08-19T00:00:00Z", "", "http://h.test/s")
    manifest.write_text(empty.to_json())
    extract = as_event(extract_lineage(dataset="menores", base_url=None, lake=tmp_path, manifest=manifest))
    validate_event(extract)
    assert [i["namespace"] + i["name"] for i in extract["inputs"]] == ["http://h.test/s/sindicacion_1143"]
    assert [(o["name"], o["outputFacets"]["outputStatistics"]["rowCount"]) for o in extract["outputs"]] == [
        (str(manifest.resolve()), 0)
    ]
    silver = as_event(
        silver_lineage(
            dataset="menores", lake=tmp_path, manifests=[manifest], summary=empty_summary("menores", "r1", 0, 0)
        )
    )
    validate_event(silver)
    assert [i["name"] for i in silver["inputs"]] == [str(manifest.resolve())]
    assert len(silver["outputs"]) == 7
    assert {o["outputFacets"]["outputStatistics"]["rowCount"] for o in silver["outputs"]} == {0}
    assert silver["run"]["facets"]["placsp_deadLetters"]["total"] == 0
