"""One SeaweedFS server for the session (tests/s3/seaweedfs.py), a bucket per test, and the `AWS_*`
environment the `placsp` processes and this process read (lake_storage). The secret is a value of
the test's own, so a test can grep everything a run wrote for it."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass

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
    env: dict[str, str]  # the AWS_* variables, set in this process too
    secret: str


@pytest.fixture
def s3_lake(s3_server: seaweedfs.S3Server, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> S3Lake:
    bucket = s3_server.create_bucket(f"lake-{secrets.token_hex(4)}")
    secret = f"SECRET-{secrets.token_hex(12)}"
    env = {
        "AWS_ACCESS_KEY_ID": "placsp-test",
        "AWS_SECRET_ACCESS_KEY": secret,
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": s3_server.endpoint,
        "AWS_ALLOW_HTTP": "true",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    from placsp_provider import lake_storage

    lake_storage._s3_store.cache_clear()  # a store is made from the environment it first saw
    lake_storage._filesystem.cache_clear()
    del request
    return S3Lake(f"s3://{bucket}/lake", bucket, {**os.environ, **env}, secret)
