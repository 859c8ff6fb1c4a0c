"""The S3 benchmark measures what it says: both sides ingest the same pages with the same engine, every
run's tables are read back and compared, and a run that lost rows fails the benchmark instead of
looking fast.

Real bundled pages (the 1044 pages of 2022-01-05 and -06), real generated pages, real delta-rs, a real
SeaweedFS server on loopback (started by the benchmark itself, as `make bench` runs it). Nothing is
mocked; the unit tests feed the report and the checks known numbers.
"""

# ruff: noqa: E402  (the repository root must be on sys.path before `benchmarks` is imported)
from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from benchmarks import bench_s3 as bench


def _run(seconds: float, contents: dict[str, Any], peak_mb: float = 300.0) -> dict[str, Any]:
    tree = {"peak_total_mb": peak_mb, "jvm_hwm_mb": 0, "workers": 0, "driver_hwm_mb": peak_mb}
    return {"seconds": seconds, "cpu_s": seconds, "server_cpu_s": 0.1, "tree": tree, "hwm_mb": peak_mb} | {
        "contents": contents
    }


_TABLES = {"entries": {"rows": 476, "checksum": "00aa"}, "tombstones": {"rows": 24, "checksum": "00bb"}}


@pytest.mark.unit
def test_a_run_whose_tables_differ_fails_the_benchmark() -> None:
    same = {"local": [_run(1.0, _TABLES)], "s3": [_run(1.2, _TABLES)]}
    assert bench.check_contents("daily", same)["tables"] == _TABLES
    lost = {**_TABLES, "tombstones": {"rows": 23, "checksum": "00bc"}}
    with pytest.raises(RuntimeError, match=r"daily: the s3 lake of run 1 holds other rows.*tombstones"):
        bench.check_contents("daily", {"local": [_run(1.0, _TABLES)], "s3": [_run(0.1, lost)]})
    empty = {"entries": {"rows": 0, "checksum": "0000"}}
    with pytest.raises(RuntimeError, match="entries table is empty"):
        bench.check_contents("daily", {"local": [_run(1.0, empty)], "s3": [_run(1.0, empty)]})


@pytest.mark.unit
def test_the_goal_is_the_median_round_not_the_best_against_the_best() -> None:
    # Round 2's local run met a slow spell; the fastest of each side would read 1.0 / 1.0 s = 1.00x.
    runs = {
        "local": [_run(1.0, _TABLES), _run(3.0, _TABLES), _run(1.1, _TABLES)],
        "s3": [_run(2.0, _TABLES), _run(1.0, _TABLES), _run(1.8, _TABLES, peak_mb=420.0)],
    }
    assert bench.rounds(runs) == pytest.approx([2.0, 1.0 / 3.0, 1.8 / 1.1])
    raw = {
        "config": bench.FULL.__dict__,
        "engine": bench.DELTA_RS,
        "measures": {"daily": {"order": ["local", "s3", "s3", "local", "local", "s3"], "runs": runs}},
        "sizes": {"daily": {"pages": 1, "bytes": 3e6, "what": "a page"}},
        "contents": {"daily": {"tables": _TABLES, "verdict": "equal"}},
    }
    result = bench.report(raw, 1.0)
    (goal,) = result.goals
    assert goal.value.startswith("1.64x") and not goal.met  # the median round, 1.8 / 1.1
    (row,) = result.tables[0].rows
    assert row[1:4] == ["1.10", "1.80", "1.64x"] and row[5] == "300.0 / 420.0"  # medians; the peaks' maximum


@pytest.mark.unit
def test_the_expected_ids_come_from_the_page_not_from_the_parser(tmp_path: Path) -> None:
    size = bench._daily(tmp_path)
    # The page holds 476 entries (SOURCES.md) under 472 distinct ids: a few ids come twice, in two versions.
    assert (len(size.expected["entries"]), len(size.expected["tombstones"])) == (472, 24)
    assert all(
        i.startswith("https://contrataciondelestado.es/sindicacion/PlataformasAgregadasSinMenores/")
        for i in size.expected["entries"]
    )


@pytest.mark.s3
@pytest.mark.http
@pytest.mark.timeout(900)
def test_quick_run_on_a_real_s3_server_compares_what_both_lakes_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(bench, "OUT", tmp_path / "out")
    secret = "SECRET-" + os.urandom(8).hex()
    monkeypatch.setattr(bench.secrets, "token_hex", lambda n: secret)  # the server's secret key, known here
    result = bench.run(quick=True)
    raw = result.raw
    written = capfd.readouterr()
    leaks = [p.name for p in (tmp_path / "out").iterdir() if secret in p.read_text()]
    assert not leaks and secret not in written.out + written.err + json.dumps(raw, default=str)
    assert "AWS_SECRET_ACCESS_KEY" not in os.environ or secret not in os.environ["AWS_SECRET_ACCESS_KEY"]
    sizes = ("daily", "daily_aged", "batch")
    assert [g.what.split(":")[0] for g in result.goals] == ["daily", "daily, aged lake", "batch"]
    for size in sizes:
        runs = raw["measures"][size]["runs"]
        assert [len(runs[side]) for side in ("local", "s3")] == [1, 1]
        assert runs["s3"][0]["summary"]["engine"] == runs["local"][0]["summary"]["engine"] == "delta-rs"
        assert runs["s3"][0]["server_cpu_s"] > 0  # the S3 run did reach the server
        assert runs["s3"][0]["contents"] == runs["local"][0]["contents"]
    tables = {size: raw["contents"][size]["tables"] for size in sizes}
    assert tables["daily"]["entries"]["rows"] == 927  # 2022-01-05 and -06: their distinct entries
    assert tables["daily_aged"]["entries"]["rows"] == 927 + 2 * 19  # and two earlier days of 19 entries each
    assert tables["daily_aged"]["reconciliation"]["rows"] == 4  # a row per page ingested
    assert tables["batch"]["entries"]["rows"] == 38  # 2 pages of 20 items, a tombstone each


@pytest.mark.s3
@pytest.mark.http
@pytest.mark.timeout(600)
def test_an_id_of_the_pages_missing_from_the_tables_fails_the_run(tmp_path: Path) -> None:
    size = bench._daily(tmp_path)
    absent = "https://contrataciondelestado.es/sindicacion/PlataformasAgregadasSinMenores/0"
    broken = dataclasses.replace(size, expected={**size.expected, "entries": [*size.expected["entries"], absent]})
    cfg = dataclasses.replace(bench.QUICK, rounds=1)
    with (
        bench.s3_environment(tmp_path / "seaweedfs") as server,
        pytest.raises(
            RuntimeError, match=r"daily on local: ids of the timed pages missing.*PlataformasAgregadasSinMenores/0"
        ),
    ):
        bench._measure_size(cfg, broken, bench.DELTA_RS, tmp_path, server)
