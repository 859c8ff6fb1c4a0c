"""A person's dead-letter tools on an S3 lake (SeaweedFS on loopback, conftest.py), as real `placsp`
processes: after a delta-rs ingest of the bundled real 643 pages (make demo's site), whose
not-well-formed fragment gives three dead letters, `show` prints one's exact bytes, `fix` stores a
corrected record (the entry with the namespace declarations its page lacked), and `stats` counts
the table as it is now. Each step is checked against the dead-letter table read back with delta-rs,
and the secret key against everything the runs wrote. On the same lake, the example export DAG's
task reads Silver with the lake connection's credentials (no `AWS_*` environment in its worker).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from placsp_provider import lake_storage
from placsp_provider.demo.loopback_site import LoopbackSite
from placsp_provider.demo.samples import demo_routes
from placsp_provider.lake import resolve_lake, table_path
from placsp_provider.lake_storage import open_table, read_object
from placsp_provider.table_files import read_table, table_files
from tests.conftest import SAMPLES
from tests.reliability import harness
from tests.s3.conftest import S3Lake

pytestmark = [pytest.mark.s3, pytest.mark.http, pytest.mark.timeout(600)]

DS = "licitaciones"
# The real page the broken fragment belongs with declares these on its <feed>; the fragment has none.
FEED = SAMPLES / "643_licitaciones" / "resolvedWithLotsAllAwarded" / "version7.atom"


def test_show_fix_and_stats_on_an_s3_lake_after_a_delta_rs_ingest(
    s3_lake: S3Lake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake, work = s3_lake.uri, tmp_path / "runs"

    def placsp(name: str, *args: str) -> harness.Outcome:
        done = harness.run(list(args), workdir=work, name=name).ok()
        assert "Traceback" not in done.stderr, f"{name}: {done.stderr[-2000:]}"  # its log lines only
        return done

    with LoopbackSite(demo_routes()) as site:
        day = ["--since", "2025-08-18", "--until", "2025-08-19", "--base-url", site.base_url]
        placsp("extract", "extract", "--dataset", DS, *day, "--lake", lake)
    placsp("ingest", "ingest", "--dataset", DS, "--lake", lake, "--engine", "delta-rs", "--json")

    table = table_path(resolve_lake(lake), "dead_letters")
    before = {r["dead_letter_id"]: r for r in read_table(table).to_pylist()}
    assert [r["error_type"] for r in before.values()] == ["unbound_prefix"] * 3, "the real fragment's three versions"
    letter = before[min(before)]

    placsp("show", "dead-letters", "show", "--lake", lake, "--id", letter["dead_letter_id"])
    assert (work / "show.stdout").read_bytes() == letter["raw_bytes"]  # the exact bytes rejected, from the bucket

    declarations = " ".join(re.findall(r'xmlns(?::[\w-]+)?="[^"]*"', re.search(r"<feed([^>]*)>", FEED.read_text())[1]))
    corrected = letter["raw_record"].replace("<entry>", f"<entry {declarations}>", 1).strip()
    (tmp_path / "record.xml").write_text(corrected, encoding="utf-8")
    placsp(
        "fix",
        "dead-letters",
        "fix",
        "--lake",
        lake,
        "--id",
        letter["dead_letter_id"],
        "--file",
        str(tmp_path / "record.xml"),
    )

    after = {r["dead_letter_id"]: r for r in read_table(table).to_pylist()}
    fixed = after[letter["dead_letter_id"]]
    assert (fixed["status"], fixed["raw_record"]) == ("fixed", corrected)
    assert fixed["raw_bytes"] == letter["raw_bytes"]  # what was rejected stays on record
    for other in set(before) - {letter["dead_letter_id"]}:
        assert after[other] == before[other]

    stats = placsp("stats", "dead-letters", "stats", "--lake", lake, "--dataset", DS, "--json").json()
    assert stats["total"] == len(after)
    assert stats["by_status"] == dict(Counter(r["status"] for r in after.values())) == {"quarantined": 2, "fixed": 1}
    assert stats["by_error_type"] == {"unbound_prefix": 3}
    assert stats["table_version"] == open_table(table).version()

    # The example export DAG's task, in a worker without the AWS_* environment: it reads the same
    # lake with the credentials of the lake connection (LakeHook), and writes its export there.
    export_entry_counts(s3_lake, monkeypatch)
    export = json.loads(read_object(f"{lake}/exports/silver_entries.json"))
    entries = open_table(table_path(resolve_lake(lake), "entries"))
    datasets = table_files(entries).to_table(columns=["dataset"]).column("dataset").to_pylist()
    assert export["entries_by_dataset"] == dict(Counter(datasets)) and datasets
    assert (export["table"], export["version"]) == (f"{lake}/silver/entries", entries.version())

    # The secret reached no object, no output and no scratch file.
    secret = s3_lake.secret.encode()
    objects = [p for p in resolve_lake(lake).rglob("*") if p.is_file()]
    assert any("/pages/" in str(p) for p in objects), "the bucket was not listed: the grep would prove nothing"
    leaks = [str(p) for p in objects if secret in p.read_bytes()]
    leaks += [str(p) for p in tmp_path.rglob("*") if p.is_file() and secret in p.read_bytes()]
    assert s3_lake.scratch.is_dir(), "the runs kept no scratch folder here: its grep would prove nothing"
    leaks += [str(p) for p in s3_lake.scratch.rglob("*") if p.is_file() and secret in p.read_bytes()]
    assert not leaks, f"the secret key is in {leaks}"


def export_entry_counts(s3_lake: S3Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the task of `placsp_silver_entries_export` as a worker would, with the lake connection
    (`placsp_lake`, from Airflow's environment secrets backend) and no `AWS_*` variable."""
    from tests.airflow.conftest import load_dag

    connection = {
        "conn_type": "aws",
        "login": s3_lake.env["AWS_ACCESS_KEY_ID"],
        "password": s3_lake.secret,
        "extra": {"endpoint_url": s3_lake.env["AWS_ENDPOINT_URL"], "region_name": s3_lake.env["AWS_REGION"]},
    }
    monkeypatch.setenv("AIRFLOW_CONN_PLACSP_LAKE", json.dumps(connection))
    monkeypatch.setenv("PLACSP_LAKE", s3_lake.uri)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_ALLOW_HTTP"):
        monkeypatch.delenv(name)
    lake_storage._s3_store.cache_clear()
    lake_storage._filesystem.cache_clear()
    task = load_dag("placsp_silver_entries_export", for_dag_test=False).get_task("export_entry_counts")
    task.python_callable(triggering_asset_events=None)
