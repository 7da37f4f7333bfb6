"""Random view SQL over the fuzzer's schema (:mod:`tests.fuzz.schema`), in Spark SQL.

Each view is one of the shapes users write: filters and projections, inner and outer
joins, aggregates with HAVING or grouping sets, DISTINCT, set operations, IN / EXISTS /
NOT IN subqueries, windows, top-K and a view on a view (a CTE or a derived table).
Expressions are drawn from what each column's kind allows, with literals from its own
values so that predicates select some rows and not others. The same seed gives the same view.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from tests.fuzz.schema import TABLES, Column

__all__ = ["SHAPES", "random_view"]

_ALIASES = {"orders": "o", "customers": "c", "lines": "l"}
_JOINS = {  # a table joined to orders, and the equality that joins them
    "customers": "o.cust = c.c_id",
    "lines": "o.o_id = l.o_id",
}
_COMPARISONS = ("<", "<=", "=", "<>", ">", ">=")


@dataclass(frozen=True)
class _Ref:
    """A column as the view reads it: ``alias.name``, and the schema's column."""

    alias: str
    column: Column

    @property
    def sql(self) -> str:
        return f"{self.alias}.{self.column.name}"


def _refs(tables: Sequence[str]) -> list[_Ref]:
    return [_Ref(_ALIASES[t], c) for t in tables for c in TABLES[t]]


def _literal(rnd: random.Random, column: Column) -> str:
    value = rnd.choice([v for v in column.values if v is not None])
    if column.kind == "string":
        return f"'{value}'"
    if column.kind == "date":
        return f"DATE '{value}'"
    if column.kind == "double":
        return "CAST('NaN' AS DOUBLE)" if value != value else repr(value)  # noqa: PLR0124
    return str(value)


def _atom(rnd: random.Random, refs: Sequence[_Ref]) -> str:
    ref = rnd.choice(refs)
    column = ref.column
    roll = rnd.random()
    if roll < 0.15:
        return f"{ref.sql} IS {rnd.choice(['', 'NOT '])}NULL"
    if roll < 0.25 and column.kind in ("int", "string"):
        values = ", ".join(_literal(rnd, column) for _ in range(2))
        return f"{ref.sql} {rnd.choice(['', 'NOT '])}IN ({values})"
    if roll < 0.32 and column.kind == "int":
        low, high = sorted(int(_literal(rnd, column)) for _ in range(2))
        return f"{ref.sql} BETWEEN {low} AND {high}"
    if roll < 0.38 and column.kind == "string":
        return f"{ref.sql} LIKE '{str(_literal(rnd, column))[1]}%'"
    operator = "=" if column.kind == "string" and rnd.random() < 0.5 else rnd.choice(_COMPARISONS)
    return f"{ref.sql} {operator} {_literal(rnd, column)}"


def _predicate(rnd: random.Random, refs: Sequence[_Ref]) -> str:
    atoms = [_atom(rnd, refs) for _ in range(rnd.choice([1, 1, 2]))]
    if len(atoms) == 1:
        return atoms[0]
    return f"({atoms[0]} {rnd.choice(['AND', 'OR'])} {atoms[1]})"


def _expression(rnd: random.Random, refs: Sequence[_Ref]) -> str:
    """A column, or an expression over one: arithmetic, CASE, COALESCE."""
    ref = rnd.choice(refs)
    kind, roll = ref.column.kind, rnd.random()
    if roll < 0.6:
        return ref.sql
    if kind in ("int", "decimal") and roll < 0.8:
        return f"{ref.sql} {rnd.choice(['+', '-', '*'])} {rnd.choice(['1', '2', '0.5'])}"
    if roll < 0.9:
        return f"CASE WHEN {_atom(rnd, refs)} THEN 'yes' ELSE 'no' END"
    if kind == "string":
        return f"COALESCE({ref.sql}, 'none')"
    return ref.sql


def _block(rnd: random.Random, outer: bool = True) -> tuple[str, list[str]]:
    """A FROM clause: orders alone or joined to one or two tables; and its tables."""
    tables = ["orders"]
    sql = "orders o"
    for partner in rnd.sample(list(_JOINS), rnd.choice([0, 1, 1, 2])):
        kind = rnd.choice(["JOIN", "JOIN", "LEFT JOIN", "LEFT OUTER JOIN", "RIGHT JOIN",
                           "FULL JOIN"] if outer else ["JOIN"])
        condition = _JOINS[partner]
        if rnd.random() < 0.15:
            condition = f"({condition} AND {_atom(rnd, _refs([partner]))})"
        sql += f" {kind} {partner} {_ALIASES[partner]} ON {condition}"
        tables.append(partner)
    return sql, tables


def _where(rnd: random.Random, refs: Sequence[_Ref], chance: float = 0.6) -> str:
    return f" WHERE {_predicate(rnd, refs)}" if rnd.random() < chance else ""


def _select(rnd: random.Random) -> str:
    block, tables = _block(rnd)
    refs = _refs(tables)
    items = ", ".join(f"{_expression(rnd, refs)} AS c{i}" for i in range(rnd.randint(1, 3)))
    return f"SELECT {items} FROM {block}{_where(rnd, refs)}"


def _distinct(rnd: random.Random) -> str:
    block, tables = _block(rnd)
    refs = _refs(tables)
    items = ", ".join(f"{rnd.choice(refs).sql} AS c{i}" for i in range(rnd.randint(1, 2)))
    return f"SELECT DISTINCT {items} FROM {block}{_where(rnd, refs)}"


def _aggregate_call(rnd: random.Random, refs: Sequence[_Ref]) -> str:
    ref = rnd.choice(refs)
    numeric = ref.column.kind in ("int", "decimal", "double")
    functions = ["COUNT(*)", f"COUNT({ref.sql})", f"MIN({ref.sql})", f"MAX({ref.sql})",
                 f"COUNT(DISTINCT {ref.sql})"]
    if numeric:
        functions += [f"SUM({ref.sql})"] * 3 + [f"AVG({ref.sql})"] * 2
        if ref.column.kind == "int":
            functions += [f"STDDEV_SAMP({ref.sql})", f"VAR_POP({ref.sql})"]
    return rnd.choice(functions)


def _aggregate(rnd: random.Random, having: bool = True) -> str:
    block, tables = _block(rnd)
    refs = _refs(tables)
    groups = [r.sql for r in rnd.sample(refs, rnd.choice([0, 1, 1, 2]))]
    items = [f"{g} AS g{i}" for i, g in enumerate(groups)]
    items += [f"{_aggregate_call(rnd, refs)} AS a{i}" for i in range(rnd.randint(1, 3))]
    grouping = _grouping(rnd, groups)
    if grouping != ", ".join(groups) and rnd.random() < 0.5:
        items.append(f"GROUPING({groups[-1]}) AS gg")
    sql = f"SELECT {', '.join(items)} FROM {block}{_where(rnd, refs, 0.4)}"
    if groups:
        sql += f" GROUP BY {grouping}"
        if having and rnd.random() < 0.3:
            sql += rnd.choice([" HAVING COUNT(*) > 1", f" HAVING {_aggregate_call(rnd, refs)} > 0"])
    return sql


def _grouping(rnd: random.Random, groups: Sequence[str]) -> str:
    """GROUP BY's list: the groups, or (one time in four) grouping sets over them."""
    listed = ", ".join(groups)
    if not groups or rnd.random() >= 0.25:
        return listed
    return rnd.choice([f"ROLLUP ({listed})", f"CUBE ({listed})", f"{listed} WITH ROLLUP",
                       f"GROUPING SETS (({listed}), ({groups[0]}), ())"])


_SET_COLUMNS = {  # columns of one type in each table, for the branches of a set operation
    "int": {"orders": ["cust", "o_id"], "customers": ["c_id", "tier"], "lines": ["o_id", "qty"]},
    "string": {"orders": ["status"], "customers": ["region"]},
}


def _set_operation(rnd: random.Random) -> str:
    kind = rnd.choice(list(_SET_COLUMNS))
    tables = _SET_COLUMNS[kind]
    branches = []
    for table in rnd.sample(list(tables), 2):
        alias = _ALIASES[table]
        refs = _refs([table])
        branches.append(f"SELECT {alias}.{rnd.choice(tables[table])} AS c0 FROM {table} {alias}"
                        f"{_where(rnd, refs, 0.5)}")
    operator = rnd.choice(["UNION", "UNION ALL", "INTERSECT", "EXCEPT", "EXCEPT ALL",
                           "INTERSECT ALL"])
    return f"{branches[0]} {operator} {branches[1]}"


def _subquery(rnd: random.Random) -> str:
    refs = _refs(["orders"])
    items = ", ".join(f"{rnd.choice(refs).sql} AS c{i}" for i in range(rnd.randint(1, 2)))
    inner = _where(rnd, _refs(["customers"]), 0.7)
    lines = _refs(["lines"])
    condition = rnd.choice([
        f"o.cust IN (SELECT c.c_id FROM customers c{inner})",
        f"EXISTS (SELECT 1 FROM lines l WHERE l.o_id = o.o_id"
        f"{' AND ' + _atom(rnd, lines) if rnd.random() < 0.5 else ''})",
        f"NOT EXISTS (SELECT 1 FROM lines l WHERE l.o_id = o.o_id"
        f"{' AND ' + _atom(rnd, lines) if rnd.random() < 0.5 else ''})",
        f"o.cust NOT IN (SELECT c.c_id FROM customers c{inner})",
        # correlated by an equality: NULLs on both sides and in the correlation key
        f"o.cust NOT IN (SELECT l.qty FROM lines l WHERE l.o_id = o.o_id"
        f"{' AND ' + _atom(rnd, lines) if rnd.random() < 0.5 else ''})",
        f"o.status NOT IN (SELECT c.region FROM customers c WHERE c.c_id = o.cust"
        f"{' AND ' + _atom(rnd, _refs(['customers'])) if rnd.random() < 0.5 else ''})",
    ])
    extra = f" AND {_predicate(rnd, refs)}" if rnd.random() < 0.3 else ""
    return f"SELECT {items} FROM orders o WHERE {condition}{extra}"


def _window(rnd: random.Random) -> str:
    refs = _refs(["orders"])
    partition = rnd.choice(["o.cust", "o.status"])
    if rnd.random() < 0.3:  # over grouped rows
        function = rnd.choice(["RANK() OVER (PARTITION BY {p} ORDER BY SUM(o.amount) DESC)",
                               "SUM(COUNT(*)) OVER (PARTITION BY {p})",
                               "MAX(o.day) - MIN(MIN(o.day)) OVER (PARTITION BY {p})"])
        return (f"SELECT o.o_id % 3 AS c0, {partition} AS c1, COUNT(*) AS n, "
                f"{function.format(p=partition)} AS w FROM orders o{_where(rnd, refs, 0.4)} "
                f"GROUP BY o.o_id % 3, {partition}")
    function = rnd.choice(["ROW_NUMBER() OVER (PARTITION BY {p} ORDER BY o.o_id)",
                           "RANK() OVER (PARTITION BY {p} ORDER BY o.amount)",
                           "SUM(o.amount) OVER (PARTITION BY {p})",
                           "COUNT(*) OVER (PARTITION BY {p})",
                           # over the whole input: ties, NULLs, and a key (no ties)
                           "RANK() OVER (ORDER BY o.amount)",
                           "DENSE_RANK() OVER (ORDER BY o.day DESC)",
                           "ROW_NUMBER() OVER (ORDER BY o.o_id DESC)"]).format(p=partition)
    return (f"SELECT o.o_id AS c0, {partition} AS c1, {function} AS w FROM orders o"
            f"{_where(rnd, refs, 0.4)}")


def _top_k(rnd: random.Random) -> str:
    """ORDER BY ... LIMIT over another shape (by output position), or over a hidden column."""
    limit = f"LIMIT {rnd.randint(1, 4)}"
    if rnd.random() < 0.3:
        refs = _refs(["orders"])
        order = rnd.choice(["o.day", "o.amount DESC", "o.score DESC NULLS FIRST, o.day"])
        where = _where(rnd, refs, 0.5)
        return f"SELECT o.amount AS c0 FROM orders o{where} ORDER BY {order} {limit}"
    inner = rnd.choice([_select, _aggregate, _distinct, _set_operation])(rnd)
    parsed = sqlglot.parse_one(inner, read="spark")
    assert isinstance(parsed, exp.Query)
    width = len(parsed.selects)
    terms = [f"{position} {rnd.choice(['ASC', 'DESC'])}"
             f"{rnd.choice(['', ' NULLS FIRST', ' NULLS LAST'])}"
             for position in rnd.sample(range(1, width + 1), rnd.randint(1, width))]
    return f"{inner} ORDER BY {', '.join(terms)} {limit}"


def _nested(rnd: random.Random) -> str:
    """A view on a view: an aggregate read by another aggregate, a filter or a join."""
    refs = _refs(["orders"])
    group = rnd.choice(refs).sql
    inner = (f"SELECT {group} AS k, COUNT(*) AS n, SUM(o.amount) AS s FROM orders o"
             f"{_where(rnd, refs, 0.4)} GROUP BY {group}")
    return rnd.choice([
        f"WITH v AS ({inner}) SELECT v.n AS n, COUNT(*) AS groups FROM v GROUP BY v.n",
        f"WITH v AS ({inner}) SELECT v.k AS k, v.s AS s FROM v WHERE v.n > 1",
        f"SELECT c.region AS region, x.s AS s FROM ({inner}) x JOIN customers c "
        f"ON x.n = c.c_id",
    ])


SHAPES: dict[str, Callable[[random.Random], str]] = {
    "select": _select, "distinct": _distinct, "aggregate": _aggregate,
    "set operation": _set_operation, "subquery": _subquery, "window": _window,
    "top-K": _top_k, "view on view": _nested,
}
"""Each shape's generator; :func:`random_view` picks one."""


def random_view(rnd: random.Random) -> tuple[str, str]:
    """A random view: its shape's name and its SQL."""
    shape = rnd.choice(list(SHAPES))
    return shape, SHAPES[shape](rnd)
