"""`placsp`: the provider's jobs outside Airflow, for scripts and for a look by hand.

Runs the same code as the operators. Errors print one line naming what failed and why, never a
stack trace (`--debug` shows it).
"""

from __future__ import annotations

import argparse
import logging
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from placsp_provider import settings
from placsp_provider.datasets import get_dataset
from placsp_provider.dead_letters.stats import count_dead_letters
from placsp_provider.errors import ConfigError, PlacspError
from placsp_provider.extras import require_spark
from placsp_provider.lake import DEAD_LETTER_TABLE, LAKE_TABLES, bronze_dir, manifest_path, resolve_lake, table_path
from placsp_provider.lake_storage import LakePath, lake_path, storage_problem
from placsp_provider.quality.contract import CONTRACT_TABLES
from placsp_provider.quality.engine import CheckRequest, list_offending_rows
from placsp_provider.quality.report import write_report
from placsp_provider.quality.run import check_dataset
from placsp_provider.quality.volume import VolumeConfig, check_day
from placsp_provider.spark.session import get_session
from placsp_provider.untrusted import printable, printable_json, printable_lines


def _lake(text: str) -> LakePath:
    try:
        return resolve_lake(text)
    except ConfigError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _lake_file(text: str) -> LakePath:
    try:
        return lake_path(text)
    except ConfigError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _timestamp(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"not an ISO date or timestamp: {text!r}") from err
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from err


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="placsp", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--debug", action="store_true", help="show stack traces and debug logs")
    sub = parser.add_subparsers(dest="command", required=True)

    ex = sub.add_parser("extract", help="land the feed pages of one dataset and interval into Bronze")
    ex.add_argument("--dataset", required=True, help="key or syndication id: licitaciones/643, agregadas/1044, ...")
    ex.add_argument("--since", required=True, type=_timestamp, help="interval start (ISO; UTC if no offset)")
    ex.add_argument("--until", required=True, type=_timestamp, help="interval end, exclusive")
    ex.add_argument("--lake", required=True, type=_lake, help="lake root: a folder or s3://bucket/prefix")
    ex.add_argument("--base-url", help="site root (…/sindicacion); default: the live site")
    ex.add_argument("--ca-bundle", help="PEM bundle including the FNMT root CA")
    # Unset: read when the command runs, as the operator reads them (settings; a bad value is one line).
    ex.add_argument("--overlap-hours", type=float, help="reach back before --since; default $PLACSP_OVERLAP_HOURS or 6")
    ex.add_argument("--max-pages", type=int, help="page cap; beyond it, archives; default $PLACSP_MAX_PAGES or 300")
    ex.add_argument(
        "--stop-after-old-pages",
        type=int,
        default=settings.DEFAULT_STOP_AFTER_OLD_PAGES,
        help="stop the walk after this many consecutive pages entirely older than the window",
    )
    ex.add_argument("--run-id", default="", help="recorded in the manifest")
    ex.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    ex.set_defaults(func=_cmd_extract)

    ing = sub.add_parser(
        "ingest",
        help="parse the landed pages of one dataset into Silver (delta-rs for a small batch, else Spark local)",
    )
    ing.add_argument("--dataset", required=True, help="key or syndication id")
    ing.add_argument("--lake", required=True, type=_lake, help="lake root: a folder or s3://bucket/prefix")
    ing.add_argument("--run-id", default="", help="recorded on every row and dead letter")
    ing.add_argument("--manifest", action="append", type=_lake_file, default=[], help="only these manifests")
    ing.add_argument("--reprocess", action="store_true", help="ingest again files already reconciled")
    ing.add_argument(
        "--engine",
        choices=("auto", "spark", "spark+delta-rs", "delta-rs"),
        default=None,
        help="auto (default; $PLACSP_INGEST_ENGINE): delta-rs, without a JVM, when the lake's tables exist "
        "and the pages to ingest are at most $PLACSP_DELTA_RS_MAX_MB (64) MB; else Spark parses and "
        "delta-rs writes, up to $PLACSP_DELTA_RS_WRITE_MAX_MB (512) MB; Spark alone above that",
    )
    ing.add_argument("--json", action="store_true", help="print the run summary as JSON on stdout")
    ing.set_defaults(func=_cmd_ingest)

    cp = sub.add_parser(
        "completeness", help="compare a closed month with the site's archive of it; land what the daily runs missed"
    )
    cp.add_argument("--dataset", required=True, help="key or syndication id")
    cp.add_argument("--month", required=True, help="the month to check, YYYY-MM (must have ended)")
    cp.add_argument("--lake", required=True, type=_lake, help="lake root: a folder or s3://bucket/prefix")
    cp.add_argument("--base-url", help="site root (…/sindicacion); default: the live site")
    cp.add_argument("--ca-bundle", help="PEM bundle including the FNMT root CA")
    cp.add_argument("--run-id", default="", help="recorded in the report and the recovery manifest")
    cp.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    cp.set_defaults(func=_cmd_completeness)

    mt = sub.add_parser(
        "maintain",
        help="compact the lake's Delta tables, then delete the files no version of the last 7 days uses "
        "(Spark local; delta-rs on an S3 lake; run when no ingest or replay writes)",
    )
    mt.add_argument("--lake", required=True, type=_lake, help="lake root: a folder or s3://bucket/prefix")
    mt.add_argument(
        "--table", action="append", choices=LAKE_TABLES, default=[], help="only this table (repeatable); default: all"
    )
    mt.add_argument("--json", action="store_true", help="print what was done as JSON on stdout")
    mt.set_defaults(func=_cmd_maintain)

    dl = sub.add_parser("dead-letters", help="inspect the dead-letter table")
    dl_sub = dl.add_subparsers(dest="dead_letters_command", required=True)
    st = dl_sub.add_parser("stats", help="counts by dataset, stage, error type and status (what the sensor counts)")
    st.add_argument("--lake", required=True, type=_lake, help="lake root: a folder or s3://bucket/prefix")
    st.add_argument("--dataset", help="key or syndication id; default: all")
    st.add_argument("--run-id", help="only the dead letters this run inserted")
    st.add_argument("--status", help="quarantined, fixed, replayed or abandoned")
    st.add_argument("--stage", action="append", default=[], help="parse, validation or reconciliation (repeatable)")
    st.add_argument("--error-type", action="append", default=[], help="e.g. xml_syntax (repeatable)")
    st.add_argument("--since", type=_timestamp, help="processed at or after this time (ISO)")
    st.add_argument("--json", action="store_true", help="print the counts as JSON on stdout")
    st.set_defaults(func=_cmd_dead_letter_stats)

    rp = dl_sub.add_parser(
        "replay", help="re-parse dead letters (quarantined or fixed) into Silver once the cause is fixed (Spark local)"
    )
    rp.add_argument("--lake", required=True, type=_lake, help="lake root: a folder or s3://bucket/prefix")
    rp.add_argument("--dataset", required=True, help="key or syndication id")
    rp.add_argument("--stage", action="append", default=[], help="parse, validation or reconciliation (repeatable)")
    rp.add_argument("--error-type", action="append", default=[], help="e.g. invalid_amount (repeatable)")
    rp.add_argument("--since", type=_day, help="first UTC day the dead letter was recorded (YYYY-MM-DD)")
    rp.add_argument("--until", type=_day, help="last UTC day the dead letter was recorded (YYYY-MM-DD)")
    rp.add_argument("--id", action="append", default=[], dest="ids", help="a dead_letter_id (repeatable)")
    rp.add_argument(
        "--max-records", type=int, default=settings.REPLAY_MAX_RECORDS, help="at most this many, oldest first"
    )
    rp.add_argument(
        "--max-attempts",
        type=int,
        default=settings.REPLAY_MAX_ATTEMPTS,
        help="still failing at this many attempts: abandoned",
    )
    rp.add_argument("--dry-run", action="store_true", help="report what would be recovered; write nothing")
    rp.add_argument("--run-id", default="", help="recorded on replayed rows and dead letters")
    rp.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    rp.set_defaults(func=_cmd_dead_letter_replay)

    sh = dl_sub.add_parser(
        "show", help="print a dead letter's record: the exact bytes the ingest rejected (stdout), what it is (stderr)"
    )
    sh.add_argument("--lake", required=True, type=_lake, help="lake root: a folder or s3://bucket/prefix")
    sh.add_argument("--id", required=True, dest="dead_letter_id", help="the dead_letter_id (64 hex characters)")
    sh.add_argument("--dataset", help="key or syndication id (optional: reads only its partition)")
    sh.add_argument(
        "--text", action="store_true", help="print raw_record instead: the text form, or a person's correction"
    )
    sh.set_defaults(func=_cmd_dead_letter_show)

    fx = dl_sub.add_parser(
        "fix", help="write a corrected record into a dead letter and mark it fixed (checked with the parser first)"
    )
    fx.add_argument("--lake", required=True, type=_lake, help="lake root: a folder or s3://bucket/prefix")
    fx.add_argument("--id", required=True, dest="dead_letter_id", help="the dead_letter_id (64 hex characters)")
    fx.add_argument("--file", required=True, type=Path, help="the corrected record, UTF-8 (e.g. edited `show` output)")
    fx.add_argument("--dataset", help="key or syndication id (optional: reads only its partition)")
    fx.set_defaults(func=_cmd_dead_letter_fix)
    _add_quality_commands(sub)
    return parser


# -- placsp quality: data contracts, volume, report (docs/data-quality.md) ----------------------------
def _add_quality_commands(sub: Any) -> None:
    q = sub.add_parser("quality", help="data contracts, volume anomalies and the quality report (no Spark)")
    q_sub = q.add_subparsers(dest="quality_command", required=True)
    ck = q_sub.add_parser("check", help="check a dataset against the contracts; exit 1 when an error rule fails")
    ck.add_argument("--dataset", required=True, help="key or syndication id")
    ck.add_argument("--lake", required=True, type=_lake, help="lake root: a folder or s3://bucket/prefix")
    ck.add_argument("--table", action="append", default=[], help="only this table (repeatable); default all")
    ck.add_argument("--run-id", help="scope `run` rules check only this run's rows; default the whole table")
    ck.add_argument("--contracts", help="folder of <table>.odcs.yaml; default: the contracts shipped in the package")
    ck.add_argument("--rule", help="with --rows: the rule whose offending rows to list")
    ck.add_argument("--rows", action="store_true", help="list the rows --rule counts as failing")
    ck.add_argument("--limit", type=int, default=50, help="at most this many rows with --rows")
    ck.add_argument("--record", action="store_true", help="also append the results to quality_results")
    ck.add_argument("--json", action="store_true", help="print every result as JSON on stdout")
    ck.set_defaults(func=_cmd_quality_check)
    vo = q_sub.add_parser("volume", help="a day's entry count against its Prophet interval; exit 1 on an anomaly")
    vo.add_argument("--dataset", required=True, help="key or syndication id")
    vo.add_argument("--lake", required=True, type=_lake, help="lake root: a folder or s3://bucket/prefix")
    vo.add_argument("--day", type=_day, help="the day to judge (YYYY-MM-DD); default yesterday (UTC)")
    vo.add_argument("--min-history-days", type=int, default=28, help="fewer days of history: skipped")
    vo.add_argument("--interval-width", type=float, default=0.99, help="Prophet's interval, e.g. 0.99")
    vo.add_argument("--json", action="store_true", help="print the verdict as JSON on stdout")
    vo.set_defaults(func=_cmd_quality_volume)
    rep = q_sub.add_parser("report", help="write one self-contained HTML page: rules, results, volume chart")
    rep.add_argument("--dataset", required=True, help="key or syndication id")
    rep.add_argument("--lake", required=True, type=_lake, help="lake root: a folder or s3://bucket/prefix")
    rep.add_argument(
        "--out", required=True, type=_lake_file, help="the HTML file to write: a local path or s3://bucket/key"
    )
    rep.add_argument("--contracts", help="folder of <table>.odcs.yaml; default: the contracts shipped in the package")
    rep.set_defaults(func=_cmd_quality_report)


def _cmd_quality_check(args: argparse.Namespace) -> dict[str, Any]:
    dataset, lake = get_dataset(args.dataset).key, args.lake
    tables = tuple(args.table) or CONTRACT_TABLES
    if args.rows:
        if not args.rule:
            raise PlacspError("--rows needs --rule RULE_ID (the rule whose failing rows to list)")
        request = CheckRequest(str(lake), dataset, args.run_id, CONTRACT_TABLES, args.contracts)
        sql, names, rows = list_offending_rows(request, args.rule, args.limit)
        print(f"-- {sql}", file=sys.stderr)
        print("\t".join(printable(n) for n in names))
        for row in rows:  # table data: entry ids, file names, record text
            print("\t".join("" if v is None else printable(v) for v in row))
        print(f"{len(rows)} row(s) (at most {args.limit})", file=sys.stderr)
        return {}
    check = check_dataset(
        lake, dataset, run_id=args.run_id, tables=tables, contracts_dir=args.contracts, record=args.record
    )
    report = check.report
    if args.json:
        print(printable_json(report.to_dict(), indent=2, default=str))
    else:
        for result in report.results:
            if not result.success:
                print(f"FAIL {printable(result.describe())}")
        print(
            f"{dataset}: {len(report.results)} rules, {len(report.errors)} error and {len(report.warnings)} warn "
            f"rule(s) failing" + ("" if report.passed else f"; list rows: {report.request.cli_command(rule='RULE_ID')}")
        )
    if not report.passed:
        raise SystemExit(1)
    return {}


def _cmd_quality_volume(args: argparse.Namespace) -> dict[str, Any]:
    config = VolumeConfig(interval_width=args.interval_width, min_history_days=args.min_history_days)
    day = args.day or (datetime.now(UTC).date() - timedelta(days=1))
    check = check_day(args.lake, get_dataset(args.dataset).key, day, config)
    print(printable_json(check.to_dict(), indent=2) if args.json else printable(check.message()))
    if check.status == "anomaly":
        raise SystemExit(1)
    return {}


def _cmd_quality_report(args: argparse.Namespace) -> dict[str, Any]:
    path = write_report(args.lake, get_dataset(args.dataset).key, args.out, contracts_dir=args.contracts)
    print(f"wrote {path}")
    return {}


def _cmd_extract(args: argparse.Namespace) -> dict[str, Any]:
    from placsp_provider.bronze.extract import ExtractRequest, extract_interval
    from placsp_provider.feed.client import FeedClient

    ds = get_dataset(args.dataset)
    request = ExtractRequest(
        dataset=ds,
        start=args.since,
        end=args.until,
        lake=args.lake,
        run_id=args.run_id,
        overlap=settings.overlap() if args.overlap_hours is None else timedelta(hours=args.overlap_hours),
        max_pages=settings.max_pages() if args.max_pages is None else args.max_pages,
        stop_after_old_pages=args.stop_after_old_pages,
    )
    with FeedClient(_client_config(args), ds.key) as client, _progress(not args.json) as tick:
        manifest = extract_interval(client, request, progress=tick)
    summary = manifest.summary()
    summary["manifest"] = str(manifest_path(request.lake, ds.key, request.start, request.end))
    return summary


def _cmd_completeness(args: argparse.Namespace) -> dict[str, Any]:
    from placsp_provider.bronze.completeness import CompletenessRequest, check_month, parse_month
    from placsp_provider.feed.client import FeedClient

    ds = get_dataset(args.dataset)
    request = CompletenessRequest(ds, parse_month(args.month), args.lake, args.run_id)
    with FeedClient(_client_config(args), ds.key) as client, _progress(not args.json) as tick:
        report = check_month(client, request, progress=tick)
    summary = report.summary()
    if summary["manifest"]:
        print(
            f"recovered pages are listed in {summary['manifest']}: run `placsp ingest --dataset {ds.key} "
            f"--lake {args.lake}` to bring them to Silver",
            file=sys.stderr,
        )
    return summary


def _client_config(args: argparse.Namespace) -> Any:
    from placsp_provider.feed.client import ClientConfig

    given = {"base_url": args.base_url, "verify": args.ca_bundle}
    return ClientConfig(**{name: value for name, value in given.items() if value})


def _run_id(args: argparse.Namespace, prefix: str) -> str:
    """`--run-id`, else a new one: `<prefix>__<UTC time>_<6 hex>`."""
    return args.run_id or f"{prefix}__{datetime.now(UTC):%Y%m%dT%H%M%S}_{uuid.uuid4().hex[:6]}"


def _cmd_ingest(args: argparse.Namespace) -> dict[str, Any]:
    from placsp_provider.ingest.engines import choose_engine, needs_spark
    from placsp_provider.ingest.request import IngestRequest
    from placsp_provider.ingest.run import ingest

    ds = get_dataset(args.dataset)
    lake = args.lake
    landed = bronze_dir(lake, ds.key)
    if not landed.is_dir():
        raise PlacspError(f"dataset {ds.key}: nothing landed under {landed}; run `placsp extract` first")
    run_id = _run_id(args, "cli")
    request = IngestRequest(ds, lake, run_id, tuple(args.manifest), args.reprocess)
    engine = choose_engine(request, args.engine)
    start = "starting Spark (local) for" if needs_spark(engine) else "ingesting"
    print(f"{start} dataset {ds.key} with engine {engine}, run {run_id}...", file=sys.stderr)
    return dict(ingest(request, engine))


def _cmd_maintain(args: argparse.Namespace) -> dict[str, Any]:
    from placsp_provider.maintenance import runs_on_spark

    lake = args.lake
    if not lake.is_dir():
        raise PlacspError(f"no lake at {lake}")
    if not runs_on_spark(lake):
        from placsp_provider.delta_rs.maintenance import maintain_tables as maintain_with_delta_rs

        print(f"maintaining the tables of {lake} with delta-rs...", file=sys.stderr)
        return maintain_with_delta_rs(lake, tuple(args.table) or LAKE_TABLES)
    require_spark(f"lake {lake}: table maintenance")
    from placsp_provider.spark.maintenance import maintain_tables

    print(f"starting Spark (local) to maintain the tables of {lake}...", file=sys.stderr)
    with get_session("placsp-maintain") as spark:  # stopped on the way out
        return maintain_tables(spark, lake, tuple(args.table) or LAKE_TABLES)


def _cmd_dead_letter_stats(args: argparse.Namespace) -> dict[str, Any]:
    counts = count_dead_letters(
        args.lake,
        dataset=get_dataset(args.dataset).key if args.dataset else None,
        run_id=args.run_id,
        status=args.status,
        stages=args.stage,
        error_types=args.error_type,
        since=args.since,
    )
    out = counts.to_dict()
    out.pop("query", None)
    out["samples"] = [f"{s['source_file']} {s['entry_id'] or ''}".strip() for s in out["samples"]]
    return out


def _cmd_dead_letter_replay(args: argparse.Namespace) -> dict[str, Any]:
    from placsp_provider.spark.replay_job import ReplayRequest, describe, run_replay

    lake = args.lake
    run_id = _run_id(args, "replay")
    request = ReplayRequest(
        dataset=args.dataset,
        lake=lake,
        run_id=run_id,
        stages=tuple(args.stage),
        error_types=tuple(args.error_type),
        since=args.since,
        until=args.until,
        dead_letter_ids=tuple(args.ids),
        max_records=args.max_records,
        max_attempts=args.max_attempts,
        dry_run=args.dry_run,
    )
    if not (table_path(lake, DEAD_LETTER_TABLE) / "_delta_log").is_dir():
        raise PlacspError(f"no dead-letter table under {lake}: nothing to replay (is --lake the lake root?)")
    require_spark(f"replay of {request.dataset}: the dead-letter replay")
    print(f"starting Spark (local) to replay dead letters of {request.dataset}, run {run_id}...", file=sys.stderr)
    with get_session("placsp-dead-letter-replay") as spark:
        summary = run_replay(spark, request)
    if not args.json:
        print(printable_lines(describe(summary)))
        return {}
    return summary


def _cmd_dead_letter_show(args: argparse.Namespace) -> dict[str, Any]:
    from placsp_provider.dead_letters.fix import find_dead_letter
    from placsp_provider.dead_letters.lifecycle import FIXED

    lake = args.lake
    letter = find_dead_letter(lake, args.dead_letter_id, args.dataset)
    data = letter.row["raw_record"].encode("utf-8") if args.text else letter.exact_bytes(lake)
    if data is None:
        raise PlacspError(
            f"{letter.describe()}: written before raw_bytes, and its exact bytes cannot be known (its Bronze "
            "page is gone and its text shows undecodable bytes as \\xNN); `--text` prints that text to fix it from"
        )
    note = " (fixed: a replay reads the corrected text, `--text`)" if letter.row["status"] == FIXED else ""
    if sys.stdout.isatty():  # record bytes never reach a terminal raw; a file or a pipe gets them exact
        note += "; escaped for the terminal: redirect to a file for the exact bytes"
        data = (printable_lines(data.decode("utf-8", "backslashreplace")) + "\n").encode("utf-8")
    print(f"{letter.describe()}; {len(data)} bytes{note}", file=sys.stderr)
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
    return {}


def _cmd_dead_letter_fix(args: argparse.Namespace) -> dict[str, Any]:
    from placsp_provider.dead_letters.fix import fix_record

    try:
        data = args.file.read_bytes()
    except OSError as err:
        raise PlacspError(f"cannot read the corrected record {args.file}: {err.strerror or err}") from err
    letter = fix_record(args.lake, args.dead_letter_id, data, args.dataset)
    print(
        f"{letter.describe()}: the corrected record parses as one {letter.row['record_kind']} and is stored; "
        f"replay it: placsp dead-letters replay --lake {args.lake} --dataset {letter.dataset} "
        f"--id {args.dead_letter_id}",
        file=sys.stderr,
    )
    return {}


@contextmanager
def _progress(enabled: bool) -> Iterator[Callable[[str, int], None] | None]:
    """A rich progress line on stderr: pages landed and MB so far (the chain's length is unknown)."""
    if not (enabled and sys.stderr.isatty()):
        yield None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, SpinnerColumn, TextColumn

    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), DownloadColumn())
    with Progress(*columns, TextColumn("{task.fields[pages]} pages")) as bar:
        task = bar.add_task("extracting", total=None, pages=0)

        def tick(message: str, size: int) -> None:
            pages = bar.tasks[0].fields["pages"] + 1
            bar.update(task, advance=size, pages=pages, description=message.split(":")[0])

        yield tick


def _print_summary(summary: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(printable_json(summary, indent=2))
        return
    for key, value in summary.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items())
        print(f"{key:>18}: {printable(value)}")  # values carry file names, ids, URLs


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.INFO, format="%(levelname)s %(message)s", stream=sys.stderr
    )
    try:
        summary = args.func(args)
    except PlacspError as err:
        if args.debug:
            raise
        print(f"placsp {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"placsp {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # the lake's object store refused or failed: one line, not a traceback
        if args.debug or (problem := storage_problem(err)) is None:
            raise
        print(f"placsp {args.command}: error: {printable(problem)}", file=sys.stderr)
        return 2
    try:
        if summary:
            _print_summary(summary, getattr(args, "json", False))
    except BrokenPipeError:  # `placsp ... | head` closed the pipe: not an error
        sys.stderr.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
