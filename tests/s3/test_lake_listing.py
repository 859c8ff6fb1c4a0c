"""An S3 lake folder is listed with one request and says what upath's own listing says (a real
SeaweedFS server on loopback: conftest.py). The request count is read from a counting proxy between
obstore and the server, the way `benchmarks/s3_requests.py` counts an ingest's requests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from upath.implementations.cloud import S3Path

from placsp_provider import lake_storage
from placsp_provider.lake import resolve_lake
from tests.s3.conftest import S3Lake
from tests.s3.seaweedfs import CountingProxy

pytestmark = [pytest.mark.s3, pytest.mark.http]


@pytest.fixture
def counted(s3_lake: S3Lake, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str, float]]]:
    """Requests of this process to the server from now on (obstore's stores made afresh through the proxy)."""
    proxy = CountingProxy(s3_lake.env["AWS_ENDPOINT_URL"])
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
    lake_storage._s3_store.cache_clear()
    lake_storage._filesystem.cache_clear()
    yield proxy.log
    proxy.close()
    lake_storage._s3_store.cache_clear()
    lake_storage._filesystem.cache_clear()


def test_a_folder_is_listed_in_one_request_with_upaths_answer(
    s3_lake: S3Lake, counted: list[tuple[str, str, float]]
) -> None:
    lake = resolve_lake(s3_lake.uri)
    log = lake / "silver" / "entries" / "_delta_log"
    for name in ("00000000000000000000.json", "00000000000000000001.json", "sub/inner.json"):
        lake_storage.put_new(log / name, b"{}")
    counted.clear()
    got = sorted(p.name for p in log.iterdir())
    assert len(counted) == 1 and "list-type=2" in counted[0][1], counted
    assert got == ["00000000000000000000.json", "00000000000000000001.json", "sub"]
    assert got == sorted(p.name for p in S3Path.iterdir(log))  # upath's own listing: the same children
    assert all(str(p).startswith(str(log) + "/") for p in log.iterdir())


def test_a_missing_folder_or_a_file_is_no_folder(s3_lake: S3Lake, counted: list[tuple[str, str, float]]) -> None:
    lake = resolve_lake(s3_lake.uri)
    lake_storage.put_new(lake / "runs" / "summary.json", b"{}")
    for path in (lake / "silver" / "lots" / "_delta_log", lake / "runs" / "summary.json"):
        with pytest.raises(NotADirectoryError):
            list(path.iterdir())
    assert counted  # the answer came from the server
