"""The driver's class-data-sharing archive (spark/class_archive.py): offered only when it fits, and
mapped by a real fresh JVM.

The unit tests build no archive: they lay a fake jar folder and archive file, since what they check is
which options a session gets. The Spark tests start fresh JVMs (a session's is shared and already up)
and read the JVM's own class-loading log; they use the archive `make jars` built in this checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from placsp_provider.spark import class_archive, session
from placsp_provider.spark.jars import S3A_LIST, SPARK_PACKAGES, jar_file_name


@pytest.fixture
def jar_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "spark-jars"
    folder.mkdir()
    for coordinate, version in SPARK_PACKAGES.items():
        (folder / jar_file_name(coordinate, version)).write_bytes(b"jar")
    (folder / "org.apache.hadoop_hadoop-aws-3.5.0.jar").write_bytes(b"jar")  # the s3a set, as fetch lists it
    (folder / S3A_LIST).write_text("org.apache.hadoop_hadoop-aws-3.5.0.jar\n")
    monkeypatch.setenv("PLACSP_SPARK_JARS", str(folder))
    monkeypatch.delenv(class_archive.SWITCH_ENV, raising=False)
    monkeypatch.delenv("PLACSP_SPARK_JAVA_OPTIONS", raising=False)
    return folder


@pytest.mark.unit
def test_the_archive_is_offered_only_once_built_for_these_jars_and_never_over_the_users_own(
    jar_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = class_archive.archive_key()
    assert key is not None  # a JDK and the (fake) jars are there
    assert class_archive.archive_options("") == ""  # none built: runs start as before
    folder = jar_folder.parent / "jvm-class-archive"
    folder.mkdir()
    archive = folder / f"driver-{key}-5.jsa"  # named with its size, as `build` publishes it
    archive.write_bytes(b"built")
    assert class_archive.built_archive(key) == archive

    options = session.driver_conf()["spark.driver.extraJavaOptions"].split()
    assert options[:3] == ["-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m", "-XX:+UseSerialGC"]
    assert options[3:] == [f"-XX:SharedArchiveFile={archive}", "-Xlog:cds*=off"]

    archive.write_bytes(b"cut")  # cut short after it was published: the JVM would crash on it
    assert class_archive.archive_options("") == ""
    archive.write_bytes(b"built")

    # Another jar set is another class path: that archive no longer applies.
    (jar_folder / jar_file_name(*next(iter(SPARK_PACKAGES.items())))).write_bytes(b"another jar")
    assert class_archive.archive_key() != key
    assert class_archive.archive_options("") == ""
    archive.rename(folder / f"driver-{class_archive.archive_key()}-5.jsa")
    assert "SharedArchiveFile" in class_archive.archive_options("")

    monkeypatch.setenv("PLACSP_SPARK_JAVA_OPTIONS", "-XX:SharedArchiveFile=/mine.jsa")  # the user's wins
    assert session.driver_java_options() == "-XX:SharedArchiveFile=/mine.jsa"
    monkeypatch.setenv("PLACSP_SPARK_JAVA_OPTIONS", "-Xshare:off")
    assert session.driver_java_options() == "-Xshare:off"
    monkeypatch.delenv("PLACSP_SPARK_JAVA_OPTIONS")
    monkeypatch.setenv(class_archive.SWITCH_ENV, "off")
    assert "SharedArchiveFile" not in session.driver_java_options()


# What the fresh JVM runs: a session, a Delta table written and read, then the classes the JVM says it
# took from the archive (`-Xlog:class+load` names the source of every class it loads).
_PROBE = textwrap.dedent(
    """
    import sys
    from placsp_provider.spark.session import get_session

    spark = get_session("class-archive-probe", extra={"spark.master": "local[1]"})
    spark.range(3).write.format("delta").save(sys.argv[1])
    print("rows", spark.read.format("delta").load(sys.argv[1]).count())
    """
)


def _classes_from_archive(tmp_path: Path, switch: str) -> tuple[int, int]:
    log = tmp_path / f"classes-{switch}.log"
    env = {
        **os.environ,
        class_archive.SWITCH_ENV: switch,
        "PLACSP_SPARK_JAVA_OPTIONS": f"{session.DEFAULT_DRIVER_JAVA_OPTIONS} -Xlog:class+load=info:file={log}",
        "PLACSP_SPARK_LOG_LEVEL": "ERROR",
    }
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(tmp_path / f"table-{switch}")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rows 3" in done.stdout
    lines = log.read_text().splitlines()
    shared = [line for line in lines if "source: shared objects file (top)" in line]
    delta = [line for line in shared if " org.apache.spark.sql.delta." in line or " io.delta." in line]
    return len(shared), len(delta)


@pytest.mark.spark
def test_a_fresh_driver_maps_spark_and_delta_classes_from_the_archive_the_install_built(tmp_path: Path) -> None:
    key = class_archive.archive_key()
    assert key is not None and class_archive.built_archive(key), (
        "no class archive for this JVM, Spark and jars: `make jars` builds it "
        "(python -m placsp_provider.spark.class_archive build)"
    )
    shared, delta = _classes_from_archive(tmp_path, "on")
    assert shared > 5_000 and delta > 500, (shared, delta)
    assert _classes_from_archive(tmp_path, "off") == (0, 0)  # switched off, every class is loaded


@pytest.mark.spark
def test_an_archive_cut_short_is_refused_before_it_gets_the_name_runs_use(tmp_path: Path) -> None:
    # The JVM crashes on a truncated archive (SIGBUS while mapping it), so `build` publishes one only
    # after a session started with `-Xshare:on` mapped it; a build killed mid-dump never gets there.
    archive = class_archive.built_archive(class_archive.archive_key() or "")
    assert archive is not None
    cut = tmp_path / "cut.jsa"
    with archive.open("rb") as whole:
        cut.write_bytes(whole.read(1_000_000))
    env = {
        **os.environ,
        class_archive.SWITCH_ENV: "off",
        "PLACSP_SPARK_JAVA_OPTIONS": f"-Xshare:on -XX:SharedArchiveFile={cut} -XX:ErrorFile={tmp_path}/hs_err_%p.log",
    }
    assert class_archive._run(["check"], env).returncode != 0
    assert list(tmp_path.glob("hs_err_*.log"))  # it crashed, as a run given such a file would


@pytest.mark.unit
def test_a_build_that_cannot_start_says_why_and_leaves_runs_as_they_were(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PLACSP_SPARK_JARS", str(tmp_path / "no-jars-here"))
    assert class_archive.main(["build"]) == 0  # `make jars` goes on: the archive only saves time
    err = capsys.readouterr().err
    assert err.startswith("class archive: ") and "Spark jars are missing" in err and "Traceback" not in err
    assert class_archive.archive_options("") == ""
