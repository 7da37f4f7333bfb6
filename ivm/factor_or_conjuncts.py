"""Rewrite rule: a correlated subquery's ORs are moved away from its correlation.

sqlglot's ``unnest_subqueries`` decorrelates a subquery only when its WHERE has no OR at
all. TPC-DS q41 writes its correlation in every branch of an OR:
``WHERE (m = o.m AND x) OR (m = o.m AND y)``. Two steps make such a subquery one that
sqlglot decorrelates:

1. A conjunct shared by every branch of an OR is taken out of it:
   ``m = o.m AND (x OR y)``. AND and OR distribute over each other in SQL's three-valued
   logic as in Boolean logic, so the two are equal. A branch left with no conjunct of its
   own makes the OR true, so only the shared conjuncts remain.
2. The conjuncts that read no outer column and hold an OR filter the subquery's one
   table in a derived table under the same alias:
   ``FROM (SELECT m, x, y FROM t AS t WHERE x OR y) AS t WHERE m = o.m``.

Conjuncts are compared by their Spark SQL. Subqueries that read several tables, or whose
correlation stays under an OR, are left as they are (the compiler then names them).

A pure function over a qualified sqlglot tree, in the style of sqlglot's optimizer rules.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, traverse_scope

__all__ = ["factor_or_conjuncts"]


def factor_or_conjuncts(query: exp.Query) -> exp.Query:
    """Apply both steps to every correlated subquery of ``query`` (in place)."""
    for scope in traverse_scope(query):
        select = scope.expression
        if not isinstance(select, exp.Select) or not scope.external_columns:
            continue
        where = select.args.get("where")
        if where is None or not where.find(exp.Or):
            continue
        for node in reversed(list(where.find_all(exp.Or))):  # innermost first
            if not isinstance(node.parent, exp.Or):  # a chain's root takes it whole
                factored = _factored(node)
                if factored is not None:
                    node.replace(factored)
        _filter_own_table(select, scope)
    return query


def _factored(disjunction: exp.Or) -> exp.Expr | None:
    """``disjunction`` with its shared conjuncts outside it, or None when it has none."""
    branches = [_conjuncts(branch) for branch in disjunction.flatten()]
    first = {c.sql("spark"): c for c in branches[0]}
    shared = [sql for sql in first if all(sql in {c.sql("spark") for c in b} for b in branches)]
    if not shared:
        return None
    rests = [[c for c in branch if c.sql("spark") not in shared] for branch in branches]
    factors = [first[sql].copy() for sql in shared]
    if all(rests):
        either = exp.or_(*[exp.and_(*[c.copy() for c in rest]) for rest in rests])
        factors.append(exp.paren(either, copy=False))
    # no parentheses around it: an OR under AND or NOT was in parentheses already, and a
    # WHERE's conjuncts must stay visible to unnest_subqueries
    return exp.and_(*factors, copy=False)


def _filter_own_table(select: exp.Select, scope: Scope) -> None:
    """Step 2: the conjuncts with an OR that read only the subquery's table filter it.

    They move into a derived table over that table, under its alias, listing the
    columns this scope reads of it. The WHERE is left a flat list of conjuncts.
    """
    source = select.args.get("from_")
    table = source.this if source is not None else None
    if (not isinstance(table, exp.Table)
            or any(select.args.get(key) for key in ("joins", "laterals", "pivots"))):
        return
    alias = table.alias_or_name
    conjuncts = _conjuncts(select.args["where"].this)
    own = [c for c in conjuncts if c.find(exp.Or) and _reads_only(c, alias)]
    if own:
        names = sorted({c.name for c in scope.columns if c.table == alias})
        filtered = (exp.select(*[exp.column(n, table=alias).as_(n) for n in names])
                    .from_(table.copy()).where(exp.and_(*[c.copy() for c in own])))
        table.replace(filtered.subquery(alias))
    kept = [c for c in conjuncts if not any(c is o for o in own)]
    select.set("where", exp.Where(this=exp.and_(*kept)) if kept else None)


def _reads_only(node: exp.Expr, alias: str) -> bool:
    """Whether ``node`` reads columns, all of ``alias``, and holds no subquery."""
    columns = list(node.find_all(exp.Column))
    return (bool(columns) and not node.find(exp.Select)
            and all(column.table == alias for column in columns))


def _conjuncts(node: exp.Expr) -> list[exp.Expr]:
    """The conjuncts of ``node``, through nested parentheses and ANDs."""
    inner = node.unnest()
    if not isinstance(inner, exp.And):
        return [inner]
    return [c for part in inner.flatten() for c in _conjuncts(part)]
