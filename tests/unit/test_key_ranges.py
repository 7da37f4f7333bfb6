"""Delta terms restricted to the change's key range (sideways information passing)."""

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import sqlglot
from sqlglot import exp

from ivm import compile_view
from ivm.change_keys import IN_LIST_MAX, arrow_keys
from ivm.key_ranges import KeyValues, join_columns, restricted

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
    term = restricted(query.copy(), pairs,
                      {"o_orderkey": KeyValues(7, 42), "o_custkey": KeyValues(None, None)})
    where = term.args["where"].sql("spark")
    assert "l.l_orderkey BETWEEN 7 AND 42" in where
    assert "FALSE" in where  # a change whose key is all NULL joins nothing


def test_literals_round_trip_through_spark_sql_text() -> None:
    query = _query("SELECT o.o_orderkey FROM orders o JOIN lineitem l ON l.l_qty = o.o_custkey")
    term = restricted(query.copy(), join_columns(query, "l"),
                      {"l_qty": KeyValues(Decimal("-1.50"), Decimal("20.00"))})
    text = term.sql("spark")
    assert "BETWEEN -1.50 AND 20.00" in text
    assert sqlglot.parse_one(text, dialect="spark").sql("spark") == text
    # str(Decimal) writes small values with an exponent, which Spark reads as a double
    tiny = restricted(query.copy(), join_columns(query, "l"),
                      {"l_qty": KeyValues(Decimal("0E-10"), Decimal("1.000E-7"))})
    assert "BETWEEN 0.0000000000 AND 0.0000001000" in tiny.sql("spark")
    dated = _query("SELECT o.o_orderkey FROM orders o JOIN orders p ON p.o_date = o.o_date")
    term = restricted(dated.copy(), join_columns(dated, "o"),
                      {"o_date": KeyValues(dt.date(1995, 1, 1), dt.date(1995, 3, 1))})
    assert "BETWEEN CAST('1995-01-01' AS DATE) AND CAST('1995-03-01' AS DATE)" in term.sql(
        "spark")


def test_listed_values_add_an_in_list_next_to_the_range() -> None:
    query = _query("SELECT o.o_orderkey, l.l_qty FROM orders o JOIN lineitem l "
                   "ON l.l_orderkey = o.o_orderkey")
    pairs = join_columns(query, "o")
    term = restricted(query.copy(), pairs, {"o_orderkey": KeyValues(7, 42, (7, 19, 42))})
    where = term.args["where"].sql("spark")
    assert "l.l_orderkey BETWEEN 7 AND 42" in where
    assert "l.l_orderkey IN (7, 19, 42)" in where
    single = restricted(query.copy(), pairs, {"o_orderkey": KeyValues(7, 7, (7,))})
    assert "IN (" not in single.args["where"].sql("spark")  # the range is already exact


def test_arrow_keys_reads_bounds_and_distinct_values_without_nulls() -> None:
    change = pa.table({"k": pa.array([5, None, 3, 5, 9], pa.int64()),
                       "d": pa.array([Decimal("1.50"), None, None, Decimal("-2.00"), None],
                                     pa.decimal128(7, 2)),
                       "n": pa.array([None] * 5, pa.int64()),
                       "_weight": pa.array([1, 1, -1, -1, 1], pa.int64())})
    keys = arrow_keys(change, ["k", "d", "n"])
    assert keys is not None
    assert (keys["k"].low, keys["k"].high, sorted(keys["k"].values or ())) == (3, 9, [3, 5, 9])
    assert (keys["d"].low, keys["d"].high) == (Decimal("-2.00"), Decimal("1.50"))
    assert keys["n"] == KeyValues(None, None)
    assert arrow_keys(change, ["missing"]) is None
    many = pa.table({"k": pa.array(range(IN_LIST_MAX + 1), pa.int64())})
    wide = arrow_keys(many, ["k"])
    assert wide is not None and wide["k"] == KeyValues(0, IN_LIST_MAX, None)


def test_partners_of_another_type_are_not_restricted() -> None:
    """``=`` casts a string to the number it meets; ``IN`` and ``BETWEEN`` with the change's
    string values would compare as strings and drop partners the join matches."""
    schemas = {"a": {"k": "string", "x": "int"}, "b": {"k": "bigint", "y": "decimal(15,2)"},
               "c": {"k": "int", "z": "string"}}
    query = compile_view("v", "SELECT a.x, b.y, c.z FROM a JOIN b ON a.k = b.k "
                              "JOIN c ON c.k = b.k", schemas).query
    assert isinstance(query, exp.Select)
    strings = restricted(query.copy(), join_columns(query, "a"),
                         {"k": KeyValues("007", "9", ("007", "9"))})
    assert strings.args.get("where") is None
    numbers = restricted(query.copy(), join_columns(query, "c"),
                         {"k": KeyValues(1, 7, (1, 7))})  # int against bigint: numbers both
    assert "b.k IN (1, 7)" in numbers.args["where"].sql("spark")


def test_arrow_keys_leave_types_arrow_cannot_compare_to_spark() -> None:
    uuids = pa.array([b"0123456789abcdef"], pa.binary(16)).cast(pa.uuid())
    assert arrow_keys(pa.table({"u": uuids}), ["u"]) is None
