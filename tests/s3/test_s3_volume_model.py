"""The Prophet volume model stored in an S3 lake (SeaweedFS on loopback, conftest.py): the first check
fits it and writes it as one object; the next check reads that object back and judges with it,
without refitting; the quality report written to the bucket names it. Real Prophet on
tests/quality/test_volume.py's small synthetic history.
"""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest

from placsp_provider.lake_storage import read_object, uri
from placsp_provider.quality.report import write_report
from placsp_provider.quality.volume import check_day, forecast_band, model_path
from tests.quality.test_volume import DAY, FIRST, synthetic
from tests.s3.conftest import S3Lake

pytestmark = [pytest.mark.s3, pytest.mark.unit, pytest.mark.timeout(600)]


def test_the_volume_model_is_saved_to_and_loaded_from_an_s3_lake(
    s3_lake: S3Lake, caplog: pytest.LogCaptureFixture
) -> None:
    counts = synthetic(FIRST, 112)
    path = model_path(s3_lake.uri, "agregadas")
    assert uri(path).startswith(f"s3://{s3_lake.bucket}/lake/quality_models/volume/")
    with caplog.at_level(logging.INFO):
        fitted = check_day(s3_lake.uri, "agregadas", DAY, counts={**counts, DAY: 480})
        stored = json.loads(read_object(uri(path)))  # the object in the bucket, read by obstore itself
        later = {**counts, DAY: 480, DAY + timedelta(days=1): 470}
        reused = check_day(s3_lake.uri, "agregadas", DAY + timedelta(days=1), counts=later)
        # The chart's band, from the stored object: one call per day (the interval's simulation is seeded per call).
        band = [forecast_band(s3_lake.uri, "agregadas", [d])[0] for d in (DAY, DAY + timedelta(days=1))]

    assert fitted.refitted and fitted.status == "ok" and fitted.lower < 480 < fitted.upper
    assert (stored["trained_from"], stored["trained_to"]) == (str(FIRST), str(DAY - timedelta(days=1)))
    assert stored["dataset"] == "agregadas" and stored["model"]
    # Judged by the stored model (trained up to the day before DAY), not a new fit.
    assert not reused.refitted and reused.trained_to == stored["trained_to"]
    assert band[0][1:] == (fitted.lower, fitted.predicted, fitted.upper)  # the same model, the same seeded interval
    assert band[1][1:] == (reused.lower, reused.predicted, reused.upper)

    # The quality report (`placsp quality report --out s3://...`) is written to the bucket too, and
    # names the stored model it found there.
    out = f"s3://{s3_lake.bucket}/reports/agregadas.html"
    assert uri(write_report(s3_lake.uri, "agregadas", out)) == out
    page = read_object(out).decode()
    assert page.startswith("<!DOCTYPE html>") and f"the stored model {uri(path)}" in page

    leaks = ["model object"] if s3_lake.secret.encode() in read_object(uri(path)) else []
    leaks += ["report"] if s3_lake.secret in page else []
    leaks += ["logs"] if s3_lake.secret in caplog.text else []
    assert not leaks, f"the secret key is in {leaks}"


def test_the_volume_series_reads_an_s3_lake_and_keeps_its_cache_there(s3_lake: S3Lake) -> None:
    """Pages landed, manifests written and the delta-rs ingest run on the bucket: the series reads the
    reconciliation table, the manifests and the pages from it, and writes its cache there."""
    from placsp_provider.lake import resolve_lake, volume_versions_paths
    from placsp_provider.quality.volume_series import read_series
    from tests.quality.volume_lake import ingest, land_day, midnight

    lake = resolve_lake(s3_lake.uri)
    first = FIRST
    land_day(lake, first, [(1, midnight(first) + timedelta(hours=9)), (2, midnight(first) + timedelta(hours=10))])
    second = first + timedelta(days=1)
    land_day(
        lake,
        second,
        [(1, midnight(second) + timedelta(hours=9))],
        relanded=[(2, midnight(first) + timedelta(hours=10))],
    )
    ingest(lake)
    series = read_series(s3_lake.uri, "agregadas")
    assert (series.counts, series.pages_read) == ({first: 2, second: 1}, 3)
    assert all(
        uri(p).startswith(f"s3://{s3_lake.bucket}/") and p.is_file() for p in volume_versions_paths(lake, "agregadas")
    )
    again = read_series(s3_lake.uri, "agregadas")
    assert (again.counts, again.pages_read) == ({first: 2, second: 1}, 0)
