"""Rewrite rule: an uncorrelated ``x NOT IN (subquery)`` becomes an anti-join with a NULL guard.

SQL's three-valued logic makes ``x NOT IN (SELECT y FROM s)`` (ISO/IEC 9075-2, 8.4
``<in predicate>``: ``x NOT IN q`` is ``NOT (x = ANY q)``):

- TRUE when the subquery yields no row (even when ``x`` is NULL);
- else NULL when ``x`` is NULL;
- else FALSE when some ``y = x``;
- else NULL when some ``y`` is NULL;
- else TRUE.

As a WHERE conjunct, NULL rejects the row like FALSE. So the conjunct is replaced by a
LEFT JOIN to the subquery's distinct values (no match: ``_value IS NULL``) and a CROSS
JOIN to one row of flags over the subquery (whether it has rows, and whether a ``y`` is
NULL)::

    FROM a ... LEFT JOIN (SELECT DISTINCT y AS _value FROM s) AS _not_in
                 ON x = _not_in._value
            CROSS JOIN (SELECT COUNT(*) > 0 AS _nonempty,
                               COUNT(*) > COUNT(y) AS _has_null FROM s) AS _not_in_flags
    WHERE _not_in._value IS NULL
      AND (NOT _not_in_flags._nonempty OR (x IS NOT NULL AND NOT _not_in_flags._has_null))

Both are derived tables the engine maintains (DISTINCT and a one-group aggregate by
affected keys), and :mod:`ivm.isolate_outer_join` moves the LEFT JOIN next to the table
``x`` reads, where it is maintained by affected join keys. The flags' delta is empty
unless a flag flips, so a change of ``s`` touches only the rows whose ``x`` it adds or
removes.

Only a conjunct of a WHERE clause, with ``x`` reading one FROM/JOIN item of a block of
inner joins and an uncorrelated subquery of one column, is rewritten; any other NOT IN is
left for :mod:`ivm.checks` to refuse by name.

A pure function over a qualified sqlglot tree, in the style of sqlglot's optimizer rules.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.helper import find_new_name

from ivm.shape import block_items, join_kinds

__all__ = ["is_not_in", "unnest_not_in"]

VALUE, NONEMPTY, HAS_NULL = "_value", "_nonempty", "_has_null"


def is_not_in(node: exp.Expr) -> bool:
    """Whether ``node`` is ``x NOT IN (subquery)``."""
    return (isinstance(node, exp.Not) and isinstance(node.this, exp.In)
            and node.this.args.get("query") is not None)


def unnest_not_in(query: exp.Query) -> exp.Query:
    """Rewrite every eligible ``NOT IN (subquery)`` of ``query`` (in place), and return it."""
    done: set[int] = set()
    while True:
        found = _next_eligible(query, done)
        if found is None:
            return query
        _rewrite(query, *found)


def _next_eligible(query: exp.Query, done: set[int]) -> tuple[exp.Select, exp.Not] | None:
    """The first eligible NOT IN conjunct not yet looked at, with its block."""
    for select in query.find_all(exp.Select):
        where = select.args.get("where")
        if where is None:
            continue
        for conjunct in where.this.flatten() if isinstance(where.this, exp.And) else [where.this]:
            if not isinstance(conjunct, exp.Not) or not is_not_in(conjunct) or (
                    id(conjunct) in done):
                continue
            done.add(id(conjunct))
            if _eligible(select, conjunct):
                return select, conjunct
    return None


def _eligible(select: exp.Select, conjunct: exp.Not) -> bool:
    predicate = conjunct.this
    subquery = predicate.args["query"].this
    if not isinstance(subquery, exp.Query) or len(subquery.selects) != 1:
        return False
    if any(k != "INNER" and k != "CROSS" for k in join_kinds(select)):
        return False
    aliases = {item.alias_or_name for item in block_items(select)}
    read = {c.table for c in predicate.this.find_all(exp.Column)}
    return len(read) == 1 and read <= aliases and not _correlated(subquery)


def _correlated(subquery: exp.Query) -> bool:
    """Whether a column of ``subquery`` names a table outside it."""
    for column in subquery.find_all(exp.Column):
        node: exp.Expr | None = column
        while node is not None and node is not subquery.parent:
            if isinstance(node, exp.Select) and column.table in {
                    item.alias_or_name for item in block_items(node)}:
                break
            node = node.parent
        else:
            return True
    return False


def _rewrite(query: exp.Query, select: exp.Select, conjunct: exp.Not) -> None:
    predicate = conjunct.this
    subquery = predicate.args["query"].this
    taken = {t.alias_or_name for t in query.find_all(exp.Table, exp.Subquery)}
    values = find_new_name(taken, "_not_in")
    flags = find_new_name(taken | {values}, f"{values}_flags")
    x = predicate.this
    y, body = _output(subquery)
    distinct = body.copy().select(y.copy().as_(VALUE), append=False).distinct()
    counts = body.copy().select(
        exp.GT(this=exp.Count(this=exp.Star()), expression=exp.Literal.number(0)).as_(NONEMPTY),
        exp.GT(this=exp.Count(this=exp.Star()), expression=exp.Count(this=y.copy()))
        .as_(HAS_NULL),
        append=False,
    )
    select.join(distinct.subquery(values), on=exp.EQ(this=x.copy(), expression=exp.column(
        VALUE, table=values)), join_type="left", copy=False)
    select.join(counts.subquery(flags), join_type="cross", copy=False)
    guard = exp.or_(exp.not_(exp.column(NONEMPTY, table=flags)), exp.and_(
        exp.Not(this=exp.Is(this=x.copy(), expression=exp.Null())),
        exp.not_(exp.column(HAS_NULL, table=flags))))
    conjunct.replace(exp.and_(exp.Is(this=exp.column(VALUE, table=values),
                                     expression=exp.Null()), exp.paren(guard, copy=False)))


def _output(subquery: exp.Query) -> tuple[exp.Expr, exp.Select]:
    """The subquery's one output and a SELECT whose FROM and WHERE yield its rows.

    A plain filter block is used as it is; anything else (grouping, DISTINCT, LIMIT,
    set operations) is read as a derived table.
    """
    if isinstance(subquery, exp.Select) and not _shaped(subquery):
        return subquery.selects[0].unalias(), subquery
    name = subquery.selects[0].alias_or_name
    body = exp.select(exp.Star()).from_(subquery.copy().subquery("_in"))
    return exp.column(name, table="_in"), body


def _shaped(select: exp.Select) -> bool:
    """Whether the block does more than filter and project its FROM/JOIN rows."""
    clauses = ("group", "having", "distinct", "limit", "offset", "order", "qualify")
    return any(select.args.get(c) for c in clauses) or any(
        p.find(exp.AggFunc, exp.Window) for p in select.selects)
