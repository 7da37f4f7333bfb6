"""Aggregate state on the driver: the law on the local engine, exact sums, the view's delta."""

import math
from decimal import Decimal

import pyarrow as pa
import pytest

from ivm import compile_view
from ivm.aggregate_form import AggregateForm, aggregate_form
from ivm.aggregate_state import Advanced, advance
from ivm.arrow_diff import consolidate
from ivm.driver_output import Output, delta_rows, plain_outputs
from ivm.state_local import LOCAL_STATE_ENGINE, supports

NAN = float("nan")

FORM = aggregate_form(compile_view(
    "v", "SELECT shop, SUM(price) AS p FROM sales GROUP BY shop",
    {"sales": {"shop": "string", "price": "decimal(15,2)"}}).query)


def _advance(state: pa.Table, change: pa.Table) -> Advanced[pa.Table] | str:
    """The law's step on the local engine; a state without ``__g*`` columns is global."""
    assert FORM is not None
    return advance(LOCAL_STATE_ENGINE, FORM, ["decimal(15,2)"], state, change)


def change_aggregate(form: AggregateForm, delta: pa.Table) -> pa.Table | str:
    return LOCAL_STATE_ENGINE.partial(form, delta)


STATE = pa.schema([("__g0", pa.string()), ("__g1", pa.int32()), ("__s0", pa.decimal128(25, 2)),
                   ("__c0", pa.int64()), ("__n", pa.int64())])


def _state(*rows: tuple) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(STATE.names, row, strict=True)) for row in rows],
                                schema=STATE)


def _by_group(table: pa.Table) -> dict[tuple, tuple]:
    return {(r["__g0"], r["__g1"]): (r["__s0"], r["__c0"], r["__n"]) for r in table.to_pylist()}


def test_changes_add_to_their_groups_and_null_matches_null() -> None:
    state = _state(("a", 1, Decimal("1.50"), 1, 1), (None, 1, Decimal("2.00"), 2, 2),
                   ("a", None, Decimal("3.00"), 1, 1), ("b", 2, Decimal("4.00"), 1, 1))
    change = _state((None, 1, Decimal("-2.00"), -1, -1), ("a", None, Decimal("-3.00"), -1, -1),
                    ("c", 3, Decimal("0.25"), 1, 1), ("a", 1, Decimal("0.00"), 0, 1))
    advanced = _advance(state, change)
    assert _by_group(advanced.state) == {
        ("a", 1): (Decimal("1.50"), 1, 2),
        (None, 1): (Decimal("0.00"), 1, 1),
        ("b", 2): (Decimal("4.00"), 1, 1),  # untouched
        ("c", 3): (Decimal("0.25"), 1, 1),  # new group
    }  # ("a", None) lost its last row: gone
    assert _by_group(advanced.before) == {k: v for k, v in _by_group(state).items()
                                          if k != ("b", 2)}
    assert _by_group(advanced.after)[("a", None)] == (Decimal("0.00"), 0, 0)
    assert advanced.state.schema == STATE


def test_a_global_group_stays_at_zero_rows() -> None:
    schema = pa.schema([("__s0", pa.int64()), ("__c0", pa.int64()), ("__n", pa.int64())])
    state = pa.table({"__s0": [5], "__c0": [1], "__n": [1]}, schema=schema)
    change = pa.table({"__s0": [-5], "__c0": [-1], "__n": [-1]}, schema=schema)
    advanced = _advance(state, change)
    assert advanced.state.to_pylist() == [{"__s0": 0, "__c0": 0, "__n": 0}]
    unchanged = _advance(state, change.slice(0, 0))
    assert not isinstance(unchanged, str)
    assert unchanged.state == state
    assert unchanged.before.num_rows == unchanged.after.num_rows == 0


def test_an_empty_change_leaves_a_sum_near_its_range_alone() -> None:
    """Nothing to add: no sum is computed, so none is refused (the state stays local)."""
    schema = pa.schema([("__s0", pa.decimal128(38, 0)), ("__n", pa.int64())])
    state = pa.table({"__s0": [Decimal(6 * 10 ** 37)], "__n": [1]}, schema=schema)
    unchanged = _advance(state, state.slice(0, 0))
    assert not isinstance(unchanged, str) and unchanged.state == state


def test_a_decimal_sum_that_overflows_its_type_is_left_to_spark() -> None:
    schema = pa.schema([("__g0", pa.int64()), ("__s0", pa.decimal128(38, 0)), ("__n", pa.int64())])
    big = Decimal(10 ** 38 - 1)
    state = pa.table({"__g0": [1], "__s0": [big], "__n": [1]}, schema=schema)
    assert _advance(state, state) == "__s0 near the range of its type"


def test_a_bigint_sum_spark_would_wrap_is_left_to_spark() -> None:
    schema = pa.schema([("__g0", pa.int64()), ("__s0", pa.int64()), ("__n", pa.int64())])
    state = pa.table({"__g0": [1], "__s0": [2 ** 63 - 1], "__n": [1]}, schema=schema)
    change = pa.table({"__g0": [1], "__s0": [1], "__n": [1]}, schema=schema)
    assert isinstance(_advance(state, change), str)
    advanced = _advance(state, change.set_column(1, "__s0", pa.array([-1])))
    assert not isinstance(advanced, str)
    assert advanced.state["__s0"].to_pylist() == [2 ** 63 - 2]


def test_float_and_nested_groups_stay_on_spark() -> None:
    assert supports(STATE)
    assert not supports(pa.schema([("__g0", pa.float64()), ("__n", pa.int64())]))
    assert not supports(pa.schema([("__g0", pa.list_(pa.int64())), ("__n", pa.int64())]))


SCHEMAS = {"sales": {"shop": "string", "qty": "int", "price": "decimal(15,2)"}}


@pytest.mark.parametrize(("sql", "plain"), [
    ("SELECT shop, SUM(qty) AS q, AVG(price) AS p, COUNT(*) AS n FROM sales GROUP BY shop",
     True),
    ("SELECT COUNT(price) AS c, shop FROM sales GROUP BY shop", True),
    ("SELECT shop, SUM(qty) + 1 AS q FROM sales GROUP BY shop", False),
    ("SELECT shop, SUM(qty) AS q FROM sales GROUP BY shop HAVING COUNT(*) > 1", False),
    ("SELECT UPPER(shop) AS s, COUNT(*) AS n FROM sales GROUP BY shop", False),
])
def test_only_plain_reads_of_the_state_are_computed_on_the_driver(sql: str, plain: bool) -> None:
    form = aggregate_form(compile_view("v", sql, SCHEMAS).query)
    assert form is not None
    assert (plain_outputs(form) is not None) is plain


def test_the_delta_holds_changed_rows_only() -> None:
    sql = "SELECT shop, SUM(qty) AS q, COUNT(*) AS n FROM sales GROUP BY shop"
    form = aggregate_form(compile_view("v", sql, SCHEMAS).query)
    assert form is not None
    outputs = plain_outputs(form)
    assert outputs == (Output("group", 0), Output("sum", 0), Output("rows"))
    schema = pa.schema([("__g0", pa.string()), ("__s0", pa.int64()), ("__c0", pa.int64()),
                        ("__n", pa.int64())])
    before = pa.Table.from_pylist([{"__g0": "x", "__s0": 3, "__c0": 1, "__n": 1},
                                   {"__g0": "y", "__s0": 1, "__c0": 1, "__n": 1}], schema=schema)
    after = pa.Table.from_pylist([{"__g0": "x", "__s0": 3, "__c0": 1, "__n": 1},  # unchanged
                                  {"__g0": "y", "__s0": 0, "__c0": 0, "__n": 0},  # gone
                                  {"__g0": None, "__s0": 0, "__c0": 0, "__n": 2}],  # SUM NULL
                                 schema=schema)
    columns = [("shop", True), ("q", True), ("n", False)]
    delta = delta_rows(form, outputs, ["int"], before, after, columns)
    assert [f.nullable for f in delta.schema] == [True, True, False, True]
    assert sorted(delta.to_pylist(), key=str) == sorted([
        {"shop": "y", "q": 1, "n": 1, "_weight": -1},
        {"shop": None, "q": None, "n": 2, "_weight": 1},
    ], key=str)


def test_consolidation_groups_nulls_nan_and_signed_zeros_as_spark_does() -> None:
    """The view delta's consolidation (the one Arrow consolidation, as the change feeds')."""
    zset = pa.table({"a": [None, None, "x", "x"], "f": [NAN, -NAN, -0.0, 0.0],
                     "_weight": [1, 2, 1, -1]})
    [row] = consolidate(zset).to_pylist()
    assert row["a"] is None and math.isnan(row["f"]) and row["_weight"] == 3



def test_the_change_aggregate_weighs_signs_counts_and_nulls() -> None:
    sql = "SELECT shop, SUM(price) AS p, COUNT(qty) AS q, COUNT(*) AS n FROM sales GROUP BY shop"
    form = aggregate_form(compile_view("v", sql, SCHEMAS).query)
    assert form is not None
    delta = pa.table({
        "__g0": ["a", "a", None, "b", "b"],
        "__a0": pa.array([Decimal("1.50"), None, Decimal("2.00"), Decimal("9.99"), None],
                         pa.decimal128(15, 2)),
        "__a1": pa.array([1, 2, None, 3, 4], pa.int32()),
        "_weight": pa.array([2, -1, 1, 0, -1], pa.int64()),
    })
    change = change_aggregate(form, delta)
    assert sorted(change.to_pylist(), key=str) == sorted([
        {"__g0": "a", "__s0": Decimal("3.00"), "__c0": 2, "__c1": 1, "__n": 1},
        {"__g0": None, "__s0": Decimal("2.00"), "__c0": 1, "__c1": 0, "__n": 1},
        {"__g0": "b", "__s0": Decimal("0.00"), "__c0": 0, "__c1": -1, "__n": -1},
    ], key=str)


def test_the_change_aggregate_of_a_global_aggregate_is_one_row() -> None:
    form = aggregate_form(compile_view("v", "SELECT SUM(qty) AS q FROM sales", SCHEMAS).query)
    assert form is not None
    delta = pa.table({"__a0": pa.array([5, 7], pa.int32()), "_weight": [1, -1]})
    assert change_aggregate(form, delta).to_pylist() == [{"__s0": -2, "__c0": 0, "__n": 0}]
    assert change_aggregate(form, delta.slice(0, 0)).num_rows == 0


def test_an_int_argument_is_negated_as_bigint() -> None:
    form = aggregate_form(compile_view(
        "v", "SELECT shop, SUM(qty) AS q FROM sales GROUP BY shop", SCHEMAS).query)
    assert form is not None
    delta = pa.table({"__g0": ["a"], "__a0": pa.array([-2 ** 31], pa.int32()),
                      "_weight": pa.array([-1], pa.int64())})
    assert change_aggregate(form, delta)["__s0"].to_pylist() == [2 ** 31]


def test_wide_decimals_sum_exactly_and_an_overflow_is_left_to_spark() -> None:
    form = aggregate_form(compile_view("v", "SELECT SUM(price) AS p FROM sales", SCHEMAS).query)
    assert form is not None
    wide = Decimal("12345678901234567890123.45")  # 25 digits: beyond a double's 17
    delta = pa.table({"__a0": pa.array([wide, wide.copy_negate(), wide], pa.decimal128(25, 2)),
                      "_weight": [2, 1, 1]})
    change = change_aggregate(form, delta)
    assert isinstance(change, pa.Table) and change["__s0"].to_pylist() == [2 * wide]
    schema = pa.schema([("__s0", pa.decimal128(25, 2)), ("__c0", pa.int64()), ("__n", pa.int64())])
    state = pa.table({"__s0": [wide], "__c0": [1], "__n": [1]}, schema=schema)
    advanced = _advance(state, change)
    assert not isinstance(advanced, str)
    assert advanced.state["__s0"].to_pylist() == [3 * wide]
    near_limit = pa.table({"__s0": [Decimal("7" + "0" * 22)], "__c0": [1], "__n": [1]},
                          schema=schema)  # 3 * wide + 7e22 > 10^23: beyond decimal(25, 2)
    assert "Spark computes otherwise" in _advance(advanced.state, near_limit)
    huge = pa.table({"__a0": pa.array([Decimal("9" * 36 + ".99")] * 2, pa.decimal128(38, 2)),
                     "_weight": [1, 1]})  # their sum has 39 digits
    assert isinstance(change_aggregate(form, huge), str)
