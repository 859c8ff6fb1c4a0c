"""Reading the lake's Delta tables with pyarrow and DuckDB, whichever engine wrote their files.

Spark writes strings as Parquet strings; delta-rs records `string_view` in each file's Arrow schema,
nested ones included. A table then holds both kinds, and pyarrow 26 refuses to compare the two ("no
kernel matching input types (string, string_view)", from a row filter or a file's statistics). So:

- a pyarrow filter on a string column compares it cast to `string` (`text_equals`, `text_in`): no
  statistics pruning inside a file, which the Delta log's own file pruning makes up for;
- a DuckDB scan gets a dataset whose schema says `string_view` for every string (`with_string_views`):
  DuckDB then reads and filters both kinds (tests/spark/test_delta_rs_ingest.py).

Every reader opens a table's files with `table_files`. Nothing here imports pyarrow at module level:
the sensors import this.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def text_equals(column: str, value: str) -> Any:
    """`column == value` for a string column, whatever the file's string type."""
    import pyarrow as pa
    import pyarrow.dataset as pads

    return pads.field(column).cast(pa.string()) == value


def text_in(column: str, values: Iterable[str]) -> Any:
    """`column IN values` for a string column, whatever the file's string type."""
    import pyarrow as pa
    import pyarrow.dataset as pads

    return pads.field(column).cast(pa.string()).isin(pa.array(list(values), pa.string()))


def with_string_views(schema: Any) -> Any:
    """`schema` with every string, at any depth (lists, structs), as `string_view`."""
    import pyarrow as pa

    def view(t: pa.DataType) -> pa.DataType:
        if t == pa.string():
            return pa.string_view()
        if pa.types.is_list(t):
            return pa.list_(t.value_field.with_type(view(t.value_type)))
        if pa.types.is_struct(t):
            return pa.struct([f.with_type(view(f.type)) for f in t])
        return t

    return pa.schema([f.with_type(view(f.type)) for f in schema], metadata=schema.metadata)


def table_files(table: Any, pruning: list[tuple[str, str, Any]] | None = None, schema: Any = None) -> Any:
    """The current files of a `deltalake.DeltaTable` as a pyarrow dataset (pruned by the Delta log's
    partition values when `pruning` is given, e.g. `[("dataset", "=", key)]`), read through Arrow's
    own filesystem rooted at the table (local, or Arrow's S3 client: `lake_storage.arrow_filesystem`):
    deltalake's default one, a Python filesystem Arrow's I/O threads call back into, crashes or hangs
    processes at interpreter exit (decision 0029)."""
    from placsp_provider.lake_storage import arrow_filesystem

    root = arrow_filesystem(table.table_uri)
    return table.to_pyarrow_dataset(filesystem=root, file_pruning_predicate=pruning or None, schema=schema)


def data_files(path: Any) -> int:
    """Files of a table (a lake path, local or S3) outside its `_delta_log`, in use or not (Hadoop's
    hidden `.crc` twins aside): what table maintenance counts before and after a VACUUM."""
    import pyarrow.fs as pafs

    from placsp_provider.lake_storage import arrow_location, uri

    filesystem, root = arrow_location(uri(path))
    try:
        found = filesystem.get_file_info(pafs.FileSelector(root, recursive=True))
    except FileNotFoundError:
        return 0
    prefix = root.rstrip("/") + "/"
    count = 0
    for info in found:
        parts = info.path[len(prefix) :].split("/")
        if info.type == pafs.FileType.File and "_delta_log" not in parts and not parts[-1].startswith((".", "_")):
            count += 1
    return count


def read_table(path: Any, columns: list[str] | None = None) -> Any:
    """The current rows of the Delta table at `path` (a lake path, local or S3) as one Arrow table,
    through `table_files` (never deltalake's `to_pyarrow_table`, which crashes processes at exit on S3)."""
    from placsp_provider.lake_storage import open_table

    return table_files(open_table(path)).to_table(columns=columns)


def table_state(path: Any) -> tuple[int, int] | None:
    """(version, rows) of the Delta table at `path` as it is now; None when there is no table. Rows
    from the log's per-file statistics (no data file read), counted from the files when a file has none."""
    import pyarrow as pa
    from deltalake.exceptions import TableNotFoundError

    from placsp_provider.lake_storage import open_table

    try:
        table = open_table(path)
    except TableNotFoundError:
        return None
    records = pa.table(table.get_add_actions(flatten=True)).column("num_records")
    rows = table_files(table).count_rows() if records.null_count else int(pa.compute.sum(records).as_py() or 0)
    return table.version(), rows
