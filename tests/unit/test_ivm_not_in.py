"""The NOT IN rewrite rule (sqlglot only): which NOT IN become anti-joins, and their shape."""

from __future__ import annotations

import pytest
from sqlglot import exp

from ivm import Law, PlanNode, compile_view
from ivm.unnest_not_in import is_not_in, unnest_not_in
from tests.qualified_sql import qualified_select

SCHEMAS = {
    "flights": {"carrier": "string", "month": "int", "origin": "string"},
    "airlines": {"carrier": "string", "name": "string"},
}


def _rewritten(sql: str) -> exp.Query:
    return unnest_not_in(qualified_select(sql, SCHEMAS), SCHEMAS)


def test_not_in_becomes_a_left_join_to_distinct_values_and_a_null_guard() -> None:
    query = _rewritten("SELECT carrier FROM flights WHERE carrier NOT IN "
                       "(SELECT carrier FROM airlines WHERE name LIKE 'D%') AND month > 1")
    assert not any(is_not_in(n) for n in query.walk())
    joins = query.args["joins"]
    assert [(j.args.get("side"), j.args.get("kind")) for j in joins] == [
        ("LEFT", None), (None, "CROSS")]
    values, flags = (j.this.this for j in joins)
    assert values.args.get("distinct") and values.args.get("where") is not None
    assert [s.alias for s in flags.selects] == ["_nonempty", "_has_null"]
    where = query.args["where"].sql("spark")
    assert "_not_in._value IS NULL" in where
    assert ("NOT _not_in_flags._nonempty OR (NOT flights.carrier IS NULL AND "
            "NOT _not_in_flags._has_null)") in where
    assert "flights.month > 1" in where


def test_a_shaped_subquery_is_read_as_a_derived_table() -> None:
    query = _rewritten("SELECT carrier FROM flights WHERE carrier NOT IN "
                       "(SELECT MAX(carrier) FROM airlines GROUP BY name)")
    values = query.args["joins"][0].this.this
    assert isinstance(values.args["from_"].this, exp.Subquery)  # grouping stays inside


def test_a_correlated_not_in_keys_the_values_and_the_flags_by_the_correlation() -> None:
    query = _rewritten("SELECT f.carrier FROM flights f WHERE f.carrier NOT IN "
                       "(SELECT a.carrier FROM airlines a WHERE (a.name = f.origin || 'x' "
                       "AND a.carrier > 'A'))")
    assert not any(is_not_in(n) for n in query.walk())
    joins = query.args["joins"]
    assert [j.args.get("side") for j in joins] == ["LEFT", "LEFT"]
    values, flags = (j.this.this for j in joins)
    assert [s.alias for s in values.selects] == ["_value", "_k0"]
    assert [s.alias for s in flags.selects] == ["_k0", "_nonempty", "_has_null"]
    assert [g.sql("spark") for g in flags.args["group"].expressions] == ["a.name"]
    for derived in (values, flags):  # the correlation left the subquery; its filter stays
        assert derived.args["where"].sql("spark") == "WHERE a.carrier > 'A'"
    assert joins[0].args["on"].sql("spark") == (
        "f.carrier = _not_in._value AND f.origin || 'x' = _not_in._k0")
    assert joins[1].args["on"].sql("spark") == "f.origin || 'x' = _not_in_flags._k0"
    assert ("_not_in_flags._nonempty IS NULL OR (NOT f.carrier IS NULL AND "
            "NOT _not_in_flags._has_null)") in query.args["where"].sql("spark")


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT f.carrier FROM flights f WHERE f.carrier NOT IN "
        "(SELECT a.carrier FROM airlines a WHERE a.name < f.origin)",  # correlated, not =
        "SELECT f.carrier FROM flights f WHERE f.carrier NOT IN "
        "(SELECT a.carrier FROM airlines a WHERE a.name = f.origin AND f.month = 3)",
        "SELECT f.carrier FROM flights f JOIN airlines b ON f.carrier = b.carrier "
        "WHERE f.carrier NOT IN (SELECT a.carrier FROM airlines a WHERE a.name = b.name)",
        "SELECT f.carrier FROM flights f WHERE f.carrier NOT IN "
        "(SELECT MAX(a.carrier) FROM airlines a WHERE a.name = f.origin)",  # shaped
        # equal after a cast ('1' and '01' are both 1): one outer row, several keys
        "SELECT f.carrier FROM flights f WHERE f.carrier NOT IN "
        "(SELECT a.carrier FROM airlines a WHERE a.name = f.month)",
        "SELECT carrier FROM flights WHERE carrier NOT IN (SELECT carrier FROM airlines) "
        "OR month = 1",  # not a conjunct
        "SELECT f.carrier FROM flights f LEFT JOIN airlines a ON f.carrier = a.carrier "
        "WHERE f.origin NOT IN (SELECT name FROM airlines)",  # over an outer join
        "SELECT f.carrier FROM flights f JOIN airlines a ON f.carrier = a.carrier "
        "WHERE f.origin || a.name NOT IN (SELECT name FROM airlines)",  # reads two tables
    ],
)
def test_other_not_in_are_left_for_the_checks(sql: str) -> None:
    assert sum(is_not_in(n) for n in _rewritten(sql).walk()) == 1
    plan = compile_view("v", sql, SCHEMAS)
    assert not plan.incremental and "NOT IN" in (plan.reason or "")


def _laws(node: PlanNode) -> set[Law]:
    return {node.law}.union(*(_laws(c) for c in node.children))


def test_nested_not_in_is_incremental() -> None:
    plan = compile_view("v", "SELECT carrier FROM flights WHERE carrier NOT IN (SELECT carrier "
                             "FROM airlines WHERE name NOT IN (SELECT origin FROM flights))",
                        SCHEMAS)
    assert plan.incremental, plan.reason
    assert Law.FULL_RECOMPUTE not in _laws(plan.root)
    assert plan.sql.count("LEFT JOIN") == 3  # the inner one in the values and the flags
