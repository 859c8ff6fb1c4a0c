"""The dead-letter replay on real Spark local and real Delta tables.

An ingest leaves dead letters of every kind (built once, `ingested`); each test replays on its own
copy of that lake, or of the lake after the whole story an operator lives through (`story`: every
replay below, in order), so the tests pass alone, in any order, and in reverse.

  clean      entries 1, 2                          -> Silver
  unclosed   entries 11, 12 (12 broken), 13       -> dead letter xml_syntax, later fixed by hand
  na         entries 21 (amount N/A), 22          -> dead letter invalid_amount, never recoverable
  miscount   entries 41, 42, manifest says 3      -> whole file quarantined; the manifest is corrected later
  commented  entry 61 + '<entry>' in a comment    -> whole file quarantined, stays so
  old        entry 31 with a decimal-comma amount -> a dead letter written by an older release that
             rejected decimal commas; today's parser accepts it
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from placsp_provider.datasets import get_dataset
from placsp_provider.ingest.request import IngestRequest
from placsp_provider.ingest.run import ingest as run_ingest
from placsp_provider.ingest.tally import dead_letter_id
from placsp_provider.lake import table_path
from placsp_provider.parser import page_split
from placsp_provider.parser.silver_schema import BUSINESS_KEYS
from placsp_provider.spark.replay_job import ReplayRequest, run_replay
from placsp_provider.spark.silver_merge import insert_only
from placsp_provider.spark.tables import spark_table_schema
from tests.conservation import assert_conserved, documented, read_with_lxml
from tests.pages import ID_PREFIX, day, entry, page
from tests.spark.bronze import land

pytestmark = pytest.mark.spark

DS = "agregadas"
TABLES = ("entries", "lots", "documents", "results", "tombstones", "dead_letters", "reconciliation")


def table(spark, lake: Path, name: str):
    return spark.read.format("delta").load(str(table_path(lake, name)))


def snapshot(spark, lake: Path) -> dict[str, list[str]]:
    return {name: sorted(str(r) for r in table(spark, lake, name).collect()) for name in TABLES}


def versions(spark, lake: Path) -> dict[str, int]:
    from delta.tables import DeltaTable

    return {
        name: DeltaTable.forPath(spark, str(table_path(lake, name))).history(1).collect()[0]["version"]
        for name in TABLES
    }


def letter(spark, lake: Path, dl_id: str):
    (row,) = table(spark, lake, "dead_letters").where(f"dead_letter_id = '{dl_id}'").collect()
    return row


def replay(spark, lake: Path, run_id: str, **filters) -> dict:
    before = {r.dead_letter_id: r for r in table(spark, lake, "dead_letters").collect()}
    summary = run_replay(spark, ReplayRequest(DS, lake, run_id, **filters))
    if not filters.get("dry_run"):
        assert_replay_conserved(spark, lake, run_id, before)
    return summary


def assert_replay_conserved(spark, lake: Path, run_id: str, before: dict) -> None:
    """From the tables, not the summary: no dead letter disappears; each one this run marked replayed
    has its entry in Silver (a record) or rows of its file in Silver (a whole file); the others keep
    their raw record."""
    after = {r.dead_letter_id: r for r in table(spark, lake, "dead_letters").collect()}
    assert set(before) <= set(after), f"dead letters gone after {run_id}: {set(before) - set(after)}"
    silver = table(spark, lake, "entries").select("entry_id", "_source_file").collect()
    for dl_id, row in after.items():
        if row.replay_run_id != run_id:
            continue
        assert row.status == "replayed" and before[dl_id].status in ("quarantined", "fixed"), row
        if row.record_kind == "file":
            assert any(s._source_file == row.source_file for s in silver), f"{row.source_file}: nothing in Silver"
        else:
            assert row.entry_id in {s.entry_id for s in silver}, f"{row.entry_id} replayed but not in Silver"


def entry_ids(spark, lake: Path, *numbers: int) -> set[str]:
    wanted = [f"{ID_PREFIX}{n}" for n in numbers]
    from pyspark.sql import functions as F

    found = table(spark, lake, "entries").where(F.col("entry_id").isin(wanted) & F.col("deleted_at").isNull())
    return {r.entry_id.rsplit("/", 1)[-1] for r in found.select("entry_id").collect()}


def _pages() -> dict[str, bytes]:
    ok = lambda n: (n, day(5, 10))  # noqa: E731
    unclosed = page([ok(11), ok(12), ok(13)])
    second = unclosed.index(b"<entry>", unclosed.index(b"<entry>") + 1)
    unclosed = unclosed[:second] + unclosed[second:].replace(b"</cbc:ContractFolderID>", b"", 1)
    na = page([ok(21), ok(22)]).replace(b'currencyID="EUR">', b'currencyID="EUR">N/A', 1)
    commented = page([ok(61)]).replace(b"<title>t</title>", b"<title>t</title><!-- <entry> -->")
    return {
        "clean.atom": page([ok(1), ok(2)]),
        "unclosed.atom": unclosed,
        "na.atom": na,
        "miscount.atom": page([ok(41), ok(42)]),
        "commented.atom": commented,
    }


def _miscount_manifest(manifest: Path, entries: int) -> None:
    """Set the manifest's count for miscount.atom (what an extraction release with a counting bug
    would have written, and what re-extraction with the fix writes back)."""
    data = json.loads(manifest.read_text())
    (page_entry,) = [p for p in data["pages"] if "miscount" in p["file"]]
    page_entry["entries"] = entries
    manifest.write_text(json.dumps(data))


def _old_release_dead_letter(spark, lake: Path) -> str:
    """A dead letter as an older release wrote it: it rejected decimal-comma amounts; today's parser
    reads them. Inserted through the same insert-only MERGE the ingest uses."""
    raw = re.sub(
        rb'(<cbc:EstimatedOverallContractAmount currencyID="EUR">)[^<]*',
        rb"\g<1>135553,26",
        entry(31, day(5, 10)),
        count=1,
    ).decode()
    source_file = "bronze/agregadas/pages/old-release.atom"
    dl_id = dead_letter_id(DS, "validation", source_file, 1234, raw)
    row = {
        "dataset": DS,
        "source_file": source_file,
        "stage": "validation",
        "error_type": "invalid_amount",
        "error_message": f"Dataset agregadas, file {source_file}: entry {ID_PREFIX}31 was rejected at stage "
        "validation [invalid_amount]: '135553,26' is not a number",
        "raw_record": raw,
        "namespace_context": page_split.scan_page(page([])).namespace_context,
        "record_kind": "entry",
        "entry_id": f"{ID_PREFIX}31",
        "record_offset": 1234,
        "dead_letter_id": dl_id,
        "run_id": "old-release-run",
        "processing_timestamp": datetime(2022, 1, 1, tzinfo=UTC),
        "status": "quarantined",
        "attempts": 0,
        "last_attempt_at": None,
        "replayed_at": None,
        "replay_run_id": None,
        "raw_bytes": None,  # an older release: the replay takes its bytes from its text (no \xNN in it)
        "parser_version": None,  # nor did it record which parser rejected it
    }
    schema = spark_table_schema("dead_letters")
    df = spark.createDataFrame([[row[f.name] for f in schema.fields]], schema)
    insert_only(spark, lake, "dead_letters", DS, df, ("dead_letter_id",))
    return dl_id


@dataclass(frozen=True)
class Lake:
    path: Path
    ids: dict[str, str]  # page stem (or "old") -> its dead letter's id; the same in every copy
    manifest: Path

    def copy(self, to: Path) -> Lake:
        shutil.copytree(self.path, to)
        return Lake(to, self.ids, to / self.manifest.relative_to(self.path))


@pytest.fixture(scope="module")
def ingested(spark, tmp_path_factory) -> Lake:
    """The lake right after the ingest (never written to by a test: each takes a copy)."""
    lake = tmp_path_factory.mktemp("replay") / "lake"
    pages = _pages()
    manifest = land(lake, DS, pages)
    _miscount_manifest(manifest, 3)
    run_ingest(IngestRequest(get_dataset(DS), lake, "ingest-1"), "spark", spark=spark)
    ids_ = lambda *n: [f"{ID_PREFIX}{i}" for i in n]  # noqa: E731
    records = [r for name, body in pages.items() if name != "unclosed.atom" for r in read_with_lxml(name, body)]
    accounted = assert_conserved(spark, lake, DS, "ingest-1", records + documented("unclosed.atom", ids_(11, 12, 13)))
    assert accounted.in_quarantined_pages == 3  # miscount (2 entries) and commented (1)
    ids = {}
    for r in table(spark, lake, "dead_letters").collect():
        ids[r.source_file.split("/")[-1].split(".")[0]] = r.dead_letter_id
    assert set(ids) == {"unclosed", "na", "miscount", "commented"}, ids
    ids["old"] = _old_release_dead_letter(spark, lake)
    return Lake(lake, ids, manifest)


@pytest.fixture
def lake(ingested: Lake, tmp_path: Path) -> Lake:
    """A copy of the ingested lake, this test's own."""
    return ingested.copy(tmp_path / "lake")


def _recover_old(spark, lake: Lake) -> dict:
    return replay(spark, lake.path, "replay-old", dead_letter_ids=(lake.ids["old"],))


def _fix_by_hand_and_replay(spark, lake: Lake) -> dict:
    """What the runbook tells a person to do: correct raw_record, set status 'fixed', replay."""
    from delta.tables import DeltaTable

    fixed = entry(12, day(5, 10)).decode()
    DeltaTable.forPath(spark, str(table_path(lake.path, "dead_letters"))).update(
        f"dead_letter_id = '{lake.ids['unclosed']}'", {"raw_record": _sql_literal(fixed), "status": "'fixed'"}
    )
    return replay(spark, lake.path, "replay-fixed", stages=("parse",))


def _replay_na(spark, lake: Lake, n: int) -> dict:
    return replay(spark, lake.path, f"replay-na-{n}", dead_letter_ids=(lake.ids["na"],), max_attempts=2)


def _reextract_and_replay_files(spark, lake: Lake) -> dict:
    _miscount_manifest(lake.manifest, 2)  # re-extraction with the counting fix
    return replay(spark, lake.path, "replay-files", stages=("reconciliation",))


@pytest.fixture(scope="module")
def story(ingested: Lake, spark, tmp_path_factory) -> Lake:
    """A copy of the ingested lake after every replay of the story, in order (read-only: copy it to write)."""
    lake = ingested.copy(tmp_path_factory.mktemp("story") / "lake")
    _recover_old(spark, lake)
    _fix_by_hand_and_replay(spark, lake)
    _replay_na(spark, lake, 1)
    _replay_na(spark, lake, 2)
    _reextract_and_replay_files(spark, lake)
    return lake


def test_dry_run_reports_what_would_be_recovered_and_writes_nothing(spark, lake) -> None:
    path, ids = lake.path, lake.ids
    before, before_versions = snapshot(spark, path), versions(spark, path)
    summary = replay(spark, path, "replay-dry", dry_run=True)
    assert (summary["selected"], summary["recovered"], summary["still_failing"]) == (5, 1, 4)
    assert summary["by_error_type"]["invalid_amount"] == {
        "selected": 2,
        "recovered": 1,
        "still_failing": 1,
        "abandoned": 0,
    }
    assert summary["recovered_entries"] == [f"{ID_PREFIX}31"]
    assert summary["files_reprocessed"] == sorted(
        f for f in (letter(spark, path, ids[k]).source_file for k in ("miscount", "commented"))
    )
    assert versions(spark, path) == before_versions and snapshot(spark, path) == before
    assert not (path / "runs" / DS / "replay-replay-dry.json").exists()


def test_replay_recovers_what_todays_code_accepts(spark, lake) -> None:
    path, ids = lake.path, lake.ids
    summary = _recover_old(spark, lake)
    assert (summary["selected"], summary["recovered"]) == (1, 1)
    assert entry_ids(spark, path, 31) == {"31"}
    (row,) = table(spark, path, "entries").where(f"entry_id = '{ID_PREFIX}31'").collect()
    assert str(row.estimated_overall_amount) == "135553.260000" and row._ingest_run_id == "replay-old"
    assert row._source_file == "bronze/agregadas/pages/old-release.atom"  # lineage points at the original page
    assert table(spark, path, "results").where(f"entry_id = '{ID_PREFIX}31'").count() == 1
    dl = letter(spark, path, ids["old"])
    assert (dl.status, dl.attempts, dl.replay_run_id) == ("replayed", 1, "replay-old")
    assert dl.replayed_at is not None and dl.last_attempt_at == dl.replayed_at
    assert json.loads((path / "runs" / DS / "replay-replay-old.json").read_text())["recovered"] == 1
    # The re-parsed rows were staged under the lake's _staging folder; the replay removed its folder.
    assert list((path / "_staging" / DS).iterdir()) == []


def test_staged_files_of_a_failed_task_attempt_are_not_merged(spark, lake, monkeypatch) -> None:
    # A task attempt can fail after its files were renamed into place (its worker lost while sending
    # its outcomes); Spark then runs the task again, and only the attempt whose outcomes came back may
    # be read. Such leftovers are planted here, after the real re-parse: a copy of every staged file
    # under another attempt's name. Read, they would double the entry's children (the insert dedups
    # only repeated versions, and this replay has none).
    import uuid

    from placsp_provider.spark import replay_job

    reparse, planted = replay_job._reparse, []

    def reparse_then_plant_leftovers(spark_, ds, request, folder):
        outcomes, selection = reparse(spark_, ds, request, folder)
        for staged in folder.glob("*/*.parquet"):
            planted.append(staged.with_name(f"{uuid.uuid4().hex}.parquet"))
            shutil.copyfile(staged, planted[-1])
        return outcomes, selection

    monkeypatch.setattr(replay_job, "_reparse", reparse_then_plant_leftovers)
    summary = _recover_old(spark, lake)
    assert (summary["selected"], summary["recovered"]) == (1, 1)
    assert {p.parent.name for p in planted} >= {"entries", "results"}
    old = f"entry_id = '{ID_PREFIX}31'"
    assert table(spark, lake.path, "entries").where(old).count() == 1
    assert table(spark, lake.path, "results").where(old).count() == 1
    for name in ("lots", "documents", "results"):
        assert table(spark, lake.path, name).groupBy(*BUSINESS_KEYS[name]).count().where("count > 1").count() == 0, name


def test_hand_fixed_record_is_recovered(spark, lake) -> None:
    path, ids = lake.path, lake.ids
    broken = letter(spark, path, ids["unclosed"])
    assert broken.error_type == "xml_syntax" and broken.entry_id == f"{ID_PREFIX}12"
    summary = _fix_by_hand_and_replay(spark, lake)
    assert (summary["selected"], summary["recovered"]) == (1, 1)
    assert entry_ids(spark, path, 11, 12, 13) == {"11", "12", "13"}
    assert table(spark, path, "results").where(f"entry_id = '{ID_PREFIX}12'").count() == 1
    assert letter(spark, path, ids["unclosed"]).status == "replayed"


def test_the_same_replay_twice_lands_nothing_twice(spark, story, tmp_path) -> None:
    lake = story.copy(tmp_path / "lake")
    path, ids = lake.path, lake.ids
    assert {letter(spark, path, ids[k]).status for k in ("old", "unclosed")} == {"replayed"}
    before = snapshot(spark, path)
    again = replay(spark, path, "replay-again", dead_letter_ids=(ids["old"], ids["unclosed"]))
    assert again["selected"] == 0 and again["recovered"] == 0
    assert snapshot(spark, path) == before
    assert table(spark, path, "entries").groupBy("entry_id").count().where("count > 1").count() == 0


def test_still_failing_gains_an_attempt_then_is_abandoned(spark, lake) -> None:
    path, ids = lake.path, lake.ids
    first = _replay_na(spark, lake, 1)
    assert (first["selected"], first["still_failing"], first["abandoned"]) == (1, 1, 0)
    dl = letter(spark, path, ids["na"])
    assert (dl.status, dl.attempts, dl.replay_run_id) == ("quarantined", 1, None)
    assert dl.last_attempt_at is not None and "N/A" in dl.error_message
    second = _replay_na(spark, lake, 2)
    assert (second["selected"], second["abandoned"]) == (1, 1)
    assert (letter(spark, path, ids["na"]).status, letter(spark, path, ids["na"]).attempts) == ("abandoned", 2)
    third = _replay_na(spark, lake, 3)
    assert third["selected"] == 0
    assert entry_ids(spark, path, 21, 22) == {"22"}


def test_whole_file_dead_letter_replays_by_reprocessing_the_file(spark, lake) -> None:
    path, ids = lake.path, lake.ids
    summary = _reextract_and_replay_files(spark, lake)
    assert (summary["selected"], summary["recovered"], summary["still_failing"]) == (2, 1, 1)
    assert entry_ids(spark, path, 41, 42, 61) == {"41", "42"}
    miscount = letter(spark, path, ids["miscount"])
    assert (miscount.status, miscount.replay_run_id) == ("replayed", "replay-files")
    commented = letter(spark, path, ids["commented"])
    assert (commented.status, commented.attempts) == ("quarantined", 1)
    assert "count" in commented.error_message
    recon = {
        r.source_file.split("/")[-1].split(".")[0]: r.status
        for r in table(spark, path, "reconciliation").select("source_file", "status").collect()
    }
    assert recon["miscount"] == "reconciled" and recon["commented"] == "quarantined"


def test_every_selected_dead_letter_ends_replayed_quarantined_or_abandoned(spark, story) -> None:
    path, ids = story.path, story.ids
    states = {k: (letter(spark, path, v).status, letter(spark, path, v).attempts) for k, v in ids.items()}
    assert states == {
        "old": ("replayed", 1),
        "unclosed": ("replayed", 1),
        "na": ("abandoned", 2),
        "miscount": ("replayed", 1),
        "commented": ("quarantined", 1),
    }
    # Conservation of the whole lake: every entry read is in Silver or a live dead letter, once.
    assert entry_ids(spark, path, 1, 2, 11, 12, 13, 21, 22, 31, 41, 42, 61) == {
        "1", "2", "11", "12", "13", "22", "31", "41", "42"
    }  # fmt: skip
    live = {
        r.entry_id or r.source_file for r in table(spark, path, "dead_letters").where("status != 'replayed'").collect()
    }
    assert f"{ID_PREFIX}21" in live and letter(spark, path, ids["commented"]).source_file in live


def test_a_replay_racing_an_ingest_loses_nothing(spark, story, tmp_path, caplog) -> None:
    lake = story.copy(tmp_path / "lake")
    path, ids = lake.path, lake.ids
    late = {"late.atom": page([(81, day(6)), (82, day(6)), (12, day(7))])}
    land(path, DS, late, "2022-01-06")
    results: dict[str, dict] = {}
    errors: list[BaseException] = []

    def ingest() -> None:
        try:
            results["ingest"] = run_ingest(IngestRequest(get_dataset(DS), path, "ingest-late"), "spark", spark=spark)
        except BaseException as err:  # surfaced below
            errors.append(err)

    def replay_commented() -> None:
        try:
            results["replay"] = run_replay(spark, ReplayRequest(DS, path, "replay-race", stages=("reconciliation",)))
        except BaseException as err:
            errors.append(err)

    caplog.set_level(logging.WARNING, logger="placsp_provider.spark.silver_merge")
    threads = [threading.Thread(target=ingest), threading.Thread(target=replay_commented)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert results["replay"]["selected"] == 1
    assert_conserved(spark, path, DS, "ingest-late", read_with_lxml("late.atom", late["late.atom"]))
    assert entry_ids(spark, path, 81, 82) == {"81", "82"}
    (twelve,) = table(spark, path, "entries").where(f"entry_id = '{ID_PREFIX}12'").collect()
    assert str(twelve.updated).startswith("2022-01-07")  # the newer version won over the replayed one
    assert table(spark, path, "results").where(f"entry_id = '{ID_PREFIX}12'").count() == 1
    assert letter(spark, path, ids["commented"]).attempts == 2
    # Whether the two writers collided depends on timing; when they did, it was retried, not lost.
    retried = [r for r in caplog.records if "concurrent writer" in r.getMessage()]
    print(f"commit conflicts retried during the race: {len(retried)}")


def _sql_literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def test_the_replays_arrow_batch_setting_holds_inside_and_is_put_back_after(spark) -> None:
    # The session sends ingest one page per batch; a replay's records are small, so its parse runs
    # inside its own setting, which leaves the session as it found it (an ingest may follow in the same
    # session). What the replay writes is checked by the other tests here, whatever the batch size.
    from placsp_provider.spark import replay_job

    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key, None)
    with replay_job._arrow_records_per_batch(spark, replay_job.REPLAY_RECORDS_PER_BATCH):
        assert spark.conf.get(key) == str(replay_job.REPLAY_RECORDS_PER_BATCH)
    assert spark.conf.get(key, None) == before
    spark.conf.set(key, "7")
    with replay_job._arrow_records_per_batch(spark, 4):
        pass
    assert spark.conf.get(key) == "7"
    if before is None:
        spark.conf.unset(key)
    else:
        spark.conf.set(key, before)
