"""Where the lake's bytes live: a local folder, or an object store (`s3://bucket/prefix`).

A lake path is a `pathlib.Path` on local disk and an `S3LakePath` (a universal_pathlib path over
obstore, the Rust `object_store` crate that delta-rs uses too) on S3, so the code that walks the lake
(`lake.py`'s layout) is the same for both. What differs is said here, once:

- writing an object once: a local rename of a durable temp file, or an S3 PUT with `If-None-Match: *`
  (`put_new`): a page object is whole or absent, and a concurrent run never overwrites it;
- opening a Delta table (`delta_options`, `open_table`) and reading its files through Arrow's own
  filesystems (`arrow_filesystem`): never a Python filesystem Arrow's threads call back into
  (decision 0029);
- the scratch folder of downloads, which is always local (`scratch_dir`);
- listing a folder on S3: one request (`S3LakePath.iterdir`), where universal_pathlib makes three.

Credentials are never part of a lake URI or a path: obstore, delta-rs, Arrow and Spark's s3a all read
the standard `AWS_*` environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
`AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`), which the operators fill from an Airflow connection
(`hooks.lake.LakeHook`); none of them is ever logged or written (tests/s3). Code that must not touch
its process's environment (the dead-letter trigger: the triggerer runs every DAG's triggers in one
process) gives the same values for one block instead (`credentials`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from contextvars import ContextVar, copy_context
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, TypeGuard
from urllib.parse import urlsplit

from placsp_provider.errors import ConfigError

if TYPE_CHECKING:
    from upath import UPath

    LakePath: TypeAlias = Path | UPath
else:
    LakePath: TypeAlias = Any

OBJECT_STORE_SCHEMES = ("s3",)

# `AWS_*` values given in code (`credentials`), as sorted (name, value) pairs: empty outside such a block.
_GIVEN: ContextVar[tuple[tuple[str, str], ...]] = ContextVar("placsp_lake_credentials", default=())


def is_object_store_uri(value: str) -> bool:
    """True for `s3://...`; a ConfigError for any other URI scheme (gs://, abfss://, http://): only
    local paths and S3 (AWS or an S3-compatible store) are supported."""
    scheme = urlsplit(value).scheme.lower() if "://" in value else ""
    if not scheme:
        return False
    if scheme in OBJECT_STORE_SCHEMES:
        return True
    raise ConfigError(
        f"lake {value!r}: the {scheme}:// scheme is not supported; use a local path or s3://bucket/prefix "
        "(S3 or an S3-compatible store)"
    )


def lake_path(value: str) -> LakePath:
    """A path of the lake given as text (a manifest in XCom, a CLI argument): `s3://...` or local."""
    return object_store_lake(value) if is_object_store_uri(value) else Path(value).expanduser()


def object_store_lake(uri: str) -> LakePath:
    """The lake root `s3://bucket/prefix` as a path (no credentials in it: see the module docstring)."""
    parts = urlsplit(uri)
    if not parts.netloc or parts.query or parts.fragment or "@" in parts.netloc:
        raise ConfigError(
            f"lake {_redacted(uri)!r}: an S3 lake is s3://bucket/prefix, with no user, query or fragment "
            "(credentials come from the lake connection or the AWS_* environment)"
        )
    return _s3_path_class()(f"s3://{parts.netloc}/{parts.path.strip('/')}".rstrip("/"), protocol="s3")


def is_local(path: LakePath) -> TypeGuard[Path]:
    return isinstance(path, Path)


def local_lake(path: LakePath, what: str) -> Path:
    """`path` (the lake or a path in it) for a part that needs a local (or mounted) lake; a
    ConfigError naming the part on S3."""
    if is_local(path):
        return path
    raise ConfigError(
        f"lake path {uri(path)}: {what} needs a local (or mounted) lake; on an S3 lake it is not supported yet "
        '(docs/architecture.md, "Lakes on S3")'
    )


def uri(path: LakePath) -> str:
    """What delta-rs, Arrow and the lineage call the path: a POSIX path, or `s3://bucket/key`."""
    return str(path)


def put_new(path: LakePath, data: bytes) -> bool:
    """Write the object at `path` unless one is already there; True when this call wrote it. Whole or
    not at all, and never over another writer's object (S3: a conditional PUT). Local lakes land
    through `bronze.landing` (a durable temp file renamed), which this is the S3 half of."""
    import obstore
    from obstore.exceptions import AlreadyExistsError

    store, key = _store_and_key(path)
    try:
        obstore.put(store, key, data, mode="create")
    except AlreadyExistsError:
        return False
    return True


def read_object(object_uri: str) -> bytes:
    """The bytes of `s3://bucket/key` (a FileNotFoundError when there is none)."""
    import obstore

    parts = urlsplit(object_uri)
    _not_in_a_fork()
    try:
        return bytes(obstore.get(_s3_store(parts.netloc, _GIVEN.get()), parts.path.lstrip("/")).bytes())
    except FileNotFoundError:
        raise
    except Exception as err:  # obstore's errors: a transport or permission failure reads as an OSError
        if type(err).__name__ == "NotFoundError":
            raise FileNotFoundError(2, "no such object", object_uri) from err
        raise OSError(f"{type(err).__name__}: {str(err).splitlines()[0][:300] if str(err) else ''}") from err


@contextlib.contextmanager
def local_copy(path: LakePath) -> Iterator[Path]:
    """A local file holding the bytes of `path`: the file itself on a local lake, else a temp copy
    (removed at the end) for the readers that stream a file from disk (the page scanner)."""
    if is_local(path):
        yield path
        return
    with tempfile.NamedTemporaryFile(prefix="placsp-", suffix=f"-{path.name}") as tmp:
        tmp.write(read_object(uri(path)))
        tmp.flush()
        yield Path(tmp.name)


def delta_options(path: LakePath) -> dict[str, str]:
    """delta-rs storage options for a table at `path`: on S3, commits use conditional PUTs, so two
    writers never both commit the same version (no locking table needed); inside a `credentials`
    block, its values too (delta-rs reads the environment for the rest)."""
    if is_local(path):
        return {}
    _not_in_a_fork()  # every delta-rs call on S3 takes these options
    return {"conditional_put": "etag", **dict(_GIVEN.get())}


def open_table(path: LakePath, version: int | None = None) -> Any:
    """The `deltalake.DeltaTable` at `path`, as of `version` (None: the latest). Inside a
    `tables_kept_open` block, the latest of a table opened before in the block is the same object
    brought up to date."""
    from deltalake import DeltaTable

    if not is_local(path):
        _not_in_a_fork()
    if version is not None:
        return DeltaTable(uri(path), version=version, storage_options=delta_options(path) or None)
    kept, key = _KEPT_OPEN.get(), uri(path)
    if kept is not None and key in kept:
        kept[key].update_incremental()
        return kept[key]
    table = DeltaTable(key, storage_options=delta_options(path) or None)
    if kept is not None:
        kept[key] = table
    return table


def side_by_side(steps: Mapping[str, Callable[[], Any]]) -> dict[str, Any]:
    """The steps run at once, each in a thread of its own; their results by name.

    For steps that wait on the store: on S3 a table open or a MERGE waits on requests most of its time,
    and delta-rs lets go of the GIL while it runs, so side by side they take about as long as the
    longest one (decision 0039). The caller says the steps are independent (different tables). Every
    step ends before the first error is raised: a write that meets a conflict is retried from a
    settled lake (`ingest.retry`). Each thread runs in a copy of the caller's context, so the tables
    kept open (`tables_kept_open`) are shared.
    """
    if len(steps) <= 1:
        return {name: step() for name, step in steps.items()}
    with ThreadPoolExecutor(max_workers=len(steps), thread_name_prefix="placsp-lake") as pool:
        futures = {name: pool.submit(copy_context().run, step) for name, step in steps.items()}
        wait(futures.values())
    return {name: future.result() for name, future in futures.items()}


# Opening a table reads its log since the last checkpoint, twice (delta-rs 1.6), a request per commit
# file on S3; bringing an open table up to date reads only the commits since (two requests when there
# is none). An ingest opens the reconciliation and dead-letter tables before it writes them
# (decision 0039).
_KEPT_OPEN: ContextVar[dict[str, Any] | None] = ContextVar("_KEPT_OPEN", default=None)


@contextlib.contextmanager
def tables_kept_open() -> Iterator[None]:
    """Within the block (one ingest), `open_table` keeps each table it opens and hands out the same
    object again, up to date, rather than reading the table's log afresh. Threads started with a copy
    of the block's context share them; one object is never used by two threads at once here."""
    token = _KEPT_OPEN.set({}) if _KEPT_OPEN.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _KEPT_OPEN.reset(token)


def arrow_filesystem(table_uri: str) -> Any:
    """Arrow's own filesystem rooted at a Delta table (`table.table_uri`): local, or Arrow's C++ S3
    client configured from the `AWS_*` environment (an S3-compatible endpoint included)."""
    from urllib.parse import unquote

    import pyarrow.fs as pafs

    parts = urlsplit(table_uri)
    if parts.scheme in ("", "file"):
        return pafs.SubTreeFileSystem(unquote(parts.path), pafs.LocalFileSystem())
    root = f"{parts.netloc}/{unquote(parts.path).strip('/')}"
    return pafs.SubTreeFileSystem(root, _arrow_s3())


def arrow_location(location: str) -> tuple[Any, str]:
    """Arrow's filesystem and path for a file or folder given as text: a local path, or `s3://bucket/key`
    (what a Spark task is handed). Arrow writes an S3 object in one upload completed on close, so a
    file written this way is whole or absent, as a renamed local file is."""
    import pyarrow.fs as pafs

    if location.startswith("s3://"):
        parts = urlsplit(location)
        return _arrow_s3(), f"{parts.netloc}/{parts.path.lstrip('/')}"
    return pafs.LocalFileSystem(), location


def read_parquet(path: LakePath, schema: Any) -> Any:
    """The Parquet file or folder at `path` as one Arrow table of `schema`."""
    import pyarrow.parquet as pq

    filesystem, location = arrow_location(uri(path))
    return pq.read_table(location, schema=schema, filesystem=filesystem)


def remove_tree(path: LakePath) -> None:
    """Remove the folder (local) or every object under the prefix (S3) at `path`; none there is fine."""
    import shutil

    if is_local(path):
        shutil.rmtree(path, ignore_errors=True)
        return
    filesystem, location = arrow_location(uri(path))
    with contextlib.suppress(FileNotFoundError):
        filesystem.delete_dir(location)


def storage_problem(err: BaseException) -> str | None:
    """One line for a failure of the lake's object store (credentials refused, endpoint unreachable,
    no such bucket), as obstore, delta-rs or Arrow raise it; None for any other error. The text names
    the request's error and where to look, never a credential (none is in a URI or a path)."""
    text = str(err)
    from_store = type(err).__module__.split(".")[0] in ("obstore", "deltalake")
    if not from_store and not (isinstance(err, OSError) and ("AWS Error" in text or "s3://" in text)):
        return None
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")[:300]
    return (
        f"the lake's object store failed the request ({type(err).__name__}: {first}); check the lake's "
        "credentials (the AWS_* environment, or the connection placsp_lake in Airflow), its endpoint and bucket"
    )


@contextlib.contextmanager
def credentials(values: Mapping[str, str]) -> Iterator[None]:
    """Within this block, S3 reads and writes use `values` (`AWS_*` names, as
    `hooks.lake.credential_environment` gives them) over the process environment, name by name. The
    block covers this thread and what it starts with its context (`asyncio.to_thread`), not other
    threads: two triggers in one triggerer each keep their own lake's credentials, and the process's
    environment is never changed."""
    token = _GIVEN.set(tuple(sorted((name, str(value)) for name, value in values.items() if value)))
    try:
        yield
    finally:
        _GIVEN.reset(token)


def scratch_dir(lake: LakePath, *parts: str) -> Path:
    """A local folder for a run's temp files (downloads) of the lake: in the lake itself when local
    (the same filesystem, so landing is a rename), else under the machine's temp folder, named after
    the lake so two lakes never share one."""
    if isinstance(lake, Path):
        return lake.joinpath(*parts)
    base = Path(os.environ.get("PLACSP_SCRATCH") or tempfile.gettempdir()) / "placsp-scratch"
    return base.joinpath(hashlib.sha256(uri(lake).encode()).hexdigest()[:16], *parts)


# -- S3 ---------------------------------------------------------------------------------------------
def _store_and_key(path: LakePath) -> tuple[Any, str]:
    _not_in_a_fork()
    parts = urlsplit(uri(path))
    return _s3_store(parts.netloc, _GIVEN.get()), parts.path.lstrip("/")


@lru_cache(maxsize=8)
def _s3_store(bucket: str, given: tuple[tuple[str, str], ...] = ()) -> Any:
    from obstore.store import S3Store

    # Configured from the AWS_* environment (obstore's default), as delta-rs is: an http:// endpoint
    # (an S3-compatible store on premises) must be allowed with AWS_ALLOW_HTTP=true. Values given in
    # code (`credentials`) are applied over it.
    return S3Store(bucket, **_obstore_options(given))


@lru_cache(maxsize=8)
def _filesystem(given: tuple[tuple[str, str], ...] = ()) -> Any:
    from obstore.fsspec import FsspecStore

    return FsspecStore("s3", **_obstore_options(given))


# obstore's names for the `AWS_*` variables `credentials` may give (its S3Config; AWS_ALLOW_HTTP is a
# client option).
_OBSTORE_CONFIG = {
    "AWS_ACCESS_KEY_ID": "access_key_id",
    "AWS_SECRET_ACCESS_KEY": "secret_access_key",
    "AWS_SESSION_TOKEN": "session_token",
    "AWS_REGION": "region",
    "AWS_ENDPOINT_URL": "endpoint",
}


def _obstore_options(given: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    values = dict(given)
    options: dict[str, Any] = {}
    if config := {key: values[name] for name, key in _OBSTORE_CONFIG.items() if name in values}:
        options["config"] = config
    if values.get("AWS_ALLOW_HTTP", "").lower() == "true":
        options["client_options"] = {"allow_http": True}
    return options


@lru_cache(maxsize=1)
def _s3_path_class() -> Any:
    from upath.implementations.cloud import S3Path

    # universal_pathlib 0.3 deprecates `_protocol_dispatch = False` (for a `ProxyUPath` API that
    # has no filesystem hook yet) and says so on every path made: the one way to give S3 paths
    # obstore's filesystem without registering it for every `s3://` path of the process (Airflow's
    # own ObjectStoragePath included).
    warnings.filterwarnings("ignore", message=r"S3LakePath\._protocol_dispatch", category=DeprecationWarning)

    class S3LakePath(S3Path):
        """An `s3://` path whose filesystem is obstore's (credentials from the environment)."""

        _protocol_dispatch = False

        @classmethod
        def _fs_factory(cls, urlpath: str, protocol: str, storage_options: Any) -> Any:
            del urlpath, protocol, storage_options
            _not_in_a_fork()
            return _filesystem(_GIVEN.get())

        # Whole objects (manifests, summaries, the volume model) are read with one GET. fsspec's
        # buffered reader, failing to open a missing object, also prints an AttributeError from its
        # `__del__` to stderr; this raises a plain FileNotFoundError and prints nothing.
        def read_bytes(self) -> bytes:
            return read_object(str(self))

        def read_text(self, encoding: str | None = None, errors: str | None = None, newline: str | None = None) -> str:
            import io

            data = io.BytesIO(self.read_bytes())
            return io.TextIOWrapper(data, encoding=encoding or "utf-8", errors=errors, newline=newline).read()

        def iterdir(self) -> Iterator[Any]:
            """The folder's children from one listing. upath asks `isdir` first (a HEAD and a second
            listing): three requests for each table-existence check of an ingest (decision 0039)."""
            import obstore

            store, key = _store_and_key(self)
            prefix = key.rstrip("/") + "/"
            listed = obstore.list_with_delimiter(store, prefix=prefix)
            names = [p.rstrip("/").rpartition("/")[2] for p in listed["common_prefixes"]]
            names += [o["path"].rpartition("/")[2] for o in listed["objects"] if o["path"] != prefix]
            if not names:  # no such folder, a file, or an empty folder marker: upath's own answer
                yield from super().iterdir()
                return
            for name in names:
                yield self / name

    return S3LakePath


# Whether this process has used an S3 client (obstore's store, Arrow's AWS SDK, delta-rs on S3):
# their runtimes are the process's own, and a fork of it cannot use them.
_S3_USED = False
_FORKED = False


def _after_fork_in_child() -> None:
    global _FORKED
    _FORKED = _FORKED or _S3_USED


# Airflow's OpenLineage listener runs its hooks in a fork of the task. There obstore's stores refuse
# to work ("This class is not fork-safe") and a new one waits forever on the parent's runtime, so the
# operators read the lake for their lineage before (`get_openlineage_facets_on_complete`), and a read
# in a fork fails at once instead of hanging (tests/s3). A fork of a process that never touched S3
# is a fresh start: Airflow's processes import this module (the PLACSP view's plugin) long before
# they fork a task, and that task must read the lake.
os.register_at_fork(after_in_child=_after_fork_in_child)


def _not_in_a_fork() -> None:
    """Called before every use of an S3 client: refuses in a fork of a process that used one."""
    global _S3_USED
    if _FORKED:
        raise RuntimeError("the S3 lake cannot be read in a forked process (its client's runtime is the parent's)")
    _S3_USED = True


def _arrow_s3() -> Any:
    import pyarrow.fs as pafs

    _not_in_a_fork()
    given = dict(_GIVEN.get())

    def setting(name: str) -> str | None:
        return given.get(name) or os.environ.get(name)

    endpoint = setting("AWS_ENDPOINT_URL")
    options: dict[str, Any] = {"region": setting("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")}
    if endpoint:
        parts = urlsplit(endpoint)
        options.update(endpoint_override=parts.netloc, scheme=parts.scheme or "https", force_virtual_addressing=False)
    if "AWS_ACCESS_KEY_ID" in given:  # else Arrow's AWS SDK finds them (the environment, an instance role)
        options.update(
            access_key=given["AWS_ACCESS_KEY_ID"],
            secret_key=given.get("AWS_SECRET_ACCESS_KEY"),
            session_token=given.get("AWS_SESSION_TOKEN"),
        )
    return pafs.S3FileSystem(**{k: v for k, v in options.items() if v is not None})


def _redacted(value: str) -> str:
    parts = urlsplit(value)
    return f"{parts.scheme}://{parts.hostname or ''}{parts.path}"
