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
# Lookups. `_Kids` indexes an element's children by tag once; each later lookup is a dict get. That is
# ~4x cheaper than one `iterchildren(tag)` per field, and field lookups dominate the cost of a page.


class _Kids:
    """The children of one element (or of nothing), indexed by their Clark-notation tag."""

    __slots__ = ("_by_tag", "element")

    def __init__(self, element: Element | None) -> None:
        self.element = element
        by_tag: dict[Any, list[Element]] = {}
        if element is not None:
            for child in element:
                tag = child.tag  # lxml builds the tag string on each read: read it once
                found = by_tag.get(tag)
                if found is None:
                    by_tag[tag] = [child]
                else:
                    found.append(child)
        self._by_tag = by_tag

    def first(self, tag: str) -> Element | None:
        found = self._by_tag.get(tag)
        return found[0] if found else None

    def all(self, tag: str) -> list[Element]:
        return self._by_tag.get(tag, [])

    def text(self, tag: str) -> str | None:
        return _text(self.first(tag))

    def texts(self, tag: str) -> list[str]:
        return [t for t in (_text(e) for e in self.all(tag)) if t is not None]

    def kids(self, tag: str) -> _Kids:
        return _Kids(self.first(tag))


def _text(element: Element | None) -> str | None:
    """Stripped text, None when the element is absent or blank."""
    if element is None or element.text is None:
        return None
    return element.text.strip() or None


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
    atom = _Kids(entry)
    entry_id = atom.text(A["id"])
    folder_number = validation.check_entry_id(entry_id, dataset, problems)
    updated = validation.check_timestamp(atom.text(A["updated"]), problems, what="updated")
    common: Row = {"dataset": dataset.key, "entry_id": entry_id, "entry_updated": updated, "_source_file": source_file}
    folder = atom.kids(CAC_EXT["ContractFolderStatus"])
    tender_results = folder.all(CAC["TenderResult"])

    row: Row = {
        **common,
        "updated": updated,
        "folder_number": folder_number,
        "title": atom.text(A["title"]),
        "summary": atom.text(A["summary"]),
        "link": _attr(atom.first(A["link"]), "href"),
        "contract_folder_id": folder.text(CBC["ContractFolderID"]),
        "status_code": folder.text(CBC_EXT["ContractFolderStatusCode"]),
        "ted_uuid": _ted_uuid(folder),
        **_contracting_party(folder.kids(CAC_EXT["LocatedContractingParty"])),
        **_project(folder.kids(CAC["ProcurementProject"]), values),
        **_process(folder.kids(CAC["TenderingProcess"])),
        "funding_program_codes": folder.kids(CAC["TenderingTerms"]).texts(CBC["FundingProgramCode"]),
        "notices": _notices(folder),
    }
    lots = [
        {**common, **_lot(lot, position, values)}
        for position, lot in enumerate(folder.all(CAC["ProcurementProjectLot"]))
    ]
    _check_lot_ids(lots, problems)
    results = [
        {**common, **result_row}
        for position, result in enumerate(tender_results)
        for result_row in _result_rows(result, position, values)
    ]
    documents = [{**common, **document} for document in _documents(folder.element)]
    row["lot_count"] = len(lots)
    row["result_count"] = len(tender_results)
    row["document_count"] = len(documents)
    return EntryRows(entry=row, lots=lots, documents=documents, results=results)


def _ted_uuid(folder: _Kids) -> str | None:
    return next((_text(uuid) for uuid in folder.all(CBC["UUID"]) if _attr(uuid, "schemeName") == "TED"), None)


def _identifiers(party: _Kids) -> list[Row]:
    """Every PartyIdentification/ID with its schemeName (DIR3, NIF, ID_PLATAFORMA, ...)."""
    idents = [_Kids(identification).first(CBC["ID"]) for identification in party.all(CAC["PartyIdentification"])]
    return [{"scheme_name": _attr(i, "schemeName"), "id": value} for i in idents if (value := _text(i)) is not None]


def _scheme(identifiers: list[Row], scheme: str) -> str | None:
    return next((str(ident["id"]) for ident in identifiers if ident["scheme_name"] == scheme), None)


def _contracting_party(located: _Kids) -> Row:
    party = located.kids(CAC["Party"])
    identifiers = _identifiers(party)
    address = party.kids(CAC["PostalAddress"])
    contact = party.kids(CAC["Contact"])
    return {
        "party_name": party.kids(CAC["PartyName"]).text(CBC["Name"]),
        "party_dir3": _scheme(identifiers, "DIR3"),
        "party_nif": _scheme(identifiers, "NIF"),
        "party_id_plataforma": _scheme(identifiers, "ID_PLATAFORMA"),
        "party_identifiers": identifiers,
        "party_type_code": located.text(CBC["ContractingPartyTypeCode"]),
        "party_activity_codes": located.texts(CBC["ActivityCode"]),
        "buyer_profile_uri": located.text(CBC["BuyerProfileURIID"]),
        "party_website_uri": party.text(CBC["WebsiteURI"]),
        "party_city": address.text(CBC["CityName"]),
        "party_postal_zone": address.text(CBC["PostalZone"]),
        "party_address_line": address.kids(CAC["AddressLine"]).text(CBC["Line"]),
        "party_country_code": address.kids(CAC["Country"]).text(CBC["IdentificationCode"]),
        "contact_name": contact.text(CBC["Name"]),
        "contact_email": contact.text(CBC["ElectronicMail"]),
        "contact_telephone": contact.text(CBC["Telephone"]),
        "parent_party_names": _parent_names(located),
    }


def _parent_names(located: _Kids) -> list[str]:
    """The ParentLocatedParty chain, nearest first (e.g. Gandía, Ayuntamientos, ..., Sector Público)."""
    names = []
    parent = located.kids(CAC_EXT["ParentLocatedParty"])
    while parent.element is not None:
        name = parent.kids(CAC["PartyName"]).text(CBC["Name"])
        if name is not None:
            names.append(name)
        parent = parent.kids(CAC_EXT["ParentLocatedParty"])
    return names


def _budget(project: _Kids, values: _Values, label: str, currency_column: str) -> Row:
    budget = project.kids(CAC["BudgetAmount"])
    estimated, cur1 = values.amount(
        budget.first(CBC["EstimatedOverallContractAmount"]), f"{label}estimated_overall_amount"
    )
    total, cur2 = values.amount(budget.first(CBC["TotalAmount"]), f"{label}total_amount")
    tax_exclusive, cur3 = values.amount(budget.first(CBC["TaxExclusiveAmount"]), f"{label}tax_exclusive_amount")
    return {
        "estimated_overall_amount": estimated,
        "total_amount": total,
        "tax_exclusive_amount": tax_exclusive,
        # One currency per budget: the first currencyID given (every sample amount is in EUR).
        currency_column: cur1 or cur2 or cur3,
    }


def _codes(project: _Kids) -> Row:
    """CPV and NUTS codes of a procurement project (the entry's or a lot's)."""
    cpv = [
        code
        for classification in project.all(CAC["RequiredCommodityClassification"])
        for code in _Kids(classification).texts(CBC["ItemClassificationCode"])
    ]
    nuts = [
        code
        for location in project.all(CAC["RealizedLocation"])
        for code in _Kids(location).texts(CBC["CountrySubentityCode"])
    ]
    return {"cpv_codes": cpv, "nuts_code": nuts[0] if nuts else None, "nuts_codes": nuts}


def _project(project: _Kids, values: _Values) -> Row:
    period = project.kids(CAC["PlannedPeriod"])
    duration = period.first(CBC["DurationMeasure"])
    return {
        "project_name": project.text(CBC["Name"]),
        "project_type_code": project.text(CBC["TypeCode"]),
        "project_subtype_code": project.text(CBC["SubTypeCode"]),
        **_budget(project, values, "", "budget_currency"),
        **_codes(project),
        "location_name": project.kids(CAC["RealizedLocation"]).text(CBC["CountrySubentity"]),
        "planned_duration": _text(duration),
        "planned_duration_unit": _attr(duration, "unitCode"),
        "planned_start_date": period.text(CBC["StartDate"]),
        "planned_end_date": period.text(CBC["EndDate"]),
    }


def _process(process: _Kids) -> Row:
    deadline = process.kids(CAC["TenderSubmissionDeadlinePeriod"])
    return {
        "procedure_code": process.text(CBC["ProcedureCode"]),
        "urgency_code": process.text(CBC["UrgencyCode"]),
        "contracting_system_code": process.text(CBC["ContractingSystemCode"]),
        "submission_method_code": process.text(CBC["SubmissionMethodCode"]),
        "submission_deadline_date": deadline.text(CBC["EndDate"]),
        "submission_deadline_time": deadline.text(CBC["EndTime"]),
    }


def _or_none(elements: list[Element]) -> list[Element | None]:
    """The elements, or one None so that an absent level still yields one (null) item."""
    return list(elements) if elements else [None]


def _notices(folder: _Kids) -> list[Row]:
    """One item per publication (document reference) of each notice; every issue date is kept.

    A notice without publication status, or a status without document reference, still yields one
    item (with null media / issue date), so no notice disappears.
    """
    items = []
    for notice in folder.all(CAC_EXT["ValidNoticeInfo"]):
        notice_kids = _Kids(notice)
        notice_type = notice_kids.text(CBC_EXT["NoticeTypeCode"])
        for status in _or_none(notice_kids.all(CAC_EXT["AdditionalPublicationStatus"])):
            status_kids = _Kids(status)
            media = status_kids.text(CBC_EXT["PublicationMediaName"])
            references = status_kids.all(CAC_EXT["AdditionalPublicationDocumentReference"])
            for reference in _or_none(references):
                items.append(
                    {
                        "notice_type_code": notice_type,
                        "publication_media": media,
                        "issue_date": _Kids(reference).text(CBC["IssueDate"]),
                    }
                )
    return items


# ---------------------------------------------------------------------------------------------------
# Lots, results, documents


def _lot(lot: Element, position: int, values: _Values) -> Row:
    lot_kids = _Kids(lot)
    project = lot_kids.kids(CAC["ProcurementProject"])
    return {
        "lot_id": lot_kids.text(CBC["ID"]),
        "lot_position": position,
        "name": project.text(CBC["Name"]),
        "type_code": project.text(CBC["TypeCode"]),
        "subtype_code": project.text(CBC["SubTypeCode"]),
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


def _result_rows(result: Element, position: int, values: _Values) -> list[Row]:
    """One row per WinningParty of a TenderResult; a result without winner gives one row."""
    label = f"results[{position}]."
    kids = _Kids(result)
    awarded = kids.kids(CAC["AwardedTenderedProject"])
    monetary = awarded.kids(CAC["LegalMonetaryTotal"])
    tax_exclusive, cur1 = values.amount(
        monetary.first(CBC["TaxExclusiveAmount"]), label + "awarded_tax_exclusive_amount"
    )
    payable, cur2 = values.amount(monetary.first(CBC["PayableAmount"]), label + "awarded_payable_amount")
    lower, cur3 = values.amount(kids.first(CBC["LowerTenderAmount"]), label + "lower_tender_amount")
    higher, cur4 = values.amount(kids.first(CBC["HigherTenderAmount"]), label + "higher_tender_amount")
    contract = kids.kids(CAC["Contract"])
    shared: Row = {
        "result_position": position,
        "lot_id": awarded.text(CBC["ProcurementProjectLotID"]),
        "result_code": kids.text(CBC["ResultCode"]),
        "description": kids.text(CBC["Description"]),
        "award_date": kids.text(CBC["AwardDate"]),
        "start_date": kids.text(CBC["StartDate"]),
        "received_tender_quantity": values.integer(
            kids.first(CBC["ReceivedTenderQuantity"]), label + "received_tender_quantity"
        ),
        "smes_received_tender_quantity": values.integer(
            kids.first(CBC["SMEsReceivedTenderQuantity"]), label + "smes_received_tender_quantity"
        ),
        "lower_tender_amount": lower,
        "higher_tender_amount": higher,
        "tender_amount_currency": cur3 or cur4,
        "sme_awarded": values.boolean(kids.first(CBC["SMEAwardedIndicator"]), label + "sme_awarded"),
        "contract_id": contract.text(CBC["ID"]),
        "contract_issue_date": contract.text(CBC["IssueDate"]),
        "awarded_tax_exclusive_amount": tax_exclusive,
        "awarded_payable_amount": payable,
        "awarded_currency": cur1 or cur2,
    }
    winners = kids.all(CAC["WinningParty"])
    return [
        {**shared, "winner_position": i, "winner_count": len(winners), **_winner(_Kids(winner))}
        for i, winner in enumerate(_or_none(winners))
    ]


def _winner(winner: _Kids) -> Row:
    identifiers = _identifiers(winner)
    # PLACSP writes the winner's place under PhysicalLocation/Address; UBL also allows PostalAddress.
    address = winner.kids(CAC["PhysicalLocation"]).kids(CAC["Address"])
    if address.element is None:
        address = winner.kids(CAC["PostalAddress"])
    return {
        "winner_name": winner.kids(CAC["PartyName"]).text(CBC["Name"]),
        "winner_id": identifiers[0]["id"] if identifiers else None,
        "winner_id_scheme": identifiers[0]["scheme_name"] if identifiers else None,
        "winner_identifiers": identifiers,
        "winner_city": address.text(CBC["CityName"]),
        "winner_postal_zone": address.text(CBC["PostalZone"]),
        "winner_country_code": address.kids(CAC["Country"]).text(CBC["IdentificationCode"]),
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
    for child in element:
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
    comment = _Kids(tombstone).first(_COMMENT)
    deletion_type = validation.check_deletion_type(comment.get("type") if comment is not None else None, problems)
    return {
        "dataset": dataset.key,
        "entry_id": ref,
        "folder_number": folder_number,
        "deleted_at": deleted_at,
        "deletion_type": deletion_type,
        "_source_file": source_file,
    }
