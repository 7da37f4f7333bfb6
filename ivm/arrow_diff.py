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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ivm.arrow_take import take_rows
from ivm.duckdb_database import SharedDatabase
from ivm.zset import WEIGHT


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
    hash_rows = hash_rows or row_hashes
    new = _normalized(new)
    old = _normalized(old if old.schema == new.schema else old.cast(new.schema))
    added, removed = _Runs.of(hash_rows(new)), _Runs.of(hash_rows(old))
    left, right = added.paired_with(removed)
    equal = rows_equal(new, old, added.order[left], removed.order[right])
    added.keep(left, equal)
    removed.keep(right, equal)
    plus, minus = added.left, removed.left
    rows = pa.concat_tables([take_rows(new, plus), take_rows(old, minus)])
    weights = np.repeat(np.array([1, -1], np.int64), [len(plus), len(minus)])
    return _consolidated(rows, weights, np.concatenate([added.hashes[plus],
                                                        removed.hashes[minus]]))


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
    return _consolidated(rows, weights, (hash_rows or row_hashes)(rows))


@dataclass
class _Runs:
    """One side's rows sorted by hash, as runs of equal hashes.

    Attributes:
        hashes: Each row's hash (uint64), in row order.
        order: Row indices sorted by hash.
        values: Each run's hash, ascending.
        sizes: Each run's length.
        cancelled: Per run, whether it cancels against the other side.
    """

    hashes: np.ndarray
    order: np.ndarray
    values: np.ndarray
    sizes: np.ndarray
    cancelled: np.ndarray

    @classmethod
    def of(cls, hashes: np.ndarray) -> _Runs:
        order = np.argsort(hashes)
        ordered = hashes[order]
        firsts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]])) \
            if len(ordered) else np.zeros(0, np.int64)
        sizes = np.diff(np.append(firsts, len(ordered)))
        return cls(hashes, order, ordered[firsts], sizes, np.zeros(len(firsts), bool))

    def paired_with(self, other: _Runs) -> tuple[np.ndarray, np.ndarray]:
        """Pair the rows of runs with the same hash and length on both sides.

        Marks those runs cancelled on both sides and returns, for each pair, the row's
        offset in ``order`` on this side and on ``other`` (same runs, same hash order).
        """
        at = np.minimum(np.searchsorted(other.values, self.values), max(len(other.values) - 1, 0))
        same = (other.values[at] == self.values) & (other.sizes[at] == self.sizes) \
            if len(other.values) else np.zeros(len(self.values), bool)
        self.cancelled[same] = True
        other.cancelled[at[same]] = True
        return (np.flatnonzero(np.repeat(self.cancelled, self.sizes)),
                np.flatnonzero(np.repeat(other.cancelled, other.sizes)))

    def keep(self, paired: np.ndarray, equal: np.ndarray) -> None:
        """Un-cancel every run with an unequal pair (offsets ``paired``)."""
        run_of = np.repeat(np.arange(len(self.sizes)), self.sizes)
        self.cancelled[run_of[paired[~equal]]] = False

    @property
    def left(self) -> np.ndarray:
        """Indices of the rows of runs that did not cancel."""
        return self.order[~np.repeat(self.cancelled, self.sizes)]


def _consolidated(rows: pa.Table, weights: np.ndarray, hashes: np.ndarray) -> pa.Table:
    """``rows`` with ``weights`` consolidated.

    A row alone with its hash is consolidated already; rows sharing a hash are grouped by
    every column.
    """
    runs = _Runs.of(hashes)
    single = np.repeat(runs.sizes == 1, runs.sizes)
    alone = runs.order[single]
    alone = alone[weights[alone] != 0]
    shared = runs.order[~single]
    index, sums = _grouped(rows.take(shared), weights[shared])
    chosen = np.concatenate([alone, shared[index]])
    return rows.take(chosen).append_column(
        WEIGHT, pa.array(np.concatenate([weights[alone], sums]), pa.int64()))


def row_hashes(rows: pa.Table) -> np.ndarray:
    """A 64-bit hash of each row (DuckDB's ``hash`` over every column), in row order.

    Returns:
        uint64 array, one per row. Equal rows (NULLs equal) hash equally; floats must be
        normalized first for -0.0 and NaN.
    """
    if rows.num_rows == 0:
        return np.zeros(0, np.uint64)
    columns = ", ".join(_quoted(name) for name in rows.column_names)
    with _DATABASE.cursor() as con:
        con.register("rows_", rows)
        hashes = con.execute(f"SELECT hash({columns}) FROM rows_").to_arrow_table()
    return hashes.column(0).to_numpy()


def rows_equal(first: pa.Table, second: pa.Table, left: np.ndarray,
               right: np.ndarray) -> np.ndarray:
    """Whether row ``left[i]`` of ``first`` equals row ``right[i]`` of ``second``.

    Every column is compared (the tables have the same columns); NULL equals NULL.

    Columns Arrow cannot compare (nested types) count as unequal: their rows are then
    grouped exactly instead.
    """
    equal = np.ones(len(left), bool)
    if not len(left):
        return equal
    order = np.argsort(left)  # take in row order: sequential reads, on both sides if the
    # rewrite kept the rows' order
    left, right = pa.array(left[order]), pa.array(right[order])
    for a, b in zip(first.columns, second.columns, strict=True):
        a, b = a.combine_chunks().take(left), b.combine_chunks().take(right)
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
    with _DATABASE.cursor() as con:
        con.register("rows_", frame)
        result = con.execute(
            f"SELECT min({_quoted(index)}), sum({_quoted(weight)})::BIGINT FROM rows_ "
            f"GROUP BY {keys} HAVING sum({_quoted(weight)}) <> 0").to_arrow_table()
    return result.column(0).to_numpy(), result.column(1).to_numpy()


_DATABASE = SharedDatabase({"preserve_insertion_order": True})
"""The process's database for hashing and grouping (a cursor each: its tables its own)."""


def _normalized(rows: pa.Table) -> pa.Table:
    """Float columns with -0.0 as 0.0 and every NaN as one NaN (Spark's grouping keys)."""
    for i, field in enumerate(rows.schema):
        if pa.types.is_float32(field.type) or pa.types.is_float64(field.type):
            column = rows.column(i)
            column = pc.if_else(pc.equal(column, 0), pa.scalar(0.0, field.type), column)
            column = pc.if_else(pc.is_nan(column), pa.scalar(float("nan"), field.type), column)
            rows = rows.set_column(i, field, column)
    return rows


def _fresh(name: str, taken: list[str]) -> str:
    while name in taken:
        name += "_"
    return name


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
