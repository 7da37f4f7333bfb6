"""The invertible-aggregate law gives the same state on both engines.

The law (:mod:`ivm.aggregate_state`) is written once over :class:`StateEngine`; these
tests run its step and its read-back of stored changes on Spark DataFrames and on Arrow
tables (DuckDB) from the same rows, and compare every result row for row.
"""

from __future__ import annotations

import random
from decimal import Decimal

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession

from ivm import compile_view, to_arrow
from ivm.aggregate_form import AggregateForm, aggregate_form
from ivm.aggregate_state import Advanced, advance, with_changes
from ivm.state_local import LOCAL_STATE_ENGINE
from ivm.state_spark import SPARK_STATE_ENGINE
from tests.spark_frames import arrow_frame

SQL = ("SELECT shop, day, SUM(price) AS p, COUNT(qty) AS q, COUNT(*) AS n FROM sales "
       "GROUP BY shop, day")
SCHEMA = {"sales": {"shop": "string", "day": "int", "price": "decimal(15,2)", "qty": "int"}}
ARG_TYPES = ["decimal(15,2)", "int"]
STATE = pa.schema([("__g0", pa.string()), ("__g1", pa.int32()), ("__s0", pa.decimal128(25, 2)),
                   ("__c0", pa.int64()), ("__c1", pa.int64()), ("__n", pa.int64())])
STATE_DDL = "__g0 string, __g1 int, __s0 decimal(25,2), __c0 bigint, __c1 bigint, __n bigint"
DELTA = pa.schema([("__g0", pa.string()), ("__g1", pa.int32()), ("__a0", pa.decimal128(15, 2)),
                   ("__a1", pa.int32()), ("_weight", pa.int64())])
DELTA_DDL = "__g0 string, __g1 int, __a0 decimal(15,2), __a1 int, _weight bigint"


def _form() -> AggregateForm:
    form = aggregate_form(compile_view("v", SQL, SCHEMA).query)
    assert form is not None
    return form


def _input_row(rng: random.Random) -> dict:
    """One input row: groups old and new, NULL among the groups and the values."""
    return {"__g0": rng.choice(["a", "b", "d", None]), "__g1": rng.choice([1, 3, 4, None]),
            "__a0": rng.choice([None, Decimal(rng.randint(-9_999, 9_999)).scaleb(-2)]),
            "__a1": rng.choice([None, rng.randint(-2 ** 31, 2 ** 31 - 1)])}


def _delta(rng: random.Random, rows: list[dict]) -> pa.Table:
    """A change of ``rows`` (updated in place): some deleted, new ones inserted, some twice."""
    deleted = rng.sample(range(len(rows)), k=len(rows) // 3)
    changes = [{**rows[i], "_weight": -1} for i in deleted]
    for i in sorted(deleted, reverse=True):
        rows.pop(i)
    for _ in range(rng.randint(0, 8)):
        row, copies = _input_row(rng), rng.choice([1, 2])
        rows.extend([row] * copies)
        changes.append({**row, "_weight": copies})
    return pa.Table.from_pylist(changes, schema=DELTA)


def _state(form: AggregateForm, rows: list[dict]) -> pa.Table:
    """The state of ``rows``: their partial aggregate, in the state's types."""
    inserted = pa.Table.from_pylist([{**row, "_weight": 1} for row in rows], schema=DELTA)
    state = LOCAL_STATE_ENGINE.partial(form, inserted, ARG_TYPES)
    assert not isinstance(state, str)
    return state.cast(STATE)


def _rows(rows: pa.Table | DataFrame) -> list[tuple]:
    table = to_arrow(rows) if isinstance(rows, DataFrame) else rows
    return sorted((tuple(row.values()) for row in table.to_pylist()), key=str)


@pytest.mark.parametrize("seed", range(6))
def test_a_step_of_the_law_is_the_same_on_spark_and_on_the_local_engine(
        spark: SparkSession, seed: int) -> None:
    rng = random.Random(seed)
    form, rows = _form(), [_input_row(rng) for _ in range(20)]
    state = _state(form, rows)
    delta = _delta(rng, rows)
    local_change = LOCAL_STATE_ENGINE.partial(form, delta, ARG_TYPES)
    spark_change = SPARK_STATE_ENGINE.partial(form, arrow_frame(spark, delta, DELTA_DDL), ARG_TYPES)
    assert not isinstance(local_change, str)
    assert _rows(local_change.cast(STATE)) == _rows(spark_change)
    local = advance(LOCAL_STATE_ENGINE, form, ARG_TYPES, state, local_change)
    on_spark = advance(SPARK_STATE_ENGINE, form, ARG_TYPES, arrow_frame(spark, state, STATE_DDL),
                       spark_change)
    assert isinstance(local, Advanced) and isinstance(on_spark, Advanced)
    for name in ("state", "before", "after"):
        assert _rows(getattr(local, name)) == _rows(getattr(on_spark, name)), name
    assert _rows(local.state) == _rows(_state(form, rows))  # the state of the new rows
    assert _rows(local.after) != _rows(local.before)


def test_stored_changes_read_back_as_the_same_state_on_both_engines(spark: SparkSession) -> None:
    rng = random.Random(7)
    form, rows = _form(), [_input_row(rng) for _ in range(20)]
    base = _state(form, rows)
    changes, state = [], base
    for _ in range(3):
        change = LOCAL_STATE_ENGINE.partial(form, _delta(rng, rows), ARG_TYPES)
        assert not isinstance(change, str)
        advanced = advance(LOCAL_STATE_ENGINE, form, ARG_TYPES, state, change)
        assert isinstance(advanced, Advanced)
        changes.append(change.cast(STATE))
        state = advanced.state
    local = with_changes(LOCAL_STATE_ENGINE, base, changes)
    on_spark = with_changes(SPARK_STATE_ENGINE, arrow_frame(spark, base, STATE_DDL),
                            [arrow_frame(spark, change, STATE_DDL) for change in changes])
    assert _rows(local) == _rows(state) == _rows(on_spark) == _rows(_state(form, rows))


def test_a_global_group_stays_on_both_engines(spark: SparkSession) -> None:
    form = aggregate_form(compile_view("v", "SELECT SUM(qty) AS q FROM sales", SCHEMA).query)
    assert form is not None
    schema = pa.schema([("__s0", pa.int64()), ("__c0", pa.int64()), ("__n", pa.int64())])
    state = pa.table({"__s0": [5], "__c0": [1], "__n": [1]}, schema=schema)
    change = pa.table({"__s0": [-5], "__c0": [-1], "__n": [-1]}, schema=schema)
    ddl = "__s0 bigint, __c0 bigint, __n bigint"
    local = advance(LOCAL_STATE_ENGINE, form, ["int"], state, change)
    on_spark = advance(SPARK_STATE_ENGINE, form, ["int"], arrow_frame(spark, state, ddl),
                       arrow_frame(spark, change, ddl))
    assert isinstance(local, Advanced) and isinstance(on_spark, Advanced)
    assert _rows(local.state) == _rows(on_spark.state) == [(0, 0, 0)]


def test_a_bigint_sum_spark_wraps_is_refused_locally_and_wrapped_on_spark(
        spark: SparkSession) -> None:
    form = aggregate_form(compile_view(
        "v", "SELECT shop, SUM(qty) AS q FROM sales GROUP BY shop", SCHEMA).query)
    assert form is not None
    schema = pa.schema([("__g0", pa.string()), ("__s0", pa.int64()), ("__c0", pa.int64()),
                        ("__n", pa.int64())])
    state = pa.table({"__g0": ["a"], "__s0": [2 ** 63 - 1], "__c0": [1], "__n": [1]},
                     schema=schema)
    change = pa.table({"__g0": ["a"], "__s0": [1], "__c0": [1], "__n": [1]}, schema=schema)
    ddl = "__g0 string, __s0 bigint, __c0 bigint, __n bigint"
    assert isinstance(advance(LOCAL_STATE_ENGINE, form, ["int"], state, change), str)
    on_spark = advance(SPARK_STATE_ENGINE, form, ["int"], arrow_frame(spark, state, ddl),
                       arrow_frame(spark, change, ddl))
    assert isinstance(on_spark, Advanced)
    assert _rows(on_spark.state) == [("a", -2 ** 63, 2, 2)]
