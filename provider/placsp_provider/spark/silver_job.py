"""The Silver ingest job: Bronze pages of one dataset -> Silver tables + dead letters, reconciled.

Runs under spark-submit (include/spark/silver_ingest.py), from the CLI (`placsp ingest`) and in
tests, always through `run_ingest`. Never imports Airflow.

Conservation, per Bronze file: the manifest's entry and tombstone counts (taken at extraction by a
streaming parser that does not depend on Spark) must equal the valid rows plus the record-level dead
letters Spark produced for that file. A file that does not add up is quarantined whole: one dead
letter with stage `reconciliation` pointing at the raw file, and none of its rows reach Silver.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import re
import sys
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from placsp_provider.bronze.landing import run_folder
from placsp_provider.bronze.manifest import LandedPage, Manifest
from placsp_provider.datasets import Dataset, get_dataset
from placsp_provider.dead_letters.lifecycle import STAGE_RECONCILIATION
from placsp_provider.errors import BronzePageError
from placsp_provider.lake import SILVER_TABLES, bronze_dir, run_summary_path, staging_dir, table_path
from placsp_provider.spark.page_tasks import page_task_split
from placsp_provider.spark.routing import (
    dead_letter_arrow_schema,
    dead_letter_id,
    lake_relative,
    stage_pages,
    table_spark_schema,
)
from placsp_provider.spark.tables import ensure_tables

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

# Page-level parse failures that stand for the whole file (nothing of it can be trusted).
WHOLE_FILE_PARSE_ERRORS = frozenset({"dtd_refused", "not_a_feed"})
_COUNT_MISMATCH = "count_mismatch"
SOURCE_COLUMN = {"dead_letters": "source_file"}  # the Silver tables' is `_source_file`


@dataclass(frozen=True)
class IngestRequest:
    dataset: Dataset
    lake: Path
    run_id: str
    manifests: tuple[Path, ...] = ()  # empty: every manifest of the dataset
    reprocess: bool = False  # ingest files again even if the reconciliation log has them
    only_files: tuple[str, ...] = ()  # restrict to these lake-relative files (replay of whole files)


@dataclass
class FileTally:
    page: LandedPage
    valid_entries: int = 0
    valid_tombstones: int = 0
    dead_entries: int = 0
    dead_tombstones: int = 0
    page_errors: list[str] = field(default_factory=list)
    rows: Counter[str] = field(default_factory=Counter)  # Spark's rows of the file by kind (Silver tables)
    repeated_versions: int = 0  # valid entries repeating an earlier one's (entry_id, updated) in the file
    dead_letters: Counter[tuple[str, str]] = field(default_factory=Counter)  # (stage, error_type) -> n

    @property
    def expected(self) -> int:
        return self.page.entries + self.page.tombstones

    @property
    def accounted(self) -> int:
        return self.valid_entries + self.valid_tombstones + self.dead_entries + self.dead_tombstones

    def quarantine_reason(self) -> str | None:
        whole = [e for e in self.page_errors if e in WHOLE_FILE_PARSE_ERRORS]
        if whole:
            return f"page-level parse failure ({', '.join(whole)})"
        if (self.valid_entries + self.dead_entries, self.valid_tombstones + self.dead_tombstones) != (
            self.page.entries,
            self.page.tombstones,
        ):
            return (
                f"the extraction manifest counted {self.page.entries} entries and {self.page.tombstones} "
                f"tombstones, Spark accounted for {self.valid_entries + self.dead_entries} entries "
                f"({self.valid_entries} valid + {self.dead_entries} dead letters) and "
                f"{self.valid_tombstones + self.dead_tombstones} tombstones"
            )
        return None


def manifest_pages(request: IngestRequest) -> dict[str, LandedPage]:
    """Pages named by the request's manifests (every manifest of the dataset if none), once each."""
    manifests = request.manifests or tuple(
        sorted((bronze_dir(request.lake, request.dataset.key) / "manifests").glob("*.json"))
    )
    pages: dict[str, LandedPage] = {}
    for path in manifests:
        for page in Manifest.load(path).pages:
            pages.setdefault(page.file, page)
    if request.only_files:
        pages = {f: p for f, p in pages.items() if f in set(request.only_files)}
    return pages


def pages_to_ingest(spark: SparkSession, request: IngestRequest) -> tuple[list[LandedPage], int]:
    """Pages named by the manifests, once each, minus those already reconciled (unless reprocess)."""
    pages = manifest_pages(request)
    if request.reprocess or not pages:
        return list(pages.values()), 0
    done = {
        r[0]
        for r in spark.read.format("delta")
        .load(str(table_path(request.lake, "reconciliation")))
        .where(f"dataset = '{request.dataset.key}'")
        .select("source_file")
        .collect()
    }
    todo = [p for f, p in pages.items() if f not in done]
    return todo, len(pages) - len(todo)


WRITERS = ("spark", "delta-rs")


def run_ingest(spark: SparkSession, request: IngestRequest, writer: str = "spark") -> dict[str, Any]:
    """Parse, route, reconcile and write; return the run summary (also written next to the tables).

    `writer`: `spark`, Delta MERGEs on Spark (`silver_merge`), or `delta-rs`, the rows the tasks
    staged written by delta-rs in this driver (`delta_rs.silver_write`: the same rules and order,
    about a tenth of the time; the batch's rows are held in the driver's memory, so
    `delta_rs.silver_job.choose_engine` gives it batches up to `$PLACSP_DELTA_RS_WRITE_MAX_MB`)."""
    if writer not in WRITERS:
        raise ValueError(f"unknown Silver writer {writer!r}; one of {', '.join(WRITERS)}")
    ds, lake = request.dataset, request.lake.resolve()
    started = datetime.now(UTC).replace(microsecond=0)
    ensure_tables(spark, lake)
    pages, skipped = pages_to_ingest(spark, request)
    log.info(
        "dataset %s: %d Bronze file(s) to ingest, %d already ingested (parsed on Spark, written by %s)",
        ds.key,
        len(pages),
        skipped,
        writer,
    )
    summary = empty_summary(ds.key, request.run_id, len(pages), skipped)
    if not pages:
        return finish(summary, lake)
    if writer == "delta-rs":
        from placsp_provider.delta_rs.silver_job import write_staged

        with run_folder(staging_dir(lake, ds.key)) as folder:
            tallies = stage_and_tally(spark, ds, lake, pages, folder)
            plan, merge_metrics = write_staged(lake, ds.key, folder, tallies, request.run_id, started)
        fill_summary(summary, tallies, plan.quarantined, plan.dead_letter_counts, merge_metrics)
        return finish(summary, lake)
    routed = route_files(spark, ds, lake, pages, request.run_id, started)
    try:
        merge_metrics = write_routed(spark, lake, ds.key, routed, request.run_id, started)
    finally:
        routed.release()
    fill_summary(summary, routed.tallies, routed.quarantined, routed.dead_letter_counts, merge_metrics)
    return finish(summary, lake)


@dataclass
class RoutedFiles:
    """Bronze files parsed, routed and reconciled, before anything is written. Their rows are staged
    as Parquet in a folder of the run, removed by `release` (or by the next run, if this one dies)."""

    rows: dict[str, DataFrame]  # Silver rows by table, from files that add up
    dead_letters: DataFrame  # every dead letter to insert, lifecycle columns included
    tallies: dict[str, FileTally]
    quarantined: dict[str, str]  # file -> reason
    _staging: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    # The same frames counted from the tallies (no Spark job): rows by table, dead letters by
    # (stage, error_type).
    sizes: dict[str, int] = field(default_factory=dict)
    dead_letter_counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    repeated_versions: int = 0  # in the files that add up: see `merge_silver`

    def release(self) -> None:
        """Remove the staged rows: call when the frames above will not be read again."""
        self._staging.close()


def route_files(
    spark: SparkSession, ds: Dataset, lake: Path, pages: list[LandedPage], run_id: str, started: datetime
) -> RoutedFiles:
    """Parse and route the pages on Spark, tally each file against its manifest counts, and decide
    which files are quarantined whole. Writes nothing to the tables; the rows wait in the run's
    staging folder until `RoutedFiles.release`."""

    staging = contextlib.ExitStack()
    try:
        folder = staging.enter_context(run_folder(staging_dir(lake, ds.key)))
        tallies = stage_and_tally(spark, ds, lake, pages, folder)
        return _staged_rows(spark, ds.key, folder, tallies, run_id, started, staging)
    except BaseException:
        staging.close()
        raise


def stage_and_tally(
    spark: SparkSession, ds: Dataset, lake: Path, pages: list[LandedPage], folder: Path
) -> dict[str, FileTally]:
    """The pages parsed and routed by Spark's tasks, each page's rows staged as Parquet in `folder`;
    each file's tally."""
    missing = [p.file for p in pages if not (lake / p.file).is_file()]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        reason = "a manifest names this page but it is not in Bronze; run the extraction of its interval again"
        raise BronzePageError(ds.key, missing[0] + more, reason, stage="ingest")
    files = [str(lake / p.file) for p in pages]
    # Tasks sized so the cores finish together.
    with page_task_split(spark, files) as plan:
        if plan is not None:
            log.info("dataset %s: %s", ds.key, plan.describe())
        try:  # Spark's listing, then the first action: where a page removed since the check surfaces
            return tally_files(stage_pages(spark, ds, str(lake), files, str(folder)).collect(), pages, lake)
        except Exception as err:
            bronze = _page_gone_error(err, ds.key, lake)
            if bronze is None:
                raise
            raise bronze from err


@dataclass(frozen=True)
class BatchPlan:
    """What a batch's tallies decide before anything is read back or written, whichever engine
    writes: the quarantined files and what the write will hold, counted without reading a row."""

    quarantined: dict[str, str]  # file -> reason
    staged: dict[str, int]  # rows staged by table (dead letters too), quarantined files included
    sizes: dict[str, int]  # rows to write by table, dead letters included
    dead_letter_counts: Counter[tuple[str, str]]  # the dead letters to write by (stage, error_type)
    repeated_versions: int  # in the files that add up: see `silver_merge.merge_silver`


def plan_batch(tallies: Mapping[str, FileTally]) -> BatchPlan:
    quarantined = {f: r for f, t in tallies.items() if (r := t.quarantine_reason())}
    staged = {t: sum(tally.rows[t] for tally in tallies.values()) for t in SILVER_TABLES}
    staged["dead_letters"] = sum(sum(tally.dead_letters.values()) for tally in tallies.values())
    sizes = {t: sum(tally.rows[t] for f, tally in tallies.items() if f not in quarantined) for t in SILVER_TABLES}
    # The dead letters written: the kept files', the page-level ones of files quarantined by a
    # page-level parse failure, and one reconciliation dead letter per other quarantined file.
    dead_counts: Counter[tuple[str, str]] = Counter()
    for f, tally in tallies.items():
        for (stage, error_type), n in tally.dead_letters.items():
            if f not in quarantined or error_type in WHOLE_FILE_PARSE_ERRORS:
                dead_counts[stage, error_type] += n
    dead_counts[STAGE_RECONCILIATION, _COUNT_MISMATCH] += len(_reconciliation_letter_files(quarantined))
    sizes["dead_letters"] = sum(dead_counts.values())
    repeated = sum(t.repeated_versions for f, t in tallies.items() if f not in quarantined)
    return BatchPlan(quarantined, staged, sizes, +dead_counts, repeated)


def _staged_rows(
    spark: SparkSession,
    dataset: str,
    folder: Path,
    tallies: dict[str, FileTally],
    run_id: str,
    started: datetime,
    staging: contextlib.ExitStack,
) -> RoutedFiles:
    """The staged rows as frames, without the quarantined files' (but their page-level dead letters)."""
    from pyspark.sql import functions as F

    plan = plan_batch(tallies)
    quarantined = plan.quarantined

    def read(table: str) -> DataFrame:
        schema = table_spark_schema(table)
        if not plan.staged[table]:  # no file was staged: there is no folder to read
            return spark.createDataFrame([], schema)
        return spark.read.schema(schema).parquet(str(folder / table))

    out = {t: read(t) for t in (*SILVER_TABLES, "dead_letters")}
    if quarantined:
        files = list(quarantined)
        kept = {t: df.where(~F.col(SOURCE_COLUMN.get(t, "_source_file")).isin(files)) for t, df in out.items()}
    else:
        kept = out
    # A file quarantined by a page-level parse failure keeps that dead letter: it is the record of it.
    page_level = out["dead_letters"].where(
        F.col("source_file").isin(list(quarantined)) & F.col("error_type").isin(list(WHOLE_FILE_PARSE_ERRORS))
    )
    reconciliation_letters = _reconciliation_dead_letters(spark, dataset, tallies, quarantined)
    all_dead = (
        kept["dead_letters"]
        .unionByName(page_level)
        .unionByName(reconciliation_letters)
        .withColumns(new_dead_letter_lifecycle(run_id, started))
    )
    rows = {t: kept[t] for t in SILVER_TABLES}
    return RoutedFiles(
        rows, all_dead, tallies, quarantined, staging, plan.sizes, plan.dead_letter_counts, plan.repeated_versions
    )


def new_dead_letter_lifecycle(run_id: str, started: datetime) -> dict[str, Any]:
    from pyspark.sql import functions as F

    return {
        "run_id": F.lit(run_id),
        "processing_timestamp": F.lit(started).cast("timestamp"),
        "status": F.lit("quarantined"),
        "attempts": F.lit(0).cast("int"),
        "last_attempt_at": F.lit(None).cast("timestamp"),
        "replayed_at": F.lit(None).cast("timestamp"),
        "replay_run_id": F.lit(None).cast("string"),
    }


def write_routed(
    spark: SparkSession, lake: Path, dataset: str, routed: RoutedFiles, run_id: str, started: datetime
) -> dict[str, dict[str, int]]:
    """MERGE Silver rows, insert dead letters, record each file's reconciliation. Idempotent, so a
    commit conflict with a concurrent writer (a replay, another ingest) is met by doing it again."""
    from placsp_provider.spark.silver_merge import (
        insert_only,
        merge_silver,
        nothing_changed,
        record_reconciliation,
        retry_on_conflict,
        run_together,
    )

    def write() -> dict[str, dict[str, int]]:
        def silver() -> dict[str, dict[str, int]]:
            return merge_silver(
                spark, lake, dataset, routed.rows, run_id, started, routed.sizes, routed.repeated_versions
            )

        def dead_letters() -> dict[str, int]:
            return insert_only(spark, lake, "dead_letters", dataset, routed.dead_letters, ("dead_letter_id",))

        # Dead letters and Silver are different tables: written at once. The reconciliation, which
        # marks the files as done, only after both.
        if routed.sizes["dead_letters"]:
            both: dict[str, Callable[[], Any]] = {"silver": silver, "dead_letters": dead_letters}
            done = run_together(spark, both)
            metrics = {**done["silver"], "dead_letters": done["dead_letters"]}
        else:
            metrics = {**silver(), "dead_letters": nothing_changed()}
        record_reconciliation(
            spark,
            lake,
            dataset,
            _reconciliation_rows(spark, dataset, run_id, routed.tallies, routed.quarantined, started),
        )
        return metrics

    return retry_on_conflict(write, what=f"dataset {dataset}: Silver write of run {run_id}")


def tally_files(by_file: list[Any], pages: list[LandedPage], lake: Path) -> dict[str, FileTally]:
    """Each file's tally (`routing.TALLY` rows, as the workers counted the rows they staged)."""
    tallies = {p.file: FileTally(p) for p in pages}
    for row in by_file:
        source = row["source_file"]
        tally = tallies.get(source)
        if tally is None:  # Spark produced rows for a file we did not ask for: a bug, never silent
            raise RuntimeError(f"Spark returned rows for {source!r}, which is not in the manifests")
        kind, n = row["kind"], row["count"]
        if kind in SILVER_TABLES:
            tally.rows[kind] += n
        if kind == "file_stats":
            tally.repeated_versions += row["repeated_versions"]
        if kind == "dead_letters":
            tally.dead_letters[row["stage"], row["error_type"]] += n
        if kind == "entries":
            tally.valid_entries += n
        elif kind == "tombstones":
            tally.valid_tombstones += n
        elif kind == "dead_letters":
            if row["record_kind"] == "entry":
                tally.dead_entries += n
            elif row["record_kind"] == "tombstone":
                tally.dead_tombstones += n
            else:
                tally.page_errors.extend([row["error_type"]] * n)
    seen = {r["source_file"] for r in by_file}  # a set: backfills ingest thousands of files
    missing = [f for f in tallies if f not in seen]
    for f in missing:  # Spark read nothing at all for it: quarantined by the count check below
        log.warning("Spark produced nothing for %s", f)
    return tallies


# Spark's two words for it: the file went between the check and the listing, or after the listing.
_FILE_GONE = re.compile(
    r"\[PATH_NOT_FOUND\] Path does not exist: (.+?)\.(?: SQLSTATE|$)"
    r"|\[FAILED_READ_FILE\.FILE_NOT_EXIST\] Encountered error while reading file (.+?)\. File does not exist",
    re.MULTILINE,
)


def _page_gone_error(err: Exception, dataset: str, lake: Path) -> BronzePageError | None:
    """A page removed after the run checked Bronze, from the text of Spark's own exception (its
    listing checks each named file, and the JVM checks each listed file again before a worker reads
    it): raised as the provider's error, so the user's first line is the message and not a JVM stack.

    Not attempted for an error a worker raises itself (`routing.read_page`): Spark 4.2 does not
    always carry a worker's message back (measured: at times a NullPointerException in
    `ArrowColumnVector.getChild` arrives instead), so that message is only in the task's log.
    """
    gone = _FILE_GONE.search(str(err))
    if gone is None:
        return None
    reason = "the page was removed while the run read it; nothing was written: run the ingest again"
    return BronzePageError(dataset, lake_relative(gone.group(1) or gone.group(2), str(lake)), reason)


def _reconciliation_letter_files(quarantined: Mapping[str, str | None]) -> dict[str, str | None]:
    """Quarantined files that get a reconciliation dead letter: those not already stood for by their
    page-level parse dead letter."""
    return {f: r for f, r in quarantined.items() if not (r and r.startswith("page-level"))}


def reconciliation_dead_letter_rows(
    dataset: str, tallies: Mapping[str, FileTally], quarantined: Mapping[str, str | None]
) -> list[dict[str, Any]]:
    """The dead letters that stand for quarantined files (`dead_letter_arrow_schema` columns): one
    per file not already stood for by its page-level parse dead letter."""
    rows = []
    for file, reason in _reconciliation_letter_files(quarantined).items():
        message = (
            f"dataset {dataset}: Bronze file {file}: stage reconciliation: {reason}; the whole file is "
            f"quarantined and none of its rows were written to Silver. Inspect the raw file, fix the "
            f"cause, then replay this dead letter (docs/runbook.md)."
        )
        rows.append(
            {
                "dataset": dataset,
                "source_file": file,
                "stage": STAGE_RECONCILIATION,
                "error_type": _COUNT_MISMATCH,
                "error_message": message,
                "raw_record": "",
                "namespace_context": "",
                "record_kind": "file",
                "entry_id": None,
                "record_offset": 0,
                "raw_bytes": b"",  # a whole file: the replay reprocesses the page from Bronze
                "dead_letter_id": dead_letter_id(dataset, STAGE_RECONCILIATION, file, 0, tallies[file].page.sha256),
            }
        )
    return rows


def reconciliation_rows(
    dataset: str, run_id: str, tallies: Mapping[str, FileTally], quarantined: Mapping[str, str], started: datetime
) -> list[dict[str, Any]]:
    """One row per ingested file for the reconciliation table (`tables.RECONCILIATION` columns)."""
    return [
        {
            "dataset": dataset,
            "source_file": f,
            "sha256": t.page.sha256,
            "run_id": run_id,
            "manifest_entries": t.page.entries,
            "manifest_tombstones": t.page.tombstones,
            "valid_entries": t.valid_entries,
            "valid_tombstones": t.valid_tombstones,
            "dead_letter_records": t.dead_entries + t.dead_tombstones,
            "status": "quarantined" if f in quarantined else "reconciled",
            "reason": quarantined.get(f),
            "ingested_at": started,
        }
        for f, t in tallies.items()
    ]


def _reconciliation_dead_letters(
    spark: SparkSession, dataset: str, tallies: dict[str, FileTally], quarantined: Mapping[str, str | None]
) -> DataFrame:
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = from_arrow_schema(dead_letter_arrow_schema(), prefer_timestamp_ntz=False)
    rows = reconciliation_dead_letter_rows(dataset, tallies, quarantined)
    return spark.createDataFrame([[r[f.name] for f in schema.fields] for r in rows], schema)


def _reconciliation_rows(spark, dataset, run_id, tallies, quarantined, started) -> DataFrame:
    from pyspark.sql.pandas.types import from_arrow_schema

    from placsp_provider.spark.tables import RECONCILIATION

    schema = from_arrow_schema(RECONCILIATION, prefer_timestamp_ntz=False)
    rows = reconciliation_rows(dataset, run_id, tallies, quarantined, started)
    return spark.createDataFrame([[r[f.name] for f in schema.fields] for r in rows], schema)


def empty_summary(dataset: str, run_id: str, files: int, skipped: int) -> dict[str, Any]:
    return {
        "dataset": dataset,
        "run_id": run_id,
        "files": {"ingested": files, "already_ingested": skipped, "reconciled": 0, "quarantined": 0},
        "read": {"entries": 0, "tombstones": 0},
        "silver": {"entries": 0, "tombstones": 0},
        "dead_letters": {"total": 0, "records": 0, "by_stage": {}, "by_error_type": {}},
        "quarantined_files": [],
        "conservation": {"read": 0, "silver": 0, "dead_letter_records": 0, "in_quarantined_files": 0, "balanced": True},
        "merge": {},
    }


def fill_summary(summary, tallies, quarantined, dead_letter_counts, merge_metrics) -> None:
    read_e = sum(t.page.entries for t in tallies.values())
    read_t = sum(t.page.tombstones for t in tallies.values())
    ok = [t for f, t in tallies.items() if f not in quarantined]
    silver_e = sum(t.valid_entries for t in ok)
    silver_t = sum(t.valid_tombstones for t in ok)
    dead_records = sum(t.dead_entries + t.dead_tombstones for t in ok)
    in_quarantine = sum(t.expected for f, t in tallies.items() if f in quarantined)
    by_stage: Counter[str] = Counter()
    by_type: Counter[str] = Counter()
    for (stage, error_type), n in dead_letter_counts.items():
        by_stage[stage] += n
        by_type[error_type] += n
    summary["files"].update(reconciled=len(ok), quarantined=len(quarantined))
    summary["read"] = {"entries": read_e, "tombstones": read_t}
    summary["silver"] = {"entries": silver_e, "tombstones": silver_t}
    summary["dead_letters"] = {
        "total": sum(by_stage.values()),
        "records": dead_records,
        "by_stage": dict(by_stage),
        "by_error_type": dict(by_type.most_common()),
    }
    summary["quarantined_files"] = [{"file": f, "reason": r} for f, r in sorted(quarantined.items())]
    summary["conservation"] = {
        "read": read_e + read_t,
        "silver": silver_e + silver_t,
        "dead_letter_records": dead_records,
        "in_quarantined_files": in_quarantine,
        "balanced": read_e + read_t == silver_e + silver_t + dead_records + in_quarantine,
    }
    summary["merge"] = merge_metrics


def finish(summary: dict[str, Any], lake: Path) -> dict[str, Any]:
    path = run_summary_path(lake, summary["dataset"], summary["run_id"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=2, sort_keys=True, default=str))
    summary["summary_file"] = str(path)
    if not summary["conservation"]["balanced"]:
        raise RuntimeError(f"conservation check failed for {summary['dataset']}: {summary['conservation']}")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="PLACSP Silver ingest (Spark job)")
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--lake", required=True, type=Path)
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--manifest", action="append", type=Path, default=[])
    parser.add_argument("--reprocess", action="store_true")
    parser.add_argument(
        "--engine",
        default="auto",
        help="spark: Spark parses and writes; spark+delta-rs: Spark parses, delta-rs writes; auto "
        "(default): as `delta_rs.silver_job.choose_engine` decides, the batch parsed here on Spark",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s %(message)s")
    from placsp_provider.delta_rs.silver_job import spark_writer
    from placsp_provider.spark.session import get_session

    request = IngestRequest(get_dataset(args.dataset), args.lake, args.run_id, tuple(args.manifest), args.reprocess)
    writer = spark_writer(request, args.engine)
    spark = get_session("placsp-silver-ingest")
    summary = run_ingest(spark, request, writer)
    print("PLACSP_SUMMARY " + json.dumps(summary, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
