"""Atomic, idempotent landing of a downloaded page into Bronze."""

from __future__ import annotations

import os
from pathlib import Path


def land_atomically(tmp: Path, final: Path) -> bool:
    """Move `tmp` to `final` (same filesystem). Return False when identical bytes were already there.

    The final name carries the content hash, so an existing file IS the same page: it is never
    rewritten, which is what makes rerunning an interval add nothing.
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.exists():
        tmp.unlink(missing_ok=True)
        return False
    with tmp.open("rb") as fh:
        os.fsync(fh.fileno())  # the rename must never expose a half-written page after a crash
    os.replace(tmp, final)
    return True


def write_text_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
