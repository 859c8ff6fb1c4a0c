"""A class-data-sharing archive (Java's AppCDS) of the Spark driver: the classes Spark, Delta and our
jobs load, mapped from one file at start-up instead of read, parsed and verified one by one.

Every Spark run (`placsp ingest` on Spark, a spark-submit of the DAGs, a test that starts a JVM)
pays that loading; the archive takes 3-5 s off each (decision 0021).

`python -m placsp_provider.spark.class_archive build` (run by `make jars`) makes the archive once per
JVM build, Spark installation and jar set: it ingests two bundled sample pages into a throwaway lake
with `-XX:ArchiveClassesAtExit`, then starts a session that must map the new archive (`-Xshare:on`
refuses one that does not fit) before renaming it into place. Only a complete, checked archive ever
has the final name, which ends in its size: the JVM crashes on a truncated archive, but ignores a
missing file, and falls back to loading classes (with a warning we silence) when the class path
differs from the one recorded.

`PLACSP_JVM_CLASS_ARCHIVE=off` leaves it out; options that already name an archive keep theirs.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from placsp_provider.spark.jars import SPARK_PACKAGES, jar_dir, jar_paths, spark_env

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SWITCH_ENV = "PLACSP_JVM_CLASS_ARCHIVE"
_ARCHIVE_OPTIONS = ("-XX:SharedArchiveFile", "-XX:ArchiveClassesAtExit", "-Xshare")
# The JVM logs (on stdout) each start whose class path does not match the archive's; it then loads
# classes as it would without one, so the line would only alarm whoever reads a task log.
_QUIET = "-Xlog:cds*=off"


def archive_dir() -> Path:
    return jar_dir().parent / "jvm-class-archive"


def java_home() -> Path | None:
    """The JDK Spark's launcher runs: $JAVA_HOME, else the `java` on PATH."""
    if os.environ.get("JAVA_HOME"):
        return Path(os.environ["JAVA_HOME"]).resolve()
    java = shutil.which("java")
    return Path(java).resolve().parent.parent if java else None


def archive_key() -> str | None:
    """What an archive is only valid for: this JVM build, this Spark and these jars (the JVM refuses an
    archive of another build or class path at start-up; the key keeps us from offering it one)."""
    home = java_home()
    if home is None:
        return None
    candidates = (home / "lib" / "server" / "libjvm.so", home / "jre" / "lib" / "server" / "libjvm.so")
    jvm = next((p for p in candidates if p.is_file()), None)
    if jvm is None:
        return None
    spark_home = Path(spark_env()["SPARK_HOME"]).resolve()
    try:
        jars = [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in jar_paths()]
        spark_jars = sorted((p.name, p.stat().st_size) for p in (spark_home / "jars").glob("*.jar"))
        jvm_stat = jvm.stat()
    except OSError:  # jars not fetched yet, or Spark without a jars folder
        return None
    facts = {
        "jvm": [str(jvm), jvm_stat.st_size, jvm_stat.st_mtime_ns],
        "spark_home": str(spark_home),
        "spark_jars": spark_jars,
        "jars": jars,
        "packages": SPARK_PACKAGES,
        # The launcher puts these folders first on the class path when they are set.
        "conf_dirs": [os.environ.get(k, "") for k in ("SPARK_CONF_DIR", "HADOOP_CONF_DIR", "YARN_CONF_DIR")],
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]


def built_archive(key: str) -> Path | None:
    """The archive built for `key`, if whole: its name ends in its size in bytes (`driver-<key>-<size>.jsa`),
    so a file cut short after it was published (a copy, a restore) is never offered to a JVM, which
    would crash on it."""
    for path in sorted(archive_dir().glob(f"driver-{key}-*.jsa")):
        size = path.name[len(f"driver-{key}-") : -len(".jsa")]
        try:
            if size.isdigit() and path.stat().st_size == int(size):
                return path
        except OSError:
            continue
    return None


def archive_options(options: str) -> str:
    """The JVM options that map the archive, to add to the driver's `options`; empty when switched off,
    when `options` already name an archive, or when none was built for this JVM, Spark and jars."""
    if os.environ.get(SWITCH_ENV, "").lower() in ("off", "0", "false", "no"):
        return ""
    if any(o.startswith(_ARCHIVE_OPTIONS) for o in options.split()):
        return ""
    key = archive_key()
    archive = built_archive(key) if key else None
    return f"-XX:SharedArchiveFile={archive} {_QUIET}" if archive else ""


def build(force: bool = False) -> Path | None:
    """Make the archive for this JVM, Spark and jars unless it exists; return its path (None: this JVM
    cannot make one, said on stderr; runs then start as they would without)."""
    from placsp_provider.spark.session import DEFAULT_DRIVER_JAVA_OPTIONS

    key = archive_key()
    if key is None:
        print("class archive: no JDK with libjvm.so found, or the Spark jars are missing", file=sys.stderr)
        return None
    built = built_archive(key)
    if built and not force:
        return built
    folder = archive_dir()
    folder.mkdir(parents=True, exist_ok=True)
    started = time.time()
    env = {**spark_env(), SWITCH_ENV: "off"}
    base = os.environ.get("PLACSP_SPARK_JAVA_OPTIONS", DEFAULT_DRIVER_JAVA_OPTIONS)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".build-") as tmp:
        staged = Path(tmp) / "driver.jsa"
        print(
            "class archive: recording the classes of a two-page ingest (about a minute, once per JDK, Spark "
            "and jar set)",
            file=sys.stderr,
            flush=True,
        )
        # Training: the classes of a real ingest (session, pages, Python workers, MERGEs into new and
        # existing tables) are the ones recorded.
        train = _run(
            ["train", tmp], {**env, "PLACSP_SPARK_JAVA_OPTIONS": f"{base} -XX:ArchiveClassesAtExit={staged} {_QUIET}"}
        )
        if train.returncode != 0 or not staged.is_file():
            print(f"class archive: the training run failed; runs start without one\n{_tail(train)}", file=sys.stderr)
            return None
        # A JVM that cannot map it may crash: its hs_err file stays in the throwaway folder.
        crash = f"-XX:ErrorFile={tmp}/hs_err_%p.log"
        check = _run(
            ["check"], {**env, "PLACSP_SPARK_JAVA_OPTIONS": f"{base} -Xshare:on -XX:SharedArchiveFile={staged} {crash}"}
        )
        if check.returncode != 0:
            print(f"class archive: a session could not map it; runs start without one\n{_tail(check)}", file=sys.stderr)
            return None
        final = folder / f"driver-{key}-{staged.stat().st_size}.jsa"
        os.replace(staged, final)
    # Older archives (other JVMs, Sparks or jar sets, or a build this one replaces: ~200 MB each). One
    # written after this build started is another build's beside it, which keeps it: then each build
    # removes only what predates it, and the newest of them always stays.
    for stale in folder.glob("driver-*.jsa"):
        with contextlib.suppress(OSError):
            if stale != final and stale.stat().st_mtime < started:
                stale.unlink()
    return final


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "placsp_provider.spark.class_archive", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, check=False)


def _tail(result: subprocess.CompletedProcess[str]) -> str:
    return "\n".join((result.stderr or result.stdout).splitlines()[-12:])


def _train(workdir: Path) -> None:
    """Ingest two bundled pages into a fresh lake, the second into the tables the first made."""
    from placsp_provider.datasets import get_dataset
    from placsp_provider.demo.samples import land_pages, samples_dir
    from placsp_provider.ingest.request import IngestRequest
    from placsp_provider.ingest.run import ingest
    from placsp_provider.lake import table_path
    from placsp_provider.spark.session import get_session

    ds = get_dataset("licitaciones")
    lake = workdir / "lake"
    samples = samples_dir() / "643_licitaciones"
    spark = get_session("placsp-class-archive", extra={"spark.master": "local[2]"})
    for n, page in enumerate(
        (samples / "resolvedWithNoLots" / "version11.atom", samples / "resolvedWithLotsAllAwarded" / "version7.atom")
    ):
        manifest = land_pages(lake, ds.key, [page], f"train-{n}")
        ingest(IngestRequest(ds, lake, f"train-{n}", manifests=(manifest,)), "spark", spark=spark)
    spark.read.format("delta").load(str(table_path(lake, "entries"))).count()
    _stop_jvm(spark)


def _stop_jvm(spark: SparkSession) -> None:
    """Stop the session and wait for its JVM to exit: the archive is written as the JVM exits."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    spark.stop()
    proc = getattr(gateway, "proc", None)
    if proc is not None:  # the JVM exits when the pipe pyspark holds open on its stdin closes
        proc.stdin.close()
        proc.wait(timeout=600)


def _check() -> None:
    from placsp_provider.spark.session import get_session

    spark = get_session("placsp-class-archive-check", extra={"spark.master": "local[1]"})
    spark.range(1).count()
    _stop_jvm(spark)


def main(argv: list[str]) -> int:
    if argv[:1] == ["build"]:
        # The archive only saves start-up time: whatever stops its build, runs start without it.
        try:
            path = build(force="--force" in argv)
        except (OSError, subprocess.SubprocessError) as err:
            print(f"class archive: not built ({err}); runs start without one", file=sys.stderr)
            return 0
        print(path if path else "class archive: none (see above)")
        return 0
    if argv[:1] == ["train"] and len(argv) == 2:
        _train(Path(argv[1]))
        return 0
    if argv[:1] == ["check"]:
        _check()
        return 0
    print("usage: python -m placsp_provider.spark.class_archive build [--force]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
