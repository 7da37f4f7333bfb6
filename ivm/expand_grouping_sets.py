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
aggregate over ``Expand`` does. Each branch is then maintained by its own aggregate law and
the UNION ALL is linear.

Blocks with windows (:mod:`ivm.lift_grouped_windows` moves them out first), DISTINCT,
QUALIFY, LIMIT or OFFSET, or more than :data:`MAX_SETS` sets are left alone (the compiler
names them). A block's ORDER BY without LIMIT is dropped: a view has no order.

A pure function over a qualified sqlglot tree, in the style of sqlglot's optimizer rules.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations, product

from sqlglot import exp

from ivm.shape import has_grouping_sets, windows

__all__ = ["MAX_SETS", "expand_grouping_sets"]

MAX_SETS = 64
"""Most grouping sets a block is expanded to (a CUBE of six expressions)."""

GroupingSet = frozenset[int]
"""Positions, in the block's grouping expressions, of the expressions grouped by."""


def expand_grouping_sets(query: exp.Query) -> exp.Query:
    """Apply the rewrite to every SELECT block of ``query`` that groups by grouping sets."""
    for select in list(query.find_all(exp.Select)):
        if not _applies(select):
            continue
        expanded = _expanded(select)
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
            and select.args.get("limit") is None and select.args.get("offset") is None)


def _expanded(select: exp.Select) -> exp.Query | None:
    """The UNION ALL of the block's grouping sets, or None when there are too many."""
    found = _grouping_sets(select.args["group"])
    if found is None:
        return None
    expressions, sets = found
    branches = [_branch(select, expressions, chosen) for chosen in sets]
    union: exp.Query = branches[0]
    for branch in branches[1:]:
        union = exp.union(union, branch, distinct=False)
    return union


def _grouping_sets(group: exp.Group) -> tuple[list[exp.Expr], list[GroupingSet]] | None:
    """The distinct grouping expressions and the grouping sets over them (None: too many).

    Each element of GROUP BY gives a list of sets (a plain expression one, ``ROLLUP`` its
    prefixes, ``CUBE`` its subsets, ``GROUPING SETS`` its sets); the block's sets are
    their cartesian product, each the union of one set per element.
    """
    expressions: list[exp.Expr] = []

    def positions(nodes: list[exp.Expr]) -> GroupingSet:
        found = set()
        for node in nodes:
            if node not in expressions:
                expressions.append(node)
            found.add(expressions.index(node))
        return frozenset(found)

    elements = [e for e in group.expressions]
    if group.args.get("rollup") or group.args.get("cube"):  # GROUP BY a, b WITH ROLLUP
        kind = exp.Rollup if group.args.get("rollup") else exp.Cube
        elements = [kind(expressions=[e.copy() for e in elements])]
    if group.args.get("grouping_sets"):
        elements += group.args["grouping_sets"]
    choices: list[list[GroupingSet]] = []
    for element in elements:
        parts = [positions(_members(e)) for e in element.expressions] if isinstance(
            element, exp.Rollup | exp.Cube | exp.GroupingSets) else None
        if isinstance(element, exp.Rollup):
            assert parts is not None
            choices.append([frozenset().union(*parts[:n]) for n in range(len(parts), -1, -1)])
        elif isinstance(element, exp.Cube):
            assert parts is not None
            choices.append([frozenset().union(*chosen) for n in range(len(parts), -1, -1)
                            for chosen in combinations(parts, n)])
        elif isinstance(element, exp.GroupingSets):
            assert parts is not None
            choices.append(parts)
        else:
            choices.append([positions([element])])
    sets = list(dict.fromkeys(frozenset().union(*chosen) for chosen in product(*choices)))
    return (expressions, sets) if len(sets) <= MAX_SETS else None


def _members(node: exp.Expr) -> list[exp.Expr]:
    """The expressions of one set: ``(a, b)``, ``(a)``, ``()`` or ``a``."""
    if isinstance(node, exp.Tuple):
        return list(node.expressions)
    return [node.this if isinstance(node, exp.Paren) else node]


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
    if not grouped and not _plain(select.args["group"]):
        conditions.append(exp.GT(this=exp.Count(this=exp.Star()),
                                 expression=exp.Literal.number(0)))
    branch.set("having", exp.Having(this=exp.and_(*conditions)) if conditions else None)
    return branch


def _plain(group: exp.Group) -> bool:
    """Whether GROUP BY lists an expression outside ROLLUP, CUBE and GROUPING SETS."""
    return not (group.args.get("rollup") or group.args.get("cube")) and any(
        not isinstance(e, exp.Rollup | exp.Cube | exp.GroupingSets) for e in group.expressions)


def _in_branch(node: exp.Expr, expressions: list[exp.Expr], chosen: GroupingSet) -> exp.Expr:
    """``node`` as the branch of ``chosen`` computes it.

    Grouping expressions outside the set read NULL outside aggregates; ``GROUPING`` and
    ``GROUPING_ID`` are constants.
    """
    def replace(current: exp.Expr) -> exp.Expr:
        if isinstance(current, exp.Grouping | exp.GroupingId):
            return _grouping(current, expressions, chosen)
        if isinstance(current, exp.AggFunc):
            return current
        if current in expressions and expressions.index(current) not in chosen:
            return exp.Null()
        return current

    return _transform_outside_aggregates(node.copy(), replace)


def _transform_outside_aggregates(node: exp.Expr, replace: Callable[[exp.Expr], exp.Expr]
                                   ) -> exp.Expr:
    """``node`` with ``replace`` applied top-down, not descending into aggregates."""
    replaced = replace(node)
    if replaced is not node or isinstance(node, exp.AggFunc):
        return replaced
    for child in list(node.iter_expressions()):
        new = _transform_outside_aggregates(child, replace)
        if new is not child:
            child.replace(new)
    return node


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
