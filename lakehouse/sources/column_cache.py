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
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from cachetools import LRUCache
from pyiceberg.schema import Schema

from lakehouse.sources.key_index import KeyIndex

DataFileKey = tuple[str, int]
"""A data file's path and size in bytes (a path rewritten in place would change size)."""

ColumnKey = tuple[DataFileKey, int, str]
"""A data file, a row group's index in it, a top-level column's name in the file."""

IndexKey = tuple[DataFileKey, str, int]
"""A data file, ``"key index"``, the indexed column's Iceberg field id."""

DeletesKey = tuple[DataFileKey, str]
"""A position delete file (path and size), ``"positions"``."""

MergedKey = tuple[str, str, frozenset[DataFileKey]]
"""A data file's path, ``"merged deletes"``, the delete files (path and size) merged."""

LayoutKey = tuple[DataFileKey, str, Hashable]
"""A data file, ``"layout"``, what its Iceberg schema was derived with (see
:meth:`ColumnCache.file_layout`)."""

ParquetOpener = Callable[[], pq.ParquetFile]
"""Opens a data file (or returns it, opened before): called only when a column or the
footer layout asked for is not kept."""

KEY_ENTRY_BYTES = 160
"""Counted per delete file named in a :class:`MergedDeletes` entry's key (a path string, a
size and the tuple and set slot holding them), besides the path's characters."""


@dataclass(frozen=True)
class FileLayout:
    """What reading a data file's row groups needs of its Parquet footer.

    Attributes:
        row_group_rows: Rows of each row group, in file order.
        arrow_schema: The file's Arrow schema (``ParquetFile.schema_arrow``).
        file_schema: The file's columns as Iceberg fields (pyiceberg's ``pyarrow_to_schema``).
        projections: How the file's columns are read for each requested schema seen, by
            its signature (:func:`lakehouse.sources.iceberg_positions.schema_signature`):
            kept with the layout, so that a file read at every tick derives them once.
            The only part that changes (entries are added; a lost race adds one twice).
    """

    row_group_rows: tuple[int, ...]
    arrow_schema: pa.Schema
    file_schema: Schema
    projections: dict[Hashable, FileProjection] = field(
        default_factory=dict, compare=False, repr=False)

    @property
    def nbytes(self) -> int:
        """An estimate of the bytes kept: 1.5 KiB per field, eight per row group.

        Measured: pyiceberg's field objects dominate. Counted when the layout is kept,
        before any projection: each adds a pruned copy of the fields it reads (a view
        reads a source in a few projections).
        """
        return 2048 + 1536 * len(self.file_schema.field_ids) + 8 * len(self.row_group_rows)


@dataclass(frozen=True)
class FileProjection:
    """How one requested schema is read from one data file.

    Attributes:
        file_columns: The file's fields the schema reads, by field id (pyiceberg's
            ``prune_columns`` of the file's schema).
        unchanged: The requested schema's Arrow schema, when the file's columns read for
            it are returned as read, under that schema: every requested field is
            primitive (pyiceberg's conversion of a primitive column of the same type is
            the column itself) and the conversion returned the columns' own names, types,
            nullability and order, no field added (only the Parquet field ids of their
            metadata dropped); None until seen, or when they need a conversion.
    """

    file_columns: Schema
    unchanged: pa.Schema | None = None


@dataclass(frozen=True)
class MergedDeletes:
    """The sorted, unique positions that several delete files delete in one data file.

    Attributes:
        positions: The positions (int64, read-only).
        key_bytes: What the entry's key costs (it names every delete file merged).
    """

    positions: np.ndarray
    key_bytes: int

    @property
    def nbytes(self) -> int:
        """Bytes of the positions and of the key."""
        return int(self.positions.nbytes) + self.key_bytes


@dataclass(frozen=True)
class DeletedPositions:
    """The positions a position delete file deletes, by data file path."""

    by_file: dict[str, pa.ChunkedArray]

    @property
    def nbytes(self) -> int:
        """Bytes of the position arrays."""
        return sum(positions.nbytes for positions in self.by_file.values())


CacheKey: TypeAlias = ColumnKey | IndexKey | DeletesKey | MergedKey | LayoutKey
Kept: TypeAlias = pa.ChunkedArray | KeyIndex | DeletedPositions | MergedDeletes | FileLayout
_Entry = TypeVar("_Entry", KeyIndex, DeletedPositions, MergedDeletes, FileLayout)


class ColumnCache:
    """Decoded Parquet columns by data file, row group and column; least recently used out.

    In the same budget: the sorted index of a data file's key column, the positions of
    each position delete file and their union per data file, and each data file's
    footer layout. All derive from files that never change once written.

    Safe to share between threads (a tick reads data files in parallel) and between the
    readers of several sources: the budget is for the whole process.

    Args:
        max_bytes: Most bytes kept: the columns' Arrow buffers (``pa.ChunkedArray.nbytes``),
            the indexes' and positions' numpy arrays, and estimates for footers and keys;
            0 keeps nothing. An entry larger than the budget is built but not kept.
    """

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._columns: LRUCache[CacheKey, Kept] = LRUCache(
            maxsize=max(max_bytes, 1), getsizeof=lambda kept: max(kept.nbytes, 1))
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def size_bytes(self) -> int:
        """Bytes kept now, as counted against ``max_bytes``."""
        return int(self._columns.currsize) if self.max_bytes else 0

    def read_row_groups(self, file: DataFileKey, groups: Sequence[int], columns: Sequence[str],
                        arrow_schema: pa.Schema, parquet: ParquetOpener) -> pa.Table:
        """Row groups ``groups`` of a data file, only ``columns``, as ``read_row_groups``.

        Args:
            file: The data file's path and size: with the row group and column, what the
                cache keys on.
            groups: Row group indexes, in the order wanted.
            columns: Top-level column names in the file.
            arrow_schema: The file's Arrow schema.
            parquet: Opens the file; not called when every column asked for is kept.

        Returns:
            The row groups' rows, concatenated in order, with ``columns`` in that order.
        """
        if not self.max_bytes:
            return parquet().read_row_groups(list(groups), columns=list(columns))
        schema = pa.schema([arrow_schema.field(name) for name in columns])
        parts = [self._row_group(parquet, file, group, schema) for group in groups]
        return pa.concat_tables(parts) if parts else schema.empty_table()

    def merged_deletes(self, path: str, files: frozenset[DataFileKey],
                       merge: Callable[[], np.ndarray]) -> np.ndarray:
        """The positions of data file ``path`` that delete ``files`` delete together.

        A data file's delete files accumulate (one more per delete that touches it, until
        compaction), and a tick needs their union at its old and new snapshots and for
        each partner read: kept, the union is computed once per set of files, and the
        next tick's old set is this tick's new one.

        Args:
            path: The data file's path.
            files: The delete files that apply to it (path and size).
            merge: Computes the union (sorted, unique int64), called when it is not kept.

        Returns:
            The sorted, unique positions; read-only, shared.
        """
        def build() -> MergedDeletes:
            positions = merge()
            positions.setflags(write=False)
            key_bytes = len(path) + sum(KEY_ENTRY_BYTES + len(name) for name, _ in files)
            return MergedDeletes(positions, key_bytes)

        key: MergedKey = (path, "merged deletes", files)
        return self._kept(key, MergedDeletes, build).positions

    def file_layout(self, file: DataFileKey, derived_with: Hashable,
                    read: Callable[[], FileLayout]) -> FileLayout:
        """A data file's row group sizes and schemas, read from its footer once and kept.

        Args:
            file: The data file's path and size.
            derived_with: What ``read`` derives the Iceberg schema with (e.g. the table's
                name mapping): a layout kept under another value is not reused.
            read: Reads the footer, called when no layout is kept.

        Returns:
            The layout; shared: only its memo of projections (``projections``) grows.
        """
        key: LayoutKey = (file, "layout", derived_with)
        return self._kept(key, FileLayout, read)

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
        return self._kept(key, KeyIndex, lambda: KeyIndex.build(column()))

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
        return self._kept(key, DeletedPositions, lambda: DeletedPositions(read())).by_file

    def _kept(self, key: CacheKey, kind: type[_Entry], build: Callable[[], _Entry]) -> _Entry:
        """The entry kept under ``key``, or ``build()``'s, kept when it fits the budget.

        Two threads missing the same key both build it; the last one kept stays.
        """
        with self._lock:
            found = self._columns.get(key)
        if isinstance(found, kind):
            return found
        built = build()
        if self.max_bytes and built.nbytes <= self.max_bytes:
            with self._lock:
                self._columns[key] = built
        return built

    def _row_group(self, parquet: ParquetOpener, file: DataFileKey, group: int,
                   schema: pa.Schema) -> pa.Table:
        """One row group's columns of ``schema``: those kept, the others read.

        A column read is kept when it fits the budget.
        """
        with self._lock:
            found = {name: self._columns.get((file, group, name)) for name in schema.names}
            missing = [name for name, column in found.items() if column is None]
            self.hits += len(found) - len(missing)
            self.misses += len(missing)
        if missing:
            read = parquet().read_row_group(group, columns=missing)
            with self._lock:
                for name in missing:
                    column = found[name] = read.column(name)
                    if column.nbytes <= self.max_bytes:
                        self._columns[(file, group, name)] = column
        return pa.Table.from_arrays([found[name] for name in schema.names], schema=schema)
