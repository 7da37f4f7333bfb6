"""Rewrite rule: ``x NOT IN (subquery)`` becomes an anti-join with a NULL guard.

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

A subquery correlated by equalities ``k = o`` (``k`` over the subquery's tables, ``o``
over the table ``x`` reads) has one set of rows per value of ``o``. The same rewrite then
keys both derived tables by ``k`` (the null-aware anti-join of Spark's
``RewritePredicateSubquery``, with the subquery's emptiness per key)::

    LEFT JOIN (SELECT DISTINCT y AS _value, k AS _k0 FROM s WHERE rest) AS _not_in
      ON x = _not_in._value AND o = _not_in._k0
    LEFT JOIN (SELECT k AS _k0, COUNT(*) > 0 AS _nonempty,
                      COUNT(*) > COUNT(y) AS _has_null FROM s WHERE rest GROUP BY k)
      AS _not_in_flags ON o = _not_in_flags._k0
    WHERE _not_in._value IS NULL
      AND (_not_in_flags._nonempty IS NULL OR (x IS NOT NULL AND NOT _not_in_flags._has_null))

A NULL ``o`` matches no key, as it matches no row of ``s``: the subquery is empty.

Only a conjunct of a WHERE clause, with ``x`` reading one FROM/JOIN item of a block of
inner joins and a subquery of one column, uncorrelated or correlated (a plain filter
block) only by such equalities, is rewritten; any other NOT IN is left for
:mod:`ivm.checks` to refuse by name.

A pure function over a qualified sqlglot tree, in the style of sqlglot's optimizer rules.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp
from sqlglot.helper import find_new_name

from ivm.keys import annotate
from ivm.shape import block_items, join_kinds

__all__ = ["is_not_in", "unnest_not_in"]

VALUE, NONEMPTY, HAS_NULL, KEY = "_value", "_nonempty", "_has_null", "_k"


def is_not_in(node: exp.Expr) -> bool:
    """Whether ``node`` is ``x NOT IN (subquery)``."""
    return (isinstance(node, exp.Not) and isinstance(node.this, exp.In)
            and node.this.args.get("query") is not None)


def unnest_not_in(query: exp.Query, schema: Mapping[str, Mapping[str, str]] | None = None
                  ) -> exp.Query:
    """Rewrite every eligible ``NOT IN (subquery)`` of ``query`` (in place), and return it.

    Args:
        query: A qualified query.
        schema: Table -> column -> type. A correlated subquery is rewritten only when each
            equality's two sides have the same type: across types Spark compares after a
            cast, which can match one outer value to several keys (``'1'`` and ``'01'``
            both equal ``1``). Without a schema, only uncorrelated ones are rewritten.
    """
    done: list[exp.Expr] = []
    while True:
        if schema is not None and any(map(is_not_in, query.walk())):  # new parts: no types
            annotate(query, schema)
        found = _next_eligible(query, done)
        if found is None:
            return query
        _rewrite(query, *found)


def _next_eligible(query: exp.Query, done: list[exp.Expr]
                   ) -> tuple[exp.Select, exp.Not, Split] | None:
    """The first eligible NOT IN conjunct not yet looked at, with its block and split."""
    for select in query.find_all(exp.Select):
        where = select.args.get("where")
        if where is None:
            continue
        for conjunct in _conjuncts(where.this):
            if not isinstance(conjunct, exp.Not) or not is_not_in(conjunct) or any(
                    conjunct is seen for seen in done):
                continue
            done.append(conjunct)
            split = _eligible(select, conjunct)
            if split is not None:
                return select, conjunct, split
    return None


def _conjuncts(condition: exp.Expr) -> list[exp.Expr]:
    """The conjuncts of ``condition``, out of their parentheses."""
    condition = condition.unnest()
    if not isinstance(condition, exp.And):
        return [condition]
    return [part for side in (condition.this, condition.expression) for part in _conjuncts(side)]


Correlation = list[tuple[exp.Expr, exp.Expr]]
"""A subquery's equalities with the outer block, as ``(inner, outer)`` sides."""

Split = tuple[Correlation, exp.Query]
"""A subquery's correlation, and the subquery without it (:func:`_split`)."""


def _eligible(select: exp.Select, conjunct: exp.Not) -> Split | None:
    """The split of ``conjunct``'s subquery when the rule rewrites it (module doc), else None.

    ``conjunct`` is a NOT IN of ``select``'s WHERE.
    """
    predicate = conjunct.this
    subquery = predicate.args["query"].this
    if not isinstance(subquery, exp.Query) or len(subquery.selects) != 1:
        return None
    if any(k != "INNER" and k != "CROSS" for k in join_kinds(select)):
        return None
    aliases = {item.alias_or_name for item in block_items(select)}
    read = {c.table for c in predicate.this.find_all(exp.Column)}
    return _split(subquery, *read) if len(read) == 1 and read <= aliases else None


def _split(subquery: exp.Query, outer: str) -> Split | None:
    """The subquery's equalities with table ``outer``, and the subquery without them.

    Returns:
        ``([], subquery)`` when it is uncorrelated; None when it is correlated otherwise
        (a column of another outer table, a correlated conjunct that is not such an
        equality, a correlated subquery that is not a plain filter block).
    """
    if not _free_columns(subquery, subquery):
        return [], subquery
    if not isinstance(subquery, exp.Select) or _shaped(subquery):
        return None
    where = subquery.args.get("where")
    correlation: Correlation = []
    rest = []
    for part in _conjuncts(where.this) if where else []:
        if not _free_columns(part, subquery):
            rest.append(part)
            continue
        pair = _equality(part, subquery, outer)
        if pair is None:
            return None
        correlation.append(pair)
    body = subquery.copy()
    body.set("where", exp.Where(this=exp.and_(*rest)) if rest else None)
    return None if _free_columns(body, body) else (correlation, body)


def _equality(part: exp.Expr, body: exp.Select, outer: str) -> tuple[exp.Expr, exp.Expr] | None:
    """The sides of ``part`` when it is ``inner = outer``, else None.

    ``inner`` reads the subquery's tables, ``outer`` table ``outer`` only; neither holds
    a subquery, and both have one known type.
    """
    if not isinstance(part, exp.EQ) or part.find(exp.Query) or not _same_type(
            part.this, part.expression):
        return None
    for inner, other in ((part.this, part.expression), (part.expression, part.this)):
        free = _free_columns(other, body)
        if (inner.find(exp.Column) and not _free_columns(inner, body)
                and free and len(free) == len(list(other.find_all(exp.Column)))
                and {c.table for c in free} == {outer}):
            return inner, other
    return None


def _same_type(left: exp.Expr, right: exp.Expr) -> bool:
    """Whether both sides are typed (:func:`ivm.keys.annotate`) and as the same Spark type."""
    types = [side.type for side in (left, right)]
    known = [t for t in types if t is not None and not t.is_type(exp.DataType.Type.UNKNOWN)]
    return len(known) == 2 and known[0].sql("spark") == known[1].sql("spark")


def _free_columns(node: exp.Expr, scope: exp.Query) -> list[exp.Column]:
    """The columns under ``node`` whose table no SELECT from them up to ``scope`` binds."""
    free = []
    for column in node.find_all(exp.Column):
        current: exp.Expr | None = column
        while current is not None:
            if isinstance(current, exp.Select) and column.table in {
                    item.alias_or_name for item in block_items(current)}:
                break
            if current is scope:
                free.append(column)
                break
            current = current.parent
    return free


def _rewrite(query: exp.Query, select: exp.Select, conjunct: exp.Not, split: Split) -> None:
    """Replace ``conjunct`` by the anti-join and its guard (module doc), in place."""
    x = conjunct.this.this
    correlation, subquery = split
    taken = {t.alias_or_name for t in query.find_all(exp.Table, exp.Subquery)}
    values = find_new_name(taken, "_not_in")
    flags = find_new_name(taken | {values}, f"{values}_flags")
    y, body = _output(subquery)
    keys = [inner.copy().as_(f"{KEY}{i}") for i, (inner, _) in enumerate(correlation)]
    distinct = body.copy().select(y.copy().as_(VALUE), *keys, append=False).distinct()
    counts = body.copy().select(
        *(key.copy() for key in keys),
        exp.GT(this=exp.Count(this=exp.Star()), expression=exp.Literal.number(0)).as_(NONEMPTY),
        exp.GT(this=exp.Count(this=exp.Star()), expression=exp.Count(this=y.copy()))
        .as_(HAS_NULL),
        append=False,
    )
    select.join(distinct.subquery(values), on=exp.and_(
        exp.EQ(this=x.copy(), expression=exp.column(VALUE, table=values)),
        *_key_matches(correlation, values)), join_type="left", copy=False)
    if correlation:
        counts = counts.group_by(*(inner.copy() for inner, _ in correlation), copy=False)
        select.join(counts.subquery(flags), on=exp.and_(*_key_matches(correlation, flags)),
                    join_type="left", copy=False)
        empty: exp.Expr = exp.Is(this=exp.column(NONEMPTY, table=flags), expression=exp.Null())
    else:
        select.join(counts.subquery(flags), join_type="cross", copy=False)
        empty = exp.not_(exp.column(NONEMPTY, table=flags))
    guard = exp.or_(empty, exp.and_(
        exp.Not(this=exp.Is(this=x.copy(), expression=exp.Null())),
        exp.not_(exp.column(HAS_NULL, table=flags))))
    conjunct.replace(exp.and_(exp.Is(this=exp.column(VALUE, table=values),
                                     expression=exp.Null()), exp.paren(guard, copy=False)))


def _key_matches(correlation: Correlation, table: str) -> list[exp.EQ]:
    """``outer = table._k<i>`` for each equality of the correlation."""
    return [exp.EQ(this=outer.copy(), expression=exp.column(f"{KEY}{i}", table=table))
            for i, (_, outer) in enumerate(correlation)]


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
