"""Copy-on-write: which data files a view delta touches, and what replaces them.

The delta's deleting rows give an ``In`` filter per compared column; pyiceberg's scan
planning keeps only the data files whose column metrics may hold such a value (Iceberg
spec, "Scan Planning"). Those candidate files are read whole, the deleted rows located
(:func:`sinks.arrow_zset.deleted_rows`), and every file that loses a row is replaced by
new files of its remaining rows. Files that lose nothing are left as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.expressions import AlwaysTrue, And, BooleanExpression, In, IsNull, Or
from pyiceberg.expressions.visitors import bind
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.manifest import DataFile
from pyiceberg.schema import Schema
from pyiceberg.table import Table
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
                    writer: DataFileWriter) -> Rewrite:
    """Rewrite the data files of ``table`` that ``delta`` deletes rows from.

    Files are read and rewritten one at a time (memory: one file plus the delta), each
    into new files of its remaining rows. For a multiset view the copies deleted in one
    file are not deleted again in the next, and reading stops once all are found.

    Args:
        table: The view table, as loaded at the refresh's base snapshot.
        delta: The view's columns (the table's Arrow types) plus ``_weight`` (int64).
        key: The view's unique key, or None for a multiset view.
        writer: Writes the replacement files.

    Returns:
        The files removed and added.
    """
    schema = table.schema()
    pending = delta if key is not None else delta.filter(pc.less(delta[WEIGHT], 0))
    columns = list(key) if key is not None else data_columns(delta)
    tasks = (list(table.scan(row_filter=pruning_filter(pending, columns, schema)).plan_files())
             if pending.num_rows else [])
    scan = ArrowScan(table.metadata, table.io, schema, AlwaysTrue())
    removed: list[DataFile] = []
    added: list[DataFile] = []
    for task in tasks:
        rows = scan.to_table([task])
        deleted = deleted_rows(rows, pending, key)
        if not len(deleted.positions):
            continue
        keep = np.ones(rows.num_rows, dtype=bool)
        keep[deleted.positions] = False
        removed.append(task.file)
        added += writer.write(rows.filter(pa.array(keep)))
        if key is None and not (pending := still_to_delete(pending, deleted)).num_rows:
            break
    return Rewrite(removed, added, len(tasks))


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
