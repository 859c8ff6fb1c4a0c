"""Explicit Arrow schemas of the rows `parse_page` returns, one per Silver table, plus dead letters.

Never infer these (inference turns CPV `03000000` into 3000000 and flips arrays to structs). Every row
dict `parse_page` returns has exactly the columns below, no more, no fewer (tests enforce it). The
Silver MERGE keys are `BUSINESS_KEYS`; dead letters carry no key (the ingest adds dead_letter_id and
their lifecycle columns).

Conventions: positions are 0-based in document order; amounts are decimal(38, 6) (exact, never float);
timestamps are UTC; dates/times are the ISO strings the XML holds (e.g. '2025-06-20', '14:00:00');
codes stay strings; list columns are never null (empty list instead). Child rows repeat the entry's
`entry_updated` so each table can do newest-wins on its own. Tombstones have no `entry_updated`: their
`deleted_at` plays that role.

Nothing here imports pyspark: the lake tables add their lineage columns in `ingest/tables.py`, and
`spark/tables.py` turns them into Spark types.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from placsp_provider.parser.validation import AMOUNT_PRECISION, AMOUNT_SCALE

AMOUNT = pa.decimal128(AMOUNT_PRECISION, AMOUNT_SCALE)
UTC_TIMESTAMP = pa.timestamp("us", tz="UTC")
STRING = pa.string()
STRINGS = pa.list_(STRING)
IDENTIFIERS = pa.list_(pa.struct([("scheme_name", pa.string()), ("id", pa.string())]))
NOTICES = pa.list_(
    pa.struct([("notice_type_code", pa.string()), ("publication_media", pa.string()), ("issue_date", pa.string())])
)


def _required(name: str, type_: pa.DataType = STRING) -> pa.Field:
    return pa.field(name, type_, nullable=False)


def _optional(name: str, type_: pa.DataType = STRING) -> pa.Field:
    return pa.field(name, type_, nullable=True)


_ENTRY_VERSION = [_required("dataset"), _required("entry_id"), _required("entry_updated", UTC_TIMESTAMP)]
SOURCE_FILE = _required("_source_file")
# The sha256 of the record's exact bytes, on every row a record gives while it is staged (not a Silver
# column): the last tie-break between versions of one entry (ingest.rules), the same in every engine.
RECORD_DIGEST_COLUMN = "_record_digest"
RECORD_DIGEST = _required(RECORD_DIGEST_COLUMN)


def _staged_row(*columns: pa.Field) -> pa.Schema:
    """A table of an entry's version: the version's columns first, its page and record digest last."""
    return pa.schema([*_ENTRY_VERSION, *columns, SOURCE_FILE, RECORD_DIGEST])


ENTRIES = _staged_row(
    _required("folder_number", pa.int64()),
    _required("updated", UTC_TIMESTAMP),  # == entry_updated; the entry's own Atom <updated>
    _optional("title"),
    _optional("summary"),
    _optional("link"),
    _optional("contract_folder_id"),
    _optional("status_code"),
    _optional("ted_uuid"),
    # contracting party (órgano de contratación)
    _optional("party_name"),
    _optional("party_dir3"),
    _optional("party_nif"),
    _optional("party_id_plataforma"),
    _required("party_identifiers", IDENTIFIERS),
    _optional("party_type_code"),
    _required("party_activity_codes", STRINGS),
    _optional("buyer_profile_uri"),
    _optional("party_website_uri"),
    _optional("party_city"),
    _optional("party_postal_zone"),
    _optional("party_address_line"),
    _optional("party_country_code"),
    _optional("contact_name"),
    _optional("contact_email"),
    _optional("contact_telephone"),
    _required("parent_party_names", STRINGS),  # nearest parent first
    # procurement project (objeto, tipo, presupuesto, CPV, lugar de ejecución, duración)
    _optional("project_name"),
    _optional("project_type_code"),
    _optional("project_subtype_code"),
    _optional("estimated_overall_amount", AMOUNT),  # valor estimado
    _optional("total_amount", AMOUNT),  # presupuesto base con impuestos
    _optional("tax_exclusive_amount", AMOUNT),  # presupuesto base sin impuestos
    _optional("budget_currency"),
    _required("cpv_codes", STRINGS),
    _optional("nuts_code"),  # first of nuts_codes
    _required("nuts_codes", STRINGS),
    _optional("location_name"),
    _optional("planned_duration"),  # text as written, e.g. '48'
    _optional("planned_duration_unit"),  # e.g. 'MON', 'ANN', 'DAY'
    _optional("planned_start_date"),
    _optional("planned_end_date"),
    # tendering process (procedimiento, tramitación, sistema, presentación, plazo)
    _optional("procedure_code"),
    _optional("urgency_code"),
    _optional("contracting_system_code"),
    _optional("submission_method_code"),
    _optional("submission_deadline_date"),
    _optional("submission_deadline_time"),
    _required("funding_program_codes", STRINGS),
    _required("notices", NOTICES),
    _required("lot_count", pa.int32()),
    _required("result_count", pa.int32()),  # TenderResult elements (results rows may be more)
    _required("document_count", pa.int32()),  # rows of this entry in `documents`
)

LOTS = _staged_row(
    _required("lot_id"),
    _required("lot_position", pa.int32()),
    _optional("name"),
    _optional("type_code"),
    _optional("subtype_code"),
    _optional("estimated_overall_amount", AMOUNT),
    _optional("total_amount", AMOUNT),
    _optional("tax_exclusive_amount", AMOUNT),
    _optional("currency"),
    _required("cpv_codes", STRINGS),
    _optional("nuts_code"),
    _required("nuts_codes", STRINGS),
)

DOCUMENTS = _staged_row(
    # legal, technical, additional, general, additional_publication, procurement_legislation, ...
    _required("document_kind"),
    _required("position", pa.int32()),
    _optional("document_id"),  # cbc:ID: the file name for legal/technical/additional documents
    _optional("file_name"),
    _optional("uri"),
    _optional("document_hash"),
    _optional("document_type_code"),
    _optional("issue_date"),
)

RESULTS = _staged_row(
    _required("result_position", pa.int32()),
    _required("winner_position", pa.int32()),
    _required("winner_count", pa.int32()),  # WinningParty elements of this result (0 = none)
    _optional("lot_id"),  # AwardedTenderedProject/ProcurementProjectLotID
    _optional("result_code"),
    _optional("description"),
    _optional("award_date"),
    _optional("start_date"),
    _optional("received_tender_quantity", pa.int64()),  # número de ofertas
    _optional("smes_received_tender_quantity", pa.int64()),
    _optional("lower_tender_amount", AMOUNT),
    _optional("higher_tender_amount", AMOUNT),
    _optional("tender_amount_currency"),
    _optional("sme_awarded", pa.bool_()),
    _optional("contract_id"),
    _optional("contract_issue_date"),  # fecha de formalización
    _optional("winner_name"),
    _optional("winner_id"),  # first PartyIdentification
    _optional("winner_id_scheme"),  # e.g. NIF
    _required("winner_identifiers", IDENTIFIERS),
    _optional("winner_city"),
    _optional("winner_postal_zone"),
    _optional("winner_country_code"),
    _optional("awarded_tax_exclusive_amount", AMOUNT),  # importe de adjudicación sin impuestos
    _optional("awarded_payable_amount", AMOUNT),  # importe de adjudicación con impuestos
    _optional("awarded_currency"),
)

TOMBSTONES = pa.schema(
    [
        _required("dataset"),
        _required("entry_id"),  # the tombstone's ref
        _required("folder_number", pa.int64()),
        _required("deleted_at", UTC_TIMESTAMP),  # the tombstone's when
        _optional("deletion_type"),  # ANULADA / CERRADA, null before mid-2022
        SOURCE_FILE,
        RECORD_DIGEST,
    ]
)

DEAD_LETTERS = pa.schema(
    [
        _required("dataset"),
        _required("source_file"),
        _required("stage"),  # parse | validation (the job adds reconciliation)
        _required("error_type"),
        _required("error_message"),
        _required("raw_record"),  # for people: UTF-8, undecodable bytes shown as \xNN
        _required("namespace_context"),
        _required("record_kind"),  # entry | tombstone | page (the job adds file)
        _optional("entry_id"),
        _required("record_offset", pa.int64()),
        # What the parser read, exactly: the page's XML declaration (when it had one), then the record's
        # bytes. A replay re-parses these, never `raw_record`'s text (unless a person corrected it), so
        # the same bytes get the same verdict. Null only on dead letters written before the column
        # existed (docs/runbook.md, "Dead letters written before raw_bytes"). Last, because a column
        # added to an existing table goes last: fresh and upgraded tables have one column order.
        _optional("raw_bytes", pa.binary()),
        # The rules that rejected it (`parser.version.PARSER_VERSION`): the scheduled reprocessing
        # replays what an older version rejected. Null on dead letters written before the column
        # existed: an unknown, older version. Last, after raw_bytes, for the reason above.
        _optional("parser_version", pa.int32()),
    ]
)

SCHEMAS: dict[str, pa.Schema] = {
    "entries": ENTRIES,
    "lots": LOTS,
    "documents": DOCUMENTS,
    "results": RESULTS,
    "tombstones": TOMBSTONES,
    "dead_letters": DEAD_LETTERS,
}

BUSINESS_KEYS: dict[str, tuple[str, ...]] = {
    "entries": ("dataset", "entry_id"),
    "lots": ("dataset", "entry_id", "lot_id"),  # lot ids are unique per entry (validated)
    "documents": ("dataset", "entry_id", "document_kind", "position"),
    "results": ("dataset", "entry_id", "result_position", "winner_position"),  # 0 for a result without winner
    "tombstones": ("dataset", "entry_id", "deleted_at"),
}


_ROW_TYPES = {table: pa.struct(list(schema)) for table, schema in SCHEMAS.items()}


def record_batch(table: str, rows: list[dict[str, Any]]) -> pa.RecordBatch:
    """Rows of one table as an Arrow batch with its explicit schema (what mapInArrow yields).

    Arrow does not enforce `nullable=False` when building from Python, so it is checked here: a null
    in a required column is a bug upstream and must not reach a Delta table silently.
    """
    schema = SCHEMAS[table]
    # Converted as one struct array: Arrow looks the keys up in C, where `from_pylist` builds a Python
    # list per column first (entries: 5.1 -> 4.0 ms a real-shaped page).
    batch = pa.RecordBatch.from_struct_array(pa.array(rows, type=_ROW_TYPES[table]))
    for index, column in enumerate(schema):
        if not column.nullable and batch.column(index).null_count:
            raise ValueError(
                f"{table}: {batch.column(index).null_count} null value(s) in required column {column.name}"
            )
    return batch
