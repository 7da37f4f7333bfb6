"""The top-K law on Spark: a buffer of the inner query's best rows, advanced by its delta.

An ``ORDER BY ... LIMIT K`` view is maintained from its inner query's delta (the view
without ORDER BY and LIMIT, maintained by its own plan) and a buffer: the inner rows that
come strictly before a *bound* row in the view's total order (:mod:`ivm.top_k`), at least
K of them, or every inner row when there are few (no bound). Since the buffer holds every
inner row before the bound, a tick adds to it the delta's rows before the bound, and
nothing else can enter; the view is the buffer's first K rows. When deletions leave fewer
than K rows before the bound, the buffer is refilled from the inner query at the new
frontier (:func:`fill`); when insertions grow it past K' rows, its tail is cut and the
first row cut becomes the bound.

Rows are consolidated Z-sets: equal rows are one row with a weight, and rows tie in the
total order only when equal, so every window below orders rows deterministically. The
buffer, the bound and the delta stay on Spark; only counts reach the driver. Source: Yi et
al., "Efficient Maintenance of Materialized Top-k Views" (ICDE 2003); DBSP's Z-sets
(Budiu et al., VLDB 2023).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ivm.aggregate_state import AggregateState
from ivm.plan import TopKPlan
from ivm.spark_observe import checkpointed
from ivm.zset import WEIGHT, consolidate, data_columns, with_weight

__all__ = ["TopKState", "advance", "fill", "view_rows"]

_SIDE = "__side"
_POSITION = "__position"
_BEFORE = "__before"
"""The weight of the rows before a row in the total order (a running sum)."""


@dataclass(frozen=True)
class TopKState:
    """The state of a top-K view at one frontier.

    Attributes:
        buffer: The inner rows before ``bound`` in the total order, a consolidated Z-set
            (inner columns plus ``_weight``, positive), checkpointed; at least K rows
            when ``bound`` is set.
        bound: The first inner row after the buffer (one row, inner columns), or None when
            the buffer holds every inner row.
        inner: The inner plan's own state (an aggregate state), if it keeps one.
    """

    buffer: DataFrame
    bound: DataFrame | None
    inner: AggregateState | None = None


@dataclass(frozen=True)
class Advanced:
    """One tick of a top-K view.

    Attributes:
        state: The state at the new frontier (``inner`` not set).
        delta: The view's delta: its columns plus ``_weight``, consolidated.
        refilled: Whether the buffer ran short and was refilled from the inner query.
    """

    state: TopKState
    delta: DataFrame
    refilled: bool


def order(top: TopKPlan) -> list[Column]:
    """The total order as Spark sort columns."""
    columns = []
    for term in top.order:
        column = F.col(term.column)
        if term.descending:
            column = column.desc_nulls_first() if term.nulls_first else column.desc_nulls_last()
        else:
            column = column.asc_nulls_first() if term.nulls_first else column.asc_nulls_last()
        columns.append(column)
    return columns


def fill(top: TopKPlan, rows: DataFrame) -> TopKState:
    """The buffer of the inner query's rows ``rows`` (duplicates kept): two or three scans.

    Takes the best K' rows (Spark's ``TakeOrderedAndProject``: a top-K per partition, then
    merged). If there are K' of them, the last one may have equal rows beyond: they are
    counted, and the best rows are taken again through every copy of it and one row more,
    which becomes the bound.
    """
    best, total, last = _best(top, rows, top.buffer_rows)
    if total < top.buffer_rows:  # every inner row
        return TopKState(_unranked(best), None)
    last_row = best.where(F.col(_POSITION) == last).select(*top.inner.columns)
    stats = best.where(F.col(_POSITION) == last).select(_BEFORE).first()
    assert stats is not None
    through = int(stats[0]) + _count_equal(rows, last_row) + 1
    best, total, last = _best(top, rows, through)
    if total < through:  # no row after the last one's copies
        return TopKState(_unranked(best), None)
    bound = best.where(F.col(_POSITION) == last).select(*top.inner.columns)
    return TopKState(_unranked(best.where(F.col(_POSITION) < last)), bound)


def _best(top: TopKPlan, rows: DataFrame, count: int) -> tuple[DataFrame, int, int]:
    """The best ``count`` rows as a ranked Z-set (checkpointed), their number, the last position."""
    best = consolidate(with_weight(rows.orderBy(*order(top)).limit(count), 1))
    ranked, stats = checkpointed(_ranked(top, best), total=F.coalesce(F.sum(WEIGHT), F.lit(0)),
                                 last=F.max(_POSITION))
    return ranked, int(stats["total"]), int(stats["last"] or 0)


def _count_equal(rows: DataFrame, row: DataFrame) -> int:
    """How many of ``rows`` equal the one row ``row`` (NULL equal to NULL, as grouping)."""
    names = [f"__equal{i}" for i in range(len(row.columns))]
    other = F.broadcast(row.toDF(*names))  # fresh attributes: no self-join ambiguity
    condition = F.lit(True)
    for column, name in zip(row.columns, names, strict=True):
        condition = condition & rows[column].eqNullSafe(F.col(name))
    return rows.join(other, on=condition, how="left_semi").count()


def advance(top: TopKPlan, state: TopKState, delta: DataFrame,
            rows_at_new: Callable[[], DataFrame]) -> Advanced:
    """Add the inner query's ``delta`` to the buffer; refill it from ``rows_at_new`` if short.

    Args:
        top: The view's top-K plan.
        state: The state at the old frontier.
        delta: The inner query's delta (inner columns plus ``_weight``).
        rows_at_new: The inner query's rows at the new frontier, read only for a refill.
    """
    columns = data_columns(state.buffer)
    delta = delta.select(*columns, WEIGHT)
    entering = delta if state.bound is None else _before_bound(top, delta, state.bound)
    added, stats = checkpointed(consolidate(state.buffer.unionByName(entering)),
                                total=F.coalesce(F.sum(WEIGHT), F.lit(0)), lowest=F.min(WEIGHT))
    total, lowest = int(stats["total"]), stats["lowest"]
    short = state.bound is not None and total < top.limit
    if short or (lowest is not None and lowest < 0):  # the latter: not a state of this view
        new = fill(top, rows_at_new())
        return Advanced(new, _view_delta(top, state.buffer, new.buffer), True)
    new = (_trimmed(top, added, state.bound) if total > top.buffer_rows
           else TopKState(added, state.bound))
    return Advanced(new, _view_delta(top, state.buffer, new.buffer), False)


def view_rows(top: TopKPlan, buffer: DataFrame) -> DataFrame:
    """The view's rows (duplicates kept) from a buffer: its first K, output columns only."""
    copies = F.explode(F.sequence(F.lit(1), F.col(WEIGHT)))
    return _first(top, buffer).withColumn("__copy", copies).select(*top.outputs)


def _ranked(top: TopKPlan, zset: DataFrame) -> DataFrame:
    """``zset`` with each row's position and the weight before it, in the total order."""
    window = Window.orderBy(*order(top))
    running = window.rowsBetween(Window.unboundedPreceding, -1)
    return (zset.withColumn(_POSITION, F.row_number().over(window))
            .withColumn(_BEFORE, F.coalesce(F.sum(WEIGHT).over(running), F.lit(0))))


def _unranked(ranked: DataFrame) -> DataFrame:
    return ranked.drop(_POSITION, _BEFORE)


def _before_bound(top: TopKPlan, delta: DataFrame, bound: DataFrame) -> DataFrame:
    """The rows of ``delta`` strictly before ``bound`` in the total order.

    The bound is ranked among them, before any row equal to it (``__side`` descending):
    rows equal to the bound are not in the buffer, nor are their changes.
    """
    sides = delta.withColumn(_SIDE, F.lit(0)).unionByName(
        bound.withColumn(WEIGHT, F.lit(0).cast("bigint")).withColumn(_SIDE, F.lit(1)))
    window = Window.orderBy(*order(top), F.col(_SIDE).desc())
    ranked = sides.withColumn(_POSITION, F.row_number().over(window))
    limit = ranked.where(F.col(_SIDE) == 1).select(F.col(_POSITION).alias("__limit"))
    kept = ranked.crossJoin(limit).where(F.col(_POSITION) < F.col("__limit"))
    return kept.select(*data_columns(delta), WEIGHT)


def _trimmed(top: TopKPlan, added: DataFrame, bound: DataFrame | None) -> TopKState:
    """The buffer cut after K' rows: the first row starting at or after K' becomes the bound.

    It comes before the old bound, which it replaces.
    """
    ranked = _ranked(top, added).localCheckpoint(eager=True)
    cut = ranked.where(F.col(_BEFORE) >= top.buffer_rows)
    first = cut.agg(F.min(_POSITION)).first()
    if first is None or first[0] is None:  # the last row's equal rows run past K': kept
        return TopKState(added, bound)
    columns = data_columns(added)
    new_bound = cut.where(F.col(_POSITION) == first[0]).select(*columns)
    return TopKState(_unranked(ranked.where(F.col(_POSITION) < first[0])), new_bound)


def _first(top: TopKPlan, buffer: DataFrame) -> DataFrame:
    """The buffer's first K rows, as a Z-set (a row's weight cut where K is reached)."""
    ranked = _ranked(top, buffer)
    taken = F.least(F.col(WEIGHT), F.greatest(F.lit(top.limit) - F.col(_BEFORE), F.lit(0)))
    return (ranked.withColumn(WEIGHT, taken.cast("bigint")).where(F.col(WEIGHT) > 0)
            .drop(_POSITION, _BEFORE))


def _view_delta(top: TopKPlan, before: DataFrame, after: DataFrame) -> DataFrame:
    """The view's rows from the buffer ``after`` (+1) and ``before`` (-1), consolidated."""
    old = _first(top, before).withColumn(WEIGHT, -F.col(WEIGHT))
    rows = _first(top, after).unionByName(old)
    return consolidate(rows.select(*top.outputs, WEIGHT))
