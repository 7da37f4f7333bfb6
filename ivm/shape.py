"""What a qualified SELECT block is made of: its tables, keys, windows and outer join.

Pure functions over sqlglot expressions, used by the compiler (to pick a law) and by
the rewrites (to build the delta queries).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

SET_OPERATIONS = exp.SetOperation
"""UNION, INTERSECT and EXCEPT (with or without ALL)."""


def block_tables(query: exp.Select) -> list[exp.Table]:
    """The tables of the top block, in FROM then JOIN order."""
    return [item for item in block_items(query) if isinstance(item, exp.Table)]


def block_items(query: exp.Select) -> list[exp.Expr]:
    """The FROM and JOIN items of the top block (tables and derived tables), in order."""
    from_ = query.args.get("from_")
    items = [from_.this] if from_ else []
    return items + [join.this for join in query.args.get("joins") or []]


def block_columns(select: exp.Select) -> list[exp.Column]:
    """The columns of the block itself, not of the subqueries and derived tables it holds."""
    nodes = select.walk(prune=lambda n: n is not select and isinstance(n, exp.Subquery))
    return [node for node in nodes if isinstance(node, exp.Column)]


def derived_tables(query: exp.Select) -> list[exp.Subquery]:
    """The subqueries of the top block's FROM and JOIN items (derived tables)."""
    return [item for item in block_items(query) if isinstance(item, exp.Subquery)]


def is_derived_table(node: exp.Expr) -> bool:
    """Whether ``node`` is a subquery used as a FROM or JOIN item."""
    return isinstance(node, exp.Subquery) and isinstance(node.parent, exp.From | exp.Join)


def set_branches(query: exp.Query) -> list[exp.Select]:
    """The SELECT blocks of a tree of set operations, left to right (``[query]`` for a block)."""
    if isinstance(query, SET_OPERATIONS):
        return set_branches(query.left) + set_branches(query.right)
    return [query] if isinstance(query, exp.Select) else []


def is_union_all(query: exp.Query) -> bool:
    """Whether ``query`` is ``UNION ALL`` (bag union: linear)."""
    return isinstance(query, exp.Union) and not query.args.get("distinct")


def has_grouping_sets(query: exp.Select) -> bool:
    """Whether the block groups by ROLLUP, CUBE or GROUPING SETS (in either spelling).

    ``GROUP BY ROLLUP (a, b)`` holds a ROLLUP among the grouping expressions; ``GROUP BY
    a, b WITH ROLLUP`` sets the clause's ``rollup`` argument.
    """
    group = query.args.get("group")
    if group is None:
        return False
    return any(group.args.get(k) for k in ("rollup", "cube", "grouping_sets", "totals")) or any(
        isinstance(e, exp.Rollup | exp.Cube | exp.GroupingSets) for e in group.expressions)


def group_expressions(query: exp.Select) -> list[exp.Expr] | None:
    """The grouping expressions of the top block, or None when it does not group.

    A SELECT DISTINCT groups by all its output expressions; an aggregate without
    GROUP BY groups by the empty key (one group).
    """
    group = query.args.get("group")
    if group is not None:
        return [_resolve_position(query, g) for g in group.expressions]
    if query.args.get("distinct") is not None:
        return [p.unalias() for p in query.selects]
    if any(p.find(exp.AggFunc) and not p.find(exp.Window) for p in query.selects):
        return []
    return None


def windows(query: exp.Select) -> list[exp.Window]:
    """The window functions of the block's outputs."""
    return [w for p in query.selects for w in p.find_all(exp.Window)]


def partition_expressions(query: exp.Select) -> list[exp.Expr]:
    """The PARTITION BY expressions every window of the block shares (empty if none)."""
    found = windows(query)
    if not found:
        return []
    shared = list(found[0].args.get("partition_by") or [])
    for window in found[1:]:
        theirs = window.args.get("partition_by") or []
        shared = [e for e in shared if any(e == t for t in theirs)]
    return shared


def key_expressions(query: exp.Select) -> list[exp.Expr] | None:
    """Expressions that split the block's output into independent parts, or None.

    Grouping keys for an aggregate or DISTINCT, shared PARTITION BY keys for window
    functions. Rows of different parts never depend on each other, so only the parts
    whose key occurs in a delta need recomputing.
    """
    groups = group_expressions(query)
    if groups is not None:
        return groups
    return partition_expressions(query) if windows(query) else None


@dataclass(frozen=True)
class OuterJoin:
    """A two-table outer equi-join ``left <side> JOIN right ON left.k = right.k AND ...``.

    Attributes:
        side: ``LEFT``, ``RIGHT`` or ``FULL``.
        left: The left table's alias.
        right: The right table's alias.
        left_keys: The left side of each equality of the ON clause.
        right_keys: The matching right side, in the same order.
    """

    side: str
    left: str
    right: str
    left_keys: tuple[exp.Expr, ...]
    right_keys: tuple[exp.Expr, ...]


def join_kinds(query: exp.Select) -> list[str]:
    """The kind of every JOIN of the block: INNER, LEFT, RIGHT, FULL, SEMI, ANTI or CROSS."""
    kinds = []
    for join in query.args.get("joins") or []:
        kind = (join.args.get("kind") or "").upper()
        side = (join.args.get("side") or "").upper()
        kinds.append(kind if kind in {"SEMI", "ANTI", "CROSS"} else side or "INNER")
    return kinds


def outer_join(query: exp.Select) -> OuterJoin | None:
    """The block's outer join when it is a two-table outer equi-join, else None."""
    kinds = join_kinds(query)
    items = block_items(query)
    if len(kinds) != 1 or kinds[0] not in {"LEFT", "RIGHT", "FULL"} or len(items) != 2:
        return None
    left, right = (item.alias_or_name for item in items)
    pairs = _equalities(query.args["joins"][0].args.get("on"), left, right)
    if not pairs:
        return None
    return OuterJoin(kinds[0], left, right, tuple(p[0] for p in pairs), tuple(p[1] for p in pairs))


def _equalities(on: exp.Expr | None, left: str, right: str) -> list[tuple[exp.Expr, exp.Expr]]:
    """The conjuncts ``a = b`` of ``on`` with one side on each table, as (left, right)."""
    if on is None:
        return []
    on = on.unnest()  # ON (a = b AND c = d)
    conjuncts = [c.unnest() for c in on.flatten()] if isinstance(on, exp.And) else [on]
    pairs = []
    for conjunct in conjuncts:
        if not isinstance(conjunct, exp.EQ):
            continue
        sides = _tables_of(conjunct.this), _tables_of(conjunct.expression)
        if sides == ({left}, {right}):
            pairs.append((conjunct.this, conjunct.expression))
        elif sides == ({right}, {left}):
            pairs.append((conjunct.expression, conjunct.this))
    return pairs


def _tables_of(expression: exp.Expr) -> set[str]:
    return {c.table for c in expression.find_all(exp.Column)}


def _resolve_position(query: exp.Select, item: exp.Expr) -> exp.Expr:
    if isinstance(item, exp.Literal) and item.is_int:
        return query.selects[int(item.this) - 1].unalias()
    return item
