"""One SparkSession (local[2], Delta) for the whole suite: starting one costs 10-30 s. It lives the
whole session, hundreds of small ingests, so its driver runs C2 (decision 0050); the short-lived
drivers the tests start through spark-submit keep the provider's default."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator:
    from placsp_provider.spark.session import LONG_LIVED_DRIVER_JAVA_OPTIONS, driver_java_options, get_session

    session = get_session(
        "placsp-tests",
        extra={
            "spark.master": "local[2]",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.driver.extraJavaOptions": driver_java_options(LONG_LIVED_DRIVER_JAVA_OPTIONS),
        },
    )
    yield session
    session.stop()
