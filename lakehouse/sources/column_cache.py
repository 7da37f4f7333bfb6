"""Decoded columns of source data files, kept in memory between ticks.

An Iceberg data file never changes once written (table spec, "Overview": files are
immutable; a delete writes a delete file beside it). A small delete in a large file
still costs decoding every column the view reads in each row group holding a deleted
row, and a partner read decodes the key columns of every file it cannot prune; with
128 MB row groups, a scattered delete decodes nearly the whole table. Keeping those
decoded columns in memory makes the next tick that needs them pay only for the rows
it takes: the cost then follows the change, as long as the columns fit the budget.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq
from cachetools import LRUCache

from lakehouse.sources.key_index import KeyIndex

DataFileKey = tuple[str, int]
"""A data file's path and size in bytes (a path rewritten in place would change size)."""

ColumnKey = tuple[DataFileKey, int, str]
"""A data file, a row group's index in it, a top-level column's name in the file."""

IndexKey = tuple[DataFileKey, str, int]
"""A data file, ``"key index"``, the indexed column's Iceberg field id."""

DeletesKey = tuple[DataFileKey, str]
"""A position delete file (path and size), ``"positions"``."""


@dataclass(frozen=True)
class DeletedPositions:
    """The positions a position delete file deletes, by data file path."""

    by_file: dict[str, pa.ChunkedArray]

    @property
    def nbytes(self) -> int:
        """Bytes of the position arrays."""
        return sum(positions.nbytes for positions in self.by_file.values())


class ColumnCache:
    """Decoded Parquet columns by data file, row group and column; least recently used out.

    Safe to share between threads (a tick reads data files in parallel) and between the
    readers of several sources: the budget is for the whole process.

    Args:
        max_bytes: Most bytes of Arrow buffers kept (``pa.ChunkedArray.nbytes``); 0 keeps
            nothing. A column larger than the budget is read but not kept.
    """

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._columns: LRUCache[ColumnKey | IndexKey | DeletesKey,
                                pa.ChunkedArray | KeyIndex | DeletedPositions] = LRUCache(
            maxsize=max(max_bytes, 1), getsizeof=lambda kept: max(kept.nbytes, 1))
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def size_bytes(self) -> int:
        """Bytes of the columns kept now."""
        return int(self._columns.currsize) if self.max_bytes else 0

    def read_row_groups(self, parquet: pq.ParquetFile, file: DataFileKey, groups: Sequence[int],
                        columns: Sequence[str]) -> pa.Table:
        """Row groups ``groups`` of a data file, only ``columns``, as ``read_row_groups``.

        Args:
            parquet: The open data file.
            file: Its path and size: with the row group and column, what the cache keys on.
            groups: Row group indexes, in the order wanted.
            columns: Top-level column names in the file.

        Returns:
            The row groups' rows, concatenated in order, with ``columns`` in that order.
        """
        if not self.max_bytes:
            return parquet.read_row_groups(list(groups), columns=list(columns))
        parts = [self._row_group(parquet, file, group, columns) for group in groups]
        if not parts:
            return parquet.schema_arrow.empty_table().select(list(columns))
        return pa.concat_tables(parts)

    def key_index(self, file: DataFileKey, field_id: int,
                  column: Callable[[], pa.ChunkedArray]) -> KeyIndex | None:
        """The sorted index of a data file's key column, built once and kept.

        Args:
            file: The data file's path and size.
            field_id: The key column's Iceberg field id.
            column: Reads the whole column (its values at every position of the file),
                called only when the index is not kept.

        Returns:
            The index; None when the cache keeps nothing (building one for a single
            lookup costs more than comparing each value once).
        """
        if not self.max_bytes:
            return None
        key: IndexKey = (file, "key index", field_id)
        with self._lock:
            found = self._columns.get(key)
        if isinstance(found, KeyIndex):
            return found
        index = KeyIndex.build(column())
        if index.nbytes <= self.max_bytes:
            with self._lock:
                self._columns[key] = index
        return index

    def deleted_positions(self, file: DataFileKey,
                          read: Callable[[], dict[str, pa.ChunkedArray]]
                          ) -> dict[str, pa.ChunkedArray]:
        """The positions a position delete file deletes, by data file; read once and kept.

        Args:
            file: The delete file's path and size.
            read: Reads it (pyiceberg's ``_read_deletes``), called when it is not kept.

        Returns:
            By data file path, the deleted positions (int64); shared, not to be changed.
        """
        key: DeletesKey = (file, "positions")
        with self._lock:
            found = self._columns.get(key)
        if isinstance(found, DeletedPositions):
            return found.by_file
        kept = DeletedPositions(read())
        if self.max_bytes and kept.nbytes <= self.max_bytes:
            with self._lock:
                self._columns[key] = kept
        return kept.by_file

    def _row_group(self, parquet: pq.ParquetFile, file: DataFileKey, group: int,
                   columns: Sequence[str]) -> pa.Table:
        """One row group's ``columns``: those kept, the others read (and kept if they fit)."""
        with self._lock:
            found = {name: self._columns.get((file, group, name)) for name in columns}
            missing = [name for name, column in found.items() if column is None]
            self.hits += len(columns) - len(missing)
            self.misses += len(missing)
        if missing:
            read = parquet.read_row_group(group, columns=missing)
            with self._lock:
                for name in missing:
                    column = found[name] = read.column(name)
                    if column.nbytes <= self.max_bytes:
                        self._columns[(file, group, name)] = column
        schema = pa.schema([parquet.schema_arrow.field(name) for name in columns])
        return pa.Table.from_arrays([found[name] for name in columns], schema=schema)
