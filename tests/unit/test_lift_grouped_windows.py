"""The rewrite rule that lifts a grouped block under its windows (``ivm.lift_grouped_windows``)."""

from __future__ import annotations

from sqlglot import exp, parse_one
from sqlglot.optimizer.qualify import qualify

from ivm import compile_view
from ivm.lift_grouped_windows import lift_grouped_windows
from ivm.shape import group_expressions, windows

SCHEMA = {"t": {"g": "string", "h": "int", "x": "int"}}
JOINED = ("SELECT t.g, SUM(t.x) AS s, RANK() OVER (PARTITION BY t.h ORDER BY SUM(t.x) DESC) "
          "AS k FROM t JOIN (SELECT g, RANK() OVER (PARTITION BY g ORDER BY COUNT(*)) AS r "
          "FROM t GROUP BY g) AS d ON t.g = d.g WHERE d.r <= 1 GROUP BY t.g, t.h")
# TPC-DS q70's shape: the nested grouped window under IN (unnested into a join first)
NESTED = ("SELECT g, SUM(x) AS s, RANK() OVER (PARTITION BY h ORDER BY SUM(x) DESC) AS k "
          "FROM t WHERE g IN (SELECT d.g FROM (SELECT g, RANK() OVER (PARTITION BY g "
          "ORDER BY COUNT(*)) AS r FROM t GROUP BY g) AS d WHERE d.r <= 1) GROUP BY g, h")


def test_every_grouped_block_with_windows_is_lifted_the_root_and_the_nested_ones() -> None:
    query = qualify(parse_one(JOINED, dialect="spark"), schema=SCHEMA, dialect="spark")
    lifted = lift_grouped_windows(query)
    assert [s for s in lifted.find_all(exp.Select)
            if windows(s) and group_expressions(s) is not None] == []
    assert len([s for s in lifted.find_all(exp.Select) if windows(s)]) == 2


def test_a_view_with_nested_grouped_windows_is_incremental() -> None:
    plan = compile_view("v", NESTED, SCHEMA)
    assert plan.incremental, plan.reason
