"""Constructs that the incremental evaluator does not maintain, each with its reason."""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

NON_DETERMINISTIC = frozenset(
    {"rand", "random", "randn", "uuid", "now", "current_timestamp", "current_date",
     "localtimestamp", "unix_timestamp", "shuffle", "monotonically_increasing_id",
     "spark_partition_id", "input_file_name"}
)


def _non_deterministic(node: exp.Expr) -> bool:
    if isinstance(node, exp.Rand | exp.Randn | exp.Uuid | exp.CurrentTimestamp | exp.CurrentDate):
        return True
    return isinstance(node, exp.Func) and node.sql_name().lower() in NON_DETERMINISTIC


def _outer_join(node: exp.Expr) -> bool:
    return isinstance(node, exp.Join) and bool(node.args.get("side") or node.args.get("kind"))


def _subquery(node: exp.Expr) -> bool:
    return isinstance(node, exp.Subquery | exp.Exists) or (
        isinstance(node, exp.In) and node.args.get("query") is not None
    )


Check = tuple[Callable[[exp.Expr], bool], str]

CHECKS: tuple[Check, ...] = (
    (_non_deterministic, "non-deterministic function: its value differs on every refresh"),
    (lambda n: isinstance(n, exp.Window), "window function: not maintained incrementally yet"),
    (_outer_join, "outer, semi or anti join: only inner joins are maintained incrementally yet"),
    (_subquery, "subquery: not maintained incrementally yet"),
    (lambda n: isinstance(n, exp.Lateral), "LATERAL VIEW: not maintained incrementally yet"),
)


def find_reason(query: exp.Expression) -> tuple[str, str] | None:
    """Return why ``query`` is not incremental, with the SQL fragment at fault.

    Args:
        query: A qualified sqlglot expression.

    Returns:
        ``(reason, fragment)`` for the first unsupported construct, or None.
    """
    if not isinstance(query, exp.Select):
        return f"{query.key.upper()}: only a single SELECT block is incremental yet", query.sql()
    if query.args.get("with_") or query.args.get("with"):
        return "WITH (CTE): not maintained incrementally yet", query.sql()[:80]
    for clause in ("order", "limit", "offset"):
        if query.args.get(clause):
            return f"{clause.upper()}: a view has no order; top-K is not incremental yet", (
                query.args[clause].sql("spark")
            )
    for node in query.walk():
        for test, reason in CHECKS:
            if test(node):
                return reason, node.sql("spark")
    return None
