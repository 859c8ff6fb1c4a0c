"""parse_page on every real sample page, and on real pages corrupted the ways real feeds break."""

from __future__ import annotations

import re
import time
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from lxml import etree

from placsp_provider import settings
from placsp_provider.datasets import Dataset, get_dataset
from placsp_provider.dead_letters.record_bytes import parse_dead_letter
from placsp_provider.feed.prolog import to_utf8
from placsp_provider.feed.xml import ATOM_NS, DELETED_ENTRY_TAG, ENTRY_TAG, TOMBSTONE_NS, make_parser
from placsp_provider.parser import page_parser, page_split, silver_schema
from placsp_provider.parser.page_parser import (
    DEAD_LETTER_KEYS,
    PageParseResult,
    parse_page,
    parse_record,
)
from placsp_provider.spark import tables as spark_tables

pytestmark = pytest.mark.unit

SAMPLES = Path(__file__).resolve().parents[2] / "include" / "placsp_samples"
PAGE_2022 = SAMPLES / "1044_agregadas" / "PlataformasAgregadasSinMenores_20220104_030016_1.atom"
VERSION7 = SAMPLES / "643_licitaciones" / "resolvedWithLotsAllAwarded" / "version7.atom"
VERSION11 = SAMPLES / "643_licitaciones" / "resolvedWithNoLots" / "version11.atom"
MENORES = SAMPLES / "1143_menores" / "contratosMenoresPerfilesContratantes.atom"
FRAGMENT = next((SAMPLES / "643_licitaciones" / "fragment_not_wellformed").glob("*.atom"))
ZIP_2019 = SAMPLES / "1044_agregadas" / "PlataformasAgregadasSinMenores_2019.zip"

AGREGADAS = get_dataset("agregadas")
LICITACIONES = get_dataset("licitaciones")
ID_1044 = "https://contrataciondelestado.es/sindicacion/PlataformasAgregadasSinMenores/"

# (entries, tombstones) per page, from SOURCES.md and grep; cross-checked below against lxml.
EXPECTED_COUNTS = {
    "PlataformasAgregadasSinMenores_20220104_030016_1.atom": (117, 383),
    "PlataformasAgregadasSinMenores_20220104_030016_1_single.atom": (1, 0),
    "PlataformasAgregadasSinMenores_20220105_030012.atom": (475, 25),
    "PlataformasAgregadasSinMenores_20220106_030013.atom": (476, 24),
    "PlataformasAgregadasSinMenores_20190103_031259.atom": (304, 196),
    "PlataformasAgregadasSinMenores_20190104_030736.atom": (494, 6),
    "PlataformasAgregadasSinMenores_20190105_030744.atom": (498, 2),
    "contratosMenoresPerfilesContratantes.atom": (2, 0),
    "version7.atom": (1, 0),
    "version11.atom": (1, 0),
    FRAGMENT.name: (3, 0),
}


# ---------------------------------------------------------------------------------------------------
# helpers


def _sample_pages() -> Iterator[tuple[str, Dataset, bytes]]:
    for path in sorted(SAMPLES.rglob("*.atom")):
        dataset = get_dataset(path.relative_to(SAMPLES).parts[0].split("_")[0])
        yield path.name, dataset, path.read_bytes()
    for archive in sorted(SAMPLES.rglob("*.zip")):
        with zipfile.ZipFile(archive) as zf:
            for member in zf.namelist():
                yield member, get_dataset("agregadas"), zf.read(member)


SAMPLE_PAGES = list(_sample_pages())


def assert_conserved(result: PageParseResult, data: bytes) -> None:
    """Every record start tag -> exactly one row or exactly one dead letter; rows fit the schemas."""
    assert result.records_seen == result.entries_seen + result.tombstones_seen
    kinds = Counter(d["record_kind"] for d in result.dead_letters)
    for dead_letter in result.dead_letters:
        assert tuple(dead_letter) == DEAD_LETTER_KEYS
    if any(d["error_type"] == "dtd_refused" for d in result.dead_letters):
        # a refused page is one page dead letter standing for all its records (documented)
        assert len(result.dead_letters) == 1 and kinds["page"] == 1
        assert not (result.entries or result.tombstones or result.lots or result.results)
        return
    assert result.entries_seen == len(result.entries) + kinds["entry"]
    assert result.tombstones_seen == len(result.tombstones) + kinds["tombstone"]
    # the dead letters point at distinct records the splitter found
    starts = {span.start for span in page_split.scan_page(data).records}
    offsets = [d["record_offset"] for d in result.dead_letters if d["record_kind"] != "page"]
    assert len(offsets) == len(set(offsets)) and set(offsets) <= starts
    for table, schema in silver_schema.SCHEMAS.items():
        rows = getattr(result, table)
        for row in rows:
            assert set(row) == set(schema.names), table
        assert silver_schema.record_batch(table, rows).num_rows == len(rows)


def _parse(data: bytes, dataset: Dataset = AGREGADAS, source_file: str = "page.atom") -> PageParseResult:
    result = parse_page(data, dataset=dataset, source_file=source_file)
    assert_conserved(result, data)
    return result


def _real_parts(path: Path = PAGE_2022) -> tuple[bytes, list[bytes], list[bytes]]:
    """(header up to the first record, tombstone records, entry records) of a real page, by plain finds."""
    data = path.read_bytes()
    first = min(i for i in (data.find(b"<at:deleted-entry"), data.find(b"<entry>")) if i >= 0)
    tombstones = re.findall(rb"<at:deleted-entry [^>]*/>", data)
    entries = []
    position = data.find(b"<entry>")
    while position >= 0:
        end = data.index(b"</entry>", position) + len(b"</entry>")
        entries.append(data[position:end])
        position = data.find(b"<entry>", end)
    return data[:first], tombstones, entries


HEADER, TOMBSTONES, ENTRIES = _real_parts()


def _small_page(
    entries: list[bytes] | None = None, tombstones: list[bytes] | None = None, footer: bytes = b"</feed>\n"
) -> bytes:
    """A page made of real records: the real header, 2 real tombstones and 5 real entries by default."""
    records = (TOMBSTONES[:2] if tombstones is None else tombstones) + (ENTRIES[:5] if entries is None else entries)
    return HEADER + b"\n    ".join(records) + b"\n" + footer


def _entry_id(entry: bytes) -> str:
    return re.search(rb"<id>([^<]+)</id>", entry).group(1).decode()  # type: ignore[union-attr]


def _without_digest(rows: list[dict]) -> list[dict]:
    """Rows without the record digest (`ingest.rules`' last tie-break): what other bytes carry alike."""
    return [{k: v for k, v in row.items() if k != "_record_digest"} for row in rows]


def _replace_once(data: bytes, old: bytes, new: bytes) -> bytes:
    assert old in data, old
    return data.replace(old, new, 1)


def _first_entry_with(*needles: bytes) -> int:
    return next(i for i, e in enumerate(ENTRIES) if all(n in e for n in needles))


# ---------------------------------------------------------------------------------------------------
# every real sample


@pytest.mark.parametrize(("name", "dataset", "data"), SAMPLE_PAGES, ids=[p[0] for p in SAMPLE_PAGES])
def test_every_sample_page_is_conserved_and_counted(name: str, dataset: Dataset, data: bytes) -> None:
    result = _parse(data, dataset, name)
    assert (result.entries_seen, result.tombstones_seen) == EXPECTED_COUNTS[name]
    if name == FRAGMENT.name:
        assert data.count(b"<entry>") == 3
        return
    assert (result.entries_seen, result.tombstones_seen) == _lxml_counts(data)
    assert result.dead_letters == []  # the well-formed real pages have nothing wrong
    assert all(row["_source_file"] == name for row in result.entries + result.tombstones)


def _lxml_counts(data: bytes) -> tuple[int, int]:
    root = etree.fromstring(data, parser=make_parser())
    return len(root.findall(ENTRY_TAG)), len(root.findall(DELETED_ENTRY_TAG))


def test_2019_entry_2603853_keeps_both_publications_of_one_status() -> None:
    with zipfile.ZipFile(ZIP_2019) as zf:
        data = zf.read("PlataformasAgregadasSinMenores_20190103_031259.atom")
    result = _parse(data)
    (entry,) = [e for e in result.entries if e["entry_id"] == ID_1044 + "2603853"]
    pcsp_awards = [
        n["issue_date"]
        for n in entry["notices"]
        if n["notice_type_code"] == "DOC_CAN_ADJ"
        and n["publication_media"] == "Plataforma de Contratación del Sector Público"
    ]
    assert pcsp_awards == ["2018-11-27", "2019-01-02"]  # two references at one level: both kept
    assert len(entry["notices"]) == 5
    assert entry["tax_exclusive_amount"] == Decimal("79013")  # the summary writes it "79,013"
    (result_row,) = [r for r in result.results if r["entry_id"] == entry["entry_id"]]
    assert (result_row["result_code"], result_row["winner_count"], result_row["winner_name"]) == (
        "3",
        0,
        None,
    )


def test_version7_who_won_what_for_how_much() -> None:
    result = _parse(VERSION7.read_bytes(), LICITACIONES, "version7.atom")
    (entry,) = result.entries
    entry_id = "https://contrataciondelestado.es/sindicacion/licitacionesPerfilContratante/16998351"
    updated = datetime(2025, 8, 18, 7, 0, tzinfo=UTC)
    assert entry["entry_id"] == entry_id and entry["folder_number"] == 16998351
    assert entry["updated"] == entry["entry_updated"] == updated
    assert entry["contract_folder_id"] == "CONT-010/2025 (58996/2024)"
    assert entry["status_code"] == "RES"
    assert entry["ted_uuid"] == "0f7f1ec5-4708-4222-b892-73f17f067ce2"
    assert entry["party_name"] == "Junta de Gobierno del Ayuntamiento de Gandía"
    assert (entry["party_nif"], entry["party_id_plataforma"], entry["party_dir3"]) == (
        "P4613300E",
        "30930440136804",
        None,
    )
    assert entry["parent_party_names"][:2] == ["Gandía", "Ayuntamientos"]
    assert entry["parent_party_names"][-1] == "Sector Público"
    assert (entry["project_type_code"], entry["project_subtype_code"]) == ("1", "2")
    assert entry["estimated_overall_amount"] == Decimal("390804")
    assert entry["total_amount"] == Decimal("472872.84")
    assert entry["tax_exclusive_amount"] == Decimal("390804")
    assert entry["budget_currency"] == "EUR"
    assert entry["cpv_codes"] == ["34410000", "66114000", "34114100"]
    assert (entry["nuts_code"], entry["location_name"]) == ("ES523", "Valencia/València")
    assert (entry["planned_duration"], entry["planned_duration_unit"]) == ("48", "MON")
    assert (entry["procedure_code"], entry["urgency_code"], entry["contracting_system_code"]) == (
        "1",
        "1",
        "0",
    )
    assert (entry["submission_deadline_date"], entry["submission_deadline_time"]) == (
        "2025-04-25",
        "14:00:00",
    )
    assert entry["funding_program_codes"] == ["NO-EU"]
    assert len(entry["notices"]) == 15
    assert entry["notices"][0] == {
        "notice_type_code": "DOC_CN",
        "publication_media": "DOUE",
        "issue_date": "2025-03-27",
    }
    assert (entry["lot_count"], entry["result_count"]) == (3, 3)

    lots = {lot["lot_id"]: lot for lot in result.lots}
    assert sorted(lots) == ["1", "2", "3"]
    assert lots["1"]["name"] == "Lote 1: Motocicleta Unidad Tráfico."
    assert (lots["1"]["total_amount"], lots["1"]["tax_exclusive_amount"]) == (
        Decimal("278706.56"),
        Decimal("230336"),
    )
    assert (lots["3"]["total_amount"], lots["3"]["currency"]) == (Decimal("54813"), "EUR")
    assert lots["2"]["cpv_codes"] == ["34410000", "34114100", "66114000"]
    assert all(lot["entry_updated"] == updated for lot in result.lots)

    awards = [
        (
            r["lot_id"],
            r["winner_name"],
            r["winner_id"],
            r["winner_id_scheme"],
            r["awarded_tax_exclusive_amount"],
            r["awarded_payable_amount"],
            r["awarded_currency"],
        )
        for r in result.results
    ]
    assert awards == [
        ("1", "COOLTRA MOTOS, S.L.", "B64146632", "NIF", Decimal("214656"), Decimal("259733.76"), "EUR"),
        ("2", "COOLTRA MOTOS, S.L.", "B64146632", "NIF", Decimal("107328"), Decimal("129866.88"), "EUR"),
        ("3", "COOLTRA MOTOS, S.L.", "B64146632", "NIF", Decimal("44832"), Decimal("54246.72"), "EUR"),
    ]
    first = result.results[0]
    assert (first["result_code"], first["award_date"], first["received_tender_quantity"]) == (
        "9",
        "2025-06-20",
        1,
    )
    assert (first["contract_id"], first["contract_issue_date"], first["sme_awarded"]) == (
        "2025-0079",
        "2025-08-08",
        False,
    )
    assert result.results[2]["sme_awarded"] is True
    assert [(r["result_position"], r["winner_position"]) for r in result.results] == [(0, 0), (1, 0), (2, 0)]

    documents = {(d["document_kind"], d["position"]): d for d in result.documents}
    assert documents[("legal", 0)]["document_id"] == "Pcap.pdf"
    assert documents[("legal", 0)]["document_hash"] == "koGyzrYnbZTzjiYyLfyfXtZxH0A="
    assert documents[("legal", 0)]["uri"].startswith(
        "https://contrataciondelestado.es/FileSystem/servlet/GetDocumentByIdServlet?DocumentIdParam=JbTPAV3y"
    )
    assert documents[("technical", 0)]["document_id"] == "Pptp.pdf"
    assert [documents[("additional", i)]["document_id"] for i in (0, 1)] == [
        "Acuerdo JGL aprobacion exp.pdf",
        "Memoria justificativa contrato.pdf",
    ]
    assert [documents[("additional_publication", i)]["document_type_code"] for i in range(3)] == ["ACTA_ADJ"] * 3
    assert documents[("additional_publication", 0)]["file_name"] == "Decreto adjudicacion.pdf"
    assert documents[("general", 1)]["file_name"] == "Actos públicos informativos o de aperturas de ofertas"
    assert documents[("procurement_legislation", 0)]["document_id"] == "2014/24/EU"
    assert entry["document_count"] == len(result.documents) == 10


def test_version11_no_lots_fourteen_general_documents() -> None:
    result = _parse(VERSION11.read_bytes(), LICITACIONES, "version11.atom")
    (entry,) = result.entries
    assert entry["folder_number"] == 17165996
    assert result.lots == [] and entry["lot_count"] == 0
    general = [d for d in result.documents if d["document_kind"] == "general"]
    assert len(general) == 14
    assert [d["position"] for d in general] == list(range(14))
    assert all(d["uri"] and d["document_id"] for d in general)
    assert len(result.results) == entry["result_count"] == 1


def test_same_id_twice_with_different_updated_gives_both_rows() -> None:
    # real head page: the second copy was hand-edited upstream (folder id suffixed, updated +20 ms)
    result = _parse(MENORES.read_bytes(), get_dataset("menores"), MENORES.name)
    assert [e["entry_id"] for e in result.entries] == [
        "https://contrataciondelestado.es/sindicacion/datosAbiertosMenores/16589552"
    ] * 2
    assert [e["updated"] for e in result.entries] == [
        datetime(2025, 2, 1, 1, 3, 51, 620000, tzinfo=UTC),
        datetime(2025, 2, 1, 1, 3, 51, 640000, tzinfo=UTC),
    ]
    assert result.entries[0]["contract_folder_id"] != result.entries[1]["contract_folder_id"]


def test_rows_do_not_depend_on_the_prefixes_the_producer_picked() -> None:
    data = VERSION7.read_bytes()
    renamed = re.sub(
        rb"<(/?)(feed|entry|id|link|summary|title|updated|author|name|uri|email)([\s>/])",
        rb"<\1atom:\2\3",
        data,
    )
    renamed = renamed.replace(f'xmlns="{ATOM_NS}"'.encode(), f'xmlns:atom="{ATOM_NS}"'.encode())
    renamed = renamed.replace(b"xmlns:cbc=", b"xmlns:basic=").replace(b"<cbc:", b"<basic:")
    renamed = renamed.replace(b"</cbc:", b"</basic:")
    assert b"<cbc:" not in renamed and b"<atom:entry>" in renamed
    original = _parse(data, LICITACIONES, "f")
    again = _parse(renamed, LICITACIONES, "f")
    for table in ("entries", "lots", "documents", "results"):  # the same values; other bytes, another digest
        assert _without_digest(getattr(again, table)) == _without_digest(getattr(original, table))


def test_fragment_without_root_is_three_unbound_prefix_dead_letters() -> None:
    data = FRAGMENT.read_bytes()
    result = _parse(data, LICITACIONES, FRAGMENT.name)
    assert result.entries == [] and len(result.dead_letters) == 3
    for dead_letter in result.dead_letters:
        assert (dead_letter["stage"], dead_letter["error_type"], dead_letter["record_kind"]) == (
            "parse",
            "unbound_prefix",
            "entry",
        )
        assert dead_letter["entry_id"] == (
            "https://contrataciondelestado.es/sindicacion/licitacionesPerfilContratante/17540944"
        )
        assert dead_letter["namespace_context"] == ""
        assert (
            "lxml: Namespace prefix cac-place-ext on ContractFolderStatus is not defined, line 7, column 44"
            in (dead_letter["error_message"])
        )
        assert dead_letter["raw_record"].startswith("<entry>")
        assert dead_letter["raw_record"].endswith("</entry>")
    assert [d["record_offset"] for d in result.dead_letters] == [m.start() for m in re.finditer(rb"<entry>", data)]
    assert "page line 324" in result.dead_letters[1]["error_message"]


# ---------------------------------------------------------------------------------------------------
# real pages, corrupted


def test_unclosed_tag_in_entry_2_of_5_costs_only_that_entry() -> None:
    entries = ENTRIES[:5]
    broken = _replace_once(entries[1], b"</cbc:ContractFolderID>", b"")
    page = _small_page([entries[0], broken, *entries[2:]])
    result = _parse(page)
    assert [e["entry_id"] for e in result.entries] == [_entry_id(e) for e in entries if e is not entries[1]]
    assert len(result.tombstones) == 2
    (dead_letter,) = result.dead_letters
    assert (dead_letter["stage"], dead_letter["error_type"], dead_letter["entry_id"]) == (
        "parse",
        "xml_syntax",
        _entry_id(entries[1]),
    )
    record_line = broken[: broken.index(b"<cbc:ContractFolderID>")].count(b"\n") + 1
    assert (
        f"lxml: Opening and ending tag mismatch: ContractFolderID line {record_line} and ContractFolderStatus"
        in (dead_letter["error_message"])
    )
    start = page.index(broken)
    error_line = page[: page.index(b"</cac-place-ext:ContractFolderStatus>", start)].count(b"\n") + 1
    assert f"page line {error_line}," in dead_letter["error_message"]
    assert dead_letter["record_offset"] == start
    assert dead_letter["raw_record"] == broken.decode()
    for needed in ("agregadas", "page.atom", _entry_id(entries[1]), "stage parse"):
        assert needed in dead_letter["error_message"]


def test_missing_end_tag_of_entry_2_does_not_swallow_entry_3() -> None:
    entries = ENTRIES[:5]
    broken = _replace_once(entries[1], b"</entry>", b"")
    result = _parse(_small_page([entries[0], broken, *entries[2:]]))
    assert len(result.entries) == 4
    (dead_letter,) = result.dead_letters
    assert dead_letter["error_type"] == "unclosed_record"
    assert dead_letter["entry_id"] == _entry_id(entries[1])
    assert "lxml: Opening and ending tag mismatch: entry line 1 and placsp-record" in dead_letter["error_message"]
    assert "placsp-record is the synthetic element" in dead_letter["error_message"]
    # replayed unchanged, it is still reported as unclosed
    replayed = parse_dead_letter(dead_letter, dataset=AGREGADAS)
    assert [d["error_type"] for d in replayed.dead_letters] == ["unclosed_record"]


def test_na_amount_is_a_validation_dead_letter() -> None:
    entries = ENTRIES[:5]
    broken = re.sub(rb'(<cbc:TaxExclusiveAmount currencyID="EUR">)[^<]*', rb"\1N/A", entries[2], count=1)
    assert broken != entries[2]
    result = _parse(_small_page([*entries[:2], broken, *entries[3:]]))
    assert len(result.entries) == 4
    (dead_letter,) = result.dead_letters
    assert (dead_letter["stage"], dead_letter["error_type"]) == ("validation", "invalid_amount")
    assert dead_letter["entry_id"] == _entry_id(entries[2])
    assert "tax_exclusive_amount: not an amount: 'N/A'" in dead_letter["error_message"]
    # no partial rows of the rejected entry leak into the child tables
    assert all(r["entry_id"] != _entry_id(entries[2]) for r in result.results + result.documents)


def test_decimal_comma_amounts_are_parsed_exactly() -> None:
    index = _first_entry_with(b"<cbc:EstimatedOverallContractAmount", b"<cbc:TaxExclusiveAmount")
    entry = re.sub(rb'(<cbc:TaxExclusiveAmount currencyID="EUR">)[^<]*', rb"\g<1>135553,26", ENTRIES[index], count=1)
    entry = re.sub(rb"(<cbc:EstimatedOverallContractAmount[^>]*>)[^<]*", rb"\g<1>1.234.567,89", entry, count=1)
    (row,) = _parse(_small_page([entry])).entries
    assert row["tax_exclusive_amount"] == Decimal("135553.26")
    assert str(row["tax_exclusive_amount"]) == "135553.26"
    assert row["estimated_overall_amount"] == Decimal("1234567.89")


def test_elements_repeated_that_are_normally_single_are_all_kept() -> None:
    index = _first_entry_with(b"<cac:TenderResult>", b"<cac-place-ext:ValidNoticeInfo>", b"<cac:RequiredCommodity")
    entry = ENTRIES[index]

    def duplicate(data: bytes, tag: bytes, change: Callable[[bytes], bytes]) -> bytes:
        block = re.search(rb"<" + tag + rb">.*?</" + tag + rb">", data, re.DOTALL).group(0)  # type: ignore[union-attr]
        return _replace_once(data, block, block + change(block))

    entry = duplicate(
        entry,
        b"cac:TenderResult",
        lambda b: re.sub(rb"<cbc:ResultCode([^>]*)>[^<]*", rb"<cbc:ResultCode\1>99", b),
    )
    entry = duplicate(
        entry,
        b"cac-place-ext:ValidNoticeInfo",
        lambda b: re.sub(rb"(<cbc-place-ext:NoticeTypeCode[^>]*>)[^<]*", rb"\1DOC_EXTRA", b),
    )
    entry = duplicate(
        entry,
        b"cac:RequiredCommodityClassification",
        lambda b: re.sub(rb"(<cbc:ItemClassificationCode[^>]*>)[^<]*", rb"\g<1>03000000", b),
    )
    original = _parse(_small_page([ENTRIES[index]]))
    result = _parse(_small_page([entry]))
    (row,) = result.entries
    assert row["cpv_codes"] == [
        *original.entries[0]["cpv_codes"][:1],
        "03000000",
        *original.entries[0]["cpv_codes"][1:],
    ]
    assert "03000000" in row["cpv_codes"]  # a CPV code stays a string, leading zero included
    assert [n["notice_type_code"] for n in row["notices"]].count("DOC_EXTRA") >= 1
    assert len(row["notices"]) > len(original.entries[0]["notices"])
    assert row["result_count"] == original.entries[0]["result_count"] + 1
    assert len(result.results) > len(original.results)
    assert "99" in [r["result_code"] for r in result.results]
    assert len({(r["result_position"], r["winner_position"]) for r in result.results}) == len(result.results)


def test_truncated_mid_entry_keeps_the_complete_records() -> None:
    entries = ENTRIES[:4]
    cut = entries[3][: len(entries[3]) // 2]
    page = HEADER + b"\n".join(TOMBSTONES[:2] + entries[:3] + [cut])
    result = _parse(page)
    assert len(result.entries) == 3 and len(result.tombstones) == 2
    (dead_letter,) = result.dead_letters  # the damaged record says it; no extra page dead letter
    assert (dead_letter["error_type"], dead_letter["record_kind"]) == ("truncated", "entry")
    assert dead_letter["entry_id"] == _entry_id(entries[3])
    assert "lxml: " in dead_letter["error_message"]


def test_truncated_between_records_is_flagged_on_the_page() -> None:
    result = _parse(_small_page(footer=b""))
    assert len(result.entries) == 5
    (dead_letter,) = result.dead_letters
    assert (dead_letter["record_kind"], dead_letter["error_type"]) == ("page", "truncated")
    assert dead_letter["raw_record"].endswith("</entry>\n")


def test_latin1_bytes_fail_only_their_record_and_stay_visible() -> None:
    entries = ENTRIES[:5]
    assert "ó".encode() in entries[1]
    broken = _replace_once(entries[1], "ó".encode(), b"\xf3")
    result = _parse(_small_page([entries[0], broken, *entries[2:]]))
    assert len(result.entries) == 4
    (dead_letter,) = result.dead_letters
    assert (dead_letter["stage"], dead_letter["error_type"]) == ("parse", "encoding")
    assert "\\xf3" in dead_letter["raw_record"]
    assert "lxml: Invalid bytes in character encoding" in dead_letter["error_message"] or (
        "not proper UTF-8" in dead_letter["error_message"]
    )


def test_replacement_characters_are_an_encoding_error() -> None:
    broken = _replace_once(ENTRIES[0], "ó".encode(), "\ufffd".encode())
    result = _parse(_small_page([broken, ENTRIES[1]]))
    assert len(result.entries) == 1
    (dead_letter,) = result.dead_letters
    assert (dead_letter["stage"], dead_letter["error_type"]) == ("validation", "encoding_error")
    assert "U+FFFD" in dead_letter["error_message"]


def test_tombstones_with_and_without_comment() -> None:
    def tombstone(
        number: int,
        when: str = "2022-07-04T10:00:00.5+02:00",
        comment: str | None = None,
        ref: str | None = None,
    ) -> bytes:
        ref = ref or f"{ID_1044}{number}"
        if comment is None:
            return f'<at:deleted-entry ref="{ref}" when="{when}"/>'.encode()
        body = f'<at:deleted-entry ref="{ref}" when="{when}"><at:comment type="{comment}"/>'
        return (body + "</at:deleted-entry>").encode()

    header = HEADER.replace(f'xmlns="{ATOM_NS}"'.encode(), f'xmlns="{ATOM_NS}" xmlns:at="{TOMBSTONE_NS}"'.encode())
    records = [
        tombstone(1, comment="ANULADA"),
        tombstone(2),
        tombstone(3, comment="CERRADA"),
        tombstone(4, comment="BORRADA"),
        tombstone(5, when="ayer"),
        tombstone(6, ref="https://contrataciondelestado.es/sindicacion/datosAbiertosMenores/6"),
    ]
    page = header + b"\n".join(records) + b"</feed>"
    result = _parse(page)
    assert [(t["folder_number"], t["deletion_type"]) for t in result.tombstones] == [
        (1, "ANULADA"),
        (2, None),
        (3, "CERRADA"),
    ]
    assert result.tombstones[0]["deleted_at"] == datetime(2022, 7, 4, 8, 0, 0, 500000, tzinfo=UTC)
    assert result.tombstones[0]["entry_id"] == f"{ID_1044}1"
    assert [(d["record_kind"], d["error_type"]) for d in result.dead_letters] == [
        ("tombstone", "invalid_tombstone"),
        ("tombstone", "invalid_timestamp"),
        ("tombstone", "invalid_entry_id"),
    ]
    assert result.dead_letters[0]["entry_id"] == f"{ID_1044}4"
    assert f'xmlns:at="{TOMBSTONE_NS}"' in result.dead_letters[0]["namespace_context"]


def test_empty_feed_and_empty_bytes() -> None:
    for data in (HEADER.split(b"<at:deleted-entry")[0] + b"</feed>", b""):
        result = _parse(data)
        assert (result.records_seen, result.dead_letters, result.entries) == (0, [], [])


def test_bytes_that_are_not_a_feed_are_one_page_dead_letter() -> None:
    result = _parse(b"<html><body>Servicio no disponible</body></html>")
    (dead_letter,) = result.dead_letters
    assert (dead_letter["record_kind"], dead_letter["error_type"], dead_letter["stage"]) == (
        "page",
        "not_a_feed",
        "parse",
    )
    assert "html" in dead_letter["error_message"]


def test_record_in_no_namespace_is_an_unexpected_element() -> None:
    result = _parse(b"<entry><id>" + ID_1044.encode() + b"1</id><title>t</title></entry>")
    (dead_letter,) = result.dead_letters
    assert dead_letter["error_type"] == "unexpected_element"
    assert dead_letter["entry_id"] == f"{ID_1044}1"


ENTITY_BOMB = (
    b'<?xml version="1.0"?>\n<!DOCTYPE feed [\n<!ENTITY lol "lol">\n'
    + b"".join(
        f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">\n'.encode() for i in range(1, 10)
    )
    + b"]>\n"
)


def test_entity_bomb_page_is_refused_without_expanding() -> None:
    body = _small_page().split(b"?>", 1)[1].replace(b"<title>", b"<title>&lol9;", 1)
    page = ENTITY_BOMB + body
    result = _parse(page)
    (dead_letter,) = result.dead_letters
    assert (dead_letter["record_kind"], dead_letter["error_type"]) == ("page", "dtd_refused")
    assert (result.entries_seen, result.tombstones_seen, result.records_seen) == (5, 2, 7)
    assert "lol" * 11 not in repr(result)  # nothing was expanded
    assert dead_letter["raw_record"].startswith('<?xml version="1.0"?>\n<!DOCTYPE feed [')


def test_external_entity_is_neither_fetched_nor_expanded(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-CONTENT-4242")
    doctype = f'<?xml version="1.0"?>\n<!DOCTYPE feed [<!ENTITY xxe SYSTEM "file://{secret}">]>\n'.encode()
    body = _small_page().split(b"?>", 1)[1].replace(b"<title>", b"<title>&xxe;", 1)
    result = _parse(doctype + body)
    assert [d["error_type"] for d in result.dead_letters] == ["dtd_refused"]
    assert "TOP-SECRET-CONTENT-4242" not in repr(result)


def test_entity_reference_without_dtd_fails_its_record_only(tmp_path: Path) -> None:
    broken = _replace_once(ENTRIES[0], b"<title>", b"<title>&xxe;")
    result = _parse(_small_page([broken, ENTRIES[1]]))
    (dead_letter,) = result.dead_letters
    assert dead_letter["error_type"] == "xml_syntax"
    assert "lxml: Entity 'xxe' not defined" in dead_letter["error_message"]


def test_a_bug_in_extraction_costs_one_record_visibly(monkeypatch: pytest.MonkeyPatch) -> None:
    real_extract = page_parser.extract_entry

    def flaky(element: etree._Element, **kwargs: object) -> object:
        if _entry_id(ENTRIES[1]).encode() in etree.tostring(element):
            raise KeyError("boom")
        return real_extract(element, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(page_parser, "extract_entry", flaky)
    result = _parse(_small_page(ENTRIES[:3]))
    assert len(result.entries) == 2
    (dead_letter,) = result.dead_letters
    assert (dead_letter["stage"], dead_letter["error_type"]) == ("validation", "extraction_failed")
    assert dead_letter["entry_id"] == _entry_id(ENTRIES[1])
    assert "KeyError: 'boom'" in dead_letter["error_message"]


# ---------------------------------------------------------------------------------------------------
# schemas


def test_spark_schemas_follow_the_arrow_schemas() -> None:
    from placsp_provider.ingest.tables import table_schema
    from placsp_provider.lake import LAKE_TABLES

    for table in LAKE_TABLES:
        assert spark_tables.spark_table_schema(table).fieldNames() == table_schema(table).names
    results = {f.name: f for f in spark_tables.spark_table_schema("results").fields}
    assert not results["entry_updated"].nullable and results["entry_updated"].dataType.simpleString() == "timestamp"
    assert results["awarded_payable_amount"].dataType.simpleString() == "decimal(38,6)"
    identifiers = results["winner_identifiers"].dataType.simpleString()
    assert identifiers == "array<struct<scheme_name:string,id:string>>" and not results["winner_identifiers"].nullable


def test_record_batch_refuses_nulls_in_required_columns() -> None:
    # Arrow itself ignores nullable=False when building from Python rows
    tombstone = {
        "dataset": "agregadas",
        "entry_id": None,
        "folder_number": 1,
        "deleted_at": datetime(2022, 1, 1, tzinfo=UTC),
        "deletion_type": None,
        "_source_file": "f",
    }
    with pytest.raises(ValueError, match="required column entry_id"):
        silver_schema.record_batch("tombstones", [tombstone])


# ---------------------------------------------------------------------------------------------------
# replay


def test_replaying_a_fixed_dead_letter_yields_the_valid_rows() -> None:
    entries = ENTRIES[:3]
    broken = re.sub(rb'(<cbc:TaxExclusiveAmount currencyID="EUR">)[^<]*', rb"\1N/A", entries[1], count=1)
    (dead_letter,) = _parse(_small_page([entries[0], broken, entries[2]])).dead_letters

    unchanged = parse_dead_letter(dead_letter, dataset=AGREGADAS)  # same input, same verdict
    assert [d["error_type"] for d in unchanged.dead_letters] == ["invalid_amount"]
    assert unchanged.dead_letters[0]["record_offset"] == dead_letter["record_offset"]

    fixed = dead_letter["raw_record"].replace(">N/A<", ">123,45<")
    replayed = parse_dead_letter(dead_letter, dataset=AGREGADAS, raw_record=fixed)
    assert replayed.dead_letters == [] and (replayed.entries_seen, replayed.records_seen) == (1, 1)
    (row,) = replayed.entries
    assert row["entry_id"] == _entry_id(entries[1]) and row["tax_exclusive_amount"] == Decimal("123.45")
    assert row["_source_file"] == "page.atom"
    reference = _parse(_small_page([entries[1]])).entries[0]
    different = ("tax_exclusive_amount", "_record_digest")  # the fixed amount, and so the record's bytes
    assert {k: v for k, v in row.items() if k not in different} == {
        k: v for k, v in reference.items() if k not in different
    }


def test_replaying_an_encoding_dead_letter_after_fixing_the_escape() -> None:
    broken = _replace_once(ENTRIES[0], "ó".encode(), b"\xf3")
    (dead_letter,) = _parse(_small_page([broken])).dead_letters
    fixed = dead_letter["raw_record"].replace("\\xf3", "ó")
    replayed = parse_dead_letter(dead_letter, dataset=AGREGADAS, raw_record=fixed)
    assert [e["entry_id"] for e in replayed.entries] == [_entry_id(ENTRIES[0])]


def test_replaying_the_fragment_with_the_namespaces_it_lacked() -> None:
    dead_letter = _parse(FRAGMENT.read_bytes(), LICITACIONES, FRAGMENT.name).dead_letters[0]
    context = page_split.scan_page(VERSION7.read_bytes()).namespace_context
    replayed = parse_record(
        dead_letter["raw_record"],
        kind="entry",
        dataset=LICITACIONES,
        source_file=FRAGMENT.name,
        namespace_context=context,
    )
    assert replayed.dead_letters == []
    (row,) = replayed.entries
    assert row["folder_number"] == 17540944
    assert row["updated"] == datetime(2025, 8, 18, 7, 0, tzinfo=UTC)


def test_a_replay_scans_the_record_inside_the_page_roots_declarations() -> None:
    # `x` is bound by the page root to another namespace: `<x:entry>` inside a record is no record start
    # for the page scan, and must be none for the replay's either, or the same bytes get another verdict
    # (the cut record was `truncated` at ingest; scanned alone it read as two records, `xml_syntax`).
    root = b'<feed xmlns:x="urn:example:other" '
    nested = _replace_once(ENTRIES[1], b"<title>", b"<x:entry>n</x:entry><title>")
    page = _small_page([ENTRIES[0], nested]).replace(b"<feed ", root, 1)
    cut = page[: page.rindex(b"</entry>") - 200]
    (dead_letter,) = [d for d in _parse(cut).dead_letters if d["record_kind"] == "entry"]
    assert dead_letter["error_type"] == "truncated"
    replayed = parse_dead_letter(dead_letter, dataset=AGREGADAS)
    assert [d["error_type"] for d in replayed.dead_letters] == ["truncated"]


def test_a_replay_reads_the_bytes_with_the_pages_declared_encoding() -> None:
    # A Latin-1 page (declared): its records parse with that declaration at ingest and in the replay,
    # which reads raw_bytes (declaration first), not raw_record's text (where 0xF3 shows as \xf3).
    latin1 = _small_page(ENTRIES[:2]).decode("utf-8").encode("latin-1", "replace")
    latin1 = latin1.replace(b'encoding="UTF-8"', b'encoding="ISO-8859-1"', 1)
    broken = re.sub(rb'(<cbc:TaxExclusiveAmount currencyID="EUR">)[^<]*', rb"\1N/A", latin1, count=1)
    (dead_letter,) = _parse(broken).dead_letters
    assert dead_letter["error_type"] == "invalid_amount"
    assert dead_letter["raw_bytes"].startswith(b'<?xml version="1.0" encoding="ISO-8859-1"')
    replayed = parse_dead_letter(dead_letter, dataset=AGREGADAS)
    assert [d["error_type"] for d in replayed.dead_letters] == ["invalid_amount"]


def test_parse_record_refuses_page_dead_letters() -> None:
    with pytest.raises(ValueError, match="record kind"):
        parse_record(b"<x/>", kind="page", dataset=AGREGADAS, source_file="f")


# ---------------------------------------------------------------------------------------------------
# speed (generous bound: the target is well under 0.3 s; this only catches pathological regressions)


def test_a_3_mb_page_costs_a_small_multiple_of_lxml_building_its_tree() -> None:
    # A guard against an accidental quadratic walk, not a benchmark (benchmarks/ measures speed): the
    # reference is lxml building the same page's tree in this process, so a slow machine moves both.
    # Measured 6-9x on a quiet 2-core machine (the parser reads every entry's fields); best of three, CPU s.
    with zipfile.ZipFile(SAMPLES / "1044_agregadas" / "PlataformasAgregadasSinMenores_202201_05-06.zip") as zf:
        data = zf.read("PlataformasAgregadasSinMenores_20220105_030012.atom")
    hardened = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)
    reference = min(_cpu_seconds(lambda: etree.fromstring(data, hardened)) for _ in range(3))
    best = min(_cpu_seconds(lambda: parse_page(data, dataset=AGREGADAS, source_file="p")) for _ in range(3))
    assert best < 25 * reference, (best, reference)


def _cpu_seconds(action: Callable[[], object]) -> float:
    start = time.process_time()
    action()
    return time.process_time() - start


def _blanks_around_text(data: bytes) -> bytes:
    """Whitespace-only text next to comments, processing instructions and CDATA, where feeds have text."""
    data = data.replace(b"<title>", b"<title>\n   <!-- a comment first -->\n   ")
    data = data.replace(b"<cbc:URI>", b"<cbc:URI>\n  <?pi first?>\n  ")
    data = re.sub(rb"(<cbc:ContractFolderID>)([^<]*)(</)", rb"\1  <![CDATA[\2]]>  \3", data)
    return data.replace(b"<cbc:Name>", b"<cbc:Name>  \n  ")


@pytest.mark.parametrize(
    ("page", "dataset"),
    [(PAGE_2022, AGREGADAS), (VERSION7, LICITACIONES), (VERSION11, LICITACIONES), (MENORES, get_dataset("menores"))],
)
def test_dropping_blank_text_changes_no_row(page: Path, dataset: Dataset, monkeypatch: pytest.MonkeyPatch) -> None:
    # Records are parsed with `remove_blank_text` (a fifth fewer instructions): every row and dead
    # letter must be what a parser that keeps all text gives, also with blanks next to comments/CDATA.
    for data in (page.read_bytes(), _blanks_around_text(page.read_bytes())):
        fast = parse_page(data, dataset=dataset, source_file="p.atom")
        monkeypatch.setattr(page_parser, "_record_parser", make_parser)
        kept = parse_page(data, dataset=dataset, source_file="p.atom")
        monkeypatch.undo()
        assert fast == kept
        assert fast.entries or fast.tombstones


def _broken_pages() -> list[bytes]:
    """Pages with page-level dead letters and broken records: the cases a part boundary could split."""
    entries = ENTRIES[:9]
    latin1 = _replace_once(entries[4], "ó".encode(), b"\xf3")
    return [
        _small_page(footer=b""),  # cut between records: a page-level dead letter at the end
        HEADER + b"\n".join(TOMBSTONES[:3] + entries[:4] + [latin1] + entries[5:8] + [entries[8][:500]]),
        ENTITY_BOMB + _small_page().split(b"?>", 1)[1],  # refused whole
        b"<html><body>Servicio no disponible</body></html>",  # not a feed
        b"",
    ]


@pytest.mark.parametrize("bytes_per_part", [1, 5_000, 50_000, 10**9])
def test_parts_hold_exactly_the_rows_of_the_page(bytes_per_part: int) -> None:
    # A worker parses a page a part at a time (memory); the parts together must be parse_page's
    # result, in order, each part ending with the record that brings its bytes to the bound,
    # page-level dead letters last.
    pages = [(name, dataset, data) for name, dataset, data in SAMPLE_PAGES] + [
        (f"broken{i}", AGREGADAS, data) for i, data in enumerate(_broken_pages())
    ]
    for name, dataset, data in pages:
        whole = parse_page(data, dataset=dataset, source_file=name)
        parts = list(
            page_parser.parse_page_in_parts(data, dataset=dataset, source_file=name, bytes_per_part=bytes_per_part)
        )
        assert parts, name
        for table in ("entries", "lots", "documents", "results", "tombstones", "dead_letters"):
            assert [row for part in parts for row in getattr(part, table)] == getattr(whole, table), (name, table)
        # The records' sizes, as the splitter cut them, in order (read apart from the parser's parts).
        sizes = iter(span.end - span.start for span in page_split.scan_page(to_utf8(data)).records)
        for i, part in enumerate(parts):
            assert (part.entries_seen, part.tombstones_seen) == (whole.entries_seen, whole.tombstones_seen)
            records = (
                len(part.entries) + len(part.tombstones) + sum(d["record_kind"] != "page" for d in part.dead_letters)
            )
            held = [next(sizes) for _ in range(records)]
            if i < len(parts) - 1:
                assert sum(held) >= bytes_per_part > sum(held[:-1]), name  # the part's last record reached it
                assert not any(d["record_kind"] == "page" for d in part.dead_letters), name
        refused = any(d["error_type"] in ("dtd_refused", "not_a_feed") for d in whole.dead_letters)
        if not refused:
            assert next(sizes, None) is None, name  # every record the splitter found is in a part
        if bytes_per_part == 1 and not refused:
            assert len(parts) == max(1, whole.records_seen), name  # a record a part
        if bytes_per_part == 10**9:
            assert len(parts) == 1, name


def _pages_records_share_a_document_in() -> list[tuple[str, bytes]]:
    """Pages whose records are parsed as one document (`page_parser._parse_together`), and pages where
    that document would not give each record what its own gives."""
    entries = ENTRIES[:6]
    with_id = [_replace_once(e, b"<entry>", b'<entry xml:id="same">') for e in entries[:2]]
    return [
        ("real", _small_page()),
        (
            "a comment and a PI last",
            _small_page([entries[0].replace(b"</entry>", b"<!-- c --><?pi x?></entry>"), *entries[1:4]]),
        ),
        ("an xml:id in two records", _small_page([*with_id, *entries[2:4]])),
        (
            "records in no namespace",
            b"".join(b"<entry><id>" + ID_1044.encode() + b"%d</id></entry>" % i for i in range(3)),
        ),
        (
            "a record start in a comment",
            _small_page([_replace_once(entries[0], b"<title>", b"<!-- <entry> --><title>")]),
        ),
        *((f"broken{i}", data) for i, data in enumerate(_broken_pages())),
    ]


@pytest.mark.parametrize(("name", "data"), _pages_records_share_a_document_in())
def test_records_parsed_together_get_the_verdicts_they_get_alone(
    name: str, data: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Records are parsed ~32 to a document (a fifth cheaper); each must get exactly what its own
    # document gives: the same rows and dead letters, in order.
    together: list[bool] = []
    parse_together = page_parser._parse_together

    def spy(contexts: list, parser: etree.XMLParser) -> list | None:
        elements = parse_together(contexts, parser)
        together.append(elements is not None)
        return elements

    monkeypatch.setattr(page_parser, "_parse_together", spy)
    joint = parse_page(data, dataset=AGREGADAS, source_file="p.atom")
    monkeypatch.setattr(page_parser, "_TOGETHER_BYTES", 1)  # every record alone
    alone = parse_page(data, dataset=AGREGADAS, source_file="p.atom")
    assert joint == alone
    assert_conserved(joint, data)
    shared = {"real": True, "a comment and a PI last": True, "an xml:id in two records": False}
    if name in shared:
        assert together and together[0] is shared[name], together  # the page's records went as one document or not
    if name == "an xml:id in two records":
        assert len(joint.entries) == 4  # alone, each record is valid: an id is unique within its own document
    if name == "records in no namespace":
        assert together == [False]
        assert [d["error_type"] for d in joint.dead_letters] == [page_parser.UNEXPECTED_ELEMENT] * 3


def test_records_over_the_node_limit_together_are_each_judged_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # The joint document's limits bound each record's; when the document is over them, each record is
    # judged alone: the one over the limit is refused, the others are parsed.
    limit = 5_000  # real entries hold a few hundred nodes
    big = _replace_once(ENTRIES[3], b"</entry>", b"<x/>" * limit + b"</entry>")
    data = _small_page([*ENTRIES[:3], big], tombstones=[])
    monkeypatch.setattr(settings, "MAX_NODES_PER_RECORD", limit)
    result = _parse(data)
    assert len(result.entries) == 3
    assert [d["error_type"] for d in result.dead_letters] == [page_parser.TREE_TOO_LARGE]
    monkeypatch.setattr(page_parser, "_TOGETHER_BYTES", 1)  # every record alone
    assert parse_page(data, dataset=AGREGADAS, source_file="page.atom") == result


def test_the_version_rules_in_python_and_in_sql_agree() -> None:
    # `ingest.rules` states "newer" and "eligible" twice: in Python (delta-rs decides in the driver) and
    # as SQL (Spark decides in a join); DuckDB evaluates the SQL on every case here.
    import duckdb

    from placsp_provider.ingest import rules

    t = [datetime(2022, 1, d, tzinfo=UTC) for d in (1, 2)]
    cases = [None, (t[0], "a"), (t[0], "b"), (t[1], "a"), (t[1], "b")]
    for held in cases:
        for incoming in cases[1:]:
            assert incoming is not None
            (row,) = duckdb.sql(
                f"SELECT ({rules.IS_NEWER_SQL}) AS newer, coalesce(({rules.IS_SAME_SQL}), false) AS same "
                "FROM (SELECT $held AS _held, $held_file AS _held_file, $updated AS updated, $file AS _source_file)",
                params={
                    "held": held[0] if held else None,
                    "held_file": held[1] if held else None,
                    "updated": incoming[0],
                    "file": incoming[1],
                },
            ).fetchall()
            newer, same = bool(row[0]), bool(row[1])
            assert newer == rules.is_newer(held, incoming), (held, incoming)
            assert (newer or same) == rules.is_eligible(held, incoming), (held, incoming)
