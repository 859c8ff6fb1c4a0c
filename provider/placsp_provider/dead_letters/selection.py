"""The dead letters a replay owns, read by delta-rs in the driver (not a Spark query: decision 0033):
the dataset's partition of `dead_letters` filtered in the Parquet scan, oldest first, at most
`max_records` (10,000 by default) records of a few KB, which fit the driver.

The scheduled reprocessing (`unattended=True`) owns only what needs no person: dead letters a person
marked `fixed`, and `quarantined` ones an older parser version rejected (`parser_version` below
`PARSER_VERSION`, or null: written before the column existed, by an unknown older version).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from placsp_provider.dead_letters.lifecycle import FIXED, QUARANTINED, REPLAYABLE
from placsp_provider.lake import table_path
from placsp_provider.lake_storage import LakePath
from placsp_provider.table_files import table_files, text_in


def select_dead_letters(
    lake: LakePath,
    dataset: str,
    columns: Sequence[str],
    *,
    stages: Sequence[str] = (),
    error_types: Sequence[str] = (),
    since: date | None = None,
    until: date | None = None,
    dead_letter_ids: Sequence[str] = (),
    unattended: bool = False,
    max_records: int,
) -> Any:
    """`columns` of the selected dead letters as an Arrow table (strings as `string`, whichever engine
    wrote the files: table_files), ordered by `processing_timestamp` then `dead_letter_id`. Dates are
    UTC days of `processing_timestamp`, both inclusive. `unattended`: only what the scheduled
    reprocessing may replay without a person (module docstring)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from placsp_provider.lake_storage import open_table

    files = table_files(open_table(table_path(lake, "dead_letters")), [("dataset", "=", dataset)])
    wanted = text_in("status", REPLAYABLE)
    if unattended:
        wanted &= unattended_rule(files.schema.names)
    for column, values in (("stage", stages), ("error_type", error_types), ("dead_letter_id", dead_letter_ids)):
        if values:
            wanted &= text_in(column, values)
    stamp = pa.timestamp("us", tz="UTC")
    if since:
        wanted &= pc.field("processing_timestamp") >= pa.scalar(datetime.combine(since, time(), UTC), stamp)
    if until:
        end = datetime.combine(until + timedelta(days=1), time(), UTC)
        wanted &= pc.field("processing_timestamp") < pa.scalar(end, stamp)
    order = ["processing_timestamp", "dead_letter_id"]
    rows = files.to_table(columns=list(dict.fromkeys([*columns, *order])), filter=wanted)
    rows = rows.sort_by([(c, "ascending") for c in order]).slice(0, max_records).select(list(columns))
    return pa.table(
        [c.cast(pa.string()) if pa.types.is_string_view(c.type) else c for c in rows.columns], names=rows.column_names
    )


def unattended_rule(columns: Sequence[str]) -> Any:
    """`fixed`, or `quarantined` by an older or unknown parser version: a pyarrow filter. A table
    that predates the `parser_version` column (nothing has written to it since the upgrade) has
    only unknown versions."""
    import pyarrow.compute as pc

    from placsp_provider.parser.version import PARSER_VERSION

    older = pc.scalar(True)
    if "parser_version" in columns:
        version = pc.field("parser_version")
        older = version.is_null() | (version < PARSER_VERSION)
    return text_in("status", [FIXED]) | (text_in("status", [QUARANTINED]) & older)


def unattended_backlog(lake: LakePath, datasets: Sequence[str], max_records: int) -> dict[str, int]:
    """Per dataset, how many dead letters the scheduled reprocessing would select now (at most
    `max_records`); 0 for every dataset when the lake has no dead-letter table yet."""
    from placsp_provider.ingest.tables import has_commit

    if not has_commit(table_path(lake, "dead_letters")):
        return dict.fromkeys(datasets, 0)
    return {
        dataset: select_dead_letters(
            lake, dataset, ["dead_letter_id"], unattended=True, max_records=max_records
        ).num_rows
        for dataset in datasets
    }
