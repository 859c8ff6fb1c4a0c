"""Which engine ingests a batch, and the two small interfaces an engine is made of.

An engine is a parser (pages in, rows staged in the run's folder, a tally row set back)
and a writer (the staged rows written into the Delta tables under `ingest.rules`):

- `delta-rs`: this machine parses (`InProcessParser`), delta-rs writes (`delta_rs.silver_job`);
  `auto` takes it when the tables exist and the batch is at most `$PLACSP_DELTA_RS_MAX_MB` (64) MB,
  and for a first load (below); it creates a fresh lake's tables with delta-rs (`delta_rs.tables`).
- `spark+delta-rs`: Spark's tasks parse (`spark.silver_job`), delta-rs writes; up to
  `$PLACSP_DELTA_RS_WRITE_MAX_MB` (512) MB; on an S3 lake any larger batch too, since there only
  delta-rs commits (decision 0038).
- `spark`: Spark parses, Spark's Delta MERGEs write (`spark.silver_merge`): larger batches on a
  local lake.
- A first load of a dataset (no Silver row of it yet; a fresh lake's first run too): `delta-rs`, a
  larger one's pages parsed on every core of this machine (`local_parse`), appended
  (`delta_rs.first_load`); with a Spark cluster, `spark+delta-rs` (decision 0053).

Parts are named here as `module:attribute` and imported when an engine is built, so this module,
like the rest of `ingest/`, imports neither pyspark nor a writer (import-linter holds it to that).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from placsp_provider.bronze.manifest import LandedPage
from placsp_provider.datasets import Dataset
from placsp_provider.errors import ConfigError
from placsp_provider.extras import missing_spark
from placsp_provider.ingest.request import IngestRequest, manifest_pages, pages_to_ingest
from placsp_provider.ingest.tables import dataset_in_silver, tables_exist
from placsp_provider.lake_storage import LakePath, is_local

if TYPE_CHECKING:
    from placsp_provider.ingest.batch import StagedBatch

log = logging.getLogger(__name__)

ENGINE_ENV = "PLACSP_INGEST_ENGINE"  # auto | spark | spark+delta-rs | delta-rs
MAX_MB_ENV = "PLACSP_DELTA_RS_MAX_MB"
DEFAULT_MAX_MB = 64.0
WRITE_MAX_MB_ENV = "PLACSP_DELTA_RS_WRITE_MAX_MB"
DEFAULT_WRITE_MAX_MB = 512.0
SPARK, SPARK_DELTA_RS, DELTA_RS = "spark", "spark+delta-rs", "delta-rs"
ENGINES = ("auto", SPARK, SPARK_DELTA_RS, DELTA_RS)
_MB = 1024 * 1024

# (parser, writer) of each engine, and where each part lives.
ENGINE_PARTS = {DELTA_RS: ("in-process", "delta-rs"), SPARK_DELTA_RS: ("spark", "delta-rs"), SPARK: ("spark", "spark")}
_PARSERS = {
    "in-process": "placsp_provider.ingest.engines:InProcessParser",
    "spark": "placsp_provider.spark.silver_job:SparkParser",
}
_WRITERS = {
    "delta-rs": "placsp_provider.delta_rs.silver_job:DeltaRsWriter",
    "spark": "placsp_provider.spark.silver_job:SparkWriter",
}


def choose_engine(
    request: IngestRequest, engine: str | None = None, *, spark_cluster: Callable[[], bool] = lambda: False
) -> str:
    """`spark`, `spark+delta-rs` or `delta-rs` for this ingest: `engine`, else `$PLACSP_INGEST_ENGINE`, else
    `auto` (by the pages still to ingest: see above); any other value insists (`delta-rs` creates a
    fresh lake's tables itself). On an S3 lake only delta-rs commits: `spark` is refused, and a batch
    `auto` would give Spark's MERGEs goes to `spark+delta-rs`. `spark_cluster`: whether Spark would run
    on a cluster (the operator's Spark connection), not on this machine; asked only when it decides."""
    engine = engine or os.environ.get(ENGINE_ENV) or "auto"
    if engine not in ENGINES:
        raise ConfigError(
            f"dataset {request.dataset.key}: unknown ingest engine {engine!r} (argument or "
            f"${ENGINE_ENV}); one of {', '.join(ENGINES)}"
        )
    on_s3 = not is_local(request.lake)
    if on_s3 and engine == SPARK:
        raise ConfigError(
            f"dataset {request.dataset.key}: ingest engine {SPARK!r} commits with Spark, whose Delta commits are "
            f"not safe on S3 next to another writer (decision 0038); use {SPARK_DELTA_RS} or {DELTA_RS}"
        )
    if engine != "auto":
        return _installed(request, engine, asked=True)
    exists = tables_exist(request.lake)
    pages = pages_to_ingest(request)[0] if exists else list(manifest_pages(request).values())
    size = sum(p.bytes for p in pages)
    if exists and size <= _limit_mb(MAX_MB_ENV, DEFAULT_MAX_MB) * _MB:
        return DELTA_RS
    small = size <= _limit_mb(WRITE_MAX_MB_ENV, DEFAULT_WRITE_MAX_MB) * _MB
    # A first load of the dataset is appended by delta-rs, a page's rows at a time, whatever its size
    # (decision 0053): its pages are parsed on this machine's cores (no JVM), or on the cluster when
    # there is one.
    first_load = not (exists and dataset_in_silver(request.lake, request.dataset.key))
    if first_load and not spark_cluster():
        return DELTA_RS
    # On S3 every commit is delta-rs's (conditional PUTs): never Spark's MERGEs there (decision 0038).
    spark = SPARK_DELTA_RS if on_s3 or small or first_load else SPARK
    return _installed(
        request, spark, asked=False, batch=f"{size / _MB:.1f} MB of pages{'' if exists else ' (a fresh lake)'}"
    )


def _installed(request: IngestRequest, engine: str, *, asked: bool, batch: str = "") -> str:
    """`engine`, when it can run here. Spark is the `spark` extra (decision 0042): without it an engine
    asked for by name is a ConfigError; what `auto` gave Spark goes to delta-rs, which ingests a batch
    of any size (in this process, slower; decisions 0029, 0031), and says so."""
    if not needs_spark(engine) or (reason := missing_spark()) is None:
        return engine
    if asked:
        raise ConfigError(
            f"dataset {request.dataset.key}: ingest engine {engine!r} needs Spark, but {reason}; or use {DELTA_RS}"
        )
    log.warning(
        "dataset %s: %s would go to Spark (engine %s), but %s; ingesting with %s in this process instead",
        request.dataset.key,
        batch,
        engine,
        reason,
        DELTA_RS,
    )
    return DELTA_RS


def needs_spark(engine: str) -> bool:
    return "spark" in ENGINE_PARTS[engine]


def _limit_mb(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        raise ConfigError(f"${name} must be a number of MB, not {os.environ[name]!r}") from None


class BatchParser(Protocol):
    # True when the parsing runs on other machines (Spark's executors): the run's staged rows then
    # go where they see them, in the lake (`staging.run_staging`).
    shared_staging: bool

    def stage(
        self, dataset: Dataset, lake: LakePath, pages: list[LandedPage], folder: LakePath
    ) -> list[Mapping[str, Any]]:
        """Parse `pages`, stage their rows under `folder`; the pages' tally rows (`staging.TALLY`)."""

    def create_tables(self, lake: LakePath, dataset: str) -> None:
        """Create the lake's tables (a fresh lake), or say why this engine cannot."""

    def close(self) -> None:
        """Release what the parser started (a Spark session of its own)."""


class BatchWriter(Protocol):
    def write(self, batch: StagedBatch) -> dict[str, Any]:
        """Write the staged batch (dead letters, Silver, then the reconciliation); what changed by table."""


class RowWriter(Protocol):
    def write_rows(
        self,
        lake: LakePath,
        dataset: str,
        rows: Mapping[str, Any],
        repeated_versions: int,
        run_id: str,
        started: datetime,
    ) -> dict[str, Any]:
        """Silver rows that are no staged batch (a replay's recovered records), under the same rules."""


def row_writer() -> RowWriter:
    """The writer of rows without a batch: delta-rs, from this process."""
    writer: RowWriter = _load(_WRITERS["delta-rs"])(None)
    return writer


class InProcessParser:
    """Pages parsed on this machine, by the same `stage_page` a Spark task runs: in this process, or a
    larger batch on a worker process per core (`local_parse`)."""

    shared_staging = False

    def __init__(self, spark: Any = None) -> None:
        del spark  # no engine session needed

    def stage(
        self, dataset: Dataset, lake: LakePath, pages: list[LandedPage], folder: LakePath
    ) -> list[Mapping[str, Any]]:
        from placsp_provider.ingest.local_parse import stage_pages_here

        return stage_pages_here(dataset, lake, pages, folder)

    def create_tables(self, lake: LakePath, dataset: str) -> None:
        del dataset
        _load("placsp_provider.delta_rs.tables:ensure_tables")(lake)

    def close(self) -> None:
        pass


@contextlib.contextmanager
def engine_parts(engine: str, spark: Any = None) -> Iterator[tuple[BatchParser, BatchWriter]]:
    """The parser and writer of `engine`, built with `spark` (a SparkSession, or None: a part that
    needs one starts a local one, stopped when the block ends, and the writer shares it)."""
    parser_name, writer_name = ENGINE_PARTS[engine]
    parser: BatchParser = _load(_PARSERS[parser_name])(spark)
    try:
        yield parser, _load(_WRITERS[writer_name])(getattr(parser, "spark", spark))
    finally:
        parser.close()


def _load(target: str) -> Any:
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)
