"""Write a corrected record into its dead letter and mark it `fixed`, ready for a replay
(docs/runbook.md, "Fixing a record by hand"). delta-rs, no Spark.

Why not delta-rs's `update(new_values=...)`: it puts a string between quotes without escaping it, so
a record holding an apostrophe (L'Ajuntament, d'Urgell: common in the feeds) is cut at its first one
without an error, or refused. Here the record goes in as a SQL literal with its quotes doubled, and
is read back before the function returns.
"""

from __future__ import annotations

import re
from pathlib import Path

from placsp_provider.datasets import get_dataset
from placsp_provider.dead_letters.lifecycle import FIXED
from placsp_provider.errors import ConfigError, PlacspError
from placsp_provider.lake import DEAD_LETTER_TABLE, table_path

_ID = re.compile(r"[0-9a-f]{64}")


def sql_string(text: str) -> str:
    """`text` as a SQL string literal (DataFusion's, standard SQL: a quote is doubled)."""
    return "'" + text.replace("'", "''") + "'"


def mark_fixed(lake: Path, dataset: str, dead_letter_id: str, raw_record: str) -> None:
    """Replace the dead letter's `raw_record` by the corrected one and set its status `fixed`."""
    from deltalake import DeltaTable

    ds = get_dataset(dataset).key
    if not _ID.fullmatch(dead_letter_id):
        raise ConfigError(f"dataset {ds}: {dead_letter_id!r} is not a dead_letter_id (64 hex characters)")
    path = table_path(Path(lake), DEAD_LETTER_TABLE)
    where = f"dataset = '{ds}' AND dead_letter_id = '{dead_letter_id}'"
    metrics = DeltaTable(str(path)).update(
        predicate=where, updates={"raw_record": sql_string(raw_record), "status": sql_string(FIXED)}
    )
    if metrics.get("num_updated_rows") != 1:
        raise PlacspError(
            f"dataset {ds}: dead letter {dead_letter_id}: {metrics.get('num_updated_rows')} rows updated in {path}, "
            "expected 1 (is the id of this dataset?)"
        )
    stored = _read_back(path, ds, dead_letter_id)
    if stored != [raw_record]:
        raise PlacspError(
            f"dataset {ds}: dead letter {dead_letter_id}: the record read back differs from the one written"
        )


def _read_back(path: Path, dataset: str, dead_letter_id: str) -> list[str]:
    """The `raw_record` of that dead letter as now committed: the dataset's partition only, the id
    filtered in the Parquet scan, through Arrow's own filesystem (`table_files.local_files`)."""
    from deltalake import DeltaTable

    from placsp_provider.table_files import local_files, text_equals

    files = local_files(DeltaTable(str(path)), [("dataset", "=", dataset)])
    wanted = text_equals("dead_letter_id", dead_letter_id)  # files of both engines (table_files)
    rows = files.to_table(columns=["raw_record"], filter=wanted)
    return rows.column("raw_record").to_pylist()
