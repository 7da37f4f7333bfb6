"""A view delta (Z-set) as Arrow: the rows it inserts, and the table rows it deletes.

Deletions are decided on row positions, so the rows written back keep their exact Arrow
types (DuckDB only sees the compared columns and answers with positions). Equality is
null-safe (``IS NOT DISTINCT FROM``): a NULL key matches a NULL key, as in SQL ``<=>``.
"""

from __future__ import annotations

from collections.abc import Sequence
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


def deleted_rows(rows: pa.Table, delta: pa.Table, key: Sequence[str] | None) -> Deleted:
    """The rows of ``rows`` that ``delta`` deletes.

    Keyed views (``key`` given): every row whose key equals the key of any delta row,
    whatever its weight (the +1 rows are inserted afresh). Multiset views (``key`` None):
    for a delta row of weight -w, w copies of the equal row (fewer if fewer exist; the
    first copies in ``rows`` order); rows of positive weight delete nothing.

    Args:
        rows: Current rows of the table (at least the compared columns).
        delta: The view's columns plus ``_weight`` (int64), consolidated.
        key: The view's unique key, or None.
    """
    columns = list(key) if key is not None else data_columns(delta)
    names = [f"c{i}" for i in range(len(columns))]  # DuckDB sees positional names only
    current = pa.table([*(rows[c] for c in columns), pa.array(np.arange(rows.num_rows))],
                       names=[*names, "position"])
    changes = pa.table([*(delta[c] for c in columns), delta[WEIGHT],
                        pa.array(np.arange(delta.num_rows))], names=[*names, "weight", "change"])
    same = " AND ".join(f"t.{c} IS NOT DISTINCT FROM d.{c}" for c in names) or "TRUE"
    if key is not None:
        sql = (f"SELECT position, min(change) AS change FROM current t JOIN changes d "
               f"ON {same} GROUP BY position")
    else:
        sql = (f"SELECT t.position, d.change FROM (SELECT *, row_number() OVER (PARTITION BY "
               f"{', '.join(names)} ORDER BY position) AS copy FROM current) t "
               f"JOIN (SELECT * FROM changes WHERE weight < 0) d ON {same} "
               f"WHERE t.copy <= -d.weight")
    with duckdb.connect() as connection:  # own connection: callers may run in threads
        connection.register("current", current)
        connection.register("changes", changes)
        found = connection.execute(f"{sql} ORDER BY 1").fetchnumpy()
    return Deleted(np.asarray(found["position"], np.int64), np.asarray(found["change"], np.int64))


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
