"""The in-process parser's pages shared among worker processes, one per usable core: `stage_page`, the
code a Spark task runs, on this machine's cores without a JVM (decision 0053).

A batch of a few pages (a daily run) is parsed in this process: starting a worker (the forkserver's
imports) costs more than a small page's parse. Past `POOL_MIN_MB` of pages the workers pay for
themselves: when 0053 measured it, 384 real-shaped pages parsed in 20.7 s on 2 workers, 25.4 s in
Spark's tasks (after its 8 s start), ~36 s in one process (decision 0054 has since made each faster).

Workers come from a forkserver, not `fork`: this process may hold threads (delta-rs's runtime,
Airflow's task supervisor), and a forked copy of a held lock never opens.
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from placsp_provider.bronze.manifest import LandedPage
from placsp_provider.datasets import Dataset, get_dataset
from placsp_provider.errors import BronzePageError, ConfigError
from placsp_provider.lake_storage import LakePath, is_local

log = logging.getLogger(__name__)

WORKERS_ENV = "PLACSP_PARSE_WORKERS"  # worker processes at most; 1: parse in this process
POOL_MIN_MB = 32.0
_MB = 1024 * 1024


def usable_cpus() -> int:
    """The CPUs this process may run on, not the machine's (what the JVM counts for `local[*]`)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def parse_workers(pages: Sequence[LandedPage]) -> int:
    """Worker processes for `pages`: 1 (this process) for a small batch or in a daemonic process,
    else one per usable core (at most `$PLACSP_PARSE_WORKERS`) and never more than the pages."""
    raw = os.environ.get(WORKERS_ENV, "")
    try:
        most = int(raw) if raw else usable_cpus()
    except ValueError:
        raise ConfigError(f"${WORKERS_ENV} must be a whole number of worker processes, not {raw!r}") from None
    if sum(p.bytes for p in pages) < POOL_MIN_MB * _MB:
        return 1
    if multiprocessing.current_process().daemon:  # e.g. a Celery worker's child: it may not have any
        log.info("parsing in this process: a daemonic process cannot start worker processes")
        return 1
    return max(1, min(most, len(pages)))


def stage_pages_here(
    dataset: Dataset, lake: LakePath, pages: Sequence[LandedPage], folder: LakePath
) -> list[Mapping[str, Any]]:
    """Every page parsed and staged under `folder` (`staging.stage_page`), on `parse_workers` processes;
    the pages' tally rows, in page order. A page's error (e.g. it went from Bronze) is raised here,
    as the worker raised it."""
    workers = parse_workers(pages)
    total, done = sum(p.bytes for p in pages), 0
    tallies: dict[int, list[dict[str, Any]]] = {}

    def progress(number: int, page: LandedPage) -> None:
        nonlocal done
        done += page.bytes
        log.info(
            "dataset %s: page %d of %d parsed, %.1f of %.1f MB%s",
            dataset.key,
            number,
            len(pages),
            done / _MB,
            total / _MB,
            f" ({workers} worker processes)" if workers > 1 else "",
        )

    if workers == 1:
        for index, page in enumerate(pages):
            tallies[index] = _stage(dataset.key, _read(dataset, lake, page), page.file, str(folder))
            progress(index + 1, page)
        return _in_order(tallies)
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["placsp_provider.ingest.staging"])  # each worker forks with it imported
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context)
    try:
        # On a local lake a worker reads its page itself; on S3 this process reads each page and hands
        # its bytes over, so a worker needs no lake credentials. At most two pages a worker in flight.
        running: dict[Future[list[dict[str, Any]]], int] = {}
        queue = iter(enumerate(pages))
        number = 0
        while True:
            for index, page in itertools.islice(queue, 2 * workers - len(running)):
                source = str(lake / page.file) if is_local(lake) else _read(dataset, lake, page)
                running[pool.submit(_stage, dataset.key, source, page.file, str(folder), str(lake))] = index
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                index = running.pop(future)
                try:
                    tallies[index] = future.result()  # a worker's error is raised here
                except BrokenProcessPool as err:
                    in_flight = [pages[i].file for i in sorted({index, *running.values()})]
                    raise _worker_died(dataset, in_flight) from err
                number += 1
                progress(number, pages[index])
    finally:
        pool.shutdown(cancel_futures=True)  # after an error, the pages not started are not parsed
    return _in_order(tallies)


def _worker_died(dataset: Dataset, files: list[str]) -> BronzePageError:
    """A worker that ended without an answer (killed: the pool only knows it is gone), named by the
    pages that were being parsed, one of which was its."""
    others = f" or one of {', '.join(files[1:])}" if len(files) > 1 else ""
    reason = (
        f"a parse worker process ended abruptly while parsing this page{others}: it was killed from "
        "outside, most often by the out-of-memory killer (the system log says). Nothing of this run was "
        f"written to Silver; run the ingest again, with fewer workers (${WORKERS_ENV}) if memory is short"
    )
    return BronzePageError(dataset.key, files[0], reason, stage="parse")


def _in_order(tallies: Mapping[int, list[dict[str, Any]]]) -> list[Mapping[str, Any]]:
    return [row for index in sorted(tallies) for row in tallies[index]]


def _read(dataset: Dataset, lake: LakePath, page: LandedPage) -> bytes:
    from placsp_provider.ingest.staging import read_page

    return read_page(str(lake / page.file), dataset=dataset, lake=str(lake))


def _stage(dataset: str, page: bytes | str, file: str, folder: str, lake: str = "") -> list[dict[str, Any]]:
    """One page parsed and staged; its tally rows (a worker's task: plain arguments). `page` is the
    page's bytes, or its path in the local `lake`, read here: the caller's CPU for 48 real-shaped pages
    (reading, pickling and sending each) went from 1.38 to 1.25 s, on the cores the workers use."""
    from placsp_provider.ingest.staging import ARROW, read_page, stage_page

    ds = get_dataset(dataset)
    data = page if isinstance(page, bytes) else read_page(page, dataset=ds, lake=lake)
    # Staged as Arrow IPC: only delta-rs's writer reads what this machine parses (decision 0054).
    tally = stage_page(data, dataset=ds, source_file=file, staging=folder, suffix=ARROW)
    rows: list[dict[str, Any]] = tally.to_pylist()
    return rows
