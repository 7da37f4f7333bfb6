"""The view's rows computed on the driver equal Spark's over the same aggregate state.

The oracle is Spark running :func:`ivm.aggregate_form.state_output`, the SQL that
computes the same rows when the state is held on Spark: SUM, COUNT and AVG, with the
rounding of a decimal average at every precision and scale where it differs.
"""

import random
from decimal import Context, Decimal

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from ivm import compile_view, to_arrow
from ivm.aggregate_form import aggregate_form, state_output
from ivm.driver_output import plain_outputs, view_rows
from ivm.state_spark import SPARK_STATE_ENGINE
from tests.spark_frames import arrow_frame, spark_frame

COUNTS = [1, 2, 3, 4, 7, 8, 16, 32, 64, 125, 1000, 3 ** 20, 2 ** 40]  # ties come from 2s and 5s


def _state_rows(precision: int, scale: int, seed: int) -> list[dict]:
    """State rows whose sums have at most ``precision`` digits."""
    rng = random.Random(seed)
    rows = []
    for i in range(400):
        count = rng.choice(COUNTS + [0])
        digits = rng.randint(0, precision)
        unscaled = rng.randint(1 - 10 ** digits, 10 ** digits - 1) if count else 0
        if i % 5 == 0 and count:  # halfway: odd multiple of count / 2 past the last digit
            unscaled = count * rng.randint(-999, 999) + count // 2
        total = Decimal(unscaled).scaleb(-scale, Context(prec=80))
        rows.append({"__g0": f"g{i}", "__s0": total, "__c0": count,
                     "__n": count + rng.randint(0, 2)})
    return rows


def _driver_rows_equal_spark(spark: SparkSession, sql: str, schema: dict[str, str],
                             rows: list[dict], state_schema: pa.Schema) -> pa.Table:
    """Assert the driver's view rows of state ``rows`` equal Spark's ``state_output``.

    Returns:
        The driver's rows (names, types and nullability checked against Spark's).
    """
    form = aggregate_form(compile_view("v", sql, {"t": schema}).query)
    assert form is not None
    outputs = plain_outputs(form)
    assert outputs is not None
    arg_types = [schema["x"]]
    spark_types = ", ".join(f"{f.name} {_spark_type(f.type)}" for f in state_schema)
    state = pa.Table.from_pylist(rows, schema=state_schema)
    arrow_frame(spark, state, spark_types).createOrReplaceTempView("driver_output_state")
    expected = spark.sql(state_output(form, arg_types, "driver_output_state").sql("spark"))
    columns = [(f.name, f.nullable) for f in expected.schema.fields]
    mine = view_rows(form, outputs, arg_types, state, columns)
    assert mine.schema == to_arrow(expected).schema
    assert sorted(mine.to_pylist(), key=lambda r: r["g"]) == sorted(
        (r.asDict() for r in expected.collect()), key=lambda r: r["g"])
    return mine


def _spark_type(arrow: pa.DataType) -> str:
    if pa.types.is_decimal(arrow):
        return f"decimal({arrow.precision},{arrow.scale})"
    return {pa.string(): "string", pa.int32(): "int", pa.int64(): "bigint"}[arrow]


@pytest.mark.parametrize(("precision", "scale"), [
    (15, 2), (5, 0), (38, 10), (30, 18), (20, 20), (10, 9), (38, 38), (28, 0),
])
def test_decimal_outputs_equal_spark(spark: SparkSession, precision: int, scale: int) -> None:
    arg_type = f"decimal({precision},{scale})"
    state_schema = pa.schema([
        ("__g0", pa.string()), ("__s0", pa.decimal128(min(38, precision + 10), scale)),
        ("__c0", pa.int64()), ("__n", pa.int64())])
    mine = _driver_rows_equal_spark(
        spark, "SELECT g, SUM(x) AS s, AVG(x) AS a, COUNT(x) AS c, COUNT(*) AS n FROM t GROUP BY g",
        {"g": "string", "x": arg_type},
        _state_rows(min(38, precision + 10), scale, seed=precision * 100 + scale), state_schema)
    assert mine.schema.field("a").type == pa.decimal128(min(38, precision + 4),
                                                       min(38, scale + 4))


def test_integer_average_is_a_double_division(spark: SparkSession) -> None:
    rng = random.Random(7)
    rows = [{"__g0": i, "__s0": rng.randint(-10 ** 12, 10 ** 12), "__c0": rng.choice(COUNTS + [0]),
             "__n": 5} for i in range(300)]
    rows += [{"__g0": 300 + i, "__s0": total, "__c0": 3, "__n": 3}  # past 2^53: rounded
             for i, total in enumerate([2 ** 53 + 1, -(2 ** 62) - 3, 2 ** 63 - 1])]
    state_schema = pa.schema([("__g0", pa.int32()), ("__s0", pa.int64()), ("__c0", pa.int64()),
                              ("__n", pa.int64())])
    _driver_rows_equal_spark(spark, "SELECT g, AVG(x) AS a, SUM(x) AS s FROM t GROUP BY g",
                             {"g": "int", "x": "int"}, rows, state_schema)


def test_spark_change_aggregate_negates_an_int_as_bigint(spark: SparkSession) -> None:
    plan = compile_view("v", "SELECT g, SUM(x) AS s FROM t GROUP BY g",
                        {"t": {"g": "int", "x": "int"}})
    form = aggregate_form(plan.query)
    assert form is not None
    delta = spark_frame(spark, [(1, -2 ** 31, -1), (1, 5, 1)],
                                  "__g0 int, __a0 int, _weight bigint")
    (row,) = SPARK_STATE_ENGINE.partial(form, delta, ["int"]).collect()
    assert (row["__s0"], row["__c0"], row["__n"]) == (2 ** 31 + 5, 0, 0)
