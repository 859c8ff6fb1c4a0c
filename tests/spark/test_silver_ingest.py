"""The Silver ingest on real Spark local and real Delta tables.

Every case asserts conservation from the Delta tables after the MERGE (Silver rows + dead letters of
the run) against the records listed outside the pipeline (a plain lxml parse of each page, or the
test's own construction for pages lxml cannot read): tests/spark/conservation.py. And the exact
dead-letter rows.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from placsp_provider.datasets import get_dataset
from placsp_provider.ingest.request import IngestRequest
from placsp_provider.ingest.run import ingest as run_ingest
from placsp_provider.lake import CHILD_TABLES, LAKE_TABLES, staging_dir, table_path
from tests.conftest import SAMPLES
from tests.conservation import (
    Accounted,
    Record,
    assert_conserved,
    assert_conserved_with_delta_rs,
    documented,
    read_with_lxml,
)
from tests.pages import ID_PREFIX, day, licitaciones_samples, page
from tests.spark.bronze import land

pytestmark = pytest.mark.spark


def ingest(spark, lake: Path, dataset: str, run_id: str, **kw) -> dict:
    return run_ingest(IngestRequest(get_dataset(dataset), lake, run_id, **kw), "spark", spark=spark)


def table(spark, lake: Path, name: str):
    return spark.read.format("delta").load(str(table_path(lake, name)))


def rows(spark, lake: Path, name: str, *cols: str, where: str = "true") -> list[tuple]:
    df = table(spark, lake, name).where(where)
    return sorted(tuple(r) for r in df.select(*cols).collect())


def snapshot(spark, lake: Path) -> dict[str, list]:
    out = {}
    for name in ("entries", "lots", "documents", "results", "tombstones", "dead_letters", "reconciliation"):
        df = table(spark, lake, name)
        out[name] = sorted(str(r) for r in df.collect())
    return out


def listed(pages: dict[str, bytes], **broken: list[Record]) -> list[Record]:
    """The records of `pages`, by lxml, except those the test lists itself (`broken`, by page stem)."""
    out: list[Record] = []
    for name, body in pages.items():
        stem = name[: -len(".atom")]
        out += broken[stem] if stem in broken else read_with_lxml(name, body)
    return out


# -- every real fixture page ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def real_lake(spark, tmp_path_factory) -> tuple[Path, dict[str, dict], dict[str, list[Record]]]:
    lake = tmp_path_factory.mktemp("real") / "lake"
    licitaciones = licitaciones_samples()
    land(lake, "licitaciones", licitaciones)
    agr = {
        "PlataformasAgregadasSinMenores_20220104_030016_1.atom": (
            SAMPLES / "1044_agregadas" / "PlataformasAgregadasSinMenores_20220104_030016_1.atom"
        ).read_bytes()
    }
    for archive in ("PlataformasAgregadasSinMenores_202201_05-06.zip", "PlataformasAgregadasSinMenores_2019.zip"):
        with zipfile.ZipFile(SAMPLES / "1044_agregadas" / archive) as z:
            agr.update({n: z.read(n) for n in z.namelist()})
    land(lake, "agregadas", agr)
    menores = {"head.atom": (SAMPLES / "1143_menores" / "contratosMenoresPerfilesContratantes.atom").read_bytes()}
    land(lake, "menores", menores)
    summaries = {d: ingest(spark, lake, d, "run-real") for d in ("licitaciones", "agregadas", "menores")}
    # SOURCES.md: the fragment is three versions of entry 17540944 with no root; lxml cannot read it.
    fragment_id = "https://contrataciondelestado.es/sindicacion/licitacionesPerfilContratante/17540944"
    records = {
        "licitaciones": listed(licitaciones, fragment=documented("fragment.atom", [fragment_id] * 3)),
        "agregadas": listed(agr),
        "menores": listed(menores),
    }
    return lake, summaries, records


def test_real_pages_are_conserved_file_by_file(spark, real_lake) -> None:
    lake, _, records = real_lake
    accounted = {d: assert_conserved(spark, lake, d, "run-real", records[d]) for d in records}
    assert all(a.in_quarantined_pages == 0 for a in accounted.values())
    # 1044, counted independently (SOURCES.md; lxml above and in tests/bronze/test_page_scan.py):
    # 117+383, 475+25, 476+24, and the 2019 pages 304+196, 494+6, 498+2; all of it in Silver. The
    # pages repeat 54 entry ids (newest wins), so Silver holds 2289 distinct entries and 636 tombstones.
    agr = accounted["agregadas"]
    assert (agr.read, agr.in_silver, agr.dead_letter_records) == (3000, 3000, 0)
    assert agr.silver_rows_of_run == 2289 + 636
    assert accounted["licitaciones"] == Accounted(
        read=5, in_silver=2, dead_letter_records=3, in_quarantined_pages=0, silver_rows_of_run=2
    )
    assert (accounted["menores"].read, accounted["menores"].silver_rows_of_run) == (2, 1)
    recon = rows(
        spark,
        lake,
        "reconciliation",
        "dataset",
        "manifest_entries",
        "manifest_tombstones",
        "valid_entries",
        "valid_tombstones",
        "dead_letter_records",
        "status",
    )
    assert all(r[1] + r[2] == r[3] + r[4] + r[5] and r[6] == "reconciled" for r in recon)
    assert len([r for r in recon if r[0] == "agregadas"]) == 6


def test_fragment_not_wellformed_becomes_three_parse_dead_letters(spark, real_lake) -> None:
    lake, summaries, _ = real_lake
    assert summaries["licitaciones"]["dead_letters"]["by_error_type"] == {"unbound_prefix": 3}
    dead = rows(
        spark,
        lake,
        "dead_letters",
        "stage",
        "error_type",
        "entry_id",
        "status",
        "attempts",
        where="dataset = 'licitaciones'",
    )
    assert (
        dead
        == [
            (
                "parse",
                "unbound_prefix",
                "https://contrataciondelestado.es/sindicacion/licitacionesPerfilContratante/17540944",
                "quarantined",
                0,
            )
        ]
        * 3
    )
    messages = [r[0] for r in table(spark, lake, "dead_letters").select("error_message").collect()]
    assert all("Namespace prefix" in m and "fragment" in m for m in messages)


def test_analyst_can_answer_who_won_what_for_how_much(spark, real_lake) -> None:
    lake, _, _ = real_lake
    entries = table(spark, lake, "entries").where("entry_id LIKE '%/16998351'")
    results = table(spark, lake, "results").where("entry_id LIKE '%/16998351'")
    answer = (
        results.join(entries.select("dataset", "entry_id", "party_name"), ["dataset", "entry_id"])
        .select("party_name", "lot_id", "winner_name", "awarded_tax_exclusive_amount")
        .collect()
    )
    assert len(answer) == 3 and all(
        r.winner_name and r.awarded_tax_exclusive_amount is not None and r.party_name for r in answer
    )
    assert table(spark, lake, "lots").where("entry_id LIKE '%/16998351'").count() == 3


def test_duplicate_id_in_one_page_keeps_the_newest(spark, real_lake) -> None:
    lake, summaries, _ = real_lake
    # 1143 head: two copies of one id, the second 20 ms newer (and hand-edited folder id)
    (row,) = rows(spark, lake, "entries", "entry_id", "updated", "contract_folder_id", where="dataset = 'menores'")
    assert str(row[1]).endswith("01:03:51.640000") and summaries["menores"]["read"]["entries"] == 2
    assert table(spark, lake, "entries").groupBy("dataset", "entry_id").count().where("count > 1").count() == 0


def test_a_version_held_twice_in_one_page_lands_its_children_once(spark, tmp_path: Path) -> None:
    """The router counts records repeating a version of their page; only then does the write dedup
    the children (else it skips Spark's sorting dedup). Counted wrong, the children land twice."""
    twice, once = tmp_path / "twice", tmp_path / "once"
    land(twice, "agregadas", {"p.atom": page([(1, day(3)), (2, day(3)), (1, day(3))])})
    land(once, "agregadas", {"p.atom": page([(1, day(3)), (2, day(3))])})
    assert ingest(spark, twice, "agregadas", "r1")["read"]["entries"] == 3
    ingest(spark, once, "agregadas", "r1")

    def content(lake: Path, name: str) -> list[tuple]:
        df = table(spark, lake, name)
        return rows(spark, lake, name, *[c for c in df.columns if not c.startswith("_")])

    for name in ("entries", "documents", "results"):
        landed = content(twice, name)
        assert landed == content(once, name) and len(landed) == len({str(r) for r in landed}), name
    assert len(content(twice, "results")) == 2  # one per entry: the comparison cannot pass vacuously


# -- each trap of the Spark XML notes, one page each, one ingest ------------------------------------
def _traps() -> dict[str, bytes]:
    ok = lambda n: (n, day(5, 10))  # noqa: E731
    base = page([ok(1), ok(2), ok(3)])
    unclosed = page([ok(11), ok(12), ok(13)])
    second = unclosed.index(b"<entry>", unclosed.index(b"<entry>") + 1)
    unclosed = unclosed[:second] + unclosed[second:].replace(b"</cbc:ContractFolderID>", b"", 1)
    na = page([ok(21), ok(22)]).replace(b'currencyID="EUR">', b'currencyID="EUR">N/A', 1)
    comma = page([ok(31)])
    comma = _set_first_amount(comma, b"135553,26")
    truncated = page([ok(41), ok(42)])
    truncated = truncated[: truncated.rindex(b"<entry>") + 500]
    latin1 = page([ok(51), ok(52)])
    marker = f"<id>{ID_PREFIX}52</id>".encode()
    latin1 = latin1.replace(marker, marker + "<title>Adjudicación</title>".encode("latin-1"), 1)
    repeated = page([ok(71)])
    start = repeated.index(b"<cac:TenderResult>")
    end = repeated.index(b"</cac:TenderResult>") + len(b"</cac:TenderResult>")
    repeated = repeated[:end] + repeated[start:end] + repeated[end:]  # normally single here: both kept
    commented = page([ok(61)]).replace(b"<title>t</title>", b"<title>t</title><!-- <entry> -->")
    return {
        "clean.atom": base,
        "unclosed.atom": unclosed,
        "na.atom": na,
        "comma.atom": comma,
        "truncated.atom": truncated,
        "repeated.atom": repeated,
        "latin1.atom": latin1,
        "empty.atom": page([]),
        "commented.atom": commented,
    }


def _set_first_amount(data: bytes, value: bytes) -> bytes:
    import re

    return re.sub(rb'(<cbc:EstimatedOverallContractAmount currencyID="EUR">)[^<]*', rb"\g<1>" + value, data, count=1)


@pytest.fixture(scope="module")
def trap_lake(spark, tmp_path_factory) -> tuple[Path, dict]:
    lake = tmp_path_factory.mktemp("traps") / "lake"
    land(lake, "agregadas", _traps())
    return lake, ingest(spark, lake, "agregadas", "run-traps")


def _trap_records() -> list[Record]:
    """The traps lxml cannot read, as `_traps` built them: every <entry> started counts, broken or cut."""
    ids = lambda *n: [f"{ID_PREFIX}{i}" for i in n]  # noqa: E731
    return listed(
        _traps(),
        unclosed=documented("unclosed.atom", ids(11, 12, 13)),
        truncated=documented("truncated.atom", ids(41, 42)),
        latin1=documented("latin1.atom", ids(51, 52)),
    )


def test_traps_are_conserved_and_routed_exactly(spark, trap_lake) -> None:
    lake, _ = trap_lake
    accounted = assert_conserved(spark, lake, "agregadas", "run-traps", _trap_records())
    print(accounted)
    recon = {
        r[0].split("/")[-1].split(".")[0]: r[1:]
        for r in rows(spark, lake, "reconciliation", "source_file", "valid_entries", "dead_letter_records", "status")
    }
    assert recon["clean"] == (3, 0, "reconciled")
    assert recon["unclosed"] == (2, 1, "reconciled")  # only entry 2 of 3 is lost to Silver
    assert recon["na"] == (1, 1, "reconciled")
    assert recon["comma"] == (1, 0, "reconciled")
    assert recon["latin1"] == (1, 1, "reconciled")
    assert recon["empty"] == (0, 0, "reconciled")
    assert recon["repeated"] == (1, 0, "reconciled")
    assert table(spark, lake, "results").where(f"entry_id = '{ID_PREFIX}71'").count() == 2
    assert recon["commented"][2] == "quarantined"  # the splitter and the manifest disagree: whole file out
    dead = {
        (r[0].split("/")[-1].split(".")[0], r[1], r[2])
        for r in rows(spark, lake, "dead_letters", "source_file", "stage", "error_type")
    }
    assert ("unclosed", "parse", "xml_syntax") in dead
    assert ("na", "validation", "invalid_amount") in dead
    assert ("latin1", "parse", "encoding") in dead
    assert ("commented", "reconciliation", "count_mismatch") in dead
    assert any(f == "truncated" and stage == "parse" for f, stage, _ in dead)
    # nothing of the quarantined file reached Silver
    assert table(spark, lake, "entries").where("_source_file LIKE '%commented%'").count() == 0


def test_decimal_comma_amount_is_exact(spark, trap_lake) -> None:
    lake, _ = trap_lake
    (amount,) = [
        r[0]
        for r in table(spark, lake, "entries")
        .where(f"entry_id = '{ID_PREFIX}31'")
        .select("estimated_overall_amount")
        .collect()
    ]
    assert str(amount) == "135553.260000"


def test_dead_letters_carry_raw_xml_and_an_actionable_message(spark, trap_lake) -> None:
    lake, _ = trap_lake
    (r,) = table(spark, lake, "dead_letters").where("error_type = 'xml_syntax'").collect()
    assert r.raw_record.startswith("<entry>") and r.entry_id == f"{ID_PREFIX}12"
    assert "agregadas" in r.error_message and "unclosed" in r.error_message and "mismatch" in r.error_message
    assert len(r.dead_letter_id) == 64 and r.run_id == "run-traps" and r.status == "quarantined"


def test_identical_rerun_changes_nothing(spark, trap_lake) -> None:
    lake, _ = trap_lake
    before = snapshot(spark, lake)
    again = ingest(spark, lake, "agregadas", "run-traps-2")
    assert again["files"] == {"ingested": 0, "already_ingested": 9, "reconciled": 0, "quarantined": 0}
    forced = ingest(spark, lake, "agregadas", "run-traps-3", reprocess=True)
    changed = {t: m for t, m in forced["merge"].items() if any(m.get(k) for k in ("inserted", "updated", "deleted"))}
    assert changed == {}
    assert snapshot(spark, lake) == before


# -- newest wins and tombstones across runs: tests/spark/test_delta_rs_ingest.py walks them, batch by
# batch, on every engine ------------------------------------------------------------------------------
def _two_results(body: bytes) -> bytes:
    start = body.index(b"<cac:TenderResult>")
    end = body.index(b"</cac:TenderResult>") + len(b"</cac:TenderResult>")
    return body[:end] + body[start:end] + body[end:]


def test_rerun_after_dying_right_after_the_entries_merge_cleans_the_older_version(spark, tmp_path: Path) -> None:
    """A run killed between the entries MERGE and the child MERGEs: `entries` holds the new version
    (no tombstone applied yet), the child tables still the old version's rows. The rerun must delete
    those, insert the new ones and re-apply the tombstone, ending exactly where a clean run ends.

    The crash state is built from real runs, not by stopping one: the lake after run 1, with its
    `entries` table replaced by the one a clean run 2 wrote, whose tombstone stamp is then cleared
    (the entries MERGE writes every new version with `deleted_at` null; the tombstone apply comes last).
    """
    import shutil

    from delta.tables import DeltaTable

    # version 1 of entry 1: one result; version 2: two results (result 0 has the same key in both)
    p1 = {"p1.atom": page([(1, day(3)), (2, day(3))], tombstones=[(1, day(9))])}
    p2 = {"p2.atom": _two_results(page([(1, day(5)), (2, day(5))]))}
    clean, crashed = tmp_path / "clean", tmp_path / "crashed"
    land(clean, "agregadas", p1, "2022-01-03")
    ingest(spark, clean, "agregadas", "r1")
    shutil.copytree(clean, crashed)
    land(clean, "agregadas", p2, "2022-01-05")
    ingest(spark, clean, "agregadas", "r2")

    shutil.rmtree(table_path(crashed, "entries"))
    shutil.copytree(table_path(clean, "entries"), table_path(crashed, "entries"))
    DeltaTable.forPath(spark, str(table_path(crashed, "entries"))).update(
        set={"deleted_at": "CAST(NULL AS TIMESTAMP)", "deletion_type": "CAST(NULL AS STRING)"}
    )
    older = table(spark, crashed, "results").where(f"entry_id = '{ID_PREFIX}1'").collect()
    assert [str(r.entry_updated)[:10] for r in older] == ["2022-01-03"]  # the state to recover from

    land(crashed, "agregadas", p2, "2022-01-05")
    # Rerun by each engine. delta-rs bounds each MERGE's read by the earliest version time it can
    # match (rules.since): the older children are older than the version `entries` now holds.
    by_delta_rs = tmp_path / "crashed-delta-rs"
    shutil.copytree(crashed, by_delta_rs)
    ingest(spark, crashed, "agregadas", "r2")
    run_ingest(IngestRequest(get_dataset("agregadas"), by_delta_rs, "r2"), "delta-rs")

    # Read back with delta-rs (Spark's reads of these small tables cost this test ~1 min of its time).
    lineage = {"_ingested_at", "ingested_at", "processing_timestamp"}
    expected = {name: _rows_without(clean, name, lineage) for name in LAKE_TABLES}
    for rerun in (crashed, by_delta_rs):
        assert assert_conserved_with_delta_rs(rerun, "agregadas", "r2", listed(p2)).silver_rows_of_run == 2
        for name in LAKE_TABLES:
            assert _rows_without(rerun, name, lineage) == expected[name], (rerun.name, name)
        of_entry_1 = {name: _of_entry(rerun, name, f"{ID_PREFIX}1") for name in ("entries", *CHILD_TABLES)}
        assert str(of_entry_1["entries"][0]["deleted_at"]).startswith("2022-01-09")
        for name in CHILD_TABLES:  # every child row is the new version's
            assert {str(r["entry_updated"])[:10] for r in of_entry_1[name]} <= {"2022-01-05"}, (rerun.name, name)
        assert len(of_entry_1["results"]) == 2


def _rows_without(lake: Path, name: str, ignore: set[str]) -> list[str]:
    """A table's rows, `ignore`d columns aside, sorted: equal for the same rows in any file layout."""
    return sorted(repr(sorted((k, v) for k, v in r.items() if k not in ignore)) for r in _delta_rows(lake, name))


def _of_entry(lake: Path, name: str, entry_id: str) -> list[dict]:
    return [r for r in _delta_rows(lake, name) if r["entry_id"] == entry_id]


def _delta_rows(lake: Path, name: str) -> list[dict]:
    from deltalake import DeltaTable

    return DeltaTable(str(table_path(lake, name))).to_pyarrow_table().to_pylist()


def test_summary_dead_letter_counts_are_the_delta_tables(spark, tmp_path: Path) -> None:
    """The run summary counts dead letters from the ingest's per-file tally, not from the frame it
    inserts: every kind of dead letter must still come out as the rows the dead_letters table holds
    for the run (entry-level ones of files that add up, the page-level one that stands for a refused
    file, a reconciliation letter for a file that does not add up, and none of the entry-level ones of
    a quarantined file), counted here from the table, not from the summary."""
    from collections import Counter

    ok = lambda n: (n, day(5, 10))  # noqa: E731
    na = page([ok(1), ok(2)]).replace(b'currencyID="EUR">', b'currencyID="EUR">N/A', 1)
    refused = b'<?xml version="1.0"?>\n<!DOCTYPE feed [<!ENTITY x "y">]>\n' + page([ok(11)]).split(b"?>", 1)[1]
    # does not add up (a commented-out <entry> the splitter counts, lxml does not) and has an invalid
    # entry of its own
    mismatched = (
        page([ok(21), ok(22)])
        .replace(b'currencyID="EUR">', b'currencyID="EUR">N/A', 1)
        .replace(b"<title>t</title>", b"<title>t</title><!-- <entry> -->")
    )
    pages = {"na.atom": na, "refused.atom": refused, "mismatched.atom": mismatched, "clean.atom": page([ok(31)])}
    land(tmp_path, "agregadas", pages)
    summary = ingest(spark, tmp_path, "agregadas", "run-dl")["dead_letters"]

    written = table(spark, tmp_path, "dead_letters").where("run_id = 'run-dl'").collect()
    by_stage, by_type = Counter(r.stage for r in written), Counter(r.error_type for r in written)
    assert summary["by_stage"] == dict(by_stage) and summary["by_error_type"] == dict(by_type)
    assert summary["total"] == len(written)
    files = {(r.source_file.split("/")[-1].split(".")[0], r.error_type) for r in written}
    assert files == {
        ("na", "invalid_amount"),
        ("refused", "dtd_refused"),
        ("mismatched", "count_mismatch"),  # not its entries' own: the whole file is out
    }, files


def test_a_page_missing_from_bronze_stops_the_run_before_any_write(spark, tmp_path: Path) -> None:
    from placsp_provider.bronze.manifest import Manifest
    from placsp_provider.errors import BronzePageError

    lake = tmp_path / "lake"
    pages = {"a.atom": page([(1, day(3))]), "b.atom": page([(2, day(3))])}
    manifest = Manifest.load(land(lake, "agregadas", pages))
    gone = next(p.file for p in manifest.pages if "/b." in p.file)
    (lake / gone).unlink()
    with pytest.raises(BronzePageError) as raised:
        ingest(spark, lake, "agregadas", "r1")
    assert str(raised.value) == (
        f"dataset agregadas: {gone}: stage ingest: a manifest names this page but it is not in Bronze; "
        "run the extraction of its interval again"
    )
    for name in ("entries", "dead_letters", "reconciliation"):  # the other page waits for the next run
        assert table(spark, lake, name).count() == 0, name


def test_a_page_removed_while_the_run_reads_it_is_the_users_first_line(spark, tmp_path: Path, monkeypatch) -> None:
    """Listed when the run started, removed before Spark read it (the race is staged by removing the
    file right after Spark listed it): Spark's own error, a JVM stack, comes back as the provider's,
    naming the file, and nothing is written."""
    from placsp_provider.bronze.manifest import Manifest
    from placsp_provider.spark import silver_job

    lake = tmp_path / "my lake"  # a space: the JVM names the file in its message as it is
    (landed,) = Manifest.load(land(lake, "agregadas", {"a.atom": page([(1, day(3))])})).pages

    def listed_then_removed(*args, **kwargs):
        frame = stage_pages(*args, **kwargs)
        (lake / landed.file).unlink()
        return frame

    stage_pages = silver_job.stage_pages
    monkeypatch.setattr(silver_job, "stage_pages", listed_then_removed)
    _fails_naming_the_removed_page(spark, lake, landed.file)


def test_a_page_removed_before_the_run_plans_its_tasks_is_the_users_first_line(
    spark, tmp_path: Path, monkeypatch
) -> None:
    """In Bronze when the run checked, gone when it sized the pages for Spark's tasks (staged by
    removing it just before the sizing): the provider's error naming the file, and nothing written."""
    from placsp_provider.bronze.manifest import Manifest
    from placsp_provider.spark import silver_job

    lake = tmp_path / "my lake"  # a space, as in the test above
    pages = {"a.atom": page([(1, day(3))]), "b.atom": page([(2, day(3))])}
    gone = next(p.file for p in Manifest.load(land(lake, "agregadas", pages)).pages if "/b." in p.file)

    def removed_then_sized(spark, files):
        (lake / gone).unlink()
        return page_task_split(spark, files)

    page_task_split = silver_job.page_task_split
    monkeypatch.setattr(silver_job, "page_task_split", removed_then_sized)
    _fails_naming_the_removed_page(spark, lake, gone)


def _fails_naming_the_removed_page(spark, lake: Path, removed: str) -> None:
    """The ingest's first line names the dataset, the file, the stage and what to do; nothing written."""
    from placsp_provider.errors import BronzePageError

    with pytest.raises(BronzePageError) as raised:
        ingest(spark, lake, "agregadas", "r1")
    assert str(raised.value) == (
        f"dataset agregadas: {removed}: stage parse: the page was removed while the run read it; "
        "nothing was written: run the ingest again"
    )
    for name in ("entries", "dead_letters", "reconciliation"):
        assert table(spark, lake, name).count() == 0, name
    assert not list(staging_dir(lake, "agregadas").iterdir())  # the run's staged rows went with it


def test_the_staged_rows_go_with_their_run_and_a_dead_runs_with_the_next(spark, tmp_path: Path) -> None:
    """Spark's tasks stage the parsed rows as Parquet in a folder of the run: removed when the run
    ends, and a killed run's (its lock no longer held) by the next run, a live run's never."""
    import fcntl
    import os

    lake = tmp_path / "lake"
    staging = staging_dir(lake, "agregadas")
    dead = staging / "dead-run"
    (dead / "entries").mkdir(parents=True)
    (dead / "entries" / "x.parquet").write_bytes(b"left by a run killed mid-ingest")
    (dead / ".lock").touch()
    live = staging / "live-run"
    live.mkdir()
    held = os.open(live / ".lock", os.O_CREAT | os.O_RDWR)
    fcntl.flock(held, fcntl.LOCK_EX)  # a run of another process, still going (flock is per open file)
    try:
        land(lake, "agregadas", {"a.atom": page([(1, day(3)), (2, day(3))])})
        summary = ingest(spark, lake, "agregadas", "r1")
        assert summary["silver"]["entries"] == 2
        assert table(spark, lake, "entries").count() == 2
        assert sorted(p.name for p in staging.iterdir()) == ["live-run"]
    finally:
        os.close(held)
