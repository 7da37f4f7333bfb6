"""Exact multiset difference and consolidation of Arrow tables, by row hash.

A change feed that reads the same files at two snapshots (copy-on-write rewrites,
overwrites) sees nearly every row twice, once with weight +1 and once with -1. Grouping
both sides by every column in Spark shuffles twice the files' rows to find the few that
differ. Here each row gets a 64-bit hash (DuckDB's ``hash``) and rows are sorted by it; in
a hash group with as many new rows as old ones, the rows are paired and a pair cancels
only when its two rows are equal column by column, so the result is exact whatever the
hash collides on. The rows left over are few: a group of one row is its own
consolidation, and larger groups are grouped by every column in DuckDB.

Equality is Spark's grouping equality: NULL equals NULL, -0.0 equals 0.0 and NaN equals
NaN (Spark normalizes floating point grouping keys), so float columns are normalized first
(to 0.0 and one NaN), as Spark's own consolidation outputs them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ivm import WEIGHT


def difference(new: pa.Table, old: pa.Table,
               hash_rows: Callable[[pa.Table], np.ndarray] | None = None) -> pa.Table:
    """``new`` minus ``old`` as multisets, as a consolidated Z-set.

    Args:
        new: Rows with weight +1.
        old: Rows with weight -1; the same columns (types are cast to ``new``'s).
        hash_rows: Row hash function (default :func:`row_hashes`). Any function that
            gives equal rows equal hashes gives the same result; collisions cost only
            work (tests force them with it).

    Returns:
        ``new``'s columns plus ``_weight`` (int64): each distinct row once, with
        (occurrences in ``new``) - (occurrences in ``old``), zero weights dropped.
    """
    if old.schema != new.schema:
        old = old.cast(new.schema)
    rows = pa.concat_tables([_normalized(new), _normalized(old)])
    weights = np.concatenate([np.ones(new.num_rows, np.int64),
                              np.full(old.num_rows, -1, np.int64)])
    groups = _Groups.of((hash_rows or row_hashes)(rows))
    return _consolidated(rows, weights, groups, ~groups.cancelled(rows, weights))


def consolidate(zset: pa.Table,
                hash_rows: Callable[[pa.Table], np.ndarray] | None = None) -> pa.Table:
    """Merge equal rows of an Arrow Z-set and drop zero weights (Spark's grouping equality).

    Args:
        zset: Data columns plus ``_weight`` (integer).
        hash_rows: Row hash function, as for :func:`difference`.

    Returns:
        The same columns, ``_weight`` as int64, each distinct row once, no zero weight.
    """
    rows = _normalized(zset.drop_columns([WEIGHT]))
    weights = zset.column(WEIGHT).to_numpy().astype(np.int64)
    groups = _Groups.of((hash_rows or row_hashes)(rows))
    return _consolidated(rows, weights, groups, np.ones(groups.count, bool))


@dataclass
class _Groups:
    """Rows grouped by hash: ``order`` lists row indices group after group.

    Attributes:
        order: Row indices sorted by hash (stable: within a group, by index).
        starts: Offset in ``order`` of each group's first row.
        sizes: Rows in each group.
    """

    order: np.ndarray
    starts: np.ndarray
    sizes: np.ndarray

    @classmethod
    def of(cls, hashes: np.ndarray) -> _Groups:
        order = np.argsort(hashes, kind="stable")
        ordered = hashes[order]
        starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]])) \
            if len(ordered) else np.zeros(0, np.int64)
        sizes = np.diff(np.append(starts, len(ordered)))
        return cls(order, starts, sizes)

    @property
    def count(self) -> int:
        return len(self.starts)

    def cancelled(self, rows: pa.Table, weights: np.ndarray) -> np.ndarray:
        """Groups whose +1 rows pair off with equal -1 rows (weights +1 before -1 by index).

        In a group with as many +1 rows as -1 rows (k each), the stable order puts the
        +1 rows first: the i-th pairs with the (k+i)-th. One unequal pair keeps the group.
        """
        sums = np.add.reduceat(weights[self.order], self.starts) if self.count else \
            np.zeros(0, np.int64)
        balanced = np.flatnonzero(sums == 0)
        half = self.sizes[balanced] // 2
        group = np.repeat(balanced, half)
        first = _spans(self.starts[balanced], half)
        left, right = self.order[first], self.order[first + half.repeat(half)]
        result = np.zeros(self.count, bool)
        result[balanced] = True
        result[group[~rows_equal(rows, left, right)]] = False
        return result


def _consolidated(rows: pa.Table, weights: np.ndarray, groups: _Groups,
                  keep: np.ndarray) -> pa.Table:
    """The Z-set of the kept groups: single rows as they are, larger groups grouped exactly."""
    kept = np.flatnonzero(keep)
    single = kept[groups.sizes[kept] == 1]
    alone = groups.order[groups.starts[single]]
    alone = alone[weights[alone] != 0]
    multi = kept[groups.sizes[kept] > 1]
    members = groups.order[_spans(groups.starts[multi], groups.sizes[multi])]
    index, sums = _grouped(rows.take(members), weights[members])
    chosen = np.concatenate([alone, members[index]])
    result = rows.take(chosen)
    return result.append_column(WEIGHT, pa.array(
        np.concatenate([weights[alone], sums]), pa.int64()))


def row_hashes(rows: pa.Table) -> np.ndarray:
    """A 64-bit hash of each row (DuckDB's ``hash`` over every column), in row order.

    Returns:
        uint64 array, one per row. Equal rows (NULLs equal) hash equally; floats must be
        normalized first for -0.0 and NaN.
    """
    if rows.num_rows == 0:
        return np.zeros(0, np.uint64)
    columns = ", ".join(_quoted(name) for name in rows.column_names)
    with duckdb.connect() as con:
        con.execute("SET preserve_insertion_order = true")
        con.register("rows_", rows)
        hashes = con.execute(f"SELECT hash({columns}) FROM rows_").to_arrow_table()
    return hashes.column(0).to_numpy()


def rows_equal(rows: pa.Table, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Whether row ``left[i]`` equals row ``right[i]`` in every column (NULL equals NULL).

    Columns Arrow cannot compare (nested types) count as unequal: their rows are then
    grouped exactly instead.
    """
    equal = np.ones(len(left), bool)
    if not len(left):
        return equal
    order = np.argsort(left)  # take in file order: sequential reads on both sides mostly
    left, right = pa.array(left[order]), pa.array(right[order])
    for column in rows.columns:
        a, b = column.take(left), column.take(right)
        try:
            same = pc.equal(a, b)
        except pa.ArrowNotImplementedError:
            return np.zeros(len(order), bool)
        if a.null_count or b.null_count:
            same = pc.or_kleene(same, pc.and_(pc.is_null(a), pc.is_null(b)))
        equal &= pc.fill_null(same, False).to_numpy(zero_copy_only=False)
    result = np.empty(len(order), bool)
    result[order] = equal
    return result


def _grouped(rows: pa.Table, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group ``rows`` by every column (DuckDB): one row index and the weight sum per group.

    Returns:
        (indices into ``rows``, int64 sums), groups whose sum is zero left out.
    """
    if rows.num_rows == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    index, weight = _fresh("__row", rows.column_names), _fresh("__weight", rows.column_names)
    frame = rows.append_column(index, pa.array(np.arange(rows.num_rows))) \
        .append_column(weight, pa.array(weights, pa.int64()))
    keys = ", ".join(_quoted(name) for name in rows.column_names)
    with duckdb.connect() as con:
        con.register("rows_", frame)
        result = con.execute(
            f"SELECT min({_quoted(index)}), sum({_quoted(weight)})::BIGINT FROM rows_ "
            f"GROUP BY {keys} HAVING sum({_quoted(weight)}) <> 0").to_arrow_table()
    return result.column(0).to_numpy(), result.column(1).to_numpy()


def _normalized(rows: pa.Table) -> pa.Table:
    """Float columns with -0.0 as 0.0 and every NaN as one NaN (Spark's grouping keys)."""
    for i, field in enumerate(rows.schema):
        if pa.types.is_float32(field.type) or pa.types.is_float64(field.type):
            column = rows.column(i)
            column = pc.if_else(pc.equal(column, 0), pa.scalar(0.0, field.type), column)
            column = pc.if_else(pc.is_nan(column), pa.scalar(float("nan"), field.type), column)
            rows = rows.set_column(i, field, column)
    return rows


def _spans(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The offsets ``starts[g] .. starts[g] + sizes[g] - 1`` of every g, concatenated."""
    offsets = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    return np.repeat(starts, sizes) + offsets


def _fresh(name: str, taken: list[str]) -> str:
    while name in taken:
        name += "_"
    return name


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
