"""Rewrite rule: GROUP BY ROLLUP, CUBE or GROUPING SETS as a UNION ALL of plain GROUP BYs.

``SELECT a, b, SUM(x) AS s, GROUPING(b) AS gb FROM t GROUP BY ROLLUP (a, b)`` becomes
``SELECT a, b, SUM(x) AS s, CAST(0 AS TINYINT) AS gb FROM t GROUP BY a, b UNION ALL
SELECT a, NULL AS b, SUM(x) AS s, CAST(1 AS TINYINT) AS gb FROM t GROUP BY a UNION ALL
SELECT NULL AS a, NULL AS b, SUM(x) AS s, CAST(1 AS TINYINT) AS gb FROM t HAVING COUNT(*) > 0``:
one branch per grouping set, where a grouping expression outside the set reads NULL outside
the aggregates and ``GROUPING``/``GROUPING_ID`` are constants. This is what grouping sets
mean (Gray et al., "Data Cube", ICDE 1996; Spark's ``Expand`` in ``ResolveGroupingAnalytics``):
each output row comes from one set's grouping, so HAVING applies branch by branch. The empty
set keeps no row for an empty input (``HAVING COUNT(*) > 0``), as Spark's grouped
aggregate over ``Expand`` does; a set listed twice groups twice. Each branch is then
maintained by its own aggregate law and the UNION ALL is linear.

Blocks with windows (:mod:`ivm.lift_grouped_windows` moves them out first), DISTINCT,
QUALIFY, LIMIT or OFFSET, a function sqlglot does not know (it could be an aggregate whose
arguments must not change), or more than :data:`MAX_SETS` sets are left alone (the compiler
names them). A block's ORDER BY without LIMIT is dropped: a view has no order.

A pure function over a qualified sqlglot tree, in the style of sqlglot's optimizer rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from itertools import combinations, product

from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types

from ivm.shape import has_grouping_sets, windows

__all__ = ["MAX_SETS", "expand_grouping_sets"]

MAX_SETS = 64
"""Most grouping sets a block is expanded to (a CUBE of six expressions)."""

GroupingSet = frozenset[int]
"""Positions, in the block's grouping expressions, of the expressions grouped by."""


def expand_grouping_sets(query: exp.Query, schema: Mapping[str, object] | None = None
                         ) -> exp.Query:
    """Apply the rewrite to every SELECT block of ``query`` that groups by grouping sets.

    Inner blocks first, so that a block read by another is expanded before its reader.

    Args:
        query: A qualified query.
        schema: Table -> column -> type, to type the NULL of a rolled-up expression as
            Spark does (the expression's own type).
    """
    for select in reversed(list(query.find_all(exp.Select))):
        if not _applies(select):
            continue
        expanded = _expanded(select, schema or {})
        if expanded is None:
            continue
        if select is query:
            return expanded
        if isinstance(select.parent, exp.Subquery):
            select.replace(expanded)
        else:  # a branch of a set operation: the union stays one operand
            select.replace(exp.select("*").from_(expanded.subquery("__grouping_sets")))
    return query


def _applies(select: exp.Select) -> bool:
    return (has_grouping_sets(select) and not windows(select)
            and not select.args.get("distinct") and select.args.get("qualify") is None
            and select.args.get("limit") is None and select.args.get("offset") is None
            and not any(isinstance(node, exp.Anonymous) for node in select.walk()))


def _expanded(select: exp.Select, schema: Mapping[str, object]) -> exp.Query | None:
    """The UNION ALL of the block's grouping sets, or None when there are too many."""
    found = _grouping_sets(select)
    if found is None:
        return None
    expressions, sets = found
    annotate_types(select, schema=dict(schema), dialect="spark")  # types of the NULLs
    branches = [_branch(select, expressions, chosen) for chosen in sets]
    union: exp.Query = branches[0]
    for branch in branches[1:]:
        union = exp.union(union, branch, distinct=False)
    return union


def _grouping_sets(select: exp.Select) -> tuple[list[exp.Expr], list[GroupingSet]] | None:
    """The distinct grouping expressions and the grouping sets over them (None: too many).

    Each element of GROUP BY gives a list of sets (a plain expression one, ``ROLLUP`` its
    prefixes, ``CUBE`` its subsets, ``GROUPING SETS`` its sets); the block's sets are
    their cartesian product, each the union of one set per element. A set listed twice
    groups twice, as in Spark. With Hive's ``GROUP BY a, b GROUPING SETS (...)`` the list
    before GROUPING SETS only names the grouping expressions. An ordinal is the output it
    points at.
    """
    group = select.args["group"]
    expressions: list[exp.Expr] = []

    def positions(nodes: list[exp.Expr]) -> GroupingSet:
        found = set()
        for node in nodes:
            node = _resolved(select, node)
            if node not in expressions:
                expressions.append(node)
            found.add(expressions.index(node))
        return frozenset(found)

    elements = list(group.expressions)
    if group.args.get("rollup") or group.args.get("cube"):  # GROUP BY a, b WITH ROLLUP
        kind = exp.Rollup if group.args.get("rollup") else exp.Cube
        elements = [kind(expressions=[e.copy() for e in elements])]
    if group.args.get("grouping_sets"):  # Hive: GROUP BY a, b GROUPING SETS ((a), (b))
        positions(elements)
        elements = list(group.args["grouping_sets"])
    nested = (e for element in elements if isinstance(element, exp.GroupingSets)
              for e in element.expressions)
    if any(isinstance(e, exp.Rollup | exp.Cube | exp.GroupingSets) for e in nested):
        return None  # GROUPING SETS (ROLLUP (a, b), c): left alone
    choices = [_element_sets(element, positions) for element in elements]
    sets = [frozenset().union(*chosen) for chosen in product(*choices)]
    return (expressions, sets) if len(sets) <= MAX_SETS else None


def _element_sets(element: exp.Expr, positions: Callable[[list[exp.Expr]], GroupingSet]
                  ) -> list[GroupingSet]:
    """The grouping sets one element of GROUP BY stands for."""
    if not isinstance(element, exp.Rollup | exp.Cube | exp.GroupingSets):
        return [positions([element])]
    parts = [positions(_members(e)) for e in element.expressions]
    if isinstance(element, exp.Rollup):
        return [frozenset().union(*parts[:n]) for n in range(len(parts), -1, -1)]
    if isinstance(element, exp.Cube):
        return [frozenset().union(*chosen) for n in range(len(parts), -1, -1)
                for chosen in combinations(parts, n)]
    return parts


def _members(node: exp.Expr) -> list[exp.Expr]:
    """The expressions of one set: ``(a, b)``, ``(a)``, ``()`` or ``a``."""
    if isinstance(node, exp.Tuple):
        return list(node.expressions)
    return [node.this if isinstance(node, exp.Paren) else node]


def _resolved(select: exp.Select, node: exp.Expr) -> exp.Expr:
    """``node``, or the output an ordinal (``ROLLUP (1, 2)``) points at."""
    if isinstance(node, exp.Literal) and node.is_int and 0 < int(node.this) <= len(
            select.expressions):
        return select.expressions[int(node.this) - 1].unalias()
    return node


def _branch(select: exp.Select, expressions: list[exp.Expr], chosen: GroupingSet
            ) -> exp.Select:
    """The block grouped by the set ``chosen`` alone."""
    branch = select.copy()
    for clause in ("group", "order"):
        branch.set(clause, None)
    branch.set("expressions", [
        exp.alias_(_in_branch(item.unalias(), expressions, chosen), item.alias_or_name)
        for item in select.expressions])
    grouped = [expressions[i].copy() for i in sorted(chosen)]
    if grouped:
        branch = branch.group_by(*grouped, copy=False)
    having = branch.args.get("having")
    conditions = [] if having is None else [_in_branch(having.this, expressions, chosen)]
    if not grouped:  # no grand total for an empty input
        conditions.append(exp.GT(this=exp.Count(this=exp.Star()),
                                 expression=exp.Literal.number(0)))
    branch.set("having", exp.Having(this=exp.and_(*conditions)) if conditions else None)
    return branch


_AGGREGATE_WRAPPERS = (exp.Filter, exp.WithinGroup, exp.IgnoreNulls, exp.RespectNulls)
"""Nodes around an aggregate whose other parts are computed on the input rows too."""


def _in_branch(node: exp.Expr, expressions: list[exp.Expr], chosen: GroupingSet) -> exp.Expr:
    """``node`` as the branch of ``chosen`` computes it.

    Grouping expressions outside the set read NULL (typed as the expression) outside
    aggregates; ``GROUPING`` and ``GROUPING_ID`` are constants. Nothing inside an
    aggregate (its arguments, FILTER or WITHIN GROUP) changes, nor inside a grouping
    expression of the set.
    """
    def replaced(current: exp.Expr) -> exp.Expr | None:
        """The replacement of ``current``; itself to keep it whole; None to look inside."""
        if isinstance(current, exp.Grouping | exp.GroupingId):
            return _grouping(current, expressions, chosen)
        if isinstance(current, (exp.AggFunc, *_AGGREGATE_WRAPPERS)):
            return current
        if current in expressions:
            return current if expressions.index(current) in chosen else _null(current)
        return None

    return _transformed(node.copy(), replaced)


def _transformed(node: exp.Expr, replaced: Callable[[exp.Expr], exp.Expr | None]) -> exp.Expr:
    """``node`` with ``replaced`` applied top-down, not looking inside what it returns."""
    new = replaced(node)
    if new is not None:
        return new
    for child in list(node.iter_expressions()):
        result = _transformed(child, replaced)
        if result is not child:
            child.replace(result)
    return node


def _null(expression: exp.Expr) -> exp.Expr:
    """NULL in the type of ``expression`` (when known), as Spark's ``Expand`` writes it."""
    data_type = expression.type
    if data_type is None or data_type.is_type(exp.DataType.Type.UNKNOWN, exp.DataType.Type.NULL):
        return exp.Null()
    return exp.Cast(this=exp.Null(), to=data_type.copy())


def _grouping(call: exp.Grouping | exp.GroupingId, expressions: list[exp.Expr],
              chosen: GroupingSet) -> exp.Expr:
    """The constant ``GROUPING(e)`` or ``GROUPING_ID(e...)`` takes in the set ``chosen``.

    ``GROUPING(e)`` is a tinyint, 1 when ``e`` is rolled up; ``GROUPING_ID(e...)`` a bigint
    with one bit per argument, the first the highest (no argument: every grouping
    expression), as Spark 3.5 types them.
    """
    arguments = list(call.expressions) or list(expressions)
    bits = 0
    for argument in arguments:
        rolled = argument not in expressions or expressions.index(argument) not in chosen
        bits = (bits << 1) | int(rolled)
    kind = "TINYINT" if isinstance(call, exp.Grouping) else "BIGINT"
    return exp.cast(exp.Literal.number(bits), kind)
