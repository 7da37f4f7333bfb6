"""Split an ``ORDER BY ... LIMIT K`` view into its inner query and a total order.

The top-K law (:mod:`ivm.top_k_state`) maintains the inner query (the view without its
ORDER BY and LIMIT) by its own plan, and keeps a buffer of its best rows. Its rows are
ranked by a *total* order: the view's ORDER BY, then every column of the inner query
ascending, so that two rows tie only when they are equal. Spark's ``ORDER BY ... LIMIT``
leaves the choice among rows tied at the K-th place open; the view takes the smallest by
that tie-break, on every tick and at every full refresh alike.

An ORDER BY term that is not an output column becomes a hidden column of the inner query
(``__o<i>``), read by the order and dropped from the view's rows.

Pure functions over sqlglot expressions. Source: Yi et al., "Efficient Maintenance of
Materialized Top-k Views" (ICDE 2003): a view of the top K' >= K rows, refilled from the
base data only when deletions leave fewer than K.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from ivm.shape import SET_OPERATIONS

__all__ = ["MAX_LIMIT", "Ordering", "TopKQuery", "buffer_rows", "top_k_query", "without_order"]

MAX_LIMIT = 10_000
"""Largest LIMIT maintained by the top-K law: its buffer is read whole at every tick."""

HIDDEN_PREFIX = "__o"
"""Inner query column of an ORDER BY term that is not an output column."""


@dataclass(frozen=True)
class Ordering:
    """One term of the total order: an inner query column and its direction.

    Attributes:
        column: The inner query's column.
        descending: DESC.
        nulls_first: NULLs before other values (Spark's default: ASC yes, DESC no).
    """

    column: str
    descending: bool = False
    nulls_first: bool = True


@dataclass(frozen=True)
class TopKQuery:
    """An ``ORDER BY ... LIMIT K`` view split for the top-K law.

    Attributes:
        inner: The view without ORDER BY and LIMIT, plus a hidden column per ORDER BY term
            that is not an output.
        outputs: The view's columns: the inner query's first ones.
        order: The total order: the view's ORDER BY, then every inner column ascending.
        limit: K.
    """

    inner: exp.Query
    outputs: tuple[str, ...]
    order: tuple[Ordering, ...]
    limit: int


def buffer_rows(limit: int) -> int:
    """K': the rows the buffer keeps beyond which the view's K are refilled from.

    Twice K plus 16: deletions of up to K + 16 of the best rows are absorbed before the
    buffer runs short.
    """
    return 2 * limit + 16


def top_k_query(query: exp.Query) -> TopKQuery | str | None:
    """The view as a :class:`TopKQuery`, why the top-K law cannot take it, or None.

    Args:
        query: The qualified query as written (CTEs not inlined).

    Returns:
        None when the view has no ORDER BY or LIMIT (not top-K at all); a reason when it
        has them but the law does not apply (no LIMIT, an OFFSET, a LIMIT that is not a
        constant of at most :data:`MAX_LIMIT`, an order over a non-output column of a
        DISTINCT or a set operation).
    """
    order, limit = query.args.get("order"), query.args.get("limit")
    if order is None and limit is None:
        return None
    if query.args.get("offset") is not None:
        return "OFFSET: a view has no order; top-K with an offset is not incremental yet"
    if limit is None:  # compile_view drops such an ORDER BY first: a view has no order
        return "ORDER BY without LIMIT: a view has no order"
    count = limit.expression
    constant = isinstance(count, exp.Literal) and count.is_int
    if not constant or not 1 <= int(count.this) <= MAX_LIMIT:
        return f"LIMIT {count.sql('spark')}: top-K takes a constant of 1 to {MAX_LIMIT:,}"
    inner = query.copy()
    for clause in ("order", "limit"):
        inner.set(clause, None)
    outputs = tuple(s.alias_or_name for s in inner.selects)
    orderings: list[Ordering] = []
    for term in order.expressions if order is not None else []:
        column = _output(inner, term.this, outputs)
        if column is None:
            if isinstance(inner, SET_OPERATIONS) or inner.args.get("distinct"):
                return (f"ORDER BY {term.this.sql('spark')}: not an output column of a "
                        "DISTINCT or a set operation")
            assert isinstance(inner, exp.Select)
            column = f"{HIDDEN_PREFIX}{len(orderings)}"
            inner.select(term.this.copy().as_(column), copy=False)
        orderings.append(Ordering(column, bool(term.args.get("desc")),
                                  bool(term.args.get("nulls_first"))))
    ordered = {o.column for o in orderings}
    orderings += [Ordering(s.alias_or_name) for s in inner.selects
                  if s.alias_or_name not in ordered]
    return TopKQuery(inner, outputs, tuple(orderings), int(count.this))


def _output(query: exp.Query, term: exp.Expr, outputs: tuple[str, ...]) -> str | None:
    """The output column ``term`` names (its alias, position or an equal expression), or None."""
    if isinstance(term, exp.Column) and not term.table and term.name in outputs:
        return term.name
    if isinstance(term, exp.Literal) and term.is_int and 1 <= int(term.this) <= len(outputs):
        return outputs[int(term.this) - 1]  # ORDER BY 2: the second output
    for select in query.selects:
        node = select.this if isinstance(select, exp.Alias) else select
        if node.unnest() == term.unnest():  # DISTINCT(x) selects (x)
            return select.alias_or_name
    return None


def without_order(query: exp.Query) -> exp.Query:
    """``query`` without an ORDER BY that has no LIMIT or OFFSET (a view has no order).

    The rows are the same in any order, so the view is maintained as if it had none; the
    ORDER BY of a top-K view is kept.
    """
    if query.args.get("order") is None or query.args.get("limit") or query.args.get("offset"):
        return query
    unordered = query.copy()
    unordered.set("order", None)
    return unordered
