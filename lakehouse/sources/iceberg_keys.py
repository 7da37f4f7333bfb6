"""Read an Iceberg snapshot's rows on the driver, restricted to join keys.

A join view's delta term needs, of each partner table, only the rows whose join key is
one of the change's keys. The keys' bounds (and, when listed, the keys themselves) become
a pyiceberg row filter: manifests and Parquet row groups whose column bounds miss them
are skipped (pyiceberg's inclusive metrics evaluator; an ``IN`` of more than 200 values
prunes by the bounds alone), and the rows read are filtered by it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

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
from pyiceberg.expressions.visitors import bind
from pyiceberg.io.pyarrow import ArrowScan, schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.table import Table

from ivm import KeyValues

FILTER_MAX_VALUES = 200
"""Most values of a key listed in pyiceberg's row filter (an ``IN``), which prunes files by
them up to this many; pyiceberg's ``In`` costs about a millisecond per ten values to
build and bind, so longer lists are looked up in each batch read instead."""


def rows_for_keys(table: Table, version: int, schema: Schema, columns: Sequence[str],
                  keys: Mapping[str, KeyValues], max_rows: int) -> pa.Table | None:
    """The rows of snapshot ``version`` that may match ``keys``, or None.

    Args:
        table: The table (its metadata holds ``version``).
        version: A snapshot id without equality deletes (position deletes are applied).
        schema: The snapshot's schema: columns are projected onto it by field id, as
            Spark reads the snapshot.
        columns: Columns to read (case-insensitive).
        keys: Bounds and values by column name; a column with no value matches nothing.
        max_rows: None is returned when the data files left after pruning hold more
            rows (before deletes and row filtering).

    Returns:
        ``columns`` (Arrow types of pyiceberg's ``schema_to_pyarrow``), at least the rows
        whose key columns match; None over ``max_rows``, or when the keys cannot be a
        pyiceberg filter on this snapshot: a key that is no literal of its column (e.g.
        NaN), or a key column whose field the table's current schema names differently
        (pyiceberg binds the filter to the current schema).
    """
    try:
        row_filter = key_filter(keys)
        projection = schema.select(*columns, case_sensitive=False)
        if not _same_fields(schema, table.schema(), keys):
            return None
        bind(schema, row_filter, case_sensitive=False)
        scan = table.scan(row_filter=row_filter, snapshot_id=version, case_sensitive=False)
        tasks = list(scan.plan_files())
    except (ResolveError, ValueError, TypeError):
        return None
    if sum(task.file.record_count for task in tasks) > max_rows:
        return None
    reader = ArrowScan(table.metadata, table.io, projection, row_filter, case_sensitive=False)
    batches = [_matching(batch, keys) for batch in reader.to_record_batches(tasks)]
    if not batches:
        return schema_to_pyarrow(projection, include_field_ids=False).empty_table()
    return pa.Table.from_batches(batches)


def _matching(batch: pa.RecordBatch, keys: Mapping[str, KeyValues]) -> pa.RecordBatch:
    """The batch's rows whose key columns hold one of the listed values (hash lookups).

    For lists longer than pyiceberg's filter takes (:data:`FILTER_MAX_VALUES`); a list
    whose values do not cast to the column's type is skipped (a superset is allowed).
    """
    names = {name.lower(): name for name in batch.schema.names}
    mask = None
    for name, values in keys.items():
        column = names.get(name.lower())
        if values.values is None or len(values.values) <= FILTER_MAX_VALUES or column is None:
            continue
        try:
            wanted = pa.array(values.values).cast(batch.column(column).type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            continue
        found = pc.is_in(batch.column(column), value_set=wanted)
        mask = found if mask is None else pc.and_(mask, found)
    return batch if mask is None else batch.filter(mask)


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
