"""The dead-letter table's vocabulary, defined once: the stage a record failed at, and its status.

Stages: `parse` (the record is not well-formed XML, or its page was refused), `validation` (it
parsed but a field is wrong), `reconciliation` (a whole Bronze file the ingest could not account for).
Statuses: a dead letter is written `quarantined`; a person may mark it `fixed` after correcting
`raw_record`; the replay moves it to `replayed`, back to `quarantined` with one more attempt, or to
`abandoned` (docs/dead-letters.md). Plain constants: the Spark job, the sensor and the CLI share them.
"""

from __future__ import annotations

STAGE_PARSE = "parse"
STAGE_VALIDATION = "validation"
STAGE_RECONCILIATION = "reconciliation"
STAGES = (STAGE_PARSE, STAGE_VALIDATION, STAGE_RECONCILIATION)

QUARANTINED = "quarantined"
FIXED = "fixed"
REPLAYED = "replayed"
ABANDONED = "abandoned"
REPLAYABLE = (QUARANTINED, FIXED)  # what a replay selects
