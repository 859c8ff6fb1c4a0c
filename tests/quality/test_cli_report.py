"""`placsp quality check|volume|report` as a user runs them (a real subprocess), on a small synthetic
`entries` table written with delta-rs in the code's own schema: 16 weeks of weekday/weekend volume,
then a day with 12 entries; the same entries landed as Bronze pages (id and `updated` only), one
manifest a day, and reconciled (the rows an ingest writes, in its schema): the volume series' source."""

from __future__ import annotations

import base64
import json
import random
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from tests.quality.volume_lake import land_day, midnight, write_reconciliation

pytestmark = pytest.mark.unit

FIRST = date(2026, 8, 3)
DIP = FIRST + timedelta(weeks=16)  # a Monday with 12 entries


def _entries(days: dict[date, int]):
    import pyarrow as pa

    from placsp_provider.ingest.tables import table_schema

    schema = table_schema("entries")
    rows = []
    for day, n in days.items():
        for i in range(n):
            ts = datetime(day.year, day.month, day.day, 9, tzinfo=UTC) + timedelta(seconds=i)
            rows.append(
                {
                    "dataset": "agregadas",
                    "entry_id": f"https://contrataciondelestado.es/sindicacion/PlataformasAgregadasSinMenores/{day:%Y%m%d}{i:04d}",
                    "entry_updated": ts,
                    "updated": ts,
                    "folder_number": int(f"{day:%Y%m%d}{i:04d}"),
                    "party_identifiers": [],
                    "party_activity_codes": [],
                    "parent_party_names": [],
                    "cpv_codes": ["45000000"],
                    "nuts_codes": [],
                    "funding_program_codes": [],
                    "notices": [],
                    "lot_count": 0,
                    "result_count": 0,
                    "document_count": 0,
                    "_source_file": "bronze/agregadas/pages/x.atom",
                    "_ingest_run_id": "synthetic",
                    "_ingested_at": ts,
                }
            )
    return pa.Table.from_pylist(rows, schema=schema)


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Path:
    from deltalake import write_deltalake

    from placsp_provider.lake import table_path

    rng = random.Random(5)
    days = {}
    for i in range(16 * 7):
        d = FIRST + timedelta(days=i)
        days[d] = int((40 if d.weekday() >= 5 else 200) * rng.uniform(0.93, 1.07))
    days[DIP] = 12
    root = tmp_path_factory.mktemp("cli") / "lake"
    write_deltalake(str(table_path(root, "entries")), _entries(days), partition_by=["dataset"])
    # what the volume series reads: the same entries as landed pages, one extraction run a day, reconciled
    for day, n in days.items():
        versions = [(int(f"{day:%Y%m%d}{i:04d}"), midnight(day) + timedelta(hours=9, seconds=i)) for i in range(n)]
        land_day(root, day, versions, minimal=True)
    write_reconciliation(root)
    return root


def placsp(*args: str) -> subprocess.CompletedProcess:
    """The command in a real process (what a user's shell sees: exit code, stdout, stderr)."""
    return subprocess.run(
        [sys.executable, "-m", "placsp_provider.cli", "quality", *args], capture_output=True, text=True, timeout=300
    )


def run(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess:
    """The same `main()` in this process (an interpreter start costs seconds on a loaded machine)."""
    from placsp_provider.cli import main

    try:
        code = main(["quality", *args])
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out.out, out.err)


def test_volume_flags_the_dip_with_exit_1_and_passes_a_normal_day(lake: Path, capsys) -> None:
    dip = run(capsys, "volume", "--dataset", "1044", "--lake", str(lake), "--day", str(DIP))
    assert dip.returncode == 1, dip.stderr
    line = dip.stdout.strip()
    assert line.startswith(f"agregadas {DIP}: 12 entries, expected ")
    assert line.endswith(
        f"(Prophet 99% interval, trained on {FIRST}..{DIP - timedelta(days=1)}) "
        "(anomaly: not strictly inside the interval)"
    )
    normal = run(
        capsys, "volume", "--dataset", "agregadas", "--lake", str(lake), "--day", str(DIP - timedelta(days=1)), "--json"
    )
    assert normal.returncode == 0, normal.stderr
    assert json.loads(normal.stdout)["status"] == "ok"


def test_check_exit_codes_and_one_line_per_failing_rule(lake: Path, capsys) -> None:
    ok = run(capsys, "check", "--dataset", "agregadas", "--lake", str(lake), "--table", "entries", "--record")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.strip().splitlines() == ["agregadas: 11 rules, 0 error and 0 warn rule(s) failing"]
    # five other tables do not exist in this lake (reconciliation does: the volume series reads it):
    # their schema rules fail, one line each
    bad = run(capsys, "check", "--dataset", "agregadas", "--lake", str(lake))
    assert bad.returncode == 1
    fails = [line for line in bad.stdout.splitlines() if line.startswith("FAIL ")]
    assert [line.split()[1] for line in fails] == [
        "lots_schema",
        "documents_schema",
        "results_schema",
        "tombstones_schema",
        "dead_letters_schema",
    ]
    assert "schema drift: no Delta table at" in fails[0]


def test_a_broken_contract_is_one_error_line_and_exit_2(lake: Path, tmp_path: Path) -> None:
    (tmp_path / "entries.odcs.yaml").write_text("apiVersion: v9\n")
    out = placsp(
        "check", "--dataset", "agregadas", "--lake", str(lake), "--table", "entries", "--contracts", str(tmp_path)
    )
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        f"placsp quality: error: data contract {tmp_path / 'entries.odcs.yaml'}: not valid ODCS at apiVersion: "
        "'v9' is not one of ['v3.2.0', 'v3.1.0', 'v3.0.2', 'v3.0.1', 'v3.0.0', 'v2.2.2', 'v2.2.1', 'v2.2.0']"
    ]


def test_report_is_one_self_contained_page_with_the_chart_and_the_latest_results(
    lake: Path, tmp_path: Path, capsys
) -> None:
    run(capsys, "volume", "--dataset", "agregadas", "--lake", str(lake), "--day", str(DIP))  # the stored model
    run(capsys, "check", "--dataset", "agregadas", "--lake", str(lake), "--table", "entries", "--record")
    out = tmp_path / "report.html"
    done = run(capsys, "report", "--dataset", "agregadas", "--lake", str(lake), "--out", str(out))
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    assert "<script" not in page and "http://" not in page and "https://" not in page.split("<table>")[0]
    png = page.split('src="data:image/png;base64,')[1].split('"')[0]
    assert base64.b64decode(png).startswith(b"\x89PNG")
    assert f"Anomalies shown: {DIP} (12)" in page
    assert "<td>entries_key_unique</td><td>error</td>" in page and "<td>pass</td>" in page
    assert "<td>lots_key_unique</td><td>error</td><td>duplicateValues(dataset, entry_id, lot_id)</td>" in page
    assert "not run" in page  # lots was never checked in this lake


def test_without_the_optional_extras_the_volume_check_and_the_chart_step_aside_saying_what_to_install(
    lake: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain `pip install` has neither Prophet nor matplotlib. Here they are installed, so their
    absence is made the way Python reports it: a None in `sys.modules` makes `import` raise ImportError."""
    for module in ("prophet", "prophet.serialize", "matplotlib", "matplotlib.figure"):
        monkeypatch.setitem(sys.modules, module, None)
    volume = run(capsys, "volume", "--dataset", "agregadas", "--lake", str(lake), "--day", str(DIP), "--json")
    assert volume.returncode == 0, volume.stderr  # the dip is not judged: never a false alarm, never a failure
    check = json.loads(volume.stdout)
    assert (check["status"], check["reason"]) == (
        "skipped",
        "prophet is not installed: pip install 'airflow-provider-placsp[volume]'",
    )
    out = tmp_path / "report.html"
    assert run(capsys, "report", "--dataset", "agregadas", "--lake", str(lake), "--out", str(out)).returncode == 0
    page = out.read_text()
    assert "data:image/png" not in page
    no_chart = "matplotlib is not installed: pip install &#x27;airflow-provider-placsp[report]&#x27;"
    assert f"<p>No chart: {no_chart}.</p>" in page
    assert "<td>entries_key_unique</td>" in page  # the rest of the report is there


def test_a_column_dropped_from_the_table_is_schema_drift_and_its_rules_say_why(tmp_path: Path) -> None:
    from deltalake import write_deltalake

    from placsp_provider.lake import table_path
    from placsp_provider.quality.engine import CheckRequest, run_checks

    lake = tmp_path / "lake"
    rows = _entries({FIRST: 3}).drop_columns(["cpv_codes"])
    write_deltalake(str(table_path(lake, "entries")), rows, partition_by=["dataset"])
    report = run_checks(CheckRequest(str(lake), "agregadas", tables=("entries",)))
    failed = {r.rule_id: r.message for r in report.results if not r.success}
    assert failed == {
        "entries_schema": "schema drift: column cpv_codes is missing from the table",
        "entries_cpv_codes_eight_digits": "invalidValues(cpv_codes); column(s) ['cpv_codes'] missing from the table",
    }
