"""One SeaweedFS server for the session (tests/s3/seaweedfs.py), a bucket per test, and the `AWS_*`
environment the `placsp` processes and this process read (lake_storage). The secret is a value of
the test's own, so a test can grep everything a run wrote for it, its local scratch folder included
(`PLACSP_SCRATCH`: the test's own, as two pytest-xdist workers would race on the machine's one)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.s3 import seaweedfs


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[seaweedfs.S3Server]:
    server = seaweedfs.start(tmp_path_factory.mktemp("seaweedfs"))
    yield server
    server.stop()


@dataclass(frozen=True)
class S3Lake:
    uri: str  # s3://bucket/prefix
    bucket: str
    env: dict[str, str]  # the AWS_* variables and PLACSP_SCRATCH, set in this process too
    secret: str
    scratch: Path  # where runs on this lake keep local temp files (lake_storage.scratch_dir)


@pytest.fixture
def s3_lake(
    s3_server: seaweedfs.S3Server, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> S3Lake:
    bucket = s3_server.create_bucket(f"lake-{secrets.token_hex(4)}")
    secret = f"SECRET-{secrets.token_hex(12)}"
    env = {
        "AWS_ACCESS_KEY_ID": "placsp-test",
        "AWS_SECRET_ACCESS_KEY": secret,
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": s3_server.endpoint,
        "AWS_ALLOW_HTTP": "true",
        "PLACSP_SCRATCH": str(tmp_path_factory.mktemp("scratch")),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    from placsp_provider import lake_storage

    lake_storage._s3_store.cache_clear()  # a store is made from the environment it first saw
    lake_storage._filesystem.cache_clear()
    scratch = Path(env["PLACSP_SCRATCH"]) / "placsp-scratch"
    return S3Lake(f"s3://{bucket}/lake", bucket, {**os.environ, **env}, secret, scratch)
