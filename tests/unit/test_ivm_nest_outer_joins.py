"""The nested-outer-join rewrite rule (sqlglot only): which blocks are nested, and how."""

from __future__ import annotations

import pytest
from sqlglot import exp

from ivm import compile_view
from ivm.nest_outer_joins import nest_outer_joins
from tests.qualified_sql import qualified_select

SCHEMAS = {
    "flights": {"carrier": "string", "month": "int", "origin": "string"},
    "airlines": {"carrier": "string", "name": "string"},
    "airports": {"code": "string", "city": "string"},
}


def _nested(sql: str, schema: dict[str, dict[str, str]] = SCHEMAS) -> exp.Select:
    result = nest_outer_joins(qualified_select(sql, schema))
    assert isinstance(result, exp.Select)
    return result


def test_the_tables_before_the_last_outer_join_become_one_derived_table() -> None:
    query = _nested("SELECT f.origin, a.name, p.city FROM flights f JOIN airlines a "
                    "ON f.carrier = a.carrier FULL JOIN airports p "
                    "ON p.code = f.origin AND p.city <> a.name")
    derived = query.args["from_"].this
    assert isinstance(derived, exp.Subquery) and derived.alias == "_nested"
    assert [j.args.get("side") for j in derived.this.args["joins"]] == [None]  # a JOIN
    assert [j.args.get("side") for j in query.args["joins"]] == ["FULL"]
    assert query.args["joins"][0].args["on"].sql("spark") == (
        "p.code = _nested.f__origin AND p.city <> _nested.a__name")
    assert [s.sql("spark") for s in query.selects] == [
        "_nested.f__origin AS origin", "_nested.a__name AS name", "p.city AS city"]


def test_a_first_outer_join_goes_in_with_its_two_tables() -> None:
    query = _nested("SELECT a.name, p.city FROM flights f RIGHT JOIN airlines a "
                    "ON f.carrier = a.carrier JOIN airports p ON p.code = f.origin")
    derived = query.args["from_"].this.this
    assert [j.args.get("side") for j in derived.args["joins"]] == ["RIGHT"]
    assert [j.args.get("side") for j in query.args["joins"]] == [None]
    assert query.args["joins"][0].args["on"].sql("spark") == (
        "p.code = _nested.f__origin")


def test_four_tables_nest_one_level_per_outer_join() -> None:
    query = _nested("SELECT f.month FROM flights f LEFT JOIN airlines a "
                    "ON f.carrier = a.carrier AND a.name = f.origin JOIN airports p "
                    "ON p.code = f.origin FULL JOIN airlines b ON b.carrier = a.carrier")
    assert _levels(query) == [["FULL"], ["INNER"], ["LEFT"]]


def _levels(query: exp.Select) -> list[list[str]]:
    """The join kinds of each level, outermost first."""
    levels = []
    node: exp.Expr = query
    while isinstance(node, exp.Select):
        levels.append([j.args.get("side") or "INNER" for j in node.args.get("joins") or []])
        node = node.args["from_"].this.this
    return levels


def test_inner_joins_after_an_outer_join_read_the_nested_table_again() -> None:
    sql = ("SELECT f.month, b.name FROM flights f JOIN airlines a ON f.carrier = a.carrier "
           "FULL JOIN airports p ON p.code = f.origin JOIN airlines b ON b.carrier = a.carrier")
    assert _levels(_nested(sql)) == [["INNER"], ["FULL"], ["INNER"]]
    assert compile_view("v", sql, SCHEMAS).incremental


def test_output_names_that_would_clash_are_told_apart() -> None:
    schema = {"p": {"x": "int", "q__x": "int"}, "t": {"a": "int", "b": "int"}}
    query = _nested("SELECT p.q__x AS y1, p__q.x AS y2, t.b FROM p JOIN p AS p__q "
                    "ON p.x = p__q.q__x FULL JOIN t ON t.a = p.x", schema)
    names = [s.alias for s in query.args["from_"].this.this.selects]
    assert len(names) == len(set(names)) == 4
    assert [s.sql("spark") for s in query.selects][:2] == [
        f"_nested.{names[0]} AS y1", f"_nested.{names[1]} AS y2"]


@pytest.mark.parametrize(
    "sql",
    [
        # two tables, or inner joins only: nothing to nest
        "SELECT f.month FROM flights f LEFT JOIN airlines a ON f.carrier = a.carrier",
        "SELECT f.month FROM flights f JOIN airlines a ON f.carrier = a.carrier "
        "JOIN airports p ON p.code = f.origin",
        # a subquery outside the FROM items reads the block's tables
        "SELECT f.month FROM flights f JOIN airlines a ON f.carrier = a.carrier "
        "FULL JOIN airports p ON p.code = f.origin WHERE f.month = "
        "(SELECT MAX(g.month) FROM flights g WHERE g.carrier = a.carrier)",
        # a CROSS JOIN has no ON
        "SELECT f.month FROM flights f CROSS JOIN airlines a "
        "FULL JOIN airports p ON p.code = f.origin",
    ],
)
def test_other_blocks_are_left_alone(sql: str) -> None:
    query = _nested(sql)
    assert not any(isinstance(s.this, exp.Subquery) for s in [query.args["from_"]])


@pytest.mark.parametrize(
    ("sql", "incremental"),
    [
        ("SELECT a.name, p.city FROM flights f JOIN airlines a ON f.carrier = a.carrier "
         "FULL JOIN airports p ON p.code = f.origin", True),
        ("SELECT a.name, p.city FROM flights f RIGHT JOIN airlines a ON f.carrier = a.carrier "
         "LEFT JOIN airports p ON p.city = a.name AND p.code = f.origin", True),
        # a level with no equality between its sides stays a full recompute, by name
        ("SELECT a.name, p.city FROM flights f JOIN airlines a ON f.carrier = a.carrier "
         "FULL JOIN airports p ON p.code < f.origin", False),
    ],
)
def test_nested_levels_are_maintained_when_each_is_an_equi_join(sql: str,
                                                                incremental: bool) -> None:
    plan = compile_view("v", sql, SCHEMAS)
    assert plan.incremental is incremental, plan.reason
    assert incremental or "outer join: maintained only with an equality" in (plan.reason or "")
