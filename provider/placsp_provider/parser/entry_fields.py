"""Fields of one parsed `<entry>` / `<at:deleted-entry>`, as rows of the Silver tables.

Rules (why: Spark's XML reader silently drops repeats and infers `03000000` as 3000000):
- elements are looked up by namespace URI, never by prefix (producers pick prefixes);
- all values are read as text; only amounts (Decimal), counts (int), indicators (bool) and the Atom
  timestamps (aware UTC datetime) are converted, strictly, in `validation` -- a value that does not
  convert is a validation problem, never a silent null;
- codes (CPV, NUTS, type codes) stay strings; dates and times stay the ISO strings the XML holds;
- every element that may repeat is read as a list. Single-valued columns (e.g. `nuts_code`, a result's
  `lot_id`) take the first occurrence; where the schema allows repeats a list column sits beside them.

Column lists and types are in `silver_schema`; positions are 0-based, in document order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, TypeVar

from lxml import etree

from placsp_provider.datasets import Dataset
from placsp_provider.feed.xml import ATOM_NS, TOMBSTONE_NS
from placsp_provider.parser import validation
from placsp_provider.parser.validation import Problems

CBC_NS = "urn:dgpe:names:draft:codice:schema:xsd:CommonBasicComponents-2"
CAC_NS = "urn:dgpe:names:draft:codice:schema:xsd:CommonAggregateComponents-2"
CBC_EXT_NS = "urn:dgpe:names:draft:codice-place-ext:schema:xsd:CommonBasicComponents-2"
CAC_EXT_NS = "urn:dgpe:names:draft:codice-place-ext:schema:xsd:CommonAggregateComponents-2"

Element = etree._Element
Row = dict[str, Any]
T = TypeVar("T")


def _tags(namespace: str, names: str) -> dict[str, str]:
    return {name: f"{{{namespace}}}{name}" for name in names.split()}


# Clark-notation tags, built once (lookups run ~100 times per entry).
A = _tags(ATOM_NS, "id link summary title updated")
CBC = _tags(
    CBC_NS,
    "ActivityCode AwardDate BuyerProfileURIID CityName ContractFolderID ContractingPartyTypeCode "
    "ContractingSystemCode CountrySubentity CountrySubentityCode Description DocumentHash DocumentTypeCode "
    "DurationMeasure ElectronicMail EndDate EndTime EstimatedOverallContractAmount FileName FundingProgramCode "
    "HigherTenderAmount ID IdentificationCode IssueDate ItemClassificationCode Line LowerTenderAmount Name "
    "PayableAmount PostalZone ProcedureCode ProcurementProjectLotID ReceivedTenderQuantity ResultCode "
    "SMEAwardedIndicator SMEsReceivedTenderQuantity StartDate SubmissionMethodCode SubTypeCode TaxExclusiveAmount "
    "Telephone TotalAmount TypeCode URI UrgencyCode UUID WebsiteURI",
)
CAC = _tags(
    CAC_NS,
    "Address AddressLine Attachment AwardedTenderedProject BudgetAmount Contact Contract Country "
    "ExternalReference LegalMonetaryTotal Party PartyIdentification PartyName PhysicalLocation PlannedPeriod "
    "PostalAddress ProcurementProject ProcurementProjectLot RealizedLocation RequiredCommodityClassification "
    "TenderingProcess TenderingTerms TenderResult TenderSubmissionDeadlinePeriod WinningParty",
)
CBC_EXT = _tags(CBC_EXT_NS, "ContractFolderStatusCode NoticeTypeCode PublicationMediaName")
CAC_EXT = _tags(
    CAC_EXT_NS,
    "AdditionalPublicationDocumentReference AdditionalPublicationStatus ContractFolderStatus "
    "LocatedContractingParty ParentLocatedParty ValidNoticeInfo",
)
_COMMENT = f"{{{TOMBSTONE_NS}}}comment"
_DOCUMENT_REFERENCE = "DocumentReference"
# Kinds named by the brief; any other *DocumentReference gets the snake_case of its local name.
_DOCUMENT_KINDS = {
    "LegalDocumentReference": "legal",
    "TechnicalDocumentReference": "technical",
    "AdditionalDocumentReference": "additional",
    "GeneralDocumentDocumentReference": "general",
    "AdditionalPublicationDocumentReference": "additional_publication",
}
_PUBLICATION_KIND = "additional_publication"
# Run on an element's local name (from the feed): zero-width, one look each side of each position, so
# linear (issue 31's audit).
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


# ---------------------------------------------------------------------------------------------------
# Field paths, compiled. Each record's tree is walked once, top down, along the paths below: at each
# element one dict lookup per child says whether that child matters and what to keep of it. This
# replaced an index of each element's children queried ~300 times an entry (decision 0049). A step
# keeps, under its slot (the tag's local name unless given):
#   FIRST   the first child of that tag; its own paths are walked into the same dict;
#   GROUP   the first child of that tag, walked into a dict of its own;
#   EACH    every child of that tag, in a list;
#   GROUPS  every child of that tag, each walked into a dict of its own, in a list;
#   TEXT    the stripped text of the first child of that tag, None when blank (what `_text` reads):
#           read as the walk passes, the field costs no second lookup (most fields are texts).
# A later child of a FIRST/GROUP/TEXT tag is skipped whole: the first occurrence wins, and nothing is read
# from inside a later one. A group keeps its own element under the key "" (for its attributes).

FIRST, GROUP, EACH, GROUPS, TEXT = range(5)
Step = tuple[str, int, Any]  # (slot, how, the Paths inside or None)
Paths = dict[Any, Step]  # Clark tag -> step
Found = dict[str, Any]


def _walk(element: Element, paths: Paths, found: Found) -> None:
    # A slice of the children is built in C: visiting them this way took half the time of iterating
    # the element (3.1 against 6.2 ms for a real-shaped page's elements). lxml takes slices; the
    # type stubs declare int indexes only.
    for child in element[:]:  # type: ignore[index]
        step = paths.get(child.tag)  # comments and PIs have a function as tag: never a path
        if step is None:
            continue
        slot, how, inner = step
        if how == TEXT:
            if slot not in found:
                text = child.text
                found[slot] = None if text is None else text.strip() or None
        elif how == FIRST:
            if slot not in found:
                found[slot] = child
                if inner is not None:
                    _walk(child, inner, found)
        elif how == EACH:
            items = found.get(slot)
            if items is None:
                found[slot] = [child]
            else:
                items.append(child)
        elif how == GROUP:
            if slot not in found:
                found[slot] = _read_group(child, inner)
        else:
            group = _read_group(child, inner)
            items = found.get(slot)
            if items is None:
                found[slot] = [group]
            else:
                items.append(group)


def _read_group(element: Element, paths: Paths) -> Found:
    found: Found = {"": element}
    _walk(element, paths, found)
    return found


def _paths(*steps: tuple[str, Step]) -> Paths:
    return dict(steps)


def _first(tag: str, inner: Paths | None = None, *, slot: str | None = None) -> tuple[str, Step]:
    return tag, (slot or tag.rsplit("}", 1)[-1], FIRST, inner)


def _text_of(tag: str, *, slot: str | None = None) -> tuple[str, Step]:
    return tag, (slot or tag.rsplit("}", 1)[-1], TEXT, None)


def _each(tag: str) -> tuple[str, Step]:
    return tag, (tag.rsplit("}", 1)[-1], EACH, None)


def _group(tag: str, inner: Paths, *, slot: str | None = None) -> tuple[str, Step]:
    return tag, (slot or tag.rsplit("}", 1)[-1], GROUP, inner)


def _groups(tag: str, inner: Paths, *, slot: str) -> tuple[str, Step]:
    return tag, (slot, GROUPS, inner)


_NAME = _paths(_text_of(CBC["Name"]))
_ADDRESS = _paths(
    _text_of(CBC["CityName"]),
    _text_of(CBC["PostalZone"]),
    _first(CAC["AddressLine"], _paths(_text_of(CBC["Line"]))),
    _first(CAC["Country"], _paths(_text_of(CBC["IdentificationCode"]))),
)
# A contracting party (cac:Party) or a winner (cac:WinningParty): the same UBL party.
_PARTY = _paths(
    _groups(CAC["PartyIdentification"], _paths(_first(CBC["ID"])), slot="identifications"),
    _first(CAC["PartyName"], _NAME),
    _text_of(CBC["WebsiteURI"]),
    _group(CAC["PostalAddress"], _ADDRESS),
    # PLACSP writes a winner's place under PhysicalLocation/Address; UBL also allows PostalAddress.
    _first(CAC["PhysicalLocation"], _paths(_group(CAC["Address"], _ADDRESS))),
    _first(
        CAC["Contact"],
        _paths(_text_of(CBC["Name"], slot="ContactName"), _text_of(CBC["Telephone"]), _text_of(CBC["ElectronicMail"])),
    ),
)
_PARENT = _paths(_first(CAC["PartyName"], _NAME))
_PARENT.update([_group(CAC_EXT["ParentLocatedParty"], _PARENT)])  # a chain, nearest first
_LOCATED_PARTY = _paths(
    _text_of(CBC["ContractingPartyTypeCode"]),
    _each(CBC["ActivityCode"]),
    _text_of(CBC["BuyerProfileURIID"]),
    _group(CAC["Party"], _PARTY),
    _group(CAC_EXT["ParentLocatedParty"], _PARENT),
)
# The entry's procurement project and each lot's.
_PROJECT = _paths(
    _text_of(CBC["Name"]),
    _text_of(CBC["TypeCode"]),
    _text_of(CBC["SubTypeCode"]),
    _group(
        CAC["BudgetAmount"],
        _paths(
            _first(CBC["EstimatedOverallContractAmount"]), _first(CBC["TotalAmount"]), _first(CBC["TaxExclusiveAmount"])
        ),
    ),
    _groups(
        CAC["RequiredCommodityClassification"], _paths(_each(CBC["ItemClassificationCode"])), slot="classifications"
    ),
    _groups(
        CAC["RealizedLocation"],
        _paths(_text_of(CBC["CountrySubentity"]), _each(CBC["CountrySubentityCode"])),
        slot="locations",
    ),
    _group(
        CAC["PlannedPeriod"],
        _paths(_first(CBC["DurationMeasure"]), _text_of(CBC["StartDate"]), _text_of(CBC["EndDate"])),
    ),
)
_PROCESS = _paths(
    _text_of(CBC["ProcedureCode"]),
    _text_of(CBC["UrgencyCode"]),
    _text_of(CBC["ContractingSystemCode"]),
    _text_of(CBC["SubmissionMethodCode"]),
    _group(
        CAC["TenderSubmissionDeadlinePeriod"],
        _paths(_text_of(CBC["EndDate"]), _text_of(CBC["EndTime"])),
        slot="deadline",
    ),
)
_NOTICE = _paths(
    _text_of(CBC_EXT["NoticeTypeCode"]),
    _groups(
        CAC_EXT["AdditionalPublicationStatus"],
        _paths(
            _text_of(CBC_EXT["PublicationMediaName"]),
            _groups(
                CAC_EXT["AdditionalPublicationDocumentReference"], _paths(_text_of(CBC["IssueDate"])), slot="references"
            ),
        ),
        slot="statuses",
    ),
)
_LOT = _paths(_text_of(CBC["ID"]), _group(CAC["ProcurementProject"], _PROJECT))
_RESULT = _paths(
    _text_of(CBC["ResultCode"]),
    _text_of(CBC["Description"]),
    _text_of(CBC["AwardDate"]),
    _text_of(CBC["StartDate"]),
    _first(CBC["ReceivedTenderQuantity"]),
    _first(CBC["SMEsReceivedTenderQuantity"]),
    _first(CBC["LowerTenderAmount"]),
    _first(CBC["HigherTenderAmount"]),
    _first(CBC["SMEAwardedIndicator"]),
    _first(
        CAC["AwardedTenderedProject"],
        _paths(
            _text_of(CBC["ProcurementProjectLotID"]),
            _first(
                CAC["LegalMonetaryTotal"],
                _paths(_first(CBC["TaxExclusiveAmount"], slot="AwardedTaxExclusive"), _first(CBC["PayableAmount"])),
            ),
        ),
    ),
    _group(CAC["Contract"], _paths(_text_of(CBC["ID"]), _text_of(CBC["IssueDate"]))),
    _groups(CAC["WinningParty"], _PARTY, slot="winners"),
)
_FOLDER = _paths(
    _text_of(CBC["ContractFolderID"]),
    _text_of(CBC_EXT["ContractFolderStatusCode"]),
    _each(CBC["UUID"]),
    _group(CAC_EXT["LocatedContractingParty"], _LOCATED_PARTY),
    _group(CAC["ProcurementProject"], _PROJECT),
    _first(CAC["TenderingProcess"], _PROCESS),
    _first(CAC["TenderingTerms"], _paths(_each(CBC["FundingProgramCode"]))),
    _groups(CAC_EXT["ValidNoticeInfo"], _NOTICE, slot="notices"),
    _groups(CAC["ProcurementProjectLot"], _LOT, slot="lots"),
    _groups(CAC["TenderResult"], _RESULT, slot="results"),
)
_ENTRY = _paths(
    *(_text_of(A[name]) for name in ("id", "updated", "title", "summary")),
    _first(A["link"]),
    _group(CAC_EXT["ContractFolderStatus"], _FOLDER),
)
_NOTHING: Found = {}


def _text(element: Element | None) -> str | None:
    """Stripped text, None when the element is absent or blank."""
    if element is None:
        return None
    text = element.text
    return None if text is None else text.strip() or None


def _texts(elements: list[Element] | None) -> list[str]:
    """The non-blank stripped texts of `elements` (absent: none)."""
    if not elements:
        return []
    return [t for t in (_text(e) for e in elements) if t is not None]


def _attr(element: Element | None, name: str) -> str | None:
    value = None if element is None else element.get(name)
    return None if value is None else value.strip() or None


# ---------------------------------------------------------------------------------------------------
# Typed values: conversion failures become validation problems, labelled with the column they feed.


class _Values:
    def __init__(self, problems: Problems) -> None:
        self.problems = problems

    def _read(self, element: Element | None, label: str, parse: Callable[[str | None], T], error_type: str) -> T | None:
        """`parse` of the element's text; absent is None, unreadable is a problem (and None)."""
        if element is None:
            return None
        try:
            return parse(element.text)
        except ValueError as err:
            self.problems.add(error_type, f"{label}: {err}")
            return None

    def amount(self, element: Element | None, label: str) -> tuple[Decimal | None, str | None]:
        """(amount, currency)."""
        if element is None:  # 3 of 5 amounts an entry may hold are absent: answered before any call
            return None, None
        amount = self._read(element, label, validation.parse_amount, validation.INVALID_AMOUNT)
        return amount, _attr(element, "currencyID")

    def integer(self, element: Element | None, label: str) -> int | None:
        return self._read(element, label, validation.parse_integer, validation.INVALID_INTEGER)

    def boolean(self, element: Element | None, label: str) -> bool | None:
        return self._read(element, label, validation.parse_boolean, validation.INVALID_BOOLEAN)


# ---------------------------------------------------------------------------------------------------
# Entries


@dataclass(frozen=True)
class EntryRows:
    """The rows one valid entry contributes to each Silver table."""

    entry: Row
    lots: list[Row]
    documents: list[Row]
    results: list[Row]


def extract_entry(entry: Element, *, dataset: Dataset, source_file: str, problems: Problems) -> EntryRows:
    """All rows of one `<entry>`. Problems go to `problems`; the rows are only valid when it is empty."""
    values = _Values(problems)
    found = _read_group(entry, _ENTRY)
    entry_id = found.get("id")
    folder_number = validation.check_entry_id(entry_id, dataset, problems)
    updated = validation.check_timestamp(found.get("updated"), problems, what="updated")
    common: Row = {"dataset": dataset.key, "entry_id": entry_id, "entry_updated": updated, "_source_file": source_file}
    folder: Found = found.get("ContractFolderStatus", _NOTHING)
    tender_results: list[Found] = folder.get("results", [])

    row: Row = {
        **common,
        "updated": updated,
        "folder_number": folder_number,
        "title": found.get("title"),
        "summary": found.get("summary"),
        "link": _attr(found.get("link"), "href"),
        "contract_folder_id": folder.get("ContractFolderID"),
        "status_code": folder.get("ContractFolderStatusCode"),
        "ted_uuid": _ted_uuid(folder.get("UUID")),
        **_contracting_party(folder.get("LocatedContractingParty", _NOTHING)),
        **_project(folder.get("ProcurementProject", _NOTHING), values),
        **_process(folder),
        "funding_program_codes": _texts(folder.get("FundingProgramCode")),
        "notices": _notices(folder.get("notices")),
    }
    lots = [{**common, **_lot(lot, position, values)} for position, lot in enumerate(folder.get("lots", ()))]
    _check_lot_ids(lots, problems)
    results = [
        {**common, **result_row}
        for position, result in enumerate(tender_results)
        for result_row in _result_rows(result, position, values)
    ]
    documents = [{**common, **document} for document in _documents(folder.get(""))]
    row["lot_count"] = len(lots)
    row["result_count"] = len(tender_results)
    row["document_count"] = len(documents)
    return EntryRows(entry=row, lots=lots, documents=documents, results=results)


def _ted_uuid(uuids: list[Element] | None) -> str | None:
    return next((_text(uuid) for uuid in uuids or () if _attr(uuid, "schemeName") == "TED"), None)


def _identifiers(party: Found) -> list[Row]:
    """Every PartyIdentification/ID with its schemeName (DIR3, NIF, ID_PLATAFORMA, ...)."""
    idents = [identification.get("ID") for identification in party.get("identifications", ())]
    return [{"scheme_name": _attr(i, "schemeName"), "id": value} for i in idents if (value := _text(i)) is not None]


def _scheme(identifiers: list[Row], scheme: str) -> str | None:
    return next((str(ident["id"]) for ident in identifiers if ident["scheme_name"] == scheme), None)


def _contracting_party(located: Found) -> Row:
    party: Found = located.get("Party", _NOTHING)
    identifiers = _identifiers(party)
    address: Found = party.get("PostalAddress", _NOTHING)
    return {
        "party_name": party.get("Name"),
        "party_dir3": _scheme(identifiers, "DIR3"),
        "party_nif": _scheme(identifiers, "NIF"),
        "party_id_plataforma": _scheme(identifiers, "ID_PLATAFORMA"),
        "party_identifiers": identifiers,
        "party_type_code": located.get("ContractingPartyTypeCode"),
        "party_activity_codes": _texts(located.get("ActivityCode")),
        "buyer_profile_uri": located.get("BuyerProfileURIID"),
        "party_website_uri": party.get("WebsiteURI"),
        "party_city": address.get("CityName"),
        "party_postal_zone": address.get("PostalZone"),
        "party_address_line": address.get("Line"),
        "party_country_code": address.get("IdentificationCode"),
        "contact_name": party.get("ContactName"),
        "contact_email": party.get("ElectronicMail"),
        "contact_telephone": party.get("Telephone"),
        "parent_party_names": _parent_names(located),
    }


def _parent_names(located: Found) -> list[str]:
    """The ParentLocatedParty chain, nearest first (e.g. Gandía, Ayuntamientos, ..., Sector Público)."""
    names = []
    parent = located.get("ParentLocatedParty")
    while parent is not None:
        name = parent.get("Name")
        if name is not None:
            names.append(name)
        parent = parent.get("ParentLocatedParty")
    return names


def _budget(project: Found, values: _Values, label: str, currency_column: str) -> Row:
    budget: Found = project.get("BudgetAmount", _NOTHING)
    estimated, cur1 = values.amount(budget.get("EstimatedOverallContractAmount"), f"{label}estimated_overall_amount")
    total, cur2 = values.amount(budget.get("TotalAmount"), f"{label}total_amount")
    tax_exclusive, cur3 = values.amount(budget.get("TaxExclusiveAmount"), f"{label}tax_exclusive_amount")
    return {
        "estimated_overall_amount": estimated,
        "total_amount": total,
        "tax_exclusive_amount": tax_exclusive,
        # One currency per budget: the first currencyID given (every sample amount is in EUR).
        currency_column: cur1 or cur2 or cur3,
    }


def _codes(project: Found) -> Row:
    """CPV and NUTS codes of a procurement project (the entry's or a lot's)."""
    cpv = [
        code
        for classification in project.get("classifications", ())
        for code in _texts(classification.get("ItemClassificationCode"))
    ]
    nuts = [code for location in project.get("locations", ()) for code in _texts(location.get("CountrySubentityCode"))]
    return {"cpv_codes": cpv, "nuts_code": nuts[0] if nuts else None, "nuts_codes": nuts}


def _project(project: Found, values: _Values) -> Row:
    period: Found = project.get("PlannedPeriod", _NOTHING)
    duration = period.get("DurationMeasure")
    locations = project.get("locations")
    return {
        "project_name": project.get("Name"),
        "project_type_code": project.get("TypeCode"),
        "project_subtype_code": project.get("SubTypeCode"),
        **_budget(project, values, "", "budget_currency"),
        **_codes(project),
        "location_name": locations[0].get("CountrySubentity") if locations else None,
        "planned_duration": _text(duration),
        "planned_duration_unit": _attr(duration, "unitCode"),
        "planned_start_date": period.get("StartDate"),
        "planned_end_date": period.get("EndDate"),
    }


def _process(folder: Found) -> Row:
    deadline: Found = folder.get("deadline", _NOTHING)
    return {
        "procedure_code": folder.get("ProcedureCode"),
        "urgency_code": folder.get("UrgencyCode"),
        "contracting_system_code": folder.get("ContractingSystemCode"),
        "submission_method_code": folder.get("SubmissionMethodCode"),
        "submission_deadline_date": deadline.get("EndDate"),
        "submission_deadline_time": deadline.get("EndTime"),
    }


def _or_none(groups: list[Found] | None) -> list[Found]:
    """The groups, or one empty group so that an absent level still yields one (null) item."""
    return groups if groups else [_NOTHING]


def _notices(notices: list[Found] | None) -> list[Row]:
    """One item per publication (document reference) of each notice; every issue date is kept.

    A notice without publication status, or a status without document reference, still yields one
    item (with null media / issue date), so no notice disappears.
    """
    items = []
    for notice in notices or ():
        notice_type = notice.get("NoticeTypeCode")
        for status in _or_none(notice.get("statuses")):
            media = status.get("PublicationMediaName")
            for reference in _or_none(status.get("references")):
                items.append(
                    {
                        "notice_type_code": notice_type,
                        "publication_media": media,
                        "issue_date": reference.get("IssueDate"),
                    }
                )
    return items


# ---------------------------------------------------------------------------------------------------
# Lots, results, documents


def _lot(lot: Found, position: int, values: _Values) -> Row:
    project: Found = lot.get("ProcurementProject", _NOTHING)
    return {
        "lot_id": lot.get("ID"),
        "lot_position": position,
        "name": project.get("Name"),
        "type_code": project.get("TypeCode"),
        "subtype_code": project.get("SubTypeCode"),
        **_budget(project, values, f"lots[{position}].", "currency"),
        **_codes(project),
    }


def _check_lot_ids(lots: list[Row], problems: Problems) -> None:
    """(dataset, entry_id, lot_id) is the lots key: a missing or repeated lot id would break the MERGE."""
    seen: set[str] = set()
    for lot in lots:
        lot_id = lot["lot_id"]
        if lot_id is None:
            problems.add(validation.INVALID_LOT_ID, f"lots[{lot['lot_position']}] has no cbc:ID")
        elif lot_id in seen:
            problems.add(validation.INVALID_LOT_ID, f"lot id {lot_id!r} appears twice in one entry")
        else:
            seen.add(lot_id)


def _result_rows(result: Found, position: int, values: _Values) -> list[Row]:
    """One row per WinningParty of a TenderResult; a result without winner gives one row."""
    label = f"results[{position}]."
    tax_exclusive, cur1 = values.amount(result.get("AwardedTaxExclusive"), label + "awarded_tax_exclusive_amount")
    payable, cur2 = values.amount(result.get("PayableAmount"), label + "awarded_payable_amount")
    lower, cur3 = values.amount(result.get("LowerTenderAmount"), label + "lower_tender_amount")
    higher, cur4 = values.amount(result.get("HigherTenderAmount"), label + "higher_tender_amount")
    contract: Found = result.get("Contract", _NOTHING)
    shared: Row = {
        "result_position": position,
        "lot_id": result.get("ProcurementProjectLotID"),
        "result_code": result.get("ResultCode"),
        "description": result.get("Description"),
        "award_date": result.get("AwardDate"),
        "start_date": result.get("StartDate"),
        "received_tender_quantity": values.integer(
            result.get("ReceivedTenderQuantity"), label + "received_tender_quantity"
        ),
        "smes_received_tender_quantity": values.integer(
            result.get("SMEsReceivedTenderQuantity"), label + "smes_received_tender_quantity"
        ),
        "lower_tender_amount": lower,
        "higher_tender_amount": higher,
        "tender_amount_currency": cur3 or cur4,
        "sme_awarded": values.boolean(result.get("SMEAwardedIndicator"), label + "sme_awarded"),
        "contract_id": contract.get("ID"),
        "contract_issue_date": contract.get("IssueDate"),
        "awarded_tax_exclusive_amount": tax_exclusive,
        "awarded_payable_amount": payable,
        "awarded_currency": cur1 or cur2,
    }
    winners = result.get("winners")
    return [
        {**shared, "winner_position": i, "winner_count": len(winners or ()), **_winner(winner)}
        for i, winner in enumerate(_or_none(winners))
    ]


def _winner(winner: Found) -> Row:
    identifiers = _identifiers(winner)
    address: Found | None = winner.get("Address")
    if address is None:
        address = winner.get("PostalAddress", _NOTHING)
    return {
        "winner_name": winner.get("Name"),
        "winner_id": identifiers[0]["id"] if identifiers else None,
        "winner_id_scheme": identifiers[0]["scheme_name"] if identifiers else None,
        "winner_identifiers": identifiers,
        "winner_city": address.get("CityName"),
        "winner_postal_zone": address.get("PostalZone"),
        "winner_country_code": address.get("IdentificationCode"),
    }


# The kind of each tag seen so far (None: not a document reference), so that the walk below costs one
# dict lookup per element. Bounded: a page of made-up tags must not grow it without end.
_KIND_OF_TAG: dict[Any, str | None] = {}
_KIND_OF_TAG_MAX = 4096


def _reference_kind(tag: Any) -> str | None:
    if not (isinstance(tag, str) and tag.endswith(_DOCUMENT_REFERENCE)):
        return None
    local_name = tag.rsplit("}", 1)[-1]
    stem = local_name[: -len(_DOCUMENT_REFERENCE)] or local_name
    return _DOCUMENT_KINDS.get(local_name) or _CAMEL_BOUNDARY.sub("_", stem).lower()


def _iter_document_references(folder: Element | None) -> Iterator[tuple[str, Element]]:
    # A full walk rather than fixed paths, so a *DocumentReference in a new place is not lost.
    if folder is None:
        return
    kinds = _KIND_OF_TAG
    for element in folder.iter():
        tag = element.tag
        try:
            kind = kinds[tag]
        except KeyError:
            kind = _reference_kind(tag)
            if len(kinds) < _KIND_OF_TAG_MAX:
                kinds[tag] = kind
        if kind is not None:
            yield kind, element


# A document reference's own fields and those of its Attachment/ExternalReference, by child tag. Read in
# one pass over each element's children (first occurrence wins, as everywhere): an entry holds ~28
# references, so this is the hottest loop of a page.
_REFERENCE_FIELDS = {
    CBC["ID"]: "document_id",
    CBC["DocumentTypeCode"]: "document_type_code",
    CBC["IssueDate"]: "issue_date",
}
_EXTERNAL_FIELDS = {CBC["FileName"]: "file_name", CBC["URI"]: "uri", CBC["DocumentHash"]: "document_hash"}
_NO_FIELDS: Row = dict.fromkeys([*_REFERENCE_FIELDS.values(), *_EXTERNAL_FIELDS.values()])
_ATTACHMENT = CAC["Attachment"]
_EXTERNAL_REFERENCE = CAC["ExternalReference"]


def _first_texts(element: Element, fields: dict[str, str], found: Row) -> Element | None:
    """Put the text of the first child of each tag in `fields` into `found` (by field name); return the
    first `cac:Attachment` child, if any."""
    attachment = None
    for child in element[:]:  # type: ignore[index]  # a slice, as in `_walk`
        tag = child.tag
        name = fields.get(tag)
        if name is not None:
            if name not in found:
                found[name] = _text(child)
        elif tag == _ATTACHMENT and attachment is None:
            attachment = child
    return attachment


def _documents(folder: Element | None) -> list[Row]:
    """Every *DocumentReference of the entry, in document order, numbered (0-based) within its kind.

    Exception: an AdditionalPublicationDocumentReference that names no document (no ID, URI or file
    name; most of them hold only an IssueDate) is a publication record, kept in `notices`, not here.
    """
    rows = []
    positions: dict[str, int] = {}
    for kind, reference in _iter_document_references(folder):
        found: Row = {}
        attachment = _first_texts(reference, _REFERENCE_FIELDS, found)
        if attachment is not None:
            external = next(attachment.iterchildren(_EXTERNAL_REFERENCE), None)
            if external is not None:
                _first_texts(external, _EXTERNAL_FIELDS, found)
        if kind == _PUBLICATION_KIND and not (found.get("document_id") or found.get("uri") or found.get("file_name")):
            continue
        position = positions.get(kind, 0)
        positions[kind] = position + 1
        rows.append({"document_kind": kind, "position": position, **_NO_FIELDS, **found})
    return rows


# ---------------------------------------------------------------------------------------------------
# Tombstones


def extract_tombstone(tombstone: Element, *, dataset: Dataset, source_file: str, problems: Problems) -> Row:
    """The row of one `<at:deleted-entry ref=... when=...>`, with its optional `<at:comment type=...>`."""
    ref = _attr(tombstone, "ref")
    folder_number = validation.check_entry_id(ref, dataset, problems, what="ref")
    deleted_at: datetime | None = validation.check_timestamp(tombstone.get("when"), problems, what="when")
    comment = next(tombstone.iterchildren(_COMMENT), None)
    deletion_type = validation.check_deletion_type(comment.get("type") if comment is not None else None, problems)
    return {
        "dataset": dataset.key,
        "entry_id": ref,
        "folder_number": folder_number,
        "deleted_at": deleted_at,
        "deletion_type": deletion_type,
        "_source_file": source_file,
    }
