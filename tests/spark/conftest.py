"""One SparkSession (local[2], Delta) for the whole suite: starting one costs 10-30 s."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator:
    from placsp_provider.spark.session import get_session

    session = get_session(
        "placsp-tests",
        extra={"spark.master": "local[2]", "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
    )
    yield session
    session.stop()
