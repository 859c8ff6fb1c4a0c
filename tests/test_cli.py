"""The `placsp` command: same code as the operators, one-line errors, JSON for scripts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from placsp_provider.demo.loopback_site import LoopbackSite
from placsp_provider.demo.samples import demo_routes

pytestmark = pytest.mark.http

PLACSP = [sys.executable, "-m", "placsp_provider.cli"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PLACSP, *args], capture_output=True, text=True, timeout=120)


def test_extract_prints_the_manifest_summary_as_json(lake: Path) -> None:
    with LoopbackSite(demo_routes()) as site:
        out = run(
            "extract",
            "--dataset",
            "643",
            "--since",
            "2025-08-18",
            "--until",
            "2025-08-19",
            "--lake",
            str(lake),
            "--base-url",
            site.base_url,
            "--json",
        )
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert (summary["dataset"], summary["pages"], summary["entries"], summary["not_well_formed"]) == (
        "licitaciones",
        3,
        5,
        1,
    )
    assert Path(summary["manifest"]).is_file()
    assert "page 1" in out.stderr  # progress is logged per page


def test_errors_are_one_line_without_a_stack_trace(lake: Path) -> None:
    with LoopbackSite({}) as site:
        out = run(
            "extract",
            "--dataset",
            "agregadas",
            "--since",
            "2022-01-05",
            "--until",
            "2022-01-06",
            "--lake",
            str(lake),
            "--base-url",
            site.base_url,
        )
    assert out.returncode == 2
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("placsp extract: error: dataset agregadas: http://127.0.0.1:")
    assert "404" in last and "Traceback" not in out.stderr


def test_bad_arguments_are_refused_before_any_work(lake: Path) -> None:
    out = run("extract", "--dataset", "999", "--since", "2022-01-05", "--until", "2022-01-06", "--lake", str(lake))
    assert out.returncode == 2 and "unknown PLACSP dataset '999'" in out.stderr and "Traceback" not in out.stderr
    out = run("extract", "--dataset", "643", "--since", "2022-01-06", "--until", "2022-01-05", "--lake", str(lake))
    assert out.returncode == 2 and "is not after its start" in out.stderr


def test_ingest_with_nothing_landed_says_what_to_do(lake: Path) -> None:
    out = run("ingest", "--dataset", "menores", "--lake", str(lake))
    assert out.returncode == 2
    assert "nothing landed under" in out.stderr and "placsp extract" in out.stderr
