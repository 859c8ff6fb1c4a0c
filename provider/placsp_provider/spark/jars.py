"""The JVM jars our Spark jobs need, pinned, fetched once from Maven Central into a local cache.

`python -m placsp_provider.spark.jars fetch` resolves them with Spark's own Ivy (so no other
tool is needed), then copies just these jars into the cache folder; later runs put those files on
`spark.jars` and never touch the network. Besides Delta and OpenLineage they include s3a (Hadoop's
S3 filesystem and the AWS SDK modules it uses), so a Spark job reads an S3 lake (`spark.session`).
The first Spark start without them fetches them itself (`ensure_jars`, saying so in the log); an
image build pre-fetches them with that command. The folder is `$PLACSP_SPARK_JARS`, else
`.cache/spark-jars` of a checkout, else `~/.cache/placsp/spark-jars`.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from placsp_provider.errors import ConfigError
from placsp_provider.extras import missing_spark, require_spark

# delta-spark's jar must match the pip package (4.4.0); 4.4.1 is on PyPI but not on Maven Central.
SPARK_PACKAGES: dict[str, str] = {
    "io.delta:delta-spark_4.2_2.13": "4.4.0",
    "io.delta:delta-storage": "4.4.0",
    "io.openlineage:openlineage-spark_2.13": "1.53.0",
}
# s3a: hadoop-aws must match the Hadoop inside pyspark (hadoop-client-api-3.5.0.jar), and the AWS SDK
# the version that Hadoop release was built with (hadoop-project 3.5.0: aws-java-sdk-v2.version).
# hadoop-aws asks for the SDK's shaded `bundle` (686 MB); the modules S3 needs are 14 MB, so the
# bundle is excluded and those are resolved instead, with what Spark already ships left out.
S3A_PACKAGES: dict[str, str] = {
    "org.apache.hadoop:hadoop-aws": "3.5.0",
    "software.amazon.awssdk:s3": "2.35.4",
    "software.amazon.awssdk:s3-transfer-manager": "2.35.4",
}
_S3A_EXCLUDED = (
    "software.amazon.awssdk:bundle",
    "org.apache.hadoop:hadoop-common",  # Spark's hadoop-client-api has it
    "org.wildfly.openssl:wildfly-openssl",  # TLS acceleration, off unless configured
)
# Of what Ivy resolves for S3A_PACKAGES, the jars kept (file-name prefixes): netty, httpclient,
# commons-* and slf4j come with Spark, in the versions its own classes need.
_S3A_KEPT = ("org.apache.hadoop_hadoop-aws-", "software.amazon.", "org.reactivestreams_")
S3A_LIST = "s3a-jars.txt"  # the kept jars' names, written last: the s3a set is complete when it exists
JARS_ENV = "PLACSP_SPARK_JARS"
PREFETCH = "python -m placsp_provider.spark.jars fetch"

log = logging.getLogger(__name__)


def jar_dir() -> Path:
    value = os.environ.get(JARS_ENV)
    if value:
        return Path(value).expanduser().resolve()
    checkout = Path(__file__).resolve().parents[3]  # <checkout>/provider/placsp_provider/spark/jars.py
    if (checkout / "pyproject.toml").is_file() and (checkout / "provider" / "placsp_provider").is_dir():
        return checkout / ".cache" / "spark-jars"
    return Path.home() / ".cache" / "placsp" / "spark-jars"


def jar_file_name(coordinate: str, version: str) -> str:
    group, artifact = coordinate.split(":")
    return f"{group}_{artifact}-{version}.jar"  # Ivy's retrieve pattern


def jar_paths(directory: Path | None = None) -> list[Path]:
    """The pinned jars and the s3a set; raise with the command to run when any is missing."""
    folder = directory or jar_dir()
    paths = [folder / jar_file_name(c, v) for c, v in SPARK_PACKAGES.items()]
    try:
        paths += [folder / name for name in (folder / S3A_LIST).read_text().split()]
    except OSError:  # not fetched yet (or no folder there at all)
        paths.append(folder / S3A_LIST)
    if missing := [p.name for p in paths if not p.is_file()]:
        raise FileNotFoundError(
            f"Spark jars missing from {folder}: {', '.join(missing)}; run `{PREFETCH}` (make does it for you)"
        )
    return paths


def ensure_jars() -> list[Path]:
    """The pinned jars, fetched now when missing (the first Spark start of an installed provider)."""
    try:
        return jar_paths()
    except FileNotFoundError as missing:
        folder = jar_dir()
        log.warning("%s; fetching them once from Maven Central (an image build runs `%s`)", missing, PREFETCH)
        try:
            return fetch(folder)
        except (OSError, RuntimeError) as failed:
            raise ConfigError(
                f"Spark jars missing from {folder} and not fetched from Maven Central ({failed}); "
                f"run `{PREFETCH}` where the network allows it, or set {JARS_ENV} to a folder holding them"
            ) from failed


def fetch(directory: Path | None = None) -> list[Path]:
    """Resolve the pinned packages through spark-submit's Ivy and keep only our jars."""
    folder = directory or jar_dir()
    try:
        return jar_paths(folder)
    except FileNotFoundError:
        pass
    folder.mkdir(parents=True, exist_ok=True)
    coords = ",".join(f"{c}:{v}" for c, v in {**SPARK_PACKAGES, **S3A_PACKAGES}.items())
    ivy = folder.parent / "ivy"
    shutil.rmtree(ivy / "jars", ignore_errors=True)  # Ivy's retrieve folder: only this resolution's jars
    with tempfile.TemporaryDirectory() as tmp:
        noop = Path(tmp) / "noop.py"
        noop.write_text("")
        spark_submit = shutil.which("spark-submit", path=str(Path(sys.executable).parent)) or "spark-submit"
        cmd = [spark_submit, "--master", "local[1]", "--packages", coords, "--conf", f"spark.jars.ivy={ivy}"]
        cmd += ["--exclude-packages", ",".join(_S3A_EXCLUDED), "--conf", "spark.ui.enabled=false", str(noop)]
        result = subprocess.run(cmd, capture_output=True, text=True, env=spark_env())
    if result.returncode != 0:
        tail = "\n".join(result.stderr.splitlines()[-15:])
        raise RuntimeError(f"could not fetch Spark jars {coords}:\n{tail}")
    names = [jar_file_name(c, v) for c, v in SPARK_PACKAGES.items()]
    s3a = sorted(p.name for p in (ivy / "jars").glob("*.jar") if p.name.startswith(_S3A_KEPT))
    for name in names + s3a:
        shutil.copy2(ivy / "jars" / name, folder / f".{name}.tmp")
        os.replace(folder / f".{name}.tmp", folder / name)
    (folder / f".{S3A_LIST}.tmp").write_text("\n".join(s3a) + "\n")
    os.replace(folder / f".{S3A_LIST}.tmp", folder / S3A_LIST)
    return jar_paths(folder)


def spark_env() -> dict[str, str]:
    """Environment for spark-submit from a venv: its launcher script needs SPARK_HOME to find the
    pip-installed Spark, and executors must run this same interpreter."""
    require_spark("spark-submit")  # pyspark-client's `pyspark` has no spark-submit (decision 0042)
    import pyspark

    env = dict(os.environ)
    env.setdefault("SPARK_HOME", str(Path(pyspark.__file__).resolve().parent))
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return env


def main(argv: list[str]) -> int:
    if argv[:1] != ["fetch"]:
        print("usage: python -m placsp_provider.spark.jars fetch", file=sys.stderr)
        return 2
    if reason := missing_spark():  # one line, not a traceback (decision 0042)
        print(f"fetching the Spark jars needs Spark, but {reason}", file=sys.stderr)
        return 2
    for path in fetch():
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
