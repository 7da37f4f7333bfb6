"""Copy-on-write: which data files a view delta touches, and what replaces them.

The delta's deleting rows give an ``In`` filter per compared column; pyiceberg's scan
planning keeps only the data files whose column metrics may hold such a value (Iceberg
spec, "Scan Planning"). Those candidate files are read whole, the deleted rows located
(:func:`sinks.arrow_zset.deleted_positions`), and every file that loses a row is replaced
by its remaining rows. Files that lose nothing are left as they are.
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
from sinks.arrow_zset import data_columns, deleted_positions

PRUNABLE = (BooleanType, IntegerType, LongType, StringType, DateType, DecimalType,
            TimestampType, TimestamptzType)
"""Column types whose values bind exactly as ``In`` literals (floats are left out: NaN)."""


@dataclass(frozen=True)
class Rewrite:
    """What a delta's deletions do to the table's data files.

    Attributes:
        removed: Data files to delete from the table.
        remaining: Rows of those files that stay (the table's Arrow schema).
        candidates: Data files read to find the deleted rows (for reports).
    """

    removed: list[DataFile]
    remaining: pa.Table
    candidates: int


def plan_rewrite(table: Table, delta: pa.Table, key: Sequence[str] | None) -> Rewrite:
    """Find the data files of ``table``'s current snapshot that ``delta`` deletes rows from.

    Args:
        table: The view table, as loaded at the refresh's base snapshot.
        delta: The view's columns (the table's Arrow types) plus ``_weight`` (int64).
        key: The view's unique key, or None for a multiset view.

    Returns:
        The files to remove and their remaining rows.
    """
    schema = table.schema()
    deleting = delta if key is not None else delta.filter(pc.less(delta[WEIGHT], 0))
    if deleting.num_rows == 0:
        return Rewrite(removed=[], remaining=schema.as_arrow().empty_table(), candidates=0)
    columns = list(key) if key is not None else data_columns(delta)
    tasks = list(table.scan(row_filter=pruning_filter(deleting, columns, schema)).plan_files())
    rows, files = _read(table, tasks, schema)
    positions = deleted_positions(rows, delta, key).to_numpy()
    touched = np.unique(files[positions])
    keep = np.isin(files, touched)
    keep[positions] = False
    return Rewrite(removed=[tasks[i].file for i in touched],
                   remaining=rows.filter(pa.array(keep)), candidates=len(tasks))


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


def _read(table: Table, tasks: list[FileScanTask], schema: Schema) -> tuple[pa.Table, np.ndarray]:
    """The live rows of ``tasks``' files and, for each row, the index of its task."""
    scan = ArrowScan(table.metadata, table.io, schema, AlwaysTrue())
    parts = [scan.to_table([task]) for task in tasks]
    files = np.repeat(np.arange(len(parts)), [part.num_rows for part in parts])
    rows = pa.concat_tables(parts) if parts else schema.as_arrow().empty_table()
    return rows, files.astype(np.int64)
