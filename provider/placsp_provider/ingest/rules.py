"""How a batch is written into Silver, as data both writers execute: keys, the order of versions,
and the MERGE conditions as SQL that Spark's `DeltaMergeBuilder` and delta-rs's `merge()` both
accept (aliases: `t` the table, `s` the batch). Imports no engine.

Versions of one entry are ordered by (`updated`, `_source_file`, `_record_digest`), the greatest
winning: the newest `updated`; on a tie the page whose name sorts last (dated pages sort by their
time stamp); on a tie within one page (a page that repeats an entry with one `updated` and other
content, as the real 643 fragment does) the greater sha256 of the record's bytes. The digest is
computed by the parser when a record is staged, so every engine, batch split and page order picks
the same version. Across batches only (`updated`, `_source_file`) is compared: one page always
yields the same winner, so Silver need not store the digest.

- entries: the winner replaces Silver's row when it is greater (`ENTRY_REPLACES`);
- lots, documents, results: rows of an older version of a batch entry go (`CHILD_IS_OLDER`); the
  winner's rows (those of its very record: `WINNER_COLUMNS`) are inserted on the business keys;
- tombstones: one per (entry_id, deleted_at), the greatest (`_source_file`, `_record_digest`) in a
  batch and the later page across batches (`TOMBSTONE_REPLACES`); the newest tombstone of an entry
  is applied to it when it deletes the version Silver holds (`TOMBSTONE_APPLIES`);
- dead letters: insert-only on their id; the reconciliation last, once everything else committed
  (`RECONCILIATION_CHANGES`).

Every Silver row belongs to a version with a time (`lake.VERSION_TIME`). A MERGE that knows the earliest
time any row it can match has may say so (`since`): the files holding only older rows are then not
read. Only safe because no other writer of the dataset can commit unseen in between (`writer_txn`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from placsp_provider.dead_letters.lifecycle import REPLAYED
from placsp_provider.lake import VERSION_TIME
from placsp_provider.parser.silver_schema import BUSINESS_KEYS, RECORD_DIGEST_COLUMN

__all__ = ["BUSINESS_KEYS"]

DIGEST = RECORD_DIGEST_COLUMN
VERSION_ORDER = ("updated", "_source_file", DIGEST)  # entries: the greatest wins
TOMBSTONE_ORDER = ("_source_file", DIGEST)  # within one tombstone key: the greatest wins
# A child row belongs to the version (entry_id, entry_updated, _source_file, _record_digest).
WINNER_COLUMNS = ("entry_id", "updated", "_source_file", DIGEST)
CHILD_VERSION_COLUMNS = ("entry_id", "entry_updated", "_source_file", DIGEST)

ENTRY_REPLACES = "s.updated > t.updated OR (s.updated = t.updated AND s._source_file > t._source_file)"
CHILD_IS_OLDER = "t.entry_updated < s.updated OR (t.entry_updated = s.updated AND t._source_file < s._source_file)"
TOMBSTONE_REPLACES = "s._source_file > t._source_file"
TOMBSTONE_APPLIES = (
    "s.deleted_at >= t.updated AND (t.deleted_at IS NULL OR t.deleted_at <> s.deleted_at "
    "OR coalesce(t.deletion_type, '') <> coalesce(s.deletion_type, ''))"
)
RECONCILIATION_CHANGES = "t.status <> s.status"  # a reprocessed file that now adds up, and back


def on(keys: Iterable[str], dataset: str) -> str:
    """A MERGE's match: the dataset as a literal (partition pruning; MERGEs of different datasets never
    conflict), then each key."""
    return " AND ".join([f"t.dataset = '{dataset}'"] + [f"t.{k} = s.{k}" for k in keys if k != "dataset"])


def since(table: str, earliest: datetime) -> str:
    """A MERGE condition's bound on the table alone: rows of versions from `earliest` on. Files whose
    rows are all older are skipped by their statistics, unread. The caller must know that no row the
    MERGE can match is older (read from the same snapshot the MERGE writes on: `writer_txn`)."""
    if earliest.tzinfo is None:
        raise ValueError(f"{table}: a MERGE's time bound must be in UTC, got {earliest!r}")
    return f"t.{VERSION_TIME[table]} >= '{earliest.astimezone(UTC).isoformat()}'"


Version = tuple[datetime, str]  # (updated, _source_file): what Silver holds of an entry

# The same two questions as SQL over a batch version joined with what Silver holds of its entry
# (`_held`, `_held_file`: null when Silver holds none), for an engine that decides in SQL (Spark).
IS_NEWER_SQL = "_held IS NULL OR _held < updated OR (_held = updated AND _held_file < _source_file)"
IS_SAME_SQL = "_held = updated AND _held_file = _source_file"


def is_newer(held: Version | None, incoming: Version) -> bool:
    """The batch's version replaces Silver's (`ENTRY_REPLACES`, in Python)."""
    return held is None or held < incoming


def is_eligible(held: Version | None, incoming: Version) -> bool:
    """The batch's version is the entry's truth: newer, or the very version Silver holds (a rerun, or
    a run completing one that died between commits): its children are (re)written."""
    return held is None or held <= incoming


def greatest_per_key(rows: list[dict[str, Any]], key: Iterable[str], order: Iterable[str]) -> list[int]:
    """Indexes of the row with the greatest `order` for each `key` (no order: the first), in batch
    order: the in-batch pick both writers make (Spark by a window, delta-rs here)."""
    key, order = tuple(key), tuple(order)
    best: dict[tuple[Any, ...], int] = {}
    for index, row in enumerate(rows):
        k = tuple(row[c] for c in key)
        held = best.get(k)
        if held is None or tuple(row[c] for c in order) > tuple(rows[held][c] for c in order):
            best[k] = index
    return sorted(best.values())


# A replay's outcome recorded on its dead letter (dead_letters.lifecycle; dead_letters.status):
# the source holds the new status, the error when it failed again, the run and its time.
_REPLAYED = f"s.new_status = '{REPLAYED}'"
STATUS_UPDATE = {
    "status": "s.new_status",
    "attempts": "CAST(t.attempts + 1 AS INT)",
    "last_attempt_at": "s.at",
    "replayed_at": f"CASE WHEN {_REPLAYED} THEN s.at ELSE t.replayed_at END",
    "replay_run_id": f"CASE WHEN {_REPLAYED} THEN s.replay_run_id ELSE t.replay_run_id END",
    "error_type": "coalesce(s.error_type, t.error_type)",
    "error_message": "coalesce(s.error_message, t.error_message)",
    # Rejected again: by the replay's parser version (the scheduled reprocessing waits for a newer one).
    # Replayed: the version that rejected it stays on record.
    "parser_version": f"CASE WHEN {_REPLAYED} THEN t.parser_version ELSE s.parser_version END",
}
# ...only on a dead letter nobody changed since the replay selected it (a person's fix included).
STATUS_UNCHANGED = "t.status = s.was_status AND t.attempts = s.was_attempts AND t.raw_record = s.was_record"
