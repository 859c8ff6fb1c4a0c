"""Fail an image build when an installed package's version is not the one in the lock.

    python check_lock.py CONSTRAINTS [--pyproject PYPROJECT] [NAME ...]

checks every NAME and, with --pyproject, every dependency of the project against CONSTRAINTS
(requirements/constraints.txt, one `name==version` a line). Both Dockerfiles run it right after
`pip install -c`, so an image whose versions drifted from the lock is never built. Standard library
only: it also runs in the Spark image's bare Python.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def normalize(name: str) -> str:
    """PEP 503 name: case and runs of `-_.` do not matter."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(text: str) -> dict[str, str]:
    lock: dict[str, str] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        if not sep:
            raise ValueError(f"lock line {line!r} is not `name==version`")
        lock[normalize(name)] = version.strip()
    return lock


def project_dependencies(pyproject_text: str, extras: Iterable[str] = ()) -> list[str]:
    """Names of the `[project] dependencies` and of the named extras' (markers and version ranges
    dropped); an extra naming the project itself (`all = ["<project>[volume,report]"]`) brings in those."""
    project = tomllib.loads(pyproject_text)["project"]
    optional = project.get("optional-dependencies", {})
    names, pending, seen = [_name(r) for r in project.get("dependencies", [])], list(extras), set()
    while pending:
        if (extra := pending.pop()) in seen:
            continue
        seen.add(extra)
        if extra not in optional:
            raise ValueError(f"extra {extra!r} is not in [project.optional-dependencies] ({', '.join(optional)})")
        for requirement in optional[extra]:
            if _name(requirement) == normalize(project["name"]):
                pending += [e.strip() for e in requirement.split("[", 1)[1].split("]", 1)[0].split(",")]
            else:
                names.append(_name(requirement))
    return names


def _name(requirement: str) -> str:
    found = _NAME.match(requirement)
    if not found:
        raise ValueError(f"dependency {requirement!r} has no package name")
    return normalize(found.group(1))


def installed_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def mismatches(names: Iterable[str], lock: dict[str, str], installed: Callable[[str], str | None]) -> list[str]:
    """One sentence per package that is missing from the lock, not installed, or at another version."""
    problems = []
    for name in dict.fromkeys(normalize(n) for n in names):
        locked = lock.get(name)
        found = installed(name)
        if locked is None:
            problems.append(f"{name}: not in the lock; add it to requirements/constraints.txt")
        elif found is None:
            problems.append(f"{name}: not installed (the lock says {locked})")
        elif found != locked:
            problems.append(f"{name}: installed {found}, the lock says {locked}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("constraints", type=Path)
    parser.add_argument("--pyproject", type=Path, help="also check every dependency of this project")
    parser.add_argument("--extra", action="append", default=[], help="and of this extra of it (repeatable)")
    parser.add_argument("names", nargs="*", help="package names to check")
    args = parser.parse_intermixed_args(argv)
    names = list(args.names)
    if args.pyproject:
        names += project_dependencies(args.pyproject.read_text(), args.extra)
    if not names:
        parser.error("name at least one package or give --pyproject")
    problems = mismatches(names, read_lock(args.constraints.read_text()), installed_version)
    for problem in problems:
        print(f"check_lock: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"check_lock: {len(set(map(normalize, names)))} packages match {args.constraints}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
