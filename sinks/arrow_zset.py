"""A view delta (Z-set) as Arrow: the rows it inserts, and the table rows it deletes.

Deletions are decided on row positions, so the rows written back keep their exact Arrow
types (DuckDB only sees the compared columns and answers with positions). Equality is
null-safe (``IS NOT DISTINCT FROM``): a NULL key matches a NULL key, as in SQL ``<=>``.
"""

from __future__ import annotations

from collections.abc import Sequence

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


def deleted_positions(rows: pa.Table, delta: pa.Table, key: Sequence[str] | None) -> pa.Array:
    """Positions of the rows of ``rows`` that ``delta`` deletes.

    Keyed views (``key`` given): every row whose key equals the key of any delta row,
    whatever its weight (the +1 rows are inserted afresh). Multiset views (``key`` None):
    for a delta row of weight -w, w copies of the equal row (fewer if fewer exist; the
    first copies in ``rows`` order); rows of positive weight delete nothing.

    Args:
        rows: Current rows of the table (at least the compared columns).
        delta: The view's columns plus ``_weight`` (int64), consolidated.
        key: The view's unique key, or None.

    Returns:
        Sorted int64 positions into ``rows``.
    """
    columns = list(key) if key is not None else data_columns(delta)
    names = [f"c{i}" for i in range(len(columns))]  # DuckDB sees positional names only
    current = pa.table([*(rows[c] for c in columns), pa.array(np.arange(rows.num_rows))],
                       names=[*names, "position"])
    changes = pa.table([*(delta[c] for c in columns), delta[WEIGHT]], names=[*names, "weight"])
    same = " AND ".join(f"t.{c} IS NOT DISTINCT FROM d.{c}" for c in names) or "TRUE"
    if key is not None:
        sql = f"SELECT position FROM current t WHERE EXISTS (SELECT 1 FROM changes d WHERE {same})"
    else:
        sql = (f"SELECT t.position FROM (SELECT *, row_number() OVER (PARTITION BY "
               f"{', '.join(names)} ORDER BY position) AS copy FROM current) t "
               f"JOIN (SELECT * FROM changes WHERE weight < 0) d ON {same} "
               f"WHERE t.copy <= -d.weight")
    with duckdb.connect() as connection:  # own connection: callers may run in threads
        connection.register("current", current)
        connection.register("changes", changes)
        positions = connection.execute(f"{sql} ORDER BY 1").to_arrow_table()
    return positions.column(0).combine_chunks().cast(pa.int64())
