"""ROW_NUMBER over the whole input, ordered by a key of the rows, is maintained as RANK."""

from __future__ import annotations

import pytest

from ivm import Law, PlanNode, compile_view

SCHEMAS = {
    "orders": {"o_id": "int", "cust": "int", "amount": "decimal(9,2)"},
    "customers": {"c_id": "int", "region": "string"},
    "lines": {"o_id": "int", "qty": "int"},
}
KEYS = {"orders": ["o_id"], "customers": ["c_id"]}


def _laws(node: PlanNode) -> set[Law]:
    return {node.law}.union(*(_laws(c) for c in node.children))


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT o.o_id, ROW_NUMBER() OVER (ORDER BY o.o_id DESC) AS r FROM orders o "
        "WHERE o.amount > 0",
        # a many-to-one join keeps the order's key
        "SELECT o.o_id, c.region, ROW_NUMBER() OVER (ORDER BY o.o_id) AS r FROM orders o "
        "JOIN customers c ON o.cust = c.c_id",
    ],
)
def test_row_number_by_a_key_is_ranked_by_the_affected_range(sql: str) -> None:
    plan = compile_view("v", sql, SCHEMAS, source_keys=KEYS)
    assert plan.incremental, plan.reason
    assert Law.AFFECTED_RANGE_RECOMPUTE in _laws(plan.root)
    assert "RANK() OVER" in plan.sql and "ROW_NUMBER" not in plan.sql
    assert "ROW_NUMBER" in plan.original_sql  # a full refresh runs the SQL as written


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT o.o_id, ROW_NUMBER() OVER (ORDER BY o.amount) AS r FROM orders o",  # ties
        # one order, many lines: the order's key repeats
        "SELECT o.o_id, l.qty, ROW_NUMBER() OVER (ORDER BY o.o_id) AS r FROM orders o "
        "JOIN lines l ON o.o_id = l.o_id",
        # the NULL-extended rows of an outer join
        "SELECT c.c_id, ROW_NUMBER() OVER (ORDER BY o.o_id) AS r FROM customers c "
        "LEFT JOIN orders o ON o.cust = c.c_id",
        "SELECT o.o_id, ROW_NUMBER() OVER (ORDER BY o.o_id + 1) AS r FROM orders o",
    ],
)
def test_row_number_over_values_that_may_tie_stays_refused(sql: str) -> None:
    plan = compile_view("v", sql, SCHEMAS, source_keys=KEYS)
    assert not plan.incremental
    assert "ROW_NUMBER ordered by a key of the rows" in (plan.reason or "")


def test_without_source_keys_row_number_stays_refused() -> None:
    plan = compile_view("v", "SELECT o.o_id, ROW_NUMBER() OVER (ORDER BY o.o_id) AS r "
                             "FROM orders o", SCHEMAS)
    assert not plan.incremental
