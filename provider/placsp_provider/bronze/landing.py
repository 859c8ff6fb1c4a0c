"""Atomic, idempotent landing of a downloaded page into Bronze, and the temp folders downloads use."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from placsp_provider.lake_storage import LakePath, is_local, put_new

log = logging.getLogger(__name__)

_LOCK = ".lock"
# A run's temp folder without its lock file: a release before the lock existed, or a run killed in
# the microseconds between creating the folder and locking it. Old enough, nobody is using it.
_UNLOCKED_GRACE_SECONDS = 3600


def land_atomically(tmp: Path, final: LakePath, *, synced: bool = False) -> bool:
    """Move `tmp` to `final` (a rename on a local lake; a conditional PUT on S3, then `tmp` removed).
    Return False when identical bytes were already there.

    The final name carries the content hash, so an existing file IS the same page: it is never
    rewritten, which is what makes rerunning an interval add nothing. `synced`: the caller already
    made `tmp` durable (`make_durable`), so landing is the rename alone.
    """
    if not is_local(final):
        try:
            return not final.exists() and put_new(final, tmp.read_bytes())
        finally:
            tmp.unlink(missing_ok=True)
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.exists():
        tmp.unlink(missing_ok=True)
        return False
    if not synced:
        make_durable(tmp)
    os.replace(tmp, final)
    return True


def make_durable(path: Path) -> None:
    """Flush `path`'s bytes to the disk: a rename must never expose a half-written page after a crash."""
    with path.open("rb") as fh:
        os.fsync(fh.fileno())


def write_text_atomically(path: LakePath, text: str) -> None:
    """Replace `path` by `text` (UTF-8) whole or not at all (`write_bytes_atomically`)."""
    write_bytes_atomically(path, text.encode("utf-8"))


def write_bytes_atomically(path: LakePath, data: bytes) -> None:
    """Replace `path` by `data` whole or not at all; a failed write (a full disk) leaves no temp file.
    (An S3 PUT is whole or nothing by itself.)"""
    if not is_local(path):
        path.write_bytes(data)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def run_folder(parent: Path, prefix: str = "") -> Iterator[Path]:
    """A temp folder of this run under `parent` (a dataset's `_incoming`), removed at the end.

    A run killed outright (SIGKILL, the OOM killer, a lost machine) runs no `finally`, so its folder,
    partial downloads included, would stay forever. Each run therefore holds an exclusive lock on a
    file in its folder for as long as it lives; the kernel drops the lock when the process dies, and
    every run starts by removing the folders whose lock it can take: their owners are gone. A live
    run's folder (this host or another sharing the lake) is never touched.
    """
    parent.mkdir(parents=True, exist_ok=True)
    sweep_dead_runs(parent)
    folder = parent / f"{prefix}{uuid.uuid4().hex}"
    folder.mkdir()
    fd = os.open(folder / _LOCK, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        os.close(fd)


def sweep_dead_runs(parent: Path) -> None:
    """Remove the temp folders of runs that died."""
    removed = []
    for folder in sorted(p for p in parent.iterdir() if p.is_dir()):
        try:
            fd = os.open(folder / _LOCK, os.O_RDWR)
        except FileNotFoundError:
            with contextlib.suppress(FileNotFoundError):
                if time.time() - folder.stat().st_mtime > _UNLOCKED_GRACE_SECONDS:
                    shutil.rmtree(folder, ignore_errors=True)
                    removed.append(folder)
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its run is alive
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
        finally:
            os.close(fd)
    if removed:
        log.warning(
            "removed the temp folder(s) of %d run(s) that died before cleaning up: %s",
            len(removed),
            ", ".join(p.name for p in removed),
        )
