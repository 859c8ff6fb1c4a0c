"""Reading back what a stager wrote (routing.stage_page, routing.make_replay_stager), for the tests."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def read_staged(staging: Path) -> dict[str, pa.Table]:
    """Every staged table under `staging`, by table name; each folder must hold exactly one staged
    file (Parquet or Arrow IPC): a temp file left behind, or a second file for one table, fails the
    test."""
    out = {}
    for folder in sorted(staging.iterdir()):
        files = sorted(folder.iterdir())
        assert len(files) == 1 and files[0].suffix in (".parquet", ".arrow"), files
        if files[0].suffix == ".arrow":
            with pa.OSFile(str(files[0])) as source:
                out[folder.name] = pa.ipc.open_file(source).read_all()
        else:
            out[folder.name] = pq.read_table(files[0])
    return out
