"""Rows the local engine computes (DuckDB, in process) equal Spark's rows of the same SQL.

The oracle is Spark running the same SELECT over the same Arrow table: every value in
the subset :mod:`ivm.spark_types` admits must be Spark's, with Spark's type, and
everything else must fall back (None), never give another answer.
"""

import datetime
import random
from decimal import Decimal

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from sqlglot import exp, parse_one

from ivm import SourceInput, compile_view, maintain, recompute, reload, to_arrow
from ivm.local_engine import select
from tests.conftest import multiset, normal_row
from tests.spark_frames import arrow_frame, spark_frame

TYPES = {"i": pa.int32(), "b": pa.int64(), "t": pa.int8(), "d": pa.decimal128(15, 2),
         "w": pa.decimal128(38, 10), "e": pa.decimal128(5, 0), "day": pa.date32(),
         "s": pa.large_string(), "f": pa.bool_(), "g": pa.float64()}


def _rows(seed: int, count: int = 300) -> pa.Table:
    rng = random.Random(seed)

    def maybe(value: object) -> object:
        return None if rng.random() < 0.1 else value

    columns = {
        "i": [maybe(rng.choice([rng.randint(-50, 50), 2**31 - 1, -2**31])) for _ in range(count)],
        "b": [maybe(rng.randint(-2**40, 2**40)) for _ in range(count)],
        "t": [maybe(rng.randint(-128, 127)) for _ in range(count)],
        "d": [maybe(Decimal(rng.randint(-10**6, 10**6)).scaleb(-2)) for _ in range(count)],
        "w": [maybe(Decimal(rng.randint(-10**27, 10**27)).scaleb(-10)) for _ in range(count)],
        "e": [maybe(Decimal(rng.randint(-99999, 99999))) for _ in range(count)],
        "day": [maybe(datetime.date(1992, 1, 1) + datetime.timedelta(days=rng.randint(0, 2500)))
                for _ in range(count)],
        "s": [maybe(rng.choice(["A", "B", "R", "N", "O", "F", "é", "AB", ""]))
              for _ in range(count)],
        "f": [maybe(rng.random() < 0.5) for _ in range(count)],
        "g": [maybe(rng.choice([float("nan"), -0.0, 0.0, float("inf"), -float("inf"), 60.0,
                                60.5, -60.0, 2.0**53 + 1, rng.uniform(-100, 100)]))
              for _ in range(count)],
        "_weight": [rng.choice([-1, 1, 2]) for _ in range(count)],
    }
    return pa.table(columns, schema=pa.schema({**TYPES, "_weight": pa.int64()}))


EVALUATED = [
    "t.d * (1 - t.d) AS x, t.e * t.d AS y",
    "t.d * (1 - t.d) * (1 + t.d) AS x",  # TPC-H Q1's charge: 49 digits cut to (38, 6)
    "t.d + t.i AS x, t.d - t.b AS y, t.e * t.t AS z",
    "t.t + 1 AS x, t.b * 3 AS y, -t.d AS z, t.t - t.t AS u",
    "t.d + 0.005 AS x, 2.50 * t.e AS y, t.e - 12345678901 AS z",
    "t.s AS x, t.day AS y, t.f AS z, t._weight AS _weight",
]
"""Select lists evaluated on the driver (over the rows the filter keeps)."""

FILTERS = [
    "t.day <= DATE '1998-12-01' - INTERVAL '90' DAY",
    "t.day > '1995-03-15' AND t.s = 'R' OR t.f",
    "NOT (t.d BETWEEN -10.5 AND 2000) AND t.i IS NOT NULL",
    "t.s IN ('A', 'é', '') OR t.b IN (1, 2, 3) OR t.d IN (1.5, -2)",
    "t.d < t.w OR t.e >= t.i OR t.t <> 3",
    "t.f IS NULL OR NOT t.f",
    "t.e >= 10 AND t.d <> t.e",
    # a double against integers and short decimal literals: both become doubles
    "t.g > 60 OR t.g <= t.i OR t.g = t.b",
    "t.g BETWEEN -1 AND 60.5 OR t.g IN (0, 2, 61.25) OR -60 = t.g",
    "t.g <> 0 AND t.g < 9007199254740993 AND t.g >= 0.1",
]

REVIEWED = [
    "SELECT t.d * (1 + 1) AS x FROM rows AS t",  # (1 + 1) is not a literal: decimal(10,0)
    "SELECT t.i AS x FROM rows AS t WHERE t.i + -2147483648 < 0",  # an int literal
    "SELECT t.day AS x FROM rows AS t WHERE t.day < DATE '1996-02-29' + INTERVAL '1' YEAR",
    "SELECT t.day AS x FROM rows AS t WHERE t.day >= DATE '1995-01-31' + INTERVAL '1' MONTH",
    "SELECT t.i AS x FROM rows AS t WHERE t.t IN (1, 2.5, -3, 5, 7, 9) OR t.e IN (7, 70000)",
    "SELECT t.d * -(2147483648) AS x FROM rows AS t",  # -(bigint literal) is a bigint
    # DuckDB's expression rewriter would turn these into t.i < -1 (no overflow computed)
    "SELECT t.i AS x FROM rows AS t WHERE t.i + 1 < 0",
    "SELECT t.i AS x FROM rows AS t WHERE t.i + 1 = -2147483648",
    "SELECT t.i AS x FROM rows AS t WHERE 1 - t.i > 0",
    "SELECT t.b AS x, t.i * 2 < 0 AS y FROM rows AS t WHERE t.b * 2 < 0",
    "SELECT t.i AS x FROM rows AS t WHERE -(-2147483648) < 0",  # the int wraps in Spark
    "SELECT t.i AS x FROM rows AS t WHERE t.i > -9223372036854775808.5",  # Spark: TRUE
    "SELECT 0000000000000000000001.23456789012345678 AS x, t.i AS i FROM rows AS t",
]
"""Shapes a review found typed differently from Spark: now equal, or falling back."""

FALLBACKS = [
    "SELECT t.w * t.w AS x FROM rows AS t",  # Spark rounds: scale 20 cut to 6
    "SELECT t.d * (1 - t.w) AS x FROM rows AS t",  # 1 - w: 39 digits, scale 10 cut to 9
    "SELECT t.d / t.e AS x FROM rows AS t",
    "SELECT t.d * 1.5e0 AS x FROM rows AS t",
    "SELECT upper(t.s) AS x FROM rows AS t",
    "SELECT t.s AS x FROM rows AS t WHERE t.s LIKE 'A%'",
    "SELECT t.i * 100000 AS x FROM rows AS t",  # int overflow: Spark wraps
    "SELECT t.s AS x FROM rows AS t WHERE t.s = 1",
    "SELECT t.d AS x FROM rows AS t WHERE t.day > '1995-3-15'",
    "SELECT CASE WHEN t.f THEN 1 ELSE 2 END AS x FROM rows AS t",
    "SELECT t.i AS x FROM rows AS t WHERE t.i < 100000000000000000000.5",  # Spark folds it
    "SELECT t.i AS x FROM rows AS t WHERE t.b < 9223372036854775807.5",  # above bigint too
    "SELECT t.w AS x FROM rows AS t WHERE t.w > 0.00000000005",  # compared in 39 digits
    "SELECT t.day AS x FROM rows AS t WHERE t.day < DATE '9999-12-31' + INTERVAL '1' DAY",
    "SELECT t.i AS x FROM rows TABLESAMPLE (10 PERCENT) AS t",
    "SELECT t.i AS x FROM rows AS t LEFT JOIN rows AS u ON t.i = u.i",
    "SELECT t.i AS x FROM rows AS t CROSS JOIN rows AS u",  # no equality: a cross product
    "SELECT t.i AS x FROM rows AS t JOIN rows AS u ON t.s = u.i",  # string = int: Spark casts
    "SELECT t.i AS x FROM rows AS t WHERE t.g > t.d",  # a decimal column as a double
    "SELECT t.i AS x FROM rows AS t WHERE t.g > 0.1234567890123456",  # 16 digits
    "SELECT t.i AS x FROM rows AS t JOIN rows AS u ON t.g = u.i",  # a join on a double
]


@pytest.fixture(scope="module")
def rows(spark: SparkSession) -> pa.Table:
    table = _rows(7)
    arrow_frame(spark, table, _spark_schema()).createOrReplaceTempView("rows")
    return table


def _spark_schema() -> str:
    spark_types = {"i": "int", "b": "bigint", "t": "tinyint", "d": "decimal(15,2)",
                   "w": "decimal(38,10)", "e": "decimal(5,0)", "day": "date", "s": "string",
                   "f": "boolean", "g": "double", "_weight": "bigint"}
    return ", ".join(f"{name} {spark_type}" for name, spark_type in spark_types.items())


def _same_as_spark(spark: SparkSession, rows: pa.Table, sql: str) -> None:
    query = parse_one(sql, read="spark")
    assert isinstance(query, exp.Select)
    mine = select(query, {"rows": rows})
    assert mine is not None, sql
    expected = to_arrow(spark.sql(sql))
    assert [_unlarge(f.type) for f in mine.schema] == [
        _unlarge(f.type) for f in expected.schema], sql
    assert mine.to_pylist() == expected.to_pylist(), sql
    assert mine.num_rows > 0, f"{sql}: no row passes (the test would not check values)"


def _unlarge(data_type: pa.DataType) -> pa.DataType:
    return pa.string() if pa.types.is_large_string(data_type) else data_type


@pytest.mark.parametrize("select", EVALUATED)
def test_projections_equal_spark(spark: SparkSession, rows: pa.Table, select: str) -> None:
    _same_as_spark(spark, rows, f"SELECT {select} FROM rows AS t")


@pytest.mark.parametrize("where", FILTERS)
def test_filters_equal_spark(spark: SparkSession, rows: pa.Table, where: str) -> None:
    _same_as_spark(spark, rows, f"SELECT t.i AS i, t.s AS s, t._weight AS w FROM rows AS t "
                                f"WHERE {where}")


def test_bare_filters_keep_spark_three_valued_logic(spark: SparkSession, rows: pa.Table) -> None:
    """NOT over a NULL comparison is NULL, and the row is dropped, as in Spark."""
    _same_as_spark(spark, rows, "SELECT t.b AS b FROM rows AS t WHERE NOT (t.d > 0 OR t.i < 0)")


@pytest.mark.parametrize("sql", REVIEWED)
def test_reviewed_shapes_equal_spark_or_fall_back(spark: SparkSession, rows: pa.Table,
                                                  sql: str) -> None:
    mine = select(parse_one(sql, read="spark"), {"rows": rows})
    if mine is not None:
        _same_as_spark(spark, rows, sql)


def test_duplicate_output_names_keep_every_column(spark: SparkSession, rows: pa.Table) -> None:
    sql = "SELECT t.i, t.i FROM rows AS t"
    mine = select(parse_one(sql, read="spark"), {"rows": rows})
    assert mine is not None
    assert mine.num_columns == len(spark.sql(sql).columns) == 2


def test_a_join_on_doubles_falls_back(spark: SparkSession) -> None:
    """Spark matches NaN with NaN and -0.0 with 0.0 in join keys; DuckDB's hash join does not."""
    keys = pa.table({"x": pa.array([float("nan"), -0.0, 0.0, 1.5], pa.float64())})
    arrow_frame(spark, keys, "x double").createOrReplaceTempView("keys")
    sql = "SELECT a.x AS x FROM keys AS a JOIN keys AS b ON a.x = b.x"
    assert len(spark.sql(sql).collect()) == 6  # NaN-NaN, the four zero pairs, 1.5-1.5
    assert select(parse_one(sql, read="spark"), {"keys": keys}) is None


DOUBLE_FILTERS = [
    "x.g > 5", "x.g >= 5", "5 < x.g", "NOT (x.g <= 5)", "x.g > 5 AND x.n = 1",
    "NOT (x.g BETWEEN 1 AND 10)", "NOT (x.g IN (0, 61))", "x.g < 0.5 OR x.g > 60",
    "x.b BETWEEN x.g AND 9007199254740992", "x.b BETWEEN 0 AND x.g",
]
"""A double against constants alone: DuckDB would hand such filters to the Arrow scan,
where NaN is not greater than 5 (it is in Spark); BETWEEN coerces each bound by itself."""


def test_doubles_against_constants_order_nan_and_coerce_between_as_spark(
    spark: SparkSession,
) -> None:
    nan, inf = float("nan"), float("inf")
    table = pa.table({
        "g": pa.array([nan, -0.0, 0.0, inf, -inf, 61.0, 5.0, None, 0.0], pa.float64()),
        "b": pa.array([1, 2, 3, 2**53 + 1, 5, 6, 2**53 + 1, 8, 2**53 + 1], pa.int64()),
        "n": pa.array([1, 1, 1, 1, 1, 1, 1, 1, 1], pa.int32())})
    arrow_frame(spark, table, "g double, b bigint, n int").createOrReplaceTempView("x")
    for where in DOUBLE_FILTERS:
        sql = f"SELECT x.b AS b FROM x AS x WHERE {where}"
        mine = select(parse_one(sql, read="spark"), {"x": table})
        assert mine is not None, sql
        assert sorted(mine.column("b").to_pylist()) == sorted(
            row["b"] for row in spark.sql(sql).collect()), sql


JOINS = [
    # NULL keys never match; int = bigint and decimal = int compare by value
    "SELECT t.i AS i, u.b AS b, t._weight AS w FROM rows AS t CROSS JOIN other AS u "
    "WHERE t.i = u.k AND u.dk = t.i",
    "SELECT t.s AS s, u.k AS k, v.s AS vs, t._weight AS w FROM rows AS t "
    "JOIN other AS u ON t.t = u.k JOIN rows2 AS v ON v.s = t.s AND v.i = u.k "
    "WHERE t.d > u.b OR v.f",  # a cycle (v joins both) and a condition over two tables
    "SELECT t.i AS i, u.k AS k FROM rows AS t INNER JOIN other AS u ON t.day = u.day "
    "WHERE t.s IN ('A', 'B') AND u.b > 0",
]


@pytest.fixture(scope="module")
def joined(spark: SparkSession, rows: pa.Table) -> dict[str, pa.Table]:
    rng = random.Random(3)
    other = pa.table({
        "k": [None if rng.random() < 0.1 else rng.randint(-60, 60) for _ in range(200)],
        "b": [rng.randint(-2**40, 2**40) for _ in range(200)],
        "day": [datetime.date(1992, 1, 1) + datetime.timedelta(days=rng.randint(0, 2500))
                for _ in range(200)]}, schema=pa.schema({"k": pa.int64(), "b": pa.int64(),
                                                         "day": pa.date32()}))
    other = other.append_column("dk", other["k"].cast(pa.decimal128(19, 0)).cast(
        pa.decimal128(5, 0)))
    arrow_frame(spark, other, "k bigint, b bigint, day date, dk decimal(5,0)"
                          ).createOrReplaceTempView("other")
    spark.sql("SELECT * FROM rows").createOrReplaceTempView("rows2")
    return {"rows": rows, "other": other, "rows2": rows}


@pytest.mark.parametrize("sql", JOINS)
def test_joins_equal_spark(spark: SparkSession, joined: dict[str, pa.Table], sql: str) -> None:
    mine = select(parse_one(sql, read="spark"), joined)
    assert mine is not None, sql
    expected = to_arrow(spark.sql(sql))
    assert [_unlarge(f.type) for f in mine.schema] == [_unlarge(f.type) for f in expected.schema]
    assert multiset(r.values() for r in mine.to_pylist()) == multiset(
        r.values() for r in expected.to_pylist())
    assert mine.num_rows > 0, f"{sql}: no row joins (the test would not check values)"


@pytest.mark.parametrize("sql", FALLBACKS)
def test_outside_the_subset_falls_back(spark: SparkSession, rows: pa.Table, sql: str) -> None:
    spark.sql(sql).collect()  # Spark runs it: the fallback has somewhere to go
    assert select(parse_one(sql, read="spark"), {"rows": rows}) is None


AGGREGATE = """
SELECT s, f, SUM(d * (1 - d) * (1 + d)) AS charge, AVG(e) AS mean, COUNT(*) AS n, SUM(t) AS ts
FROM li WHERE day <= DATE '1998-12-01' - INTERVAL '90' DAY AND i IS NOT NULL GROUP BY s, f
"""


def test_a_small_change_to_a_one_table_aggregate_runs_no_spark_job(spark: SparkSession) -> None:
    """The tick reads the Arrow change feed and the driver-held state: zero Spark jobs."""
    table = _rows(11).drop_columns(["_weight"])
    old, inserted = table.slice(0, 250), table.slice(250)
    deleted = old.take(list(range(0, 250, 7)))
    new = pa.concat_tables([old.take([i for i in range(250) if i % 7]), inserted])
    change = pa.concat_tables([
        inserted.append_column("_weight", pa.array([1] * inserted.num_rows, pa.int64())),
        deleted.append_column("_weight", pa.array([-1] * deleted.num_rows, pa.int64()))])
    schema = _spark_schema()
    source = schema.removesuffix(", _weight bigint")
    frames = {name: arrow_frame(spark, rows, source)
              for name, rows in (("old", old), ("new", new))}
    plan = compile_view("v", AGGREGATE, {"li": dict(
        part.split(" ", 1) for part in source.split(", "))})
    loaded = reload(plan, {"li": SourceInput(frames["old"])})
    assert loaded.state is not None and loaded.state.table is not None, "state on the driver"
    inputs = {"li": SourceInput(frames["new"], frames["old"],
                                arrow_frame(spark, change, schema), change)}
    spark.sparkContext.setJobGroup("arrow-eval-tick", "arrow-eval-tick")
    maintained = maintain(plan, inputs, loaded.state)
    delta = maintained.to_arrow()
    nothing = change.slice(0, 0)  # a change that consolidated to no row (a compaction)
    empty = spark_frame(spark, [], schema)
    unchanged = maintain(plan, {"li": SourceInput(frames["new"], frames["new"], empty, nothing)},
                         maintained.state).to_arrow()
    assert spark.sparkContext.statusTracker().getJobIdsForGroup("arrow-eval-tick") == []
    assert unchanged.num_rows == 0 and unchanged.column_names == delta.column_names
    spark.sparkContext.setJobGroup("other", "other")
    view = multiset(loaded.rows.collect())
    for row in delta.to_pylist():
        view[normal_row(list(row.values())[:-1])] += row["_weight"]
    assert +view == multiset(recompute(plan, inputs).collect())
    assert delta.num_rows > 0


def test_a_sum_past_bigint_moves_the_driver_state_to_spark(spark: SparkSession) -> None:
    """DuckDB stops where Spark wraps a bigint sum: Spark takes the state and the tick."""
    schema = "g string, x bigint"
    old = pa.table({"g": ["a", "a", "b"], "x": pa.array([2 ** 62, 2 ** 62 - 10, 5], pa.int64())})
    inserted = pa.table({"g": ["a", "b"], "x": pa.array([100, 1], pa.int64())})
    change = inserted.append_column("_weight", pa.array([1, 1], pa.int64()))
    new = pa.concat_tables([old, inserted])
    plan = compile_view("v", "SELECT g, SUM(x) AS s, COUNT(*) AS n FROM t GROUP BY g",
                        {"t": {"g": "string", "x": "bigint"}})
    old_frame, new_frame = arrow_frame(spark, old, schema), arrow_frame(spark, new, schema)
    loaded = reload(plan, {"t": SourceInput(old_frame)})
    assert loaded.state is not None and loaded.state.table is not None, "state on the driver"
    inputs = {"t": SourceInput(new_frame, old_frame,
                               arrow_frame(spark, change, f"{schema}, _weight bigint"), change)}
    maintained = maintain(plan, inputs, loaded.state)
    assert maintained.state is not None and maintained.state.rows is not None, "on Spark"
    assert maintained.engine == "spark" and "sums, on Spark" in maintained.engine_reason
    view = multiset(loaded.rows.collect())
    for row in maintained.to_arrow().to_pylist():
        view[normal_row(list(row.values())[:-1])] += row["_weight"]
    expected = multiset(recompute(plan, inputs).collect())
    assert +view == expected
    assert any(row[1] < 0 for row in expected), "Spark wrapped the sum past 2^63"


@pytest.mark.parametrize(("driver_state_max_rows", "arrow_change"),
                         [(100, True), (100, False), (0, True)],
                         ids=["driver", "driver, change on Spark", "spark"])
def test_a_decimal_sum_past_38_digits_is_recomputed_as_spark_does(
        spark: SparkSession, driver_state_max_rows: int, arrow_change: bool) -> None:
    """Spark makes an overflowing decimal SUM NULL: the state cannot hold it, the group is
    recomputed (NULL), and a later tick that brings it back in range recomputes it again.

    The first change's own sum overflows (two values of 6 * 10^37 for one group), where the
    state's sum (5) is far from the type's range.
    """
    schema, big = "g string, x decimal(38,0)", Decimal(6 * 10 ** 37)
    decimal = pa.decimal128(38, 0)
    plan = compile_view("v", "SELECT g, SUM(x) AS s, COUNT(*) AS n FROM t GROUP BY g",
                        {"t": {"g": "string", "x": "decimal(38,0)"}})

    def frame(rows: pa.Table) -> object:
        return arrow_frame(spark, rows, schema)

    snapshots = [pa.table({"g": ["a", "b"], "x": pa.array([Decimal(5), Decimal(1)], decimal)})]
    changes = [pa.table({"g": ["a", "b"], "x": pa.array([big, Decimal(2)], decimal),
                         "_weight": pa.array([2, 1], pa.int64())}),
               pa.table({"g": ["a"], "x": pa.array([big], decimal),
                         "_weight": pa.array([-2], pa.int64())})]
    added = changes[0].drop_columns(["_weight"]).take([0, 0, 1])
    snapshots.append(pa.concat_tables([snapshots[0], added]))
    snapshots.append(snapshots[1].take([0, 1, 4]))
    loaded = reload(plan, {"t": SourceInput(frame(snapshots[0]))}, driver_state_max_rows)
    view, state = multiset(loaded.rows.collect()), loaded.state
    for tick, change in enumerate(changes):
        inputs = {"t": SourceInput(frame(snapshots[tick + 1]), frame(snapshots[tick]),
                                   arrow_frame(spark, change, f"{schema}, _weight bigint"),
                                   change if arrow_change else None)}
        maintained = maintain(plan, inputs, state, driver_state_max_rows)
        for row in maintained.to_arrow().to_pylist():
            view[normal_row(list(row.values())[:-1])] += row["_weight"]
        expected = multiset(recompute(plan, inputs).collect())
        assert +view == expected, f"tick {tick}"
        assert "overflows" in maintained.engine_reason and maintained.state is None
        state = maintained.state
    assert any(row[1] is None for row in multiset(
        recompute(plan, {"t": SourceInput(frame(snapshots[1]))}).collect())), "Spark's NULL"
