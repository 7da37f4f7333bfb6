"""A view delta (Z-set) as Arrow: the rows it inserts, and the table rows it deletes.

Deletions are decided on row positions, so the rows written back keep their exact Arrow
types (DuckDB only sees the compared columns and answers with positions). Equality is
null-safe (``IS NOT DISTINCT FROM``): a NULL key matches a NULL key, as in SQL ``<=>``.

Most rows of a file are not deleted: Arrow's ``is_in`` first keeps the rows whose every
compared column of an exactly comparable type (integers, strings, dates, timestamps,
decimals, booleans, binary; not floats, where NaN and -0.0 compare differently) holds a
value of the delta, and only those reach DuckDB. A key made of such columns needs no DuckDB.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ivm import WEIGHT


def data_columns(delta: pa.Table) -> list[str]:
    """The view's columns of a delta (every column but ``_weight``)."""
    return [name for name in delta.column_names if name != WEIGHT]


def has_deletes(delta: pa.Table) -> bool:
    """Whether some row of ``delta`` has a negative weight."""
    lowest = pc.min(delta[WEIGHT]).as_py()
    return lowest is not None and lowest < 0


def expanded(delta: pa.Table) -> pa.Table:
    """The rows of ``delta`` with a positive weight, each repeated weight times.

    Args:
        delta: The view's columns plus ``_weight`` (int64).

    Returns:
        The view's columns (no ``_weight``).
    """
    weights = delta[WEIGHT].to_numpy(zero_copy_only=False)
    repeats = np.repeat(np.arange(delta.num_rows), np.clip(weights, 0, None))
    return delta.drop_columns([WEIGHT]).take(pa.array(repeats, pa.int64()))


@dataclass(frozen=True)
class Deleted:
    """Rows of a table that a delta deletes.

    Attributes:
        positions: Sorted positions into the table's rows (int64).
        changes: For each position, the delta row that deletes it (int64).
    """

    positions: np.ndarray
    changes: np.ndarray


def deleted_rows(rows: pa.Table, delta: pa.Table, key: Sequence[str] | None,
                 connect: Callable[[], duckdb.DuckDBPyConnection] | None = None) -> Deleted:
    """The rows of ``rows`` that ``delta`` deletes.

    Keyed views (``key`` given): every row whose key equals the key of any delta row,
    whatever its weight (the +1 rows are inserted afresh). Multiset views (``key`` None):
    for a delta row of weight -w, w copies of the equal row (fewer if fewer exist; the
    first copies in ``rows`` order); rows of positive weight delete nothing.

    Args:
        rows: Current rows of the table (at least the compared columns).
        delta: The view's columns plus ``_weight`` (int64), consolidated.
        key: The view's unique key, or None.
        connect: Gives the DuckDB connection to use, called only if DuckDB is needed (the
            caller closes it); by default one is opened and closed here.
    """
    columns = list(key) if key is not None else data_columns(delta)
    if key is not None:
        exact = _exact_key(rows, delta, columns)
        if exact is not None:
            return exact
    deleting = delta if key is not None else delta.filter(pc.less(delta[WEIGHT], 0))
    candidates = _candidates(rows, deleting, columns)
    if candidates is not None:
        if not len(candidates):
            return Deleted(np.empty(0, np.int64), np.empty(0, np.int64))
        rows = rows.take(pa.array(candidates))
    if connect is None:
        with duckdb.connect() as own:  # own connection: callers may run in threads
            found = _matched(own, rows, delta, columns, key is not None)
    else:
        found = _matched(connect(), rows, delta, columns, key is not None)
    if candidates is not None:
        found = Deleted(candidates[found.positions], found.changes)
    return found


def _matched(connection: duckdb.DuckDBPyConnection, rows: pa.Table, delta: pa.Table,
             columns: list[str], keyed: bool) -> Deleted:
    """:func:`deleted_rows` by a DuckDB join (positions into ``rows``, changes into ``delta``)."""
    names = [f"c{i}" for i in range(len(columns))]  # DuckDB sees positional names only
    current = pa.table([*(rows[c] for c in columns), pa.array(np.arange(rows.num_rows))],
                       names=[*names, "position"])
    changes = pa.table([*(delta[c] for c in columns), delta[WEIGHT],
                        pa.array(np.arange(delta.num_rows))], names=[*names, "weight", "change"])
    same = " AND ".join(f"t.{c} IS NOT DISTINCT FROM d.{c}" for c in names) or "TRUE"
    if keyed:
        sql = (f"SELECT position, min(change) AS change FROM current t JOIN changes d "
               f"ON {same} GROUP BY position")
    else:
        sql = (f"SELECT t.position, d.change FROM (SELECT *, row_number() OVER (PARTITION BY "
               f"{', '.join(names)} ORDER BY position) AS copy FROM current) t "
               f"JOIN (SELECT * FROM changes WHERE weight < 0) d ON {same} "
               f"WHERE t.copy <= -d.weight")
    connection.register("current", current)
    connection.register("changes", changes)
    try:
        found = connection.execute(f"{sql} ORDER BY 1").fetchnumpy()
    finally:
        connection.unregister("current")
        connection.unregister("changes")
    return Deleted(np.asarray(found["position"], np.int64), np.asarray(found["change"], np.int64))


_EXACT: tuple[Callable[[pa.DataType], bool], ...] = (
    pa.types.is_integer, pa.types.is_string, pa.types.is_large_string, pa.types.is_date,
    pa.types.is_timestamp, pa.types.is_decimal, pa.types.is_boolean, pa.types.is_binary,
    pa.types.is_large_binary)
"""Arrow types whose ``is_in`` equality is SQL's ``IS NOT DISTINCT FROM`` (floats are not:
``is_in`` tells -0.0 from 0.0)."""


def _delta_values(rows: pa.Table, delta: pa.Table, column: str) -> pa.Array | None:
    """The distinct values of ``delta[column]`` as ``rows[column]``'s type (NULL included).

    Returns:
        None when the column's type does not compare exactly, or the values do not cast.
    """
    kind = rows.schema.field(column).type
    if not any(test(kind) for test in _EXACT):
        return None
    try:
        return pc.unique(delta[column].combine_chunks().cast(kind))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None


def _codes(column: pa.ChunkedArray | pa.Array, values: pa.Array) -> np.ndarray:
    """Per value of ``column``: its index in ``values`` (null-safe), or -1 if absent."""
    index = pc.index_in(column, value_set=values, skip_nulls=False)
    return np.asarray(pc.fill_null(index, -1).to_numpy(zero_copy_only=False), np.int64)


def _exact_key(rows: pa.Table, delta: pa.Table, key: list[str]) -> Deleted | None:
    """:func:`deleted_rows` of a key whose columns all compare exactly, by Arrow alone.

    Each key column's values become their index among the delta's distinct values; the
    indexes of one row, in mixed radix, are one int64 code, and a row is deleted by the
    first delta row of equal code. None when a column does not compare exactly, or the
    codes would not fit in an int64.
    """
    if not key:
        return None
    found = np.ones(rows.num_rows, dtype=bool)
    row_codes = np.zeros(rows.num_rows, np.int64)
    delta_codes = np.zeros(delta.num_rows, np.int64)
    radix = 1
    for column in key:
        values = _delta_values(rows, delta, column)
        if values is None or (radix := radix * max(len(values), 1)) > 2**62:
            return None
        codes = _codes(rows[column], values)
        found &= codes >= 0
        row_codes = row_codes * len(values) + np.maximum(codes, 0)
        delta_codes = delta_codes * len(values) + _codes(delta[column].cast(values.type), values)
    index = _codes(pa.array(row_codes), pa.array(delta_codes))
    positions = np.flatnonzero(found & (index >= 0)).astype(np.int64)
    return Deleted(positions, index[positions])


def _candidates(rows: pa.Table, delta: pa.Table, columns: list[str]) -> np.ndarray | None:
    """Positions of the rows that may equal a delta row on ``columns``.

    Returns:
        Sorted positions of the rows each of whose exactly comparable columns holds a value
        of ``delta``; None when no column is exactly comparable.
    """
    mask: np.ndarray | None = None
    for column in columns:
        values = _delta_values(rows, delta, column)
        if values is not None:
            hit = _codes(rows[column], values) >= 0
            mask = hit if mask is None else mask & hit
    return None if mask is None else np.flatnonzero(mask).astype(np.int64)


def still_to_delete(delta: pa.Table, deleted: Deleted) -> pa.Table:
    """The negative rows of a multiset ``delta`` with the copies in ``deleted`` taken off.

    Returns:
        ``delta``'s rows whose weight, raised by the copies deleted, is still negative.
    """
    done = np.bincount(deleted.changes, minlength=delta.num_rows)
    weights = delta[WEIGHT].to_numpy(zero_copy_only=False) + done
    left = delta.set_column(delta.schema.get_field_index(WEIGHT), WEIGHT,
                            pa.array(weights, pa.int64()))
    return left.filter(pc.less(left[WEIGHT], 0))
