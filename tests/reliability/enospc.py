"""Run `placsp` with ENOSPC injected at the file layer: the fallback of test_full_disk.py where no
size-limited filesystem can be made (no user and mount namespaces).

    python -m tests.reliability.enospc LAKE BUDGET placsp-args...

Every file opened for writing under LAKE shares BUDGET bytes; a write past it raises
`OSError(ENOSPC)` as a full disk would, after writing what still fit. Removing files frees nothing:
once full, the disk stays full for this process (the rerun runs without this wrapper).
"""

from __future__ import annotations

import errno
import io
import os
import sys
from pathlib import Path
from typing import Any


class _Disk:
    def __init__(self, root: Path, budget: int) -> None:
        self.root, self.left = str(root.resolve()), budget

    def take(self, n: int) -> int:
        granted = max(0, min(n, self.left))
        self.left -= granted
        return granted


class _FullDiskFile:
    """A file object whose writes stop at the disk's budget."""

    def __init__(self, raw: Any, disk: _Disk, path: str) -> None:
        self._raw, self._disk, self._path = raw, disk, path

    def write(self, data: Any) -> int:
        granted = self._disk.take(len(data))
        if granted:
            self._raw.write(data[:granted])
        if granted < len(data):
            self._raw.flush()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self._path)
        return granted

    def __enter__(self) -> _FullDiskFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self._raw.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


def install(root: Path, budget: int) -> None:
    disk, real_open = _Disk(root, budget), io.open

    def fake_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = real_open(file, mode, *args, **kwargs)
        writing = any(c in mode for c in "wax+")
        if writing and isinstance(file, str | os.PathLike) and os.path.abspath(file).startswith(disk.root):
            return _FullDiskFile(handle, disk, os.fspath(file))
        return handle

    io.open = fake_open  # type: ignore[assignment]  # pathlib's Path.open calls io.open


def main() -> int:
    lake, budget, *args = sys.argv[1:]
    install(Path(lake), int(budget))
    from placsp_provider.cli import main as placsp

    return placsp(args)


if __name__ == "__main__":
    raise SystemExit(main())
