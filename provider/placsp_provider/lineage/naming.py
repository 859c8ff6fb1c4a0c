"""Dataset names shared by the Airflow side and the OpenLineage Spark listener.

Both sides must name a dataset identically or a catalogue shows two nodes where there is one. The
Spark listener (openlineage-spark 1.53, measured with spark-submit on local disk) names a local file
or a Delta table by namespace `file` and the absolute path, without a trailing slash:
`file` + `/srv/lake/silver/entries`; an S3 lake's by `s3://<bucket>` and the key. The Silver
operator hands Spark the resolved lake path, so local names here resolve symlinks as well. The PLACSP
feed is named after its URL (`placsp_feed`: OpenLineage has no convention for plain HTTP sources).

Pure Python: no Airflow, no OpenLineage, no Spark.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from placsp_provider.lake import resolve_lake, table_path
from placsp_provider.lake_storage import LakePath

FILE_NAMESPACE = "file"


@dataclass(frozen=True)
class DatasetName:
    """An OpenLineage dataset identity: (namespace, name)."""

    namespace: str
    name: str


def storage_path(path: str | LakePath) -> DatasetName:
    """A file or directory of the lake, named as the Spark listener names it: on local (or mounted)
    disk namespace `file` and the absolute path; on S3 namespace `s3://<bucket>` and the key
    (OpenLineage's naming spec). Never credentials: a lake URI holds none (lake_storage)."""
    text = str(path)
    parts = urlsplit(text) if "://" in text else None
    if parts is not None and parts.scheme == "s3":
        return DatasetName(f"s3://{parts.netloc}", parts.path.strip("/") or "/")
    text = str(Path(text).expanduser().resolve())
    return DatasetName(FILE_NAMESPACE, text.rstrip("/") or "/")


def lake_table(lake: str | LakePath, table: str) -> DatasetName:
    """A Delta table of the lake: `silver/<table>`, `dead_letters` or `reconciliation` under the lake root."""
    return storage_path(table_path(resolve_lake(lake), table))


def bronze_file(lake: str | LakePath, relative: str) -> DatasetName:
    """A Bronze page (or manifest) by its lake-relative path, as manifests and tables store it."""
    return storage_path(resolve_lake(lake) / relative)


def placsp_feed(base_url: str, folder: str) -> DatasetName:
    """A PLACSP dataset's feed: `<scheme>://<host>[:<port>]` + `<base path>/<folder>` (e.g. `sindicacion_643`),
    which holds the head feed, every older page and the archives; never user info or a query string."""
    parts = urlsplit(base_url)
    if not parts.scheme or not parts.hostname:
        raise ValueError(f"the PLACSP base URL must be absolute (scheme and host); got {base_url!r}")
    authority = parts.hostname + (f":{parts.port}" if parts.port else "")
    path = parts.path.rstrip("/") + "/" + folder.strip("/")
    return DatasetName(f"{parts.scheme}://{authority}", path)
