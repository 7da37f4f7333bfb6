"""The affected-range law for ranks over the whole input (``ivm.rank_ranges``).

The law's rewrite is run on DuckDB over random old and new inputs: new minus old of the
restricted block must equal new minus old of the whole block (the view's true delta).
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

from ivm import compile_view
from ivm.laws import Law
from ivm.rank_ranges import affected_ranks, rank_orders
from ivm.rewrite import key_projection, substitute

SCHEMA = {"t": {"g": "string", "x": "int", "y": "int"}}
RANKS = [
    "SELECT g, x, RANK() OVER (ORDER BY x) AS r FROM t",
    "SELECT g, RANK() OVER (ORDER BY x DESC) AS r, DENSE_RANK() OVER (ORDER BY y NULLS LAST) "
    "AS d FROM t WHERE g <> 'c'",
    "SELECT g, DENSE_RANK() OVER (ORDER BY x + y DESC NULLS FIRST) * 10 AS d FROM t",
]


def _qualified(sql: str) -> exp.Select:
    query = qualify(parse_one(sql, dialect="spark"), schema=SCHEMA, dialect="spark")
    assert isinstance(query, exp.Select)
    return query


@pytest.mark.parametrize(("sql", "expected"), [
    ("SELECT RANK() OVER (ORDER BY x DESC) AS r FROM t", [(True, False)]),
    ("SELECT DENSE_RANK() OVER (ORDER BY x) AS r, RANK() OVER (ORDER BY y NULLS LAST) AS s "
     "FROM t", [(False, True), (False, False)]),
    ("SELECT ROW_NUMBER() OVER (ORDER BY x) AS r FROM t", None),  # ties in no fixed order
    ("SELECT RANK() OVER (PARTITION BY g ORDER BY x) AS r FROM t", None),
    ("SELECT RANK() OVER (ORDER BY x, y) AS r FROM t", None),
    ("SELECT SUM(x) OVER (ORDER BY x) AS r FROM t", None),
    ("SELECT g, x FROM t", None),
    ("SELECT RANK() OVER (ORDER BY x - (SELECT AVG(y) FROM t)) AS r FROM t", None),
])
def test_rank_orders_take_only_ranks_over_the_whole_input_by_one_expression(
        sql: str, expected: list[tuple[bool, bool]] | None) -> None:
    orders = rank_orders(_qualified(sql))
    found = None if orders is None else [(o.descending, o.nulls_first) for o in orders]
    assert found == expected


def test_a_view_of_ranks_is_planned_by_the_affected_range_law() -> None:
    plan = compile_view("v", RANKS[1], SCHEMA)
    window = plan.root
    while window.operator != "window":
        window = window.children[0]
    assert plan.incremental and window.law is Law.AFFECTED_RANGE_RECOMPUTE
    assert window.detail.startswith("ORDER BY t.x DESC NULLS LAST, t.y ASC NULLS LAST")


rows = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]),
                          st.one_of(st.none(), st.integers(0, 4)),
                          st.one_of(st.none(), st.integers(0, 2))), max_size=8)


@settings(max_examples=100, deadline=None)
@given(old=rows, inserted=rows, deleted=st.integers(0, 8), which=st.sampled_from(RANKS))
def test_the_restricted_delta_is_the_whole_delta(old: list[tuple], inserted: list[tuple],
                                                 deleted: int, which: str) -> None:
    new = old[deleted:] + inserted
    query = _qualified(which)
    orders = rank_orders(query)
    assert orders is not None
    changed = (Counter(new) - Counter(old)) + (Counter(old) - Counter(new))
    connection = duckdb.connect()
    for name, table in (("t_new", new), ("t_old", old), ("changed", list(changed))):
        connection.register(name, pa.table(
            {c: pa.array([r[i] for r in table], pa.string() if c == "g" else pa.int32())
             for i, c in enumerate(("g", "x", "y"))}))
    # the input delta's order values, as the window block computes them
    projection = key_projection(substitute(query, lambda _, source: "changed"),
                                [o.expression for o in orders])
    connection.execute(f"CREATE VIEW keys AS {projection.sql('duckdb')}")

    def relation(role: str, source: str) -> str:
        return f"{source}_{role}"

    def delta(new_sql: str, old_sql: str) -> dict[tuple, int]:
        """new minus old, weights per row (zeros dropped), a trailing ``_weight`` ignored."""
        found: Counter = Counter()
        for sql, sign in ((new_sql, 1), (old_sql, -1)):
            for row in connection.sql(sql).fetchall():
                found[row[:width]] += sign
        return {row: weight for row, weight in found.items() if weight}

    width = len(query.selects)
    whole = delta(*[substitute(query, lambda _, s, r=role: relation(r, s)).sql("duckdb")
                    for role in ("new", "old")])
    restricted = delta(*[affected_ranks(query, orders, role, "keys", 1, relation).sql("duckdb")
                         for role in ("new", "old")])
    assert restricted == whole
