"""Which aggregates the invertible-aggregate law maintains, and the SQL it derives."""

import pytest
import sqlglot

from ivm import Law, compile_view, explain
from ivm.aggregate_form import aggregate_form, exact_type, state_output, sum_type

SCHEMAS = {
    "sales": {"shop": "string", "day": "date", "qty": "int", "price": "decimal(15,2)",
              "weight": "double"},
    "shops": {"shop": "string", "city": "string"},
}


def _plan(sql: str):
    return compile_view("v", sql, SCHEMAS)


@pytest.mark.parametrize("sql", [
    "SELECT shop, SUM(qty) AS q, COUNT(*) AS n FROM sales GROUP BY shop",
    "SELECT shop, AVG(price) AS p, COUNT(price) AS c FROM sales GROUP BY shop HAVING SUM(qty) > 1",
    "SELECT COUNT(*) AS n, SUM(price) AS p FROM sales",
    "SELECT s.shop, h.city, SUM(s.price * s.qty) AS total FROM sales s "
    "JOIN shops h ON s.shop = h.shop GROUP BY s.shop, h.city",
    "SELECT shop, COUNT(weight) AS w FROM sales GROUP BY shop",  # COUNT of a double is exact
])
def test_exact_sums_and_counts_are_invertible(sql: str) -> None:
    plan = _plan(sql)
    assert plan.root.law is Law.INVERTIBLE_AGGREGATE
    text = explain(plan)
    assert "invertible aggregate" in text
    engine = next(line for line in text.splitlines() if line.startswith("engine: "))
    if "HAVING" in sql:  # an output the state's reads do not give: the state stays on Spark
        assert engine.startswith("engine: spark (an output computed from aggregates, or HAVING")
    else:
        assert engine.startswith("engine: local (DuckDB) within: aggregate state of at most")


@pytest.mark.parametrize("sql", [
    "SELECT shop, SUM(weight) AS w FROM sales GROUP BY shop",  # floating point drifts
    "SELECT shop, AVG(weight) AS w FROM sales GROUP BY shop",
    "SELECT shop, MIN(qty) AS q FROM sales GROUP BY shop",
    "SELECT shop, COUNT(DISTINCT day) AS d FROM sales GROUP BY shop",
    "SELECT shop, SUM(qty) FILTER (WHERE qty > 1) AS q FROM sales GROUP BY shop",
    "SELECT DISTINCT shop FROM sales",
])
def test_other_aggregates_keep_affected_key_recompute(sql: str) -> None:
    plan = _plan(sql)
    assert plan.incremental
    assert plan.root.law is Law.AFFECTED_KEY_RECOMPUTE


def test_state_output_replaces_aggregates_and_groups() -> None:
    plan = _plan("SELECT shop, SUM(price) / COUNT(*) AS r, AVG(qty) AS a FROM sales "
                 "GROUP BY shop HAVING COUNT(price) > 1")
    form = aggregate_form(plan.query)
    assert form is not None
    assert [a.sql("spark") for a in form.args] == ["sales.price", "sales.qty"]
    sql = state_output(form, ["decimal(15,2)", "int"], "st").sql("spark")
    assert sql == (
        "SELECT __g0 AS shop, CASE WHEN __c0 = 0 THEN NULL ELSE __s0 END / __n AS r, "
        "CASE WHEN __c1 = 0 THEN NULL ELSE CAST(__s1 AS DOUBLE) / CAST(__c1 AS DOUBLE) END "
        "AS a FROM st WHERE __n > 0 AND (__c0 > 1)")


def test_global_aggregate_keeps_its_row_and_averages_decimals_like_spark() -> None:
    form = aggregate_form(_plan("SELECT AVG(price) AS p FROM sales").query)
    assert form is not None and form.is_global
    sql = state_output(form, ["decimal(15,2)"], "st").sql("spark")
    assert "WHERE" not in sql  # an aggregate without GROUP BY has one row, even over nothing
    assert "CAST((__s0 / CAST(__c0 AS DECIMAL(20, 0))) AS DECIMAL(19, 6))" in sql


def test_rows_query_keeps_the_block_without_grouping() -> None:
    form = aggregate_form(_plan(
        "SELECT shop, SUM(qty) AS q FROM sales WHERE day > DATE'2024-01-01' GROUP BY shop "
        "HAVING SUM(qty) > 3").query)
    assert form is not None
    rows = sqlglot.parse_one(form.rows().sql("spark"), dialect="spark")
    assert rows.args.get("group") is None and rows.args.get("having") is None
    assert [s.alias for s in rows.selects] == ["__g0", "__a0"]
    assert rows.args.get("where") is not None


@pytest.mark.parametrize(("spark_type", "exact", "summed"), [
    ("int", True, "bigint"), ("bigint", True, "bigint"), ("decimal(15,2)", True,
                                                          "decimal(25,2)"),
    ("decimal(35,4)", True, "decimal(38,4)"), ("double", False, None), ("float", False, None),
])
def test_exact_types_and_spark_sum_types(spark_type: str, exact: bool, summed: str | None
                                         ) -> None:
    assert exact_type(spark_type) is exact
    if summed is not None:
        assert sum_type(spark_type) == summed
