"""Validation and normalisation of values: amounts, counts, indicators, ids, timestamps, tombstones."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from placsp_provider.datasets import get_dataset
from placsp_provider.feed.timestamps import parse_rfc3339_strict
from placsp_provider.parser import validation
from placsp_provider.parser.validation import Problems

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5989390,79", Decimal("5989390.79")),  # the spec's own decimal-comma example
        ("4949909.74", Decimal("4949909.74")),  # ... and its decimal-dot one
        ("1.234.567,89", Decimal("1234567.89")),
        ("1,234,567.89", Decimal("1234567.89")),
        ("135553,26", Decimal("135553.26")),  # Spark read this as 13555326.0
        ("1.234.567", Decimal("1234567")),
        ("390804", Decimal("390804")),
        ("472872.84", Decimal("472872.84")),
        ("0", Decimal("0")),
        (" 42 ", Decimal("42")),
        ("-12.5", Decimal("-12.5")),
        ("0.123456", Decimal("0.123456")),
        ("7.1000000000", Decimal("7.100000")),  # zeros beyond the scale are dropped, nothing else
        ("79,013", Decimal("79.013")),  # a lone separator is a decimal separator (documented)
    ],
)
def test_parse_amount_accepts_both_decimal_separators_exactly(text: str, expected: Decimal) -> None:
    value = validation.parse_amount(text)
    assert isinstance(value, Decimal)
    assert value == expected
    assert str(value) == str(expected)  # no float on the way: the digits are the ones written


def test_parse_amount_keeps_every_decimal() -> None:
    assert validation.parse_amount("0,01") == Decimal("0.01")
    assert validation.parse_amount("1234567890123.456789") == Decimal("1234567890123.456789")


@pytest.mark.parametrize(
    "text",
    [
        "N/A",
        "",
        "   ",
        None,
        "12,34,5",
        "1.2.3",
        "1,234.567.8",
        "1.234,567.89",
        "1e5",
        "EUR 12",
        "12 345,00",
        "١٢٣",
        "12.1234567",
        "1" + "0" * 32,
        "--1",
        ".",
    ],
)
def test_parse_amount_rejects_what_is_not_an_amount(text: str | None) -> None:
    with pytest.raises(ValueError, match="amount"):
        validation.parse_amount(text)


def test_parse_integer_and_boolean() -> None:
    assert validation.parse_integer(" 12 ") == 12
    for bad in ("1.0", "", "doce", str(2**63)):
        with pytest.raises(ValueError):
            validation.parse_integer(bad)
    assert validation.parse_boolean("true") is True
    assert validation.parse_boolean("0") is False
    with pytest.raises(ValueError, match="xsd:boolean"):
        validation.parse_boolean("yes")


def test_check_entry_id_returns_the_folder_number_for_either_host() -> None:
    dataset = get_dataset("agregadas")
    problems = Problems()
    for host in ("contrataciondelestado.es", "contrataciondelsectorpublico.gob.es"):
        entry_id = f"https://{host}/sindicacion/PlataformasAgregadasSinMenores/2603853"
        assert validation.check_entry_id(entry_id, dataset, problems) == 2603853
    assert not problems


@pytest.mark.parametrize(
    "entry_id",
    [
        None,
        "  ",
        # an id of another dataset must not land in this one
        "https://contrataciondelestado.es/sindicacion/licitacionesPerfilContratante/16998351",
        "https://contrataciondelestado.es/sindicacion/PlataformasAgregadasSinMenores/abc",
    ],
)
def test_check_entry_id_rejects(entry_id: str | None) -> None:
    problems = Problems()
    assert validation.check_entry_id(entry_id, get_dataset("1044"), problems) is None
    assert [p.error_type for p in problems.items] == ["invalid_entry_id"]


def test_check_timestamp_gives_aware_utc() -> None:
    problems = Problems()
    value = validation.check_timestamp("2022-01-03T03:00:13.633+01:00", problems, what="updated")
    assert value == datetime(2022, 1, 3, 2, 0, 13, 633000, tzinfo=UTC)
    assert value is not None and value.utcoffset() is not None
    assert not problems


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "2022-01-03",  # a date is not a timestamp
        "2022-01-03T03:00:13",  # no offset: ambiguous
        "20220103T030013+0100",  # ISO 8601 basic format: fromisoformat takes it, RFC 3339 does not
        "2022-W01-1T03:00:13+01:00",
        "2022-01-03T03+01:00",
        "2022-13-03T03:00:13Z",
        "ayer",
    ],
)
def test_check_timestamp_rejects_non_rfc3339(text: str | None) -> None:
    problems = Problems()
    assert validation.check_timestamp(text, problems, what="updated") is None
    assert problems.error_type == "invalid_timestamp"
    assert "updated" in problems.describe()


def test_parse_rfc3339_strict_accepts_rfc3339_forms() -> None:
    for text in ("2022-01-03T03:00:13Z", "2022-01-03t03:00:13.5-05:00", "2022-01-03 03:00:13+00:00"):
        assert parse_rfc3339_strict(text).tzinfo is not None


def test_check_deletion_type() -> None:
    problems = Problems()
    assert validation.check_deletion_type("ANULADA", problems) == "ANULADA"
    assert validation.check_deletion_type(" CERRADA ", problems) == "CERRADA"
    assert validation.check_deletion_type(None, problems) is None  # before mid-2022: no comment
    assert not problems
    assert validation.check_deletion_type("BORRADA", problems) is None
    assert problems.error_type == "invalid_tombstone"
    assert "'BORRADA'" in problems.describe()


def test_replacement_characters_are_found_literal_or_as_references() -> None:
    assert validation.has_replacement_characters("<cbc:Name>M\ufffdlaga</cbc:Name>".encode())
    assert validation.has_replacement_characters(b"<cbc:Name>M&#xFFFD;laga</cbc:Name>")
    assert validation.has_replacement_characters(b"<cbc:Name>M&#65533;laga</cbc:Name>")
    assert not validation.has_replacement_characters("<cbc:Name>Málaga</cbc:Name>".encode())


def test_problems_report_the_first_type_and_list_all_bounded() -> None:
    problems = Problems()
    problems.add("invalid_entry_id", "id is missing")
    for i in range(12):
        problems.add("invalid_amount", f"amount {i}")
    assert problems.error_type == "invalid_entry_id"
    text = problems.describe()
    assert text.startswith("13 problem(s): invalid_entry_id: id is missing; invalid_amount: amount 0")
    assert "amount 8" in text and "amount 9" not in text
    assert text.endswith("and 3 more problem(s)")
