"""Marking a dead letter `fixed` with its corrected record (delta-rs, no Spark), as the runbook says.

The record of the runbook's own example holds apostrophes and a backslash: delta-rs's
`update(new_values=...)` would cut it at the first apostrophe without a word.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from placsp_provider.dead_letters.fix import mark_fixed
from placsp_provider.errors import ConfigError, PlacspError
from placsp_provider.lake import table_path

pytestmark = pytest.mark.unit

RECORD = "<entry><title>L'Ajuntament d'Alp; a\\b 'quoted'</title></entry>"


def _dead_letters(lake: Path) -> str:
    import pyarrow as pa
    from deltalake import write_deltalake

    from placsp_provider.spark.tables import table_schema

    schema = table_schema("dead_letters")
    dl_id = "ab" * 32
    row = {f.name: None for f in schema}
    row.update(
        dataset="agregadas",
        source_file="bronze/agregadas/pages/p.atom",
        stage="parse",
        error_type="xml_syntax",
        error_message="broken",
        raw_record="<entry><title>L'Ajuntament",
        namespace_context="",
        record_kind="entry",
        record_offset=0,
        dead_letter_id=dl_id,
        run_id="r",
        processing_timestamp=datetime(2022, 1, 5, tzinfo=UTC),
        status="quarantined",
        attempts=0,
    )
    other = {**row, "dead_letter_id": "cd" * 32}
    write_deltalake(str(table_path(lake, "dead_letters")), pa.Table.from_pylist([row, other], schema=schema))
    return dl_id


def test_the_corrected_record_is_stored_whole_and_marked_fixed(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    dl_id = _dead_letters(tmp_path)
    mark_fixed(tmp_path, "1044", dl_id, RECORD)
    rows = {
        r["dead_letter_id"]: r
        for r in DeltaTable(str(table_path(tmp_path, "dead_letters"))).to_pyarrow_table().to_pylist()
    }
    assert (rows[dl_id]["raw_record"], rows[dl_id]["status"]) == (RECORD, "fixed")
    assert rows["cd" * 32]["status"] == "quarantined"  # nothing else touched


def test_an_unknown_or_malformed_id_is_a_named_error(tmp_path: Path) -> None:
    _dead_letters(tmp_path)
    with pytest.raises(PlacspError, match="0 rows updated"):
        mark_fixed(tmp_path, "agregadas", "ef" * 32, RECORD)
    with pytest.raises(ConfigError, match="not a dead_letter_id"):
        mark_fixed(tmp_path, "agregadas", "x' OR '1'='1", RECORD)
