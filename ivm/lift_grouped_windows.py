"""Rewrite rule: a window over a GROUP BY block reads the grouped rows from a derived table.

``SELECT g, SUM(x) AS s, RANK() OVER (PARTITION BY h ORDER BY SUM(x)) AS r FROM t GROUP BY g, h``
becomes ``SELECT __grouped.g AS g, __grouped.s AS s, RANK() OVER (PARTITION BY
__grouped.__h0 ORDER BY __grouped.__h1) AS r FROM (SELECT g AS g, SUM(x) AS s, h AS __h0,
SUM(x) AS __h1 FROM t GROUP BY g, h) AS __grouped``. SQL evaluates windows after grouping,
so the two are equal; the grouped block is then maintained by its own law and the window
by recomputing the partitions the grouped rows' delta touches.

Inside a window's parts, each aggregate that is not the window function itself (the inner
``SUM`` of ``SUM(SUM(x)) OVER (...)``) and each column outside an aggregate (a grouping
column) becomes a column of the derived table, ``GROUPING(...)`` included: grouping sets
are then expanded in the derived table (:mod:`ivm.expand_grouping_sets`). Blocks with
DISTINCT or QUALIFY are left alone (the compiler names them).

A pure function over a qualified sqlglot tree, in the style of sqlglot's optimizer rules.
"""

from __future__ import annotations

from sqlglot import exp

from ivm.shape import group_expressions, windows

__all__ = ["lift_grouped_windows"]

GROUPED = "__grouped"
"""Alias of the derived table holding the grouped rows."""
HIDDEN_PREFIX = "__h"
"""Column of the derived table for a part of a window."""


def lift_grouped_windows(query: exp.Query) -> exp.Query:
    """Apply the rewrite to every SELECT block of ``query`` that groups and has windows."""
    for select in reversed(list(query.find_all(exp.Select))):  # the root last: it returns
        if _applies(select):
            lifted = _lifted(select)
            if select is query:
                return lifted  # the root has no parent to be replaced in
            select.replace(lifted)
    return query


def _applies(select: exp.Select) -> bool:
    return (bool(windows(select)) and group_expressions(select) is not None
            and not select.args.get("distinct")
            and select.args.get("qualify") is None
            and not any(isinstance(n, exp.Window) for n in _clauses(select)))


def _clauses(select: exp.Select) -> list[exp.Expr]:
    """The nodes of WHERE, GROUP BY and HAVING (a window there is left to the compiler)."""
    return [node for key in ("where", "group", "having")
            if (clause := select.args.get(key)) is not None for node in clause.walk()]


def _lifted(select: exp.Select) -> exp.Select:
    inner = select.copy()
    for clause in ("order", "limit", "offset"):
        inner.set(clause, None)
    hidden: dict[str, str] = {}
    inner_items: list[exp.Expr] = []
    outer_items: list[exp.Expr] = []
    for item in select.expressions:
        name = item.alias_or_name
        if not any(isinstance(n, exp.Window) for n in item.walk()):
            inner_items.append(exp.alias_(_unaliased(item).copy(), name))
            outer_items.append(exp.alias_(exp.column(name, table=GROUPED), name))
            continue
        window_item = _unaliased(item).copy()
        for target in _targets(window_item):
            key = target.sql("spark")
            if key not in hidden:
                hidden[key] = f"{HIDDEN_PREFIX}{len(hidden)}"
                inner_items.append(exp.alias_(target.copy(), hidden[key]))
            target.replace(exp.column(hidden[key], table=GROUPED))
        outer_items.append(exp.alias_(window_item, name))
    inner.set("expressions", inner_items)
    outer = exp.select(*outer_items).from_(inner.subquery(GROUPED))
    for clause in ("order", "limit", "offset"):
        if select.args.get(clause) is not None:
            outer.set(clause, select.args[clause].copy())
    return outer


def _unaliased(item: exp.Expr) -> exp.Expr:
    return item.this if isinstance(item, exp.Alias) else item


def _targets(item: exp.Expr) -> list[exp.Expr]:
    """The parts of a window item the grouped rows give: aggregates and grouping columns."""
    found: list[exp.Expr] = []
    for node in item.find_all(exp.AggFunc, exp.Column):
        if any(node is f or _inside(node, f) for f in found):
            continue
        if _window_function(node):
            continue
        if isinstance(node, exp.Column) and _under_aggregate(node, item):
            continue
        found.append(node)
    return found


def _inside(node: exp.Expr, ancestor: exp.Expr) -> bool:
    parent = node.parent
    while parent is not None:
        if parent is ancestor:
            return True
        parent = parent.parent
    return False


def _under_aggregate(node: exp.Expr, root: exp.Expr) -> bool:
    """Whether ``node`` is inside a group aggregate (not a window function) of ``root``."""
    parent = node.parent
    while parent is not None and parent is not root.parent:
        if isinstance(parent, exp.AggFunc) and not _window_function(parent):
            return True
        parent = parent.parent
    return False


def _window_function(node: exp.Expr) -> bool:
    """Whether ``node`` is the function of a window (not an aggregate in its PARTITION BY).

    The function may sit in IGNORE NULLS, RESPECT NULLS or FILTER.
    """
    child, parent = node, node.parent
    while isinstance(parent, exp.IgnoreNulls | exp.RespectNulls | exp.Filter):
        child, parent = parent, parent.parent
    return isinstance(parent, exp.Window) and child.arg_key == "this"
