"""Read an Iceberg snapshot's rows on the driver, restricted to join keys.

A join view's delta term needs, of each partner table, only the rows whose join key is
one of the change's keys. The keys' bounds (and, when at most :data:`FILTER_MAX_VALUES`,
the keys themselves) become a pyiceberg row filter that prunes data files by their column
bounds (pyiceberg's inclusive metrics evaluator). Each file left is then read in two
steps (late materialization): its key columns first, whose values are looked up in the
keys; then the other columns, only at the matching positions that no delete file
deletes, and only in the row groups holding them (:func:`.iceberg_positions.rows_at`). A
file with no matching row costs the decoding of its key columns alone: after a delete,
reading the partner at the snapshot without the deleted rows decodes little else.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.exceptions import ResolveError
from pyiceberg.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BooleanExpression,
    GreaterThanOrEqual,
    In,
    LessThanOrEqual,
)
from pyiceberg.expressions.visitors import _InclusiveMetricsEvaluator, bind
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.manifest import FileFormat
from pyiceberg.schema import Schema
from pyiceberg.table import FileScanTask, Table
from pyiceberg.utils.concurrent import ExecutorFactory

from ivm import KeyValues
from lakehouse.sources.column_cache import ColumnCache, DataFileKey
from lakehouse.sources.iceberg_positions import (
    DeleteFiles,
    deleted_positions,
    read_deletes,
    rows_at,
    sorted_difference,
)
from lakehouse.sources.key_index import indexable

FILTER_MAX_VALUES = 200
"""Most values of a key listed in pyiceberg's row filter (an ``IN``), which prunes files by
them up to this many; pyiceberg's ``In`` costs about a millisecond per ten values to
build and bind, so longer lists prune by their bounds alone."""

_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError)


def rows_for_keys(table: Table, version: int, schema: Schema, columns: Sequence[str],
                  keys: Mapping[str, KeyValues], max_rows: int,
                  cache: ColumnCache | None = None,
                  planned: Iterable[FileScanTask] | None = None) -> pa.Table | None:
    """The live rows of snapshot ``version`` that may match ``keys``, or None.

    Args:
        table: The table (its metadata holds ``version``).
        version: A snapshot id without equality deletes (position deletes are applied).
        schema: The snapshot's schema: columns are projected onto it by field id, as
            Spark reads the snapshot.
        columns: Columns to read (case-insensitive).
        keys: Bounds and values by column name; a column with no value matches nothing;
            no column at all: every live row is read.
        max_rows: None is returned when the data files left after pruning hold more
            rows (before deletes and key lookups).
        cache: Where decoded row groups are kept between ticks (None: nowhere).
        planned: Every scan task of the snapshot, when the caller keeps them (pruned
            here by the keys' bounds); None plans the scan from the manifests.

    Returns:
        ``columns`` (Arrow types of pyiceberg's ``schema_to_pyarrow``): every live row
        whose key columns lie in their bounds and, when listed, among their values (a
        value that does not cast to its column's type leaves the list unchecked: a
        superset). None over ``max_rows``; for a data file that is not Parquet; or when
        the keys cannot be a pyiceberg filter on this snapshot: a key that is no literal
        of its column (e.g. NaN), or a key column whose field the table's current schema
        names differently (pyiceberg binds the filter to the current schema).
    """
    try:
        row_filter = key_filter(keys)
        projection = schema.select(*columns, case_sensitive=False)
        key_schema = schema.select(*keys, case_sensitive=False)
        if not _same_fields(schema, table.schema(), keys):
            return None
        bind(schema, row_filter, case_sensitive=False)
        tasks = _pruned(table, version, row_filter, planned)
    except (ResolveError, ValueError, TypeError):
        return None
    if (sum(task.file.record_count for task in tasks) > max_rows
            or any(task.file.file_format != FileFormat.PARQUET for task in tasks)):
        return None
    deletes = read_deletes(table.io, [f for task in tasks for f in task.delete_files], cache)
    target = schema_to_pyarrow(projection, include_field_ids=False)

    def read(task: FileScanTask) -> pa.Table:
        found = _matching_positions(table, task, key_schema, keys, deletes, cache)
        if not len(found):
            return target.empty_table()
        rows = rows_at(table.metadata, table.io, task.file, found, projection, cache)
        return rows.cast(target) if target else rows  # a cast drops the row count too

    parts = ExecutorFactory.get_or_create().map(read, tasks)
    # not concat_tables: it counts no row in tables of no column
    return pa.Table.from_batches([b for part in parts for b in part.to_batches()], target)


def _pruned(table: Table, version: int, row_filter: BooleanExpression,
            planned: Iterable[FileScanTask] | None) -> list[FileScanTask]:
    """The scan tasks of snapshot ``version`` whose files may hold rows of ``row_filter``.

    Judged by the data files' column bounds, as pyiceberg's scan planning prunes them
    (its metrics evaluator, on the table's current schema); ``planned`` saves reading
    the manifests again.
    """
    if planned is None:
        scan = table.scan(row_filter=row_filter, snapshot_id=version, case_sensitive=False)
        return list(scan.plan_files())
    may_match = _InclusiveMetricsEvaluator(table.schema(), row_filter, case_sensitive=False).eval
    return [task for task in planned if may_match(task.file)]


def _matching_positions(table: Table, task: FileScanTask, key_schema: Schema,
                        keys: Mapping[str, KeyValues], deletes: DeleteFiles,
                        cache: ColumnCache | None) -> np.ndarray:
    """Live positions of the task's data file whose key columns match ``keys`` (sorted).

    Without keys (a partner the change does not restrict), every live position. The key
    columns are read only if a key has no kept index.
    """
    if keys:
        key_rows = functools.cache(lambda: rows_at(table.metadata, table.io, task.file, None,
                                                   key_schema, cache))
        types = schema_to_pyarrow(key_schema, include_field_ids=False)
        found: np.ndarray | None = None
        for name, values in keys.items():
            field = key_schema.find_field(name, case_sensitive=False)
            column = functools.partial(_column_of, key_rows, field.name)
            matching = _key_positions(column, types.field(field.name).type, values, cache,
                                      (task.file.file_path, task.file.file_size_in_bytes),
                                      field.field_id)
            found = matching if found is None else np.intersect1d(found, matching,
                                                                  assume_unique=True)
        assert found is not None  # keys is not empty
    else:
        found = np.arange(task.file.record_count, dtype=np.int64)
    gone = deleted_positions(deletes, task.delete_files, task.file.file_path, cache)
    return sorted_difference(found, gone)


def _key_positions(column: Callable[[], pa.ChunkedArray], column_type: pa.DataType,
                   values: KeyValues, cache: ColumnCache | None, file: DataFileKey,
                   field_id: int) -> np.ndarray:
    """Sorted positions of a key column (read by ``column``) matching ``values``.

    By the file's kept :class:`.KeyIndex` when the column can have one (the column is
    then read only to build it), else by comparing every value.
    """
    if cache is not None and indexable(column_type):
        index = cache.key_index(file, field_id, column)
        found = index.lookup(values) if index is not None else None
        if found is not None:
            return found
    return np.flatnonzero(key_mask(column(), values).to_numpy(zero_copy_only=False))


def _column_of(rows: Callable[[], pa.Table], name: str) -> pa.ChunkedArray:
    return rows().column(name)


def key_mask(column: pa.ChunkedArray, values: KeyValues) -> pa.Array:
    """Whether each value of ``column`` lies in the bounds and, when listed, the values.

    Null never matches (a join never matches it). A bound or list that does not compare
    with the column's type is not checked, so the mask may hold more rows than match.

    Args:
        column: A key column.
        values: Its bounds and values (bounds None: nothing matches).

    Returns:
        A boolean array, one entry per row of ``column``, no null.
    """
    if values.low is None or values.high is None:
        return pa.array(np.zeros(len(column), np.bool_))
    mask = pc.is_valid(column)
    checks = [(pc.greater_equal, values.low), (pc.less_equal, values.high)]
    for compare, bound in checks:
        try:
            mask = pc.and_kleene(mask, compare(column, pa.scalar(bound)))
        except _ARROW_ERRORS:
            continue
    if values.values is not None:
        try:
            wanted = pa.array(values.values).cast(column.type)
            mask = pc.and_kleene(mask, pc.is_in(column, value_set=wanted))
        except _ARROW_ERRORS:
            pass
    return pc.fill_null(mask, False).combine_chunks()


def _same_fields(snapshot: Schema, current: Schema, names: Collection[str]) -> bool:
    """Whether each name is the same field (id) in the snapshot's and the current schema."""
    for name in names:
        mine = snapshot.find_field(name, case_sensitive=False)
        theirs = current.find_field(name, case_sensitive=False)
        if mine.field_id != theirs.field_id:
            return False
    return True


def key_filter(keys: Mapping[str, KeyValues]) -> BooleanExpression:
    """``low <= column <= high`` and, when listed, ``column IN (values)``, per column."""
    conditions: list[BooleanExpression] = []
    for name, values in keys.items():
        if values.low is None or values.high is None:
            return AlwaysFalse()
        # pyiceberg's predicates are pydantic models whose positional __init__ mypy misreads
        conditions += [GreaterThanOrEqual(name, values.low),  # type: ignore[call-arg, arg-type]
                       LessThanOrEqual(name, values.high)]  # type: ignore[call-arg, arg-type]
        if values.values and len(values.values) <= FILTER_MAX_VALUES:
            conditions.append(In(name, values.values))  # type: ignore[call-arg, arg-type]
    return And(*conditions) if len(conditions) > 1 else (conditions[0] if conditions
                                                          else AlwaysTrue())
