"""Field reads when elements repeat: a single-valued field takes the first occurrence (and nothing
from inside a later one), a list keeps every occurrence in document order (`parser.entry_fields`)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from placsp_provider.datasets import get_dataset
from placsp_provider.parser.page_parser import parse_page
from tests.pages import ATOM_ROOT, ID_PREFIX

pytestmark = pytest.mark.unit

NAME = "<cac:PartyName><cbc:Name>{}</cbc:Name></cac:PartyName>"
PARENT = "<cac-place-ext:ParentLocatedParty>" + NAME + "{}</cac-place-ext:ParentLocatedParty>"
ENTRY = (
    f"<entry><id>{ID_PREFIX}7</id><updated>2022-01-05T10:00:00Z</updated><title>T1</title><title>T2</title>"
    "<cac-place-ext:ContractFolderStatus>"
    "<cbc:ContractFolderID>F1</cbc:ContractFolderID><cbc:ContractFolderID>F2</cbc:ContractFolderID>"
    "<cac-place-ext:LocatedContractingParty>"
    "<cbc:ActivityCode>A1</cbc:ActivityCode><cbc:ActivityCode> </cbc:ActivityCode>"
    "<cbc:ActivityCode>A2</cbc:ActivityCode>"
    f"<cac:Party>{NAME.format('P1')}{NAME.format('P2')}"
    "<cac:Contact><cbc:Name>C1</cbc:Name><cbc:Name>C2</cbc:Name></cac:Contact></cac:Party>"
    f"<cac:Party>{NAME.format('P3')}<cac:Contact><cbc:Telephone>T</cbc:Telephone></cac:Contact></cac:Party>"
    + PARENT.format("Up1", PARENT.format("Up2", ""))
    + PARENT.format("Other", "")
    + "</cac-place-ext:LocatedContractingParty>"
    "<cac:ProcurementProject><cbc:Name>Proj1</cbc:Name>"
    '<cac:BudgetAmount><cbc:TotalAmount currencyID="EUR">10</cbc:TotalAmount>'
    '<cbc:TotalAmount currencyID="USD">20,5</cbc:TotalAmount></cac:BudgetAmount>'
    '<cac:BudgetAmount><cbc:TaxExclusiveAmount currencyID="USD">9</cbc:TaxExclusiveAmount></cac:BudgetAmount>'
    "<cac:RequiredCommodityClassification><cbc:ItemClassificationCode>03000000</cbc:ItemClassificationCode>"
    "<cbc:ItemClassificationCode>45000000</cbc:ItemClassificationCode></cac:RequiredCommodityClassification>"
    "<cac:RequiredCommodityClassification><cbc:ItemClassificationCode>50000000</cbc:ItemClassificationCode>"
    "</cac:RequiredCommodityClassification>"
    "<cac:RealizedLocation><cbc:CountrySubentity>Madrid</cbc:CountrySubentity>"
    "<cbc:CountrySubentityCode>ES300</cbc:CountrySubentityCode></cac:RealizedLocation>"
    "<cac:RealizedLocation><cbc:CountrySubentity>Sevilla</cbc:CountrySubentity>"
    "<cbc:CountrySubentityCode>ES618</cbc:CountrySubentityCode></cac:RealizedLocation>"
    "</cac:ProcurementProject>"
    "<cac:ProcurementProject><cbc:Name>Proj2</cbc:Name><cbc:TypeCode>2</cbc:TypeCode></cac:ProcurementProject>"
    "<cac:TenderResult><cbc:ResultCode>8</cbc:ResultCode><cbc:ResultCode>9</cbc:ResultCode>"
    "<cac:WinningParty>"
    + NAME.format("W1")
    + "<cac:PhysicalLocation><cac:Address><cbc:CityName>Lugo</cbc:CityName></cac:Address></cac:PhysicalLocation>"
    "<cac:PostalAddress><cbc:CityName>Not this</cbc:CityName></cac:PostalAddress></cac:WinningParty>"
    "<cac:WinningParty>"
    + NAME.format("W2")
    + "<cac:PostalAddress><cbc:CityName>Vigo</cbc:CityName></cac:PostalAddress></cac:WinningParty>"
    "</cac:TenderResult>"
    "<cac:TenderResult><cbc:ResultCode>3</cbc:ResultCode></cac:TenderResult>"
    "</cac-place-ext:ContractFolderStatus>"
    "<cac-place-ext:ContractFolderStatus><cbc:ContractFolderID>F3</cbc:ContractFolderID>"
    "<cac:LegalDocumentReference><cbc:ID>ignored</cbc:ID></cac:LegalDocumentReference>"
    "</cac-place-ext:ContractFolderStatus></entry>"
)


def test_single_values_take_the_first_occurrence_and_lists_keep_every_one() -> None:
    page = ATOM_ROOT + ENTRY.encode() + b"</feed>"
    result = parse_page(page, dataset=get_dataset("agregadas"), source_file="repeats.atom")
    assert result.dead_letters == []
    (entry,) = result.entries
    assert entry["title"] == "T1"
    assert entry["contract_folder_id"] == "F1"  # not F2, nor the second ContractFolderStatus's F3
    assert entry["party_activity_codes"] == ["A1", "A2"]  # the blank one is no code
    assert entry["party_name"] == "P1"  # first PartyName of the first Party
    assert (entry["contact_name"], entry["contact_telephone"]) == ("C1", None)  # the second Party is not read
    assert entry["parent_party_names"] == ["Up1", "Up2"]  # the chain under the first ParentLocatedParty
    assert entry["project_name"] == "Proj1"
    assert entry["project_type_code"] is None  # only in the second ProcurementProject
    assert (entry["total_amount"], entry["budget_currency"]) == (Decimal(10), "EUR")
    assert entry["tax_exclusive_amount"] is None  # only in the second BudgetAmount
    assert entry["cpv_codes"] == ["03000000", "45000000", "50000000"]
    assert (entry["nuts_code"], entry["nuts_codes"]) == ("ES300", ["ES300", "ES618"])
    assert entry["location_name"] == "Madrid"
    assert entry["document_count"] == 0  # the reference sits in the second ContractFolderStatus
    assert [
        (r["result_position"], r["result_code"], r["winner_position"], r["winner_count"]) for r in result.results
    ] == [
        (0, "8", 0, 2),
        (0, "8", 1, 2),
        (1, "3", 0, 0),
    ]
    assert [(r["winner_name"], r["winner_city"]) for r in result.results] == [
        ("W1", "Lugo"),  # PhysicalLocation/Address first
        ("W2", "Vigo"),  # else PostalAddress
        (None, None),
    ]


def test_a_parent_chain_as_deep_as_libxml2_allows_is_read_whole() -> None:
    """The walk recurses per level: at libxml2's nesting limit (256, settings.XML_MAX_DEPTH) it must still
    read every name, not fail the record with a RecursionError (the chain was once read in a loop)."""
    depth = 250  # the deepest chain libxml2 parses in a record (251 is "Excessive depth in document")
    chain = ""
    for level in reversed(range(depth)):
        chain = PARENT.format(f"L{level}", chain)
    record = (
        f"<entry><id>{ID_PREFIX}8</id><updated>2022-01-05T10:00:00Z</updated><cac-place-ext:ContractFolderStatus>"
        f"<cac-place-ext:LocatedContractingParty>{chain}</cac-place-ext:LocatedContractingParty>"
        "</cac-place-ext:ContractFolderStatus></entry>"
    )
    result = parse_page(ATOM_ROOT + record.encode() + b"</feed>", dataset=get_dataset("agregadas"), source_file="deep")
    assert result.dead_letters == []
    assert result.entries[0]["parent_party_names"] == [f"L{level}" for level in range(depth)]
