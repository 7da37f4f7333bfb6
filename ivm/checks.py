"""Constructs that the incremental evaluator does not maintain, each with its reason."""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from ivm.rank_ranges import rank_orders
from ivm.shape import (
    SET_OPERATIONS,
    derived_tables,
    group_expressions,
    has_grouping_sets,
    is_derived_table,
    join_kinds,
    outer_join,
    partition_expressions,
    windows,
)
from ivm.unnest_not_in import is_not_in

NON_DETERMINISTIC = frozenset(
    {"rand", "random", "randn", "uuid", "now", "current_timestamp", "current_date",
     "localtimestamp", "unix_timestamp", "shuffle", "monotonically_increasing_id",
     "spark_partition_id", "input_file_name"}
)


def _non_deterministic(node: exp.Expr) -> bool:
    if isinstance(node, exp.Rand | exp.Randn | exp.Uuid | exp.CurrentTimestamp | exp.CurrentDate):
        return True
    return isinstance(node, exp.Func) and node.sql_name().lower() in NON_DETERMINISTIC


def _subquery(node: exp.Expr) -> bool:
    if is_derived_table(node):
        return False
    return isinstance(node, exp.Subquery | exp.Exists) or (
        isinstance(node, exp.In) and node.args.get("query") is not None
    )


def _parenthesized_join(node: exp.Expr) -> bool:
    """Whether ``node`` is a FROM or JOIN item ``(a JOIN b ON ...)``, not a subquery."""
    return is_derived_table(node) and not isinstance(node.this, exp.Query)


Check = tuple[Callable[[exp.Expr], bool], str]

CHECKS: tuple[Check, ...] = (
    (_non_deterministic, "non-deterministic function: its value differs on every refresh"),
    (is_not_in, "NOT IN (subquery): maintained only as a WHERE conjunct over inner joins, "
                "of one column, uncorrelated or correlated only by equalities with the one "
                "table it tests"),
    (_parenthesized_join, "parenthesized join (JOIN (a JOIN b ON ...)): not maintained "
                          "incrementally yet"),
    (_subquery, "subquery: not maintained incrementally yet"),
    (lambda n: isinstance(n, exp.Lateral), "LATERAL VIEW: not maintained incrementally yet"),
)


def find_reason(query: exp.Expr) -> tuple[str, str] | None:
    """Return why ``query`` is not incremental, with the SQL fragment at fault.

    Args:
        query: A qualified sqlglot expression, CTEs already inlined.

    Returns:
        ``(reason, fragment)`` for the first unsupported construct, or None.
    """
    if query.args.get("with_") or query.args.get("with"):
        return "WITH (CTE) that cannot be inlined: not maintained incrementally yet", (
            query.sql("spark")[:80])
    for clause in ("order", "limit", "offset"):
        if query.args.get(clause):
            return f"{clause.upper()}: top-K is maintained only at the top of a view", (
                query.args[clause].sql("spark"))
    if isinstance(query, SET_OPERATIONS):
        return find_reason(query.left) or find_reason(query.right)
    if not isinstance(query, exp.Select):
        return f"{query.key.upper()}: not a SELECT block", query.sql("spark")
    return _block_reason(query)


def _block_reason(query: exp.Select) -> tuple[str, str] | None:
    for node in query.walk(prune=lambda n: n is not query and is_derived_table(n)):
        for test, reason in CHECKS:
            if test(node):
                return reason, node.sql("spark")
    for derived in derived_tables(query):
        found = find_reason(derived.this)
        if found:
            return found
    if has_grouping_sets(query):
        return ("GROUP BY ROLLUP, CUBE or GROUPING SETS: not maintained incrementally yet",
                query.args["group"].sql("spark"))
    return _join_reason(query) or _window_reason(query)


def _join_reason(query: exp.Select) -> tuple[str, str] | None:
    kinds = join_kinds(query)
    joins = query.args.get("joins") or []
    for kind, join in zip(kinds, joins, strict=True):
        if kind in {"SEMI", "ANTI"}:
            return f"{kind} join: not maintained incrementally yet", join.sql("spark")
    if any(k in {"LEFT", "RIGHT", "FULL"} for k in kinds) and outer_join(query) is None:
        return ("outer join: maintained only with an equality between its two sides in ON "
                "(a join of more tables is read as nested two-table joins)",
                " ".join(j.sql("spark") for j in joins))
    return None


def _window_reason(query: exp.Select) -> tuple[str, str] | None:
    found = windows(query)
    if not found:
        return None
    fragment = found[0].sql("spark")
    if group_expressions(query) is not None:
        return "window function over GROUP BY or DISTINCT: not maintained incrementally yet", (
            fragment)
    if not partition_expressions(query) and rank_orders(query) is None:
        return ("window function without a PARTITION BY shared by every window, other than "
                "RANK or DENSE_RANK ordered by one expression, or ROW_NUMBER ordered by a key "
                "of the rows: each row depends on the whole "
                "input"), fragment
    return None
