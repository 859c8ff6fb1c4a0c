"""A person's dead-letter tools on an S3 lake (SeaweedFS on loopback, conftest.py), as real `placsp`
processes: after a delta-rs ingest of the bundled real 643 pages (make demo's site), whose
not-well-formed fragment gives three dead letters, `show` prints one's exact bytes, `fix` stores a
corrected record (the entry with the namespace declarations its page lacked), and `stats` counts
the table as it is now. Each step is checked against the dead-letter table read back with delta-rs,
and the secret key against everything the runs wrote.
"""

from __future__ import annotations

import re
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from placsp_provider.demo.loopback_site import LoopbackSite
from placsp_provider.demo.samples import demo_routes
from placsp_provider.lake import resolve_lake, table_path
from placsp_provider.lake_storage import open_table
from tests.conftest import SAMPLES
from tests.reliability import harness
from tests.s3.conftest import S3Lake

pytestmark = [pytest.mark.s3, pytest.mark.http, pytest.mark.timeout(600)]

DS = "licitaciones"
# The real page the broken fragment belongs with declares these on its <feed>; the fragment has none.
FEED = SAMPLES / "643_licitaciones" / "resolvedWithLotsAllAwarded" / "version7.atom"


def test_show_fix_and_stats_on_an_s3_lake_after_a_delta_rs_ingest(s3_lake: S3Lake, tmp_path: Path) -> None:
    lake, work = s3_lake.uri, tmp_path / "runs"

    def placsp(name: str, *args: str) -> harness.Outcome:
        return harness.run(list(args), workdir=work, name=name).ok()

    with LoopbackSite(demo_routes()) as site:
        day = ["--since", "2025-08-18", "--until", "2025-08-19", "--base-url", site.base_url]
        placsp("extract", "extract", "--dataset", DS, *day, "--lake", lake)
    placsp("ingest", "ingest", "--dataset", DS, "--lake", lake, "--engine", "delta-rs", "--json")

    table = table_path(resolve_lake(lake), "dead_letters")
    before = {r["dead_letter_id"]: r for r in open_table(table).to_pyarrow_table().to_pylist()}
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

    after = {r["dead_letter_id"]: r for r in open_table(table).to_pyarrow_table().to_pylist()}
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

    # The secret reached no object, no output and no scratch file.
    secret = s3_lake.secret.encode()
    objects = [p for p in resolve_lake(lake).rglob("*") if p.is_file()]
    assert any("/pages/" in str(p) for p in objects), "the bucket was not listed: the grep would prove nothing"
    leaks = [str(p) for p in objects if secret in p.read_bytes()]
    leaks += [str(p) for p in tmp_path.rglob("*") if p.is_file() and secret in p.read_bytes()]
    scratch = Path(tempfile.gettempdir()) / "placsp-scratch"
    leaks += [str(p) for p in scratch.rglob("*") if p.is_file() and secret in p.read_bytes()]
    assert not leaks, f"the secret key is in {leaks}"
