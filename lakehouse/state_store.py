"""Aggregate states kept in the warehouse, so that a new process resumes without rebuilding them.

A view maintained by the invertible-aggregate law reads its state (sums and counts per group)
at the frontier its sinks reflect. The state is a pure function of the view's SQL and of the
sources at that frontier, so it is stored under names made of both, in
``<warehouse>/_state/<view>/<sql digest>/``:

- ``<frontier digest>.json``, the record, written last: the frontier, the state's types, and
  either nothing more (the data is the whole state: a *base*) or the frontier digest of the
  previous state (the data is the tick's change, the partial aggregate added to it);
- the data it names, a Parquet file written on the driver (a state held there) or a Parquet
  folder written by Spark's executors (a state held on Spark; the driver reads no row).

Sums and counts add up, so a state reads back as its base plus the changes since
(:func:`ivm.aggregate_state.with_changes`, on the engine that holds it): a tick
writes only its change, O(change) rather than O(state). A new base is written when the
changes since the last one hold as many rows as it does, or number :data:`MAX_CHANGES`, and
the view's older entries are then dropped. A crash before the record is written only costs
the next process a rebuild; a state of another SQL or frontier is never read, nor one whose
data does not hold the rows its record counts (files another process deleted meanwhile).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TypeVar

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from ivm import AggregateState
from ivm.aggregate_state import engine_of, with_changes
from lakehouse.storage import Folder

__all__ = ["MAX_CHANGES", "StateStore"]

MAX_CHANGES = 16
"""Most changes stored on top of a base: a read merges at most this many."""


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _frontier_digest(frontier: Mapping[str, int]) -> str:
    return _digest(json.dumps(dict(frontier), sort_keys=True))


@dataclass(frozen=True)
class _Record:
    """One stored entry: a base or a change, and where its rows are.

    ``rows`` counts the data's rows; ``changed_rows`` the rows of the changes since the
    base, this one's included (0 for a base).
    """

    frontier: dict[str, int]
    arg_types: list[str]
    schema: str | None
    on_spark: bool
    data: str
    rows: int
    previous: str | None = None
    base_rows: int = 0
    changes: int = 0
    changed_rows: int = 0


class StateStore:
    """The aggregate states of a pipeline's views, in one folder of the warehouse.

    Args:
        folder: Where the states live (:func:`lakehouse.storage.warehouse_folder`,
            ``_state``), on the warehouse's storage.
        spark: The session that writes and reads states held on Spark (started only when
            such a state is read or written); None stores driver-held states only.
    """

    def __init__(self, folder: Folder, spark: SparkSession | None = None):
        self.folder = folder
        self.spark = spark

    def load(self, view: str, sql: str, frontier: Mapping[str, int], on_driver: bool = True
             ) -> AggregateState | None:
        """The state of ``view`` (compiled from ``sql``) at ``frontier``, or None if not stored.

        With ``on_driver`` False, a state held on the driver is not read (None).

        Raises:
            OSError: The storage cannot be read (other than an entry being absent).
            ValueError: A record is not what this module writes, or an entry's data does
                not hold the rows its record counts.
        """
        folder = self.folder.child(view).child(_digest(sql))
        chain = self._chain(folder, _frontier_digest(frontier))
        if chain is None or (chain[0].on_spark and self.spark is None) or (
                not on_driver and not chain[0].on_spark):
            return None
        last = chain[-1]
        schema = StructType.fromJson(json.loads(last.schema)) if last.schema else None
        if last.on_spark:  # read once, here: a failure is no state, and the files may go
            assert self.spark is not None
            spark = self.spark
            parts = [_checked(spark.read.parquet(folder.child(r.data).uri), r) for r in chain]
            rows = with_changes(engine_of(parts[0]), parts[0], parts[1:])
            return AggregateState(tuple(last.arg_types), rows=rows.localCheckpoint(eager=True),
                                  schema=schema)
        tables = [_checked(_read_table(folder.child(r.data)), r) for r in chain]
        table = with_changes(engine_of(tables[0]), tables[0], tables[1:])
        return AggregateState(tuple(last.arg_types), table=table, schema=schema)

    def _chain(self, folder: Folder, digest: str) -> list[_Record] | None:
        """The records from the base to the one of ``digest``, or None if one is missing."""
        chain: list[_Record] = []
        current: str | None = digest
        while current is not None and len(chain) <= MAX_CHANGES:
            record = _read_record(folder.child(f"{current}.json"))
            if record is None:
                return None
            chain.append(record)
            current = record.previous
        return chain[::-1] if current is None else None

    def save(self, view: str, sql: str, frontier: Mapping[str, int],
             state: AggregateState | None, previous: Mapping[str, int] | None = None) -> None:
        """Store ``state`` as the state of ``view`` at ``frontier``.

        Only the state's change is written when the state at ``previous`` is stored (in
        the same form) and the changes since its base stay small; otherwise the whole
        state, and the view's other entries are dropped. None drops them all.

        Args:
            view: The view's name.
            sql: Its SQL.
            frontier: The frontier the sinks committed.
            state: The state there; its ``change`` is relative to the state at
                ``previous``.
            previous: The frontier the tick started from (None: the state was built whole).

        Raises:
            OSError: The storage cannot be written.
        """
        folder = self.folder.child(view).child(_digest(sql))
        if state is None or (state.rows is not None and self.spark is None):
            self._drop(view, keep=None)
            return
        digest = _frontier_digest(frontier)
        record = self._change_record(folder, state, frontier, previous)
        if record is None:
            rows = state.rows if state.rows is not None else state.table
            assert rows is not None
            record = self._record(folder, state, frontier, rows)
        self._write_record(folder.child(f"{digest}.json"), record)
        if record.previous is None:
            self._drop(view, keep=(folder, digest, record.data))

    def _change_record(self, folder: Folder, state: AggregateState,
                       frontier: Mapping[str, int], previous: Mapping[str, int] | None
                       ) -> _Record | None:
        """Write the state's change after the stored previous one; None when a base is due."""
        if state.change is None or previous is None:
            return None
        on_spark = state.rows is not None
        before_digest = _frontier_digest(previous)
        before = _read_record(folder.child(f"{before_digest}.json"))
        if before is None or before.on_spark != on_spark or before.changes >= MAX_CHANGES:
            return None
        base_rows = before.base_rows if before.previous is not None else before.rows
        change_rows = _count(state.change)
        if before.changed_rows + change_rows > base_rows:
            return None
        record = self._record(folder, state, frontier, state.change, change_rows)
        return _Record(**{**asdict(record), "previous": before_digest, "base_rows": base_rows,
                          "changes": before.changes + 1,
                          "changed_rows": before.changed_rows + change_rows})

    def _record(self, folder: Folder, state: AggregateState, frontier: Mapping[str, int],
                rows: DataFrame | pa.Table, count: int | None = None) -> _Record:
        """Write ``rows`` (the whole state or its change) as a new data entry; its record.

        ``count`` is the number of ``rows`` when the caller counted them already.
        """
        data = f"{_frontier_digest(frontier)}-{uuid.uuid4().hex[:8]}.parquet"
        target = folder.child(data)
        if isinstance(rows, pa.Table):
            folder.filesystem.create_dir(folder.path, recursive=True)
            pq.write_table(rows, target.path, filesystem=target.filesystem)
        else:  # from the executors
            rows.write.parquet(target.uri)
        if count is None:
            count = _count(rows)  # a state the tick checkpointed: no recompute
        return _Record(dict(frontier), list(state.arg_types),
                       state.schema.json() if state.schema is not None else None,
                       on_spark=not isinstance(rows, pa.Table), data=data, rows=count,
                       base_rows=count)

    def _write_record(self, file: Folder, record: _Record) -> None:
        body = json.dumps(asdict(record)).encode()
        if isinstance(file.filesystem, pafs.LocalFileSystem):  # rename: whole or absent
            staging = f"{file.path}.{uuid.uuid4().hex}.tmp"
            with file.filesystem.open_output_stream(staging) as out:
                out.write(body)
            file.filesystem.move(staging, file.path)
        else:  # an object store's PUT is atomic
            with file.filesystem.open_output_stream(file.path) as out:
                out.write(body)

    def _drop(self, view: str, keep: tuple[Folder, str, str] | None) -> None:
        """Delete the view's entries but the base ``keep`` (its folder, digest, data name).

        Records go before data, so that no record outlives its data; files being written
        (``.tmp``) are left alone.
        """
        root = self.folder.child(view)
        filesystem = root.filesystem
        kept: set[str] = set()
        if keep is not None:
            folder, digest, data = keep
            kept = {folder.path, folder.child(f"{digest}.json").path, folder.child(data).path}
        entries = _children(filesystem, root.path)
        for info in entries:  # the folders of other SQL, and files of older versions
            if info.path not in kept and not info.path.endswith(".tmp"):
                _delete(filesystem, info)
        if keep is not None:
            inside = sorted(_children(filesystem, keep[0].path),
                            key=lambda i: not i.path.endswith(".json"))
            for info in inside:
                if info.path not in kept and not info.path.endswith(".tmp"):
                    _delete(filesystem, info)


def _children(filesystem: pafs.FileSystem, path: str) -> list[pafs.FileInfo]:
    return list(filesystem.get_file_info(pafs.FileSelector(path, allow_not_found=True)))


def _delete(filesystem: pafs.FileSystem, info: pafs.FileInfo) -> None:
    if info.type == pafs.FileType.Directory:
        filesystem.delete_dir(info.path)
    elif info.type == pafs.FileType.File:
        filesystem.delete_file(info.path)


def _read_record(file: Folder) -> _Record | None:
    """The record in ``file``, or None when there is none.

    Raises:
        ValueError: The file is not a record this module writes.
    """
    try:
        with file.filesystem.open_input_stream(file.path) as stream:
            body = stream.read()
    except FileNotFoundError:
        return None
    try:
        return _Record(**json.loads(body))
    except TypeError as error:  # other keys
        raise ValueError(f"not an aggregate state record: {file.path}") from error


_Rows = TypeVar("_Rows", DataFrame, pa.Table)


def _checked(rows: _Rows, record: _Record) -> _Rows:
    """``rows``, once they count as many rows as ``record`` says its data holds.

    Raises:
        ValueError: They do not (files of the entry deleted or left half written, as by
            another process dropping the view's entries while this one wrote).
    """
    count = _count(rows)
    if count != record.rows:
        raise ValueError(f"state data {record.data} holds {count} rows, its record {record.rows}")
    return rows


def _read_table(file: Folder) -> pa.Table:
    return pq.read_table(file.path, filesystem=file.filesystem)


def _count(rows: DataFrame | pa.Table) -> int:
    return rows.num_rows if isinstance(rows, pa.Table) else rows.count()
