"""Delta terms restricted to the change's key range (sideways information passing)."""

import datetime as dt
from decimal import Decimal

import sqlglot
from sqlglot import exp

from ivm import compile_view
from ivm.key_ranges import join_columns, restricted

SCHEMAS = {
    "orders": {"o_orderkey": "bigint", "o_custkey": "bigint", "o_date": "date"},
    "lineitem": {"l_orderkey": "bigint", "l_qty": "decimal(15,2)"},
    "customer": {"c_custkey": "bigint", "c_name": "string"},
}


def _query(sql: str) -> exp.Select:
    query = compile_view("v", sql, SCHEMAS).query
    assert isinstance(query, exp.Select)
    return query


def test_join_columns_come_from_on_and_where_conjuncts_only() -> None:
    query = _query(
        "SELECT o.o_orderkey, l.l_qty, c.c_name FROM orders o JOIN lineitem l "
        "ON l.l_orderkey = o.o_orderkey, customer c "
        "WHERE c.c_custkey = o.o_custkey AND (o.o_orderkey = 1 OR l.l_orderkey = c.c_custkey)")
    pairs = [(a.sql(), b.sql()) for a, b in join_columns(query, "o")]
    assert pairs == [("o.o_orderkey", "l.l_orderkey"), ("o.o_custkey", "c.c_custkey")]
    assert [(a.sql(), b.sql()) for a, b in join_columns(query, "c")] == [
        ("c.c_custkey", "o.o_custkey")]


def test_restricted_adds_between_with_typed_literals() -> None:
    query = _query("SELECT o.o_orderkey, l.l_qty FROM orders o JOIN lineitem l "
                   "ON l.l_orderkey = o.o_orderkey AND l.l_qty = o.o_custkey")
    pairs = join_columns(query, "o")
    term = restricted(query.copy(), pairs, {"o_orderkey": (7, 42), "o_custkey": (None, None)})
    where = term.args["where"].sql("spark")
    assert "l.l_orderkey BETWEEN 7 AND 42" in where
    assert "FALSE" in where  # a change whose key is all NULL joins nothing


def test_literals_round_trip_through_spark_sql_text() -> None:
    query = _query("SELECT o.o_orderkey FROM orders o JOIN lineitem l ON l.l_qty = o.o_custkey")
    term = restricted(query.copy(), join_columns(query, "l"),
                      {"l_qty": (Decimal("-1.50"), Decimal("20.00"))})
    text = term.sql("spark")
    assert "BETWEEN -1.50 AND 20.00" in text
    assert sqlglot.parse_one(text, dialect="spark").sql("spark") == text
    dated = _query("SELECT o.o_orderkey FROM orders o JOIN orders p ON p.o_date = o.o_date")
    term = restricted(dated.copy(), join_columns(dated, "o"),
                      {"o_date": (dt.date(1995, 1, 1), dt.date(1995, 3, 1))})
    assert "BETWEEN CAST('1995-01-01' AS DATE) AND CAST('1995-03-01' AS DATE)" in term.sql(
        "spark")
