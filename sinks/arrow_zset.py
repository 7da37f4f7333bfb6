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

POSITION = "__position"
"""Column of row positions handed to DuckDB."""


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
    current = pa.table({**{c: rows[c] for c in columns},
                        POSITION: pa.array(np.arange(rows.num_rows), pa.int64())})
    changes = delta.select([*columns, WEIGHT])
    same = " AND ".join(f"t.{_quoted(c)} IS NOT DISTINCT FROM d.{_quoted(c)}" for c in columns)
    if key is not None:
        sql = (f"SELECT {POSITION} FROM current t WHERE EXISTS "
               f"(SELECT 1 FROM changes d WHERE {same or 'TRUE'})")
    else:
        partition = ", ".join(_quoted(c) for c in columns)
        sql = (f"SELECT t.{POSITION} FROM (SELECT *, row_number() OVER (PARTITION BY {partition} "
               f"ORDER BY {POSITION}) AS n FROM current) t "
               f"JOIN (SELECT * FROM changes WHERE {WEIGHT} < 0) d ON {same} WHERE t.n <= -d.{WEIGHT}")
    with duckdb.connect() as connection:  # own connection: callers may run in threads
        connection.register("current", current)
        connection.register("changes", changes)
        positions = connection.execute(f"{sql} ORDER BY 1").to_arrow_table()
    return positions.column(0).combine_chunks().cast(pa.int64())


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
