"""Rewrite rule: move a LEFT JOIN of a multi-way block into a derived table of its own.

``FROM a JOIN t ON ... LEFT JOIN r ON r.k = t.k`` becomes
``FROM a JOIN (SELECT t.x AS x, r.k AS r__k FROM t LEFT JOIN r ON r.k = t.k) AS t ON ...``
when the ON clause reads only ``t`` and ``r``: a left outer join whose predicate involves
only its two inputs associates with the inner joins before it (Galindo-Legaria and
Rosenthal, "Outerjoin simplification and reordering for query optimization", TODS 1997).
The two-table outer join is then maintained by affected join keys, and the rest of the
block by the bilinear rule. Decorrelated subqueries (sqlglot's ``unnest_subqueries``)
produce exactly such LEFT JOINs.

A pure function over a qualified sqlglot tree, in the style of sqlglot's optimizer rules.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.helper import find_new_name

from ivm.shape import block_columns, block_items

__all__ = ["isolate_outer_joins"]


def isolate_outer_joins(query: exp.Query) -> exp.Query:
    """Apply the rewrite to every SELECT block of ``query`` (in place), and return it.

    A rewrite copies the blocks it moves, so the blocks are looked up afresh after each.
    """
    while any(_isolate_one(select) for select in query.find_all(exp.Select)):
        pass
    return query


def _isolate_one(select: exp.Select) -> bool:
    """Isolate the block's first eligible LEFT JOIN; return whether one was rewritten."""
    items = block_items(select)
    if len(items) <= 2:
        return False
    for join in select.args.get("joins") or []:
        side = (join.args.get("side") or "").upper()
        on = join.args.get("on")
        if side != "LEFT" or on is None or (join.args.get("kind") or "OUTER") != "OUTER":
            continue
        right = join.this.alias_or_name
        read = {c.table for c in on.find_all(exp.Column)} - {right}
        if len(read) != 1:
            continue
        left = next(iter(read))
        target = next((i for i in items if i.alias_or_name == left), None)
        if target is not None and target is not join.this:
            _rewrite(select, join, target, left, right)
            return True
    return False


def _columns_of(select: exp.Select, alias: str) -> list[str]:
    """Names of the columns of ``alias`` that the block reads, in first-use order."""
    return list(dict.fromkeys(c.name for c in block_columns(select) if c.table == alias))


def _rewrite(select: exp.Select, join: exp.Join, target: exp.Expr, left: str, right: str) -> None:
    left_columns = _columns_of(select, left)
    renamed: dict[str, str] = {}  # right column -> its name in the derived table
    for name in _columns_of(select, right):
        renamed[name] = find_new_name({*left_columns, *renamed.values()}, f"{right}__{name}")
    outputs = [exp.column(c, table=left).as_(c) for c in left_columns]
    outputs += [exp.column(c, table=right).as_(renamed[c]) for c in renamed]
    body = (exp.select(*outputs).from_(target.copy())
            .join(join.this.copy(), on=join.args["on"].copy(), join_type="left"))
    join.pop()
    for column in block_columns(select):
        if column.table == right:
            column.replace(exp.column(renamed[column.name], table=left))
    alias = exp.TableAlias(this=exp.to_identifier(left))
    target.replace(exp.Subquery(this=body, alias=alias))
