"""Reading back what a stager wrote (routing.stage_page, routing.make_replay_stager), for the tests."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def read_staged(staging: Path) -> dict[str, pa.Table]:
    """Every staged table under `staging`, by table name; each folder must hold exactly one Parquet
    file: a temp file left behind, or a second file for one table, fails the test."""
    out = {}
    for folder in sorted(staging.iterdir()):
        files = sorted(folder.iterdir())
        assert len(files) == 1 and files[0].suffix == ".parquet", files
        out[folder.name] = pq.read_table(files[0])
    return out
