"""Copy-on-write: which data files a view delta touches, and what replaces them.

The delta's deleting rows give an ``In`` filter per compared column; pyiceberg's scan
planning keeps only the data files whose column metrics may hold such a value (Iceberg
spec, "Scan Planning"). Those candidate files are read whole, the deleted rows located
(:func:`sinks.arrow_zset.deleted_rows`), and every file that loses a row is removed. Their
remaining rows are gathered, with the rows the delta inserts, into as few new files as
:data:`GATHER_BYTES` allows, so a small refresh replaces the files it touches by one file
instead of adding one per touched file. Files that lose nothing are left as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from functools import cache, reduce
from typing import Protocol

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.expressions import AlwaysTrue, And, BooleanExpression, In, IsNull, Or
from pyiceberg.expressions.visitors import bind
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.manifest import DataFile
from pyiceberg.schema import Schema
from pyiceberg.table import FileScanTask, Table
from pyiceberg.types import (
    BooleanType,
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
)

from ivm import WEIGHT
from sinks.arrow_zset import data_columns, deleted_rows, still_to_delete
from sinks.iceberg_snapshot import DataFileWriter

PRUNABLE = (BooleanType, IntegerType, LongType, StringType, DateType, DecimalType,
            TimestampType, TimestamptzType)
"""Column types whose values bind exactly as ``In`` literals (floats are left out: NaN)."""

GATHER_BYTES = 64 * 2**20
"""Remaining rows of rewritten files are held (as Arrow) up to this many bytes before they
are written; the last batch is written with the delta's inserts."""


class ScanPlanner(Protocol):
    """Plans a snapshot's scan as ``table.scan(...).plan_files()`` does.

    E.g. from manifest entries kept between refreshes
    (``lakehouse.sources.manifest_cache.ManifestCache``).
    """

    def plan_files(self, table: Table, snapshot_id: int,
                   row_filter: BooleanExpression | None = None) -> list[FileScanTask]:
        """The scan tasks of snapshot ``snapshot_id`` that may hold rows of ``row_filter``."""
        ...


def planned(table: Table, row_filter: BooleanExpression | None = None,
            planner: ScanPlanner | None = None) -> list[FileScanTask]:
    """The scan tasks of the table's current snapshot (none without one).

    Planned by ``planner`` when given, else by pyiceberg from the manifests.
    """
    snapshot_id = table.metadata.current_snapshot_id
    if snapshot_id is None:
        return []
    if planner is not None:
        return planner.plan_files(table, snapshot_id, row_filter)
    return list(table.scan(row_filter=row_filter or AlwaysTrue()).plan_files())


@dataclass(frozen=True)
class Rewrite:
    """What a delta's deletions do to the table's data files.

    Attributes:
        removed: Data files to delete from the table.
        added: Data files holding their remaining rows (already written).
        candidates: Data files read to find the deleted rows.
    """

    removed: list[DataFile]
    added: list[DataFile]
    candidates: int


def rewrite_deleted(table: Table, delta: pa.Table, key: Sequence[str] | None,
                    writer: DataFileWriter, inserts: pa.Table | None = None,
                    planner: ScanPlanner | None = None) -> Rewrite:
    """Rewrite the data files of ``table`` that ``delta`` deletes rows from.

    Files are read one at a time; the remaining rows of those that lose rows are written
    to new files in batches of :data:`GATHER_BYTES` (memory: one file, one batch and the
    delta), the last batch together with ``inserts``. For a multiset view the copies
    deleted in one file are not deleted again in the next, and reading stops once all are
    found.

    Args:
        table: The view table, as loaded at the refresh's base snapshot.
        delta: The view's columns (the table's Arrow types) plus ``_weight`` (int64).
        key: The view's unique key, or None for a multiset view.
        writer: Writes the replacement files.
        inserts: Rows to write with the remaining rows (the view's columns), if any.
        planner: Plans the candidate files (None: pyiceberg, from the manifests).

    Returns:
        The files removed and added (``inserts`` included).
    """
    schema = table.schema()
    pending = delta if key is not None else delta.filter(pc.less(delta[WEIGHT], 0))
    columns = list(key) if key is not None else data_columns(delta)
    tasks = (planned(table, pruning_filter(pending, columns, schema), planner)
             if pending.num_rows else [])
    scan = ArrowScan(table.metadata, table.io, schema, AlwaysTrue())
    removed: list[DataFile] = []
    kept = _Gathered(writer, schema.as_arrow())
    with ExitStack() as stack:
        connect = cache(lambda: stack.enter_context(duckdb.connect()))
        for task in tasks:
            rows = scan.to_table([task])
            deleted = deleted_rows(rows, pending, key, connect)
            if not len(deleted.positions):
                continue
            keep = np.ones(rows.num_rows, dtype=bool)
            keep[deleted.positions] = False
            removed.append(task.file)
            kept.add(rows.filter(pa.array(keep)))
            if key is None and not (pending := still_to_delete(pending, deleted)).num_rows:
                break
    if inserts is not None:
        kept.add(inserts)
    return Rewrite(removed, kept.flush(), len(tasks))


class _Gathered:
    """Rows to write, gathered into batches of up to :data:`GATHER_BYTES`."""

    def __init__(self, writer: DataFileWriter, schema: pa.Schema):
        self.writer = writer
        self.schema = schema
        self.parts: list[pa.Table] = []
        self.bytes = 0
        self.written: list[DataFile] = []

    def add(self, rows: pa.Table) -> None:
        """Hold ``rows``; write the batch once it reaches :data:`GATHER_BYTES`."""
        self.parts.append(rows.select(self.schema.names).cast(self.schema))
        self.bytes += rows.nbytes
        if self.bytes >= GATHER_BYTES:
            self.flush()

    def flush(self) -> list[DataFile]:
        """Write what is held; returns every file written so far."""
        if self.parts:
            self.written += self.writer.write(pa.concat_tables(self.parts))
        self.parts, self.bytes = [], 0
        return self.written


def pruning_filter(rows: pa.Table, columns: Sequence[str], schema: Schema) -> BooleanExpression:
    """A filter true for every table row that may equal one of ``rows`` on ``columns``.

    One conjunct per column of a :data:`PRUNABLE` type: ``col IN (values)``, or-ed with
    ``col IS NULL`` when a value is NULL. Other columns do not restrict it.
    """
    terms = [term for name in columns if (term := _column_term(rows, name, schema)) is not None]
    return reduce(And, terms) if terms else AlwaysTrue()


def _column_term(rows: pa.Table, name: str, schema: Schema) -> BooleanExpression | None:
    if not isinstance(schema.find_field(name).field_type, PRUNABLE):
        return None
    values = set(pc.unique(rows[name]).to_pylist())
    present = values - {None}
    terms: list[BooleanExpression] = []
    if present:  # pyiceberg's overloaded __new__ confuses mypy's pydantic view of In/IsNull
        terms.append(In(name, present))  # type: ignore[call-arg, arg-type]
    if None in values:
        terms.append(IsNull(name))  # type: ignore[call-arg, arg-type]
    if not terms:
        return None
    term = reduce(Or, terms)
    try:
        bind(schema, term, case_sensitive=True)
    except (TypeError, ValueError):  # a value that does not convert to the column's type
        return None
    return term
