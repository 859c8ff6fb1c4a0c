"""The `placsp` command: same code as the operators, one-line errors, JSON for scripts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from placsp_provider.demo.loopback_site import LoopbackSite
from placsp_provider.demo.samples import demo_routes

pytestmark = pytest.mark.http

PLACSP = [sys.executable, "-m", "placsp_provider.cli"]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, **(env or {})}
    return subprocess.run([*PLACSP, *args], capture_output=True, text=True, timeout=120, env=environ)


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


def test_extract_reads_its_page_cap_and_overlap_as_the_operator_does(lake: Path) -> None:
    """`placsp extract` takes PLACSP_MAX_PAGES and PLACSP_OVERLAP_HOURS when no flag is given (settings,
    as the operator): a value that is no number is refused in one line, a flag wins over it, and
    the other commands do not read it."""
    interval = ["--dataset", "643", "--since", "2025-08-18", "--until", "2025-08-19", "--lake", str(lake)]
    with LoopbackSite(demo_routes()) as site:
        for name in ("PLACSP_MAX_PAGES", "PLACSP_OVERLAP_HOURS"):
            refused = run("extract", *interval, "--base-url", site.base_url, env={name: "lots"})
            assert refused.returncode == 2 and refused.stdout == ""
            assert refused.stderr.strip().splitlines() == [
                f"placsp extract: error: {name} must be a number, not 'lots'"
            ]
        flags = ["--max-pages", "3", "--overlap-hours", "6"]
        bad = {"PLACSP_MAX_PAGES": "lots", "PLACSP_OVERLAP_HOURS": "lots"}
        assert run("extract", *interval, "--base-url", site.base_url, *flags, "--json", env=bad).returncode == 0
    assert run("dead-letters", "stats", "--lake", str(lake), "--json", env=bad).returncode == 0


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


def test_replay_refuses_bad_filters_in_one_line(lake: Path) -> None:
    out = run("dead-letters", "replay", "--dataset", "nope", "--lake", str(lake))
    assert out.returncode == 2 and "unknown PLACSP dataset 'nope'" in out.stderr and "Traceback" not in out.stderr
    out = run("dead-letters", "replay", "--dataset", "643", "--lake", str(lake), "--max-records", "0")
    assert out.returncode == 2 and "max_records must be at least 1" in out.stderr
    out = run(
        "dead-letters",
        "replay",
        "--dataset",
        "643",
        "--lake",
        str(lake),
        "--since",
        "2025-02-01",
        "--until",
        "2025-01-01",
    )
    assert out.returncode == 2 and "since (2025-02-01) is after until (2025-01-01)" in out.stderr
    out = run("dead-letters", "replay", "--dataset", "643", "--lake", str(lake))
    assert out.returncode == 2 and "no dead-letter table under" in out.stderr


@pytest.mark.spark
def test_replay_runs_the_same_job_outside_airflow(lake: Path) -> None:
    """`placsp ingest` then `placsp dead-letters replay`, each its own Spark local, as a user would."""
    from tests.pages import day, page
    from tests.spark.bronze import land

    broken = page([(21, day(5)), (22, day(5))]).replace(b'currencyID="EUR">', b'currencyID="EUR">N/A', 1)
    land(lake, "agregadas", {"na.atom": broken})
    assert run("ingest", "--dataset", "agregadas", "--lake", str(lake), "--json").returncode == 0
    dry = run("dead-letters", "replay", "--dataset", "1044", "--lake", str(lake), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "(dry run, nothing written): 1 selected, would recover 0, still failing 1" in dry.stdout
    out = run("dead-letters", "replay", "--dataset", "1044", "--lake", str(lake), "--json", "--run-id", "r1")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert (summary["selected"], summary["still_failing"], summary["run_id"]) == (1, 1, "r1")
    assert summary["by_error_type"] == {
        "invalid_amount": {"selected": 1, "recovered": 0, "still_failing": 1, "abandoned": 0}
    }
    stats = json.loads(run("dead-letters", "stats", "--lake", str(lake), "--json").stdout)
    assert stats["total"] == 1
