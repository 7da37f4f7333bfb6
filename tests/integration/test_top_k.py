"""The top-K law: ORDER BY ... LIMIT views equal a recompute after every tick.

Buffers are made small (K' = K + 1) so that a few rows reach every path: a row entering
above the bound, one below it, the buffer cut after K' rows, deletions leaving it short
(a refill from the sources), and rows repeated across the bound. The recompute takes the
K rows by the same total order (:mod:`ivm.top_k`): the view's ORDER BY, then its columns.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from decimal import Decimal

import pytest
from pyspark.sql import SparkSession

from ivm import SourceInput, TopKState, ViewPlan, compile_view, explain, maintain, recompute, reload
from tests.conftest import multiset, normal_row
from tests.spark_frames import spark_frame

pytestmark = pytest.mark.spark

SCHEMA = "id int, g string, v int, d decimal(5,1)"
SCHEMAS = {"t": {"id": "int", "g": "string", "v": "int", "d": "decimal(5,1)"}}
Rows = list[tuple[object, ...]]


def _plan(sql: str, buffer_rows: int | None = None) -> ViewPlan:
    plan = compile_view("top", sql, SCHEMAS)
    assert plan.incremental and plan.top_k is not None, plan.reason
    if buffer_rows is None:
        return plan
    return replace(plan, top_k=replace(plan.top_k, buffer_rows=buffer_rows))


def _ticks(spark: SparkSession, plan: ViewPlan, snapshots: list[Rows]) -> list[bool]:
    """Load the first snapshot, tick through the others; whether each tick refilled."""
    def frame(rows: Rows):
        return spark_frame(spark, rows, SCHEMA)

    loaded = reload(plan, {"t": SourceInput(frame(snapshots[0]))})
    view = multiset(loaded.rows.collect())
    assert view == multiset(recompute(plan, {"t": SourceInput(frame(snapshots[0]))}).collect())
    state, refills = loaded.state, []
    for old, new in zip(snapshots, snapshots[1:], strict=False):
        change = Counter(new)
        change.subtract(Counter(old))
        delta = spark_frame(spark, [(*r, w) for r, w in change.items() if w],
                            f"{SCHEMA}, _weight bigint")
        inputs = {"t": SourceInput(frame(new), frame(old), delta)}
        maintained = maintain(plan, inputs, state)
        assert isinstance(maintained.state, TopKState)
        for row in maintained.rows.collect():
            view[normal_row(tuple(row)[:-1])] += row["_weight"]
        expected = multiset(recompute(plan, inputs).collect())
        assert +view == expected, (new, maintained.engine_reason)
        assert all(weight >= 0 for weight in view.values())
        refills.append("refilled" in maintained.engine_reason)
        state = maintained.state
    return refills


def _row(i: int, v: int | None, g: str = "a", d: str | None = None) -> tuple[object, ...]:
    return (i, g, v, Decimal(d) if d is not None else None)


def test_rows_enter_leave_and_the_buffer_refills_only_when_short(spark: SparkSession) -> None:
    plan = _plan("SELECT id, v FROM t ORDER BY v DESC LIMIT 3", buffer_rows=4)
    start = [_row(i, i) for i in range(1, 11)]  # buffer 10, 9, 8, 7; bound 6
    top, low = [_row(20, 20)], [_row(11, 1)]
    steps = [
        start + top,  # enters at the top; the buffer is cut again after 4: bound 7
        start + top + low,  # after the bound: no row enters
        # 10 leaves, 0 comes after the bound: 20, 9, 8 are left, no refill
        [r for r in start if r[0] != 10] + top + low + [_row(0, 0)],
        # 9 leaves too: 2 rows before the bound, refilled (7 is next, not 1 or 0)
        [r for r in start if r[0] not in (9, 10)] + top + low + [_row(0, 0)],
        [r for r in start if r[0] not in (9, 10)] + [_row(0, 0), _row(7, 7)] * 2,  # twins
    ]
    assert _ticks(spark, plan, [start, *steps]) == [False, False, False, True, False]


def test_a_row_repeated_across_the_bound(spark: SparkSession) -> None:
    """Equal rows tie: the bound is never a row with equal rows on both of its sides."""
    plan = _plan("SELECT v FROM t ORDER BY v LIMIT 2", buffer_rows=3)
    ones = [_row(1, 1)] * 5
    start = ones + [_row(2, 2), _row(3, 3)]
    steps = [start + [_row(1, 1)], [_row(1, 1), _row(2, 2), _row(3, 3)],
             [_row(2, 2), _row(3, 3), _row(0, 0)] * 2]
    refills = _ticks(spark, plan, [start, *steps])
    assert refills[0] is False and refills[1] is True  # 6 copies to 1: short


def test_a_row_repeated_far_more_often_than_the_buffer_holds(spark: SparkSession) -> None:
    """600 equal best rows and K' = 2: the buffer takes every copy, the next row is the bound."""
    plan = _plan("SELECT v, g FROM t ORDER BY v LIMIT 1", buffer_rows=2)
    start = [_row(1, 1)] * 600 + [_row(2, 2), _row(3, 3)]
    steps = [start + [_row(1, 1)], [_row(2, 2), _row(3, 3), _row(1, 2, "b")]]
    assert _ticks(spark, plan, [start, *steps]) == [False, True]


def test_a_change_to_the_bound_row_reads_nothing_more(spark: SparkSession) -> None:
    """The bound group's old row (-1) equals the bound: it is not in the buffer, no refill."""
    plan = _plan("SELECT g, SUM(v) AS s FROM t GROUP BY g ORDER BY s DESC LIMIT 1",
                 buffer_rows=2)
    start = [_row(1, 10, "a"), _row(2, 5, "b"), _row(3, 3, "c"), _row(4, 1, "d")]
    steps = [start[:2] + [_row(3, 2, "c"), start[3]],  # c (the bound) goes from 3 to 2
             start[1:2] + [_row(3, 2, "c")]]  # a and d leave: 1 row left, no bound row
    assert _ticks(spark, plan, [start, *steps]) == [False, False]


def test_an_aggregate_ordered_by_a_sum_with_nulls(spark: SparkSession) -> None:
    plan = _plan("SELECT g, SUM(d) AS s, COUNT(*) AS n FROM t GROUP BY g "
                 "ORDER BY s DESC NULLS LAST, g LIMIT 2", buffer_rows=3)
    start = [_row(1, 0, "a", "1.5"), _row(2, 0, "b", "7.0"), _row(3, 0, "c", None),
             _row(4, 0, "d", "-2.0"), _row(5, 0, "e", "3.0")]
    steps = [start + [_row(6, 0, "c", "9.9")],  # c's sum goes from NULL to the top
             [r for r in start if r[2] != "b"] + [_row(6, 0, "c", "9.9")],
             [_row(7, 0, "f", None)]]
    _ticks(spark, plan, [start, *steps])


def test_an_order_by_a_column_the_view_does_not_output(spark: SparkSession) -> None:
    plan = _plan("SELECT id FROM t ORDER BY d, id DESC LIMIT 2", buffer_rows=3)
    assert plan.top_k is not None and plan.top_k.outputs == ("id",)
    start = [_row(i, 0, "a", d) for i, d in enumerate([None, "1.0", "1.0", "2.0", None])]
    steps = [start[1:], start[2:] + [_row(9, 0, "a", "0.5")], start]
    _ticks(spark, plan, [start, *steps])


def test_explain_names_the_law_and_its_buffer() -> None:
    text = explain(compile_view("top", "SELECT id, v FROM t ORDER BY v DESC LIMIT 10", SCHEMAS))
    assert "[top-K] ORDER BY v DESC LIMIT 10" in text
    assert "buffer of the best 36 rows" in text
    refused = compile_view("top", "SELECT id FROM t ORDER BY v LIMIT 3 OFFSET 1", SCHEMAS)
    assert not refused.incremental and "OFFSET" in str(refused.reason)
