"""The change of data files whose only change is their set of deleted positions.

Iceberg table spec, "Position Delete Files" and "Deletion Vectors": a merge-on-read delete
leaves the data file in place and records the positions (0-based row numbers in the file)
of the rows it deletes. A data file live at two snapshots has, at each, its rows minus the
positions deleted there; so its change is exactly the rows at the positions deleted at the
new snapshot and not at the old one (weight -1), plus the rows at positions deleted at the
old snapshot and no longer at the new one (+1; no writer does that, but it keeps the
result exact whatever the delete files). Only the delete files and the data file's row
groups that hold those positions are read, never the file's other rows.

Delete files are read by pyiceberg (Parquet and ORC position deletes, Puffin deletion
vectors); the data file's rows are projected by field id onto the snapshot's schema as
pyiceberg's ``ArrowScan`` does (renamed columns keep their values, added ones read as null
or as their identity partition value).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from contextlib import ExitStack
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import (
    _get_column_projection_values,
    _read_deletes,
    _to_requested_schema,
    pyarrow_to_schema,
    schema_to_pyarrow,
)
from pyiceberg.manifest import DataFile, FileFormat
from pyiceberg.schema import Schema, prune_columns
from pyiceberg.table import DOWNCAST_NS_TIMESTAMP_TO_US_ON_WRITE, FileScanTask, TableProperties
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.types import ListType, MapType
from pyiceberg.utils.concurrent import ExecutorFactory
from pyiceberg.utils.config import Config

from ivm import WEIGHT
from ivm.arrow_take import take_rows
from lakehouse.sources.column_cache import (
    ColumnCache,
    DataFileKey,
    FileLayout,
    FileProjection,
    ParquetOpener,
)

TaskPair = tuple[FileScanTask, FileScanTask]
"""One data file's scan task at the old snapshot and at the new one."""


def readable(before: FileScanTask, after: FileScanTask) -> bool:
    """Whether the data file of ``before`` and ``after`` can be read by position here."""
    return (before.file.file_path == after.file.file_path
            and after.file.file_format == FileFormat.PARQUET)


def position_changes(metadata: TableMetadata, io: FileIO, pairs: Iterable[TaskPair],
                     schema: Schema, cache: ColumnCache | None = None) -> pa.Table:
    """Rows that a change of deleted positions removed (-1) or restored (+1).

    For data files live at both snapshots.

    Args:
        metadata: The table's metadata (name mapping, partition specs, format version).
        io: The table's FileIO.
        pairs: Per data file, its scan task at the old and at the new snapshot (pyiceberg
            ``plan_files``, which attaches the delete files that apply to it there). The
            snapshots must have no equality deletes; the file must pass :func:`readable`.
        schema: The Iceberg schema to project rows onto.
        cache: Where decoded row groups are kept between ticks (None: nowhere).

    Returns:
        ``schema``'s columns (Arrow types of ``schema_to_pyarrow``) plus ``_weight``
        (int64, -1 or +1), not consolidated: equal rows of several positions repeat.
    """
    changed = [(b, a) for b, a in pairs if _delete_keys(b) != _delete_keys(a)]
    deletes = read_deletes(io, [f for b, a in changed for f in (*b.delete_files, *a.delete_files)],
                           cache)
    target = schema_to_pyarrow(schema, include_field_ids=False)

    def rows(pair: TaskPair) -> pa.Table:
        before, after = pair
        path = after.file.file_path
        gone, were = (deleted_positions(deletes, t.delete_files, path, cache)
                      for t in (after, before))
        removed, restored = sorted_difference(gone, were), sorted_difference(were, gone)
        found = rows_at(metadata, io, after.file, np.concatenate([removed, restored]), schema,
                        cache)
        weights = np.repeat(np.array([-1, 1], np.int64), [len(removed), len(restored)])
        return found.cast(target).append_column(WEIGHT, pa.array(weights, pa.int64()))

    parts = list(ExecutorFactory.get_or_create().map(rows, changed))
    empty = target.empty_table().append_column(WEIGHT, pa.array([], pa.int64()))
    return pa.concat_tables([empty, *parts])


DeleteFiles = dict[str, dict[str, pa.ChunkedArray]]
"""Position delete files read: by delete file path, the deleted positions of each data file."""


def read_deletes(io: FileIO, files: Iterable[DataFile],
                 cache: ColumnCache | None = None) -> DeleteFiles:
    """Read position delete files (Parquet, ORC, Puffin deletion vectors), each once.

    Args:
        io: The table's FileIO.
        files: Delete files of scan tasks (repeats are read once).
        cache: Where decoded delete files are kept between ticks (None: nowhere); a
            delete file never changes, and a table's accumulate until compaction.

    Returns:
        By delete file path, the positions it deletes in each data file.
    """
    unique = {f.file_path: f for f in files}

    def read(file: DataFile) -> dict[str, pa.ChunkedArray]:
        if cache is None:
            return _read_deletes(io, file)
        return cache.deleted_positions((file.file_path, file.file_size_in_bytes),
                                       lambda: _read_deletes(io, file))
    executor = ExecutorFactory.get_or_create()
    return dict(zip(unique, executor.map(read, unique.values()), strict=True))


def deleted_positions(deletes: DeleteFiles, files: Iterable[DataFile], path: str,
                      cache: ColumnCache | None = None) -> np.ndarray:
    """The positions of data file ``path`` that the delete ``files`` delete.

    Args:
        deletes: From :func:`read_deletes`, holding every one of ``files``.
        files: The delete files that apply to the data file (a scan task's).
        path: The data file's path.
        cache: Where the union is kept per set of delete files (None: computed each time).

    Returns:
        Sorted, unique positions (int64); not to be changed.
    """
    applying = [f for f in files if path in deletes[f.file_path]]
    if not applying:
        return np.zeros(0, np.int64)

    def merge() -> np.ndarray:
        arrays = [deletes[f.file_path][path].to_numpy() for f in applying]
        return np.unique(np.concatenate(arrays)).astype(np.int64)

    if cache is None:
        return merge()
    return cache.merged_deletes(path, frozenset((f.file_path, f.file_size_in_bytes)
                                                for f in applying), merge)


def sorted_difference(values: np.ndarray, removed: np.ndarray) -> np.ndarray:
    """The values that ``removed`` does not hold (``np.setdiff1d`` without the sorts).

    Args:
        values: Positions, in any order.
        removed: Sorted positions.

    Returns:
        ``values`` without those in ``removed``, in their order: a binary search of each.
    """
    if not len(values) or not len(removed):
        return values
    at = np.minimum(np.searchsorted(removed, values), len(removed) - 1)
    return values[removed[at] != values]


def rows_at(metadata: TableMetadata, io: FileIO, data_file: DataFile,
            positions: np.ndarray | None, schema: Schema,
            cache: ColumnCache | None = None) -> pa.Table:
    """The rows of a Parquet data file at ``positions``, projected onto ``schema``.

    Reads only the row groups that hold a position, and only the columns ``schema``
    needs. With a cache, the file's footer is read once and a file whose columns are
    all kept is not opened.

    Args:
        metadata: The table's metadata (name mapping, partition specs, format version).
        io: The table's FileIO.
        data_file: The data file (Parquet).
        positions: 0-based row positions in the file (int64), in the order wanted; None
            for every row of the file (its deleted ones too).
        schema: The Iceberg schema to project onto (by field id).
        cache: Where the file's layout and its row groups' decoded columns are looked up
            and kept (None: they are read from the file each time).

    Returns:
        One row per position, in order, with ``schema``'s columns (Arrow types as
        pyiceberg's ``_to_requested_schema`` gives them).

    Raises:
        IndexError: A position is past the file's last row.
    """
    downcast = _downcast(metadata)
    file_key = (data_file.file_path, data_file.file_size_in_bytes)
    with _LazyParquet(io, data_file.file_path) as parquet:
        layout = file_layout(metadata, file_key, parquet, cache, downcast)
        sizes = np.array(layout.row_group_rows, np.int64)
        if positions is None:
            groups, local = np.arange(len(sizes)), None
        else:
            groups, local = row_group_offsets(positions, sizes)
        projection = _file_projection(layout, schema)
        projected = projection.file_columns
        # with no column of ``schema`` in the file, one of its columns still counts the rows
        names = [c.name for c in projected.columns] or layout.arrow_schema.names[:1]
        if cache is None:
            table = parquet().read_row_groups(groups.tolist(), columns=names)
        else:
            table = cache.read_row_groups(file_key, groups.tolist(), names,
                                          layout.arrow_schema, parquet)
    rows = table if local is None else take_rows(table, local)
    if not schema.fields:  # pyiceberg's projection would drop the row count with the columns
        return rows.select([])
    if projection.unchanged is not None and rows.schema.equals(projection.unchanged):
        # what pyiceberg's conversion returns for these columns (their Parquet field ids
        # dropped with the metadata)
        return pa.Table.from_batches(rows.to_batches(), projection.unchanged)
    missing = _get_column_projection_values(
        data_file, schema, metadata.schema(), metadata.specs().get(data_file.spec_id),
        layout.file_schema.field_ids)
    batches = [_to_requested_schema(schema, projected, batch, downcast_ns_timestamp_to_us=downcast,
                                    projected_missing_fields=missing,
                                    allow_timestamp_tz_mismatch=True)
               for batch in rows.to_batches()]
    if not batches:
        return schema_to_pyarrow(schema, include_field_ids=False).empty_table()
    if not missing and all(f.field_type.is_primitive for f in schema.fields) \
            and all(b.schema.equals(rows.schema) for b in batches):
        # (a list or map is rebuilt from its offsets: a NULL one becomes empty)
        layout.projections[schema_signature(schema)] = replace(projection,
                                                               unchanged=batches[0].schema)
    return pa.Table.from_batches(batches)


def schema_signature(schema: Schema) -> tuple[tuple[int, str, str, bool, str | None], ...]:
    """What a read's result depends on of a requested schema.

    Each field's id, name, type, whether it is required, and its doc (in the field's
    metadata).
    """
    return tuple((f.field_id, f.name, str(f.field_type), f.required, f.doc)
                 for f in schema.fields)


def _file_projection(layout: FileLayout, schema: Schema) -> FileProjection:
    """How ``schema`` is read from the file of ``layout``: derived once, kept with it."""
    key = schema_signature(schema)
    projection = layout.projections.get(key)
    if projection is None:
        projection = layout.projections[key] = FileProjection(prune_columns(
            layout.file_schema, _projected_ids(schema), select_full_types=False))
    return projection


def file_layout(metadata: TableMetadata, file: DataFileKey, parquet: ParquetOpener,
                cache: ColumnCache | None, downcast: bool) -> FileLayout:
    """A data file's row group sizes, Arrow schema and Iceberg schema, footer read once.

    Args:
        metadata: The table's metadata (name mapping, format version).
        file: The data file's path and size.
        parquet: Opens the data file; not called when the cache keeps its layout.
        cache: Where the layout is kept (None: the footer is read each time).
        downcast: Whether nanosecond timestamps read as microseconds (pyiceberg's setting
            for the table).

    Returns:
        The layout. Its Iceberg schema is the file's columns by field id, or by the
        table's name mapping for a file written without ids (pyiceberg's
        ``pyarrow_to_schema``).
    """
    def read() -> FileLayout:
        footer = parquet()
        file_schema = pyarrow_to_schema(footer.schema_arrow, metadata.name_mapping(),
                                        downcast_ns_timestamp_to_us=downcast,
                                        format_version=metadata.format_version)
        return FileLayout(tuple(footer.metadata.row_group(i).num_rows
                                for i in range(footer.num_row_groups)),
                          footer.schema_arrow, file_schema)

    if cache is None:
        return read()
    derived_with = (downcast, metadata.format_version,
                    metadata.properties.get(TableProperties.DEFAULT_NAME_MAPPING))
    return cache.file_layout(file, derived_with, read)


def _downcast(metadata: TableMetadata) -> bool:
    """Whether nanosecond timestamps read as microseconds (pyiceberg's rule for a scan)."""
    downcast = _downcast_setting()
    return downcast if downcast is not None else metadata.format_version <= 2


@functools.cache
def _downcast_setting() -> bool | None:
    """The ``downcast-ns-timestamp-to-us-on-write`` setting of pyiceberg, read once per process.

    As pyiceberg reads ``max-workers``: reading its configuration costs a pass over the
    environment and the ``.pyiceberg.yaml`` file, and rows are read per data file. Unlike
    pyiceberg's scans, a change of the setting after the first read is not seen until
    ``_downcast_setting.cache_clear()``.
    """
    return Config().get_bool(DOWNCAST_NS_TIMESTAMP_TO_US_ON_WRITE)


class _LazyParquet:
    """A data file opened on first call and closed on exit: kept columns need no open."""

    def __init__(self, io: FileIO, path: str):
        self._io, self._path = io, path
        self._stack = ExitStack()
        self._file: pq.ParquetFile | None = None

    def __call__(self) -> pq.ParquetFile:
        if self._file is None:
            stream = self._stack.enter_context(self._io.new_input(self._path).open())
            self._file = pq.ParquetFile(stream)
        return self._file

    def __enter__(self) -> _LazyParquet:
        return self

    def __exit__(self, *exc: Any) -> bool | None:
        return self._stack.__exit__(*exc)


def row_group_offsets(positions: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which row groups hold ``positions``, and each position's row in those groups read.

    Args:
        positions: 0-based row positions in the file.
        sizes: Rows in each row group of the file, in file order.

    Returns:
        (the row groups to read, ascending; each position's offset in the concatenation
        of those row groups).

    Raises:
        IndexError: A position is negative or past the file's last row.
    """
    firsts = np.concatenate([[0], np.cumsum(sizes)])
    if len(positions) and (positions.min() < 0 or positions.max() >= firsts[-1]):
        raise IndexError(f"row positions outside 0..{firsts[-1] - 1}")
    group = np.searchsorted(firsts, positions, side="right") - 1
    groups = np.unique(group)
    starts = np.concatenate([[0], np.cumsum(sizes[groups])])[:-1]
    return groups, positions - firsts[group] + starts[np.searchsorted(groups, group)]


def _delete_keys(task: FileScanTask) -> set[tuple[str, int | None]]:
    """The delete files of a task (a deletion vector is a blob of a Puffin file)."""
    return {(f.file_path, getattr(f, "content_offset", None)) for f in task.delete_files}


def _projected_ids(schema: Schema) -> set[int]:
    """Field ids to read, as ``ArrowScan`` selects them (maps and lists come whole)."""
    return {i for i in schema.field_ids
            if not isinstance(schema.find_type(i), (MapType, ListType))}
