"""Ranks over the whole input: recompute only the rows ranked at or after a change.

``RANK() OVER (ORDER BY o)`` is one plus the number of rows ordered strictly before the
row, ``DENSE_RANK()`` one plus the number of distinct order values before it. A change
to the input (rows inserted or deleted at order values ``c``) therefore leaves the rank
of every row ordered strictly before the first ``c`` as it was: the delta of the window
block is its output at the new snapshot minus its output at the old one, both
restricted to the rows ordered at or after that first changed value (in each window's
order, NULLs where it places them). The ranks are still computed over the whole input;
only the rows they are emitted for are restricted. With several windows, a row is
recomputed when it lies in the affected range of any of them.

``ROW_NUMBER`` is left out (ties are numbered in no fixed order, so a recompute may
number them differently) unless it orders by a key of the rows, where it is ``RANK``
(:mod:`ivm.rank_unique_row_numbers`); so are other window functions, windows with more
than one ORDER BY expression, frames and PARTITION BY (maintained by affected-key
recompute).

Pure functions over a qualified sqlglot SELECT block, in the style of sqlglot's
optimizer rules. Source: the range-restricted recompute of order-dependent operators,
Gupta and Mumick, "Maintenance of Materialized Views" (IEEE Data Eng. Bull. 1995).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from ivm.rewrite import KEY_PREFIX, Relation, substitute, weighted
from ivm.shape import windows

__all__ = ["RankOrder", "affected_ranks", "rank_orders"]

RANKED = "__ranked"
"""Alias of the window block, computed whole, whose rows the range restricts."""
ORDER_PREFIX = "__r"
"""Column of the window block holding the k-th window's order value."""
OUTPUT_PREFIX = "__o"
"""Column of the window block holding its i-th output."""
RANKINGS = (exp.Rank, exp.DenseRank)


@dataclass(frozen=True)
class RankOrder:
    """The order of one ranking window over the whole input.

    Attributes:
        expression: The ORDER BY expression.
        descending: Whether the order is descending.
        nulls_first: Whether NULLs are ordered before every value (explicit in sqlglot's
            Spark dialect: first for ascending, last for descending by default).
    """

    expression: exp.Expr
    descending: bool
    nulls_first: bool


def rank_orders(query: exp.Select) -> list[RankOrder] | None:
    """The order of each window of the block, when every one ranks over the whole input.

    Returns:
        One entry per window, in output order; None unless the block has windows and
        each is ``RANK()`` or ``DENSE_RANK()`` with no PARTITION BY, no frame and one
        ORDER BY expression of the row's own columns (no aggregate, subquery or window),
        and the block neither groups nor has QUALIFY.
    """
    found = windows(query)
    if not found or query.args.get("group") or query.args.get("distinct") or query.args.get(
            "qualify"):
        return None
    orders = []
    for window in found:
        order = window.args.get("order")
        keys = order.expressions if order is not None else []
        if (not isinstance(window.this, RANKINGS) or window.args.get("partition_by")
                or window.args.get("spec") or len(keys) != 1):
            return None
        key = keys[0]
        if key.this.find(exp.AggFunc, exp.Subquery, exp.Window):
            return None  # a grouped or nested value: not a row's own order value
        orders.append(RankOrder(key.this, bool(key.args.get("desc")),
                                bool(key.args.get("nulls_first"))))
    return orders


def affected_ranks(query: exp.Select, orders: Sequence[RankOrder], role: str, keys_view: str,
                   weight: int, relation: Relation) -> exp.Select:
    """The block's rows at ``role`` in the affected range of any window, as a Z-set.

    Args:
        query: The qualified window block.
        orders: Its windows' orders (:func:`rank_orders`).
        role: ``new`` or ``old``: which snapshot of every source to read.
        keys_view: Relation of the order values the input's delta holds, ``__k<k>`` for
            the k-th window (its rows' values, duplicates allowed).
        weight: +1 for the new rows, -1 for the old ones.
        relation: Gives the relation name of a source at a role.

    Returns:
        ``SELECT`` of the block's outputs (their names kept) plus ``_weight``.
    """
    block = substitute(query, lambda _, source: relation(role, source))
    outputs = [e.unalias().copy().as_(f"{OUTPUT_PREFIX}{i}")
               for i, e in enumerate(block.selects)]
    ranked_orders = [o.expression.copy().as_(f"{ORDER_PREFIX}{k}") for k, o in enumerate(orders)]
    block.set("expressions", [*outputs, *ranked_orders])
    affected = exp.or_(*[_in_range(order, k, keys_view) for k, order in enumerate(orders)])
    names = query.named_selects
    side = (exp.select(*[exp.column(f"{OUTPUT_PREFIX}{i}", table=RANKED).as_(name)
                         for i, name in enumerate(names)])
            .from_(block.subquery(RANKED)).where(affected))
    return weighted(side, weight)


def _in_range(order: RankOrder, k: int, keys_view: str) -> exp.Expr:
    """Whether a row of the block lies at or after the k-th window's first changed value.

    NULLs ordered last follow every value: they are affected by any change. NULLs
    ordered first precede every value: they are affected (and with them every row) only
    by a changed NULL.
    """
    def value() -> exp.Column:
        return exp.column(f"{ORDER_PREFIX}{k}", table=RANKED)

    def changed() -> exp.Column:
        return exp.column(f"{KEY_PREFIX}{k}")

    first = (exp.Max if order.descending else exp.Min)(this=changed())
    compare = exp.LTE if order.descending else exp.GTE
    after = compare(this=value(), expression=_scalar(first, keys_view))
    if order.nulls_first:
        changed_nulls = _scalar(exp.Count(this=exp.Star()), keys_view, changed().is_(exp.null()))
        return exp.or_(exp.GT(this=changed_nulls, expression=exp.Literal.number(0)), after)
    changes = _scalar(exp.Count(this=exp.Star()), keys_view)
    any_change = exp.GT(this=changes, expression=exp.Literal.number(0))
    return exp.or_(exp.and_(value().is_(exp.null()), any_change), after)


def _scalar(aggregate: exp.Expr, keys_view: str, where: exp.Expr | None = None) -> exp.Expr:
    """``(SELECT aggregate FROM keys_view [WHERE where])``, a scalar subquery."""
    select = exp.select(aggregate).from_(keys_view)
    if where is not None:
        select = select.where(where)
    return exp.Subquery(this=select)
