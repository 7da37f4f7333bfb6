"""The rule that moves a correlated subquery's ORs away from its correlation.

Each rewritten query, and the same query decorrelated by sqlglot, must return what the
original returns: DuckDB (which runs correlated subqueries itself) is the oracle.
"""

from __future__ import annotations

from collections import Counter

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp, parse_one
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.unnest_subqueries import unnest_subqueries

from ivm.factor_or_conjuncts import factor_or_conjuncts

SCHEMA = {"t": {"k": "string", "m": "int"}, "u": {"k": "string", "c": "string", "s": "int"}}
# TPC-DS q41's shape: the correlation in every branch of an OR
Q41 = ("SELECT DISTINCT t.k FROM t WHERE t.m > 0 AND (SELECT COUNT(*) FROM u WHERE "
       "(u.k = t.k AND (u.c = 'a' OR u.c = 'b') AND u.s > 1) OR (u.k = t.k AND u.c = 'c')) > 0")
DECORRELATED = [
    Q41,
    # a branch with nothing of its own: the OR is true, the correlation alone remains
    "SELECT t.k, t.m FROM t WHERE EXISTS (SELECT 1 FROM u WHERE (u.k = t.k) OR "
    "(u.k = t.k AND u.s > 2))",
    "SELECT t.k FROM t WHERE t.m < (SELECT MAX(u.s) FROM u WHERE u.k = t.k AND "
    "(u.c = 'a' OR u.s IS NULL))",
    # the factored conjuncts inside parentheses among others
    "SELECT t.k FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.s > 0 AND "
    "((u.k = t.k AND u.c = 'a') OR (u.k = t.k AND u.c = 'b')))",
]
NESTED = [
    # a nested subquery naming its own table with the same alias: not a column of ours
    "SELECT t.k FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND (u.c = 'a' OR "
    "u.s > 1) AND EXISTS (SELECT 1 FROM t AS u WHERE u.m = 1))",
]
KEPT = [
    # the correlation only in some branches: left to the compiler to name
    "SELECT t.k FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k OR u.s > 2)",
    # an OR holding a subquery, or no column, stays in the WHERE
    "SELECT t.k FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND (u.s > 2 OR "
    "EXISTS (SELECT 1 FROM t AS u WHERE u.m = 1)))",
    "SELECT t.k FROM t WHERE EXISTS (SELECT 1 FROM u WHERE t.k = 'x' AND (1 = 1 OR 2 = 3))",
]


def _qualified(sql: str) -> exp.Query:
    query = qualify(parse_one(sql, dialect="spark"), schema=SCHEMA, dialect="spark")
    assert isinstance(query, exp.Query)
    return query


def _subqueries(query: exp.Query) -> int:
    """Subqueries left in a WHERE: those not decorrelated into a join."""
    return sum(1 for where in query.find_all(exp.Where) for _ in where.find_all(exp.Select))


@pytest.mark.parametrize("sql", DECORRELATED)
def test_sqlglot_decorrelates_the_rewritten_subquery(sql: str) -> None:
    assert _subqueries(unnest_subqueries(_qualified(sql))) == 1, "sqlglot alone does not"
    assert _subqueries(unnest_subqueries(factor_or_conjuncts(_qualified(sql)))) == 0


@pytest.mark.parametrize("sql", KEPT)
def test_a_correlation_under_an_or_is_left_as_written(sql: str) -> None:
    assert factor_or_conjuncts(_qualified(sql)).sql() == _qualified(sql).sql()


keys = st.sampled_from(["x", "y", None])
outer_rows = st.lists(st.tuples(keys, st.one_of(st.none(), st.integers(-1, 3))), max_size=6)
inner_rows = st.lists(st.tuples(keys, st.sampled_from(["a", "b", "c", None]),
                                st.one_of(st.none(), st.integers(0, 3))), max_size=8)


@settings(max_examples=60, deadline=None)
@given(outer=outer_rows, inner=inner_rows, sql=st.sampled_from(DECORRELATED + KEPT + NESTED))
def test_the_rewrites_return_what_the_original_returns(outer: list[tuple], inner: list[tuple],
                                                       sql: str) -> None:
    connection = duckdb.connect()
    connection.register("t", pa.table({"k": pa.array([r[0] for r in outer], pa.string()),
                                       "m": pa.array([r[1] for r in outer], pa.int32())}))
    connection.register("u", pa.table({"k": pa.array([r[0] for r in inner], pa.string()),
                                       "c": pa.array([r[1] for r in inner], pa.string()),
                                       "s": pa.array([r[2] for r in inner], pa.int32())}))

    def rows(query: exp.Query) -> Counter:
        return Counter(connection.sql(query.sql("duckdb")).fetchall())

    expected = rows(_qualified(sql))
    assert rows(factor_or_conjuncts(_qualified(sql))) == expected
    assert rows(unnest_subqueries(factor_or_conjuncts(_qualified(sql)))) == expected
