"""Aggregate state on Spark: the distributed implementation of :class:`StateEngine`.

State rows are DataFrames, checkpointed on the executors (``localCheckpoint``), so a
state's size is bounded by the cluster, not the driver, and its lineage does not reach
the change feeds it was computed from. Sums follow Spark's ``SUM``: a bigint wraps, a
decimal sum past its type is NULL (:func:`ivm.aggregate_state.settled_checked` raises then).
The state is built here by a full aggregation of the block's input rows (:func:`build`),
then held on Spark or, when small and exact in Arrow, on the driver
(:mod:`ivm.state_local`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from ivm.aggregate_form import (
    ARG_PREFIX,
    COUNT_PREFIX,
    GROUP_PREFIX,
    ROWS,
    SUM_PREFIX,
    AggregateForm,
    decimal_parts,
    sum_type,
)
from ivm.aggregate_state import AggregateState, settled_checked
from ivm.spark_arrow import collect_arrow
from ivm.spark_observe import checkpointed
from ivm.state_local import LOCAL_STATE_ENGINE, supports
from ivm.zset import WEIGHT

if TYPE_CHECKING:
    from ivm.engine_rule import Engine

SIGN = "__sign"


class SparkStateEngine:
    """The invertible-aggregate law's operations on Spark DataFrames."""

    name: Engine = "spark"

    def partial(self, form: AggregateForm, delta: DataFrame, arg_types: Sequence[str]
                ) -> DataFrame:
        """The partial aggregate of ``delta`` (``__g*``, ``__a*``, ``_weight``).

        A row of weight w counts as |w| rows of sign +1 or -1, added one at a time
        rather than multiplied by the weight, so a decimal sum keeps the type and scale
        of Spark's ``SUM``.
        """
        copies = F.explode(F.sequence(F.lit(1), F.abs(F.col(WEIGHT))))
        units = (delta.where(F.col(WEIGHT) != 0)
                 .withColumn(SIGN, F.signum(F.col(WEIGHT)).cast("bigint"))
                 .withColumn("__copy", copies).drop("__copy", WEIGHT))
        return _partial(form, units, arg_types)

    def split(self, state: DataFrame, change: DataFrame) -> tuple[DataFrame, DataFrame]:
        """The state rows whose group occurs in ``change``, and the rest (null-safe joins)."""
        groups = _groups(state)
        if not groups:  # the one global group is always affected
            return state, state.limit(0)
        keys = change.select(*groups)
        same = reduce(lambda a, b: a & b, [state[g].eqNullSafe(keys[g]) for g in groups])
        return state.join(keys, on=same, how="left_semi"), state.join(keys, on=same,
                                                                       how="left_anti")

    def summed(self, parts: Sequence[DataFrame]) -> DataFrame:
        """``parts`` added up group by group; a sum is NULL when one of its parts' is."""
        first = parts[0]
        stats = [_total(f.name).cast(f.dataType).alias(f.name) for f in first.schema.fields
                 if not f.name.startswith(GROUP_PREFIX)]
        return reduce(DataFrame.unionByName, parts[1:], first).groupBy(*_groups(first)).agg(*stats)

    def nonempty(self, rows: DataFrame) -> DataFrame:
        """``rows`` without groups of no rows (a global aggregate's group stays)."""
        return rows.where(F.col(ROWS) != 0) if _groups(rows) else rows

    def union(self, first: DataFrame, second: DataFrame) -> DataFrame:
        """The rows of both."""
        return first.unionByName(second)

    def settled(self, rows: DataFrame) -> DataFrame:
        """``rows`` checkpointed on the executors (one Spark action)."""
        return rows.localCheckpoint(eager=True)

    def settled_nulls(self, rows: DataFrame, names: Sequence[str]
                      ) -> tuple[DataFrame, list[bool]]:
        """``rows`` checkpointed, and whether each column of ``names`` holds a NULL.

        One Spark action: the checkpoint's, observing the columns as they pass.
        """
        metrics = {f"null{i}": F.max(F.col(name).isNull()) for i, name in enumerate(names)}
        held, found = checkpointed(rows, **metrics)
        return held, [bool(found[f"null{i}"]) for i in range(len(names))]


SPARK_STATE_ENGINE = SparkStateEngine()
"""Spark's state operations (it holds no state of its own)."""


def build(form: AggregateForm, rows: DataFrame, arg_types: Sequence[str],
          driver_max_rows: int = 0) -> AggregateState:
    """Aggregate the block's input rows into state (a full pass over ``rows`` on Spark).

    Args:
        form: The aggregate block.
        rows: The block's input rows (``form.rows()`` evaluated): ``__g*``, ``__a*``.
        arg_types: Spark type of each ``__a<j>``.
        driver_max_rows: Collect the state to the driver when it has at most this many
            groups and they compare exactly in Arrow (:func:`ivm.state_local.supports`);
            0 keeps it on Spark. A larger state is aggregated again, on Spark.

    Raises:
        SumOverflowError: A group's decimal sum overflows its type.
    """
    state = _partial(form, rows.withColumn(SIGN, F.lit(1).cast("bigint")), arg_types)
    if driver_max_rows > 0 and _driver_supports(state.schema):
        table = collect_arrow(state, driver_max_rows)
        if table is not None:
            table = settled_checked(LOCAL_STATE_ENGINE, form, arg_types, table)
            return AggregateState(tuple(arg_types), table=table)
    held = settled_checked(SPARK_STATE_ENGINE, form, arg_types, state)
    return AggregateState(tuple(arg_types), rows=held)


def _driver_supports(schema: StructType) -> bool:
    try:
        return supports(to_arrow_schema(schema))
    except TypeError:  # PySpark has no Arrow type for it (UNSUPPORTED_DATA_TYPE...)
        return False


def _partial(form: AggregateForm, rows: DataFrame, arg_types: Sequence[str]) -> DataFrame:
    """Per group: the signed sums and counts of input rows carrying ``__sign`` (+1 or -1).

    A sum is 0 when the group has no non-null value, and NULL when it overflows (Spark's
    ``SUM``).
    """
    sign = F.col(SIGN)
    stats: list[Column] = []
    for j, arg_type in enumerate(arg_types):
        value = F.col(f"{ARG_PREFIX}{j}")
        if form.summed[j]:  # an integer is negated as bigint: -(-2^31) does not fit an int
            wide = value if decimal_parts(arg_type)[0] is not None else value.cast("bigint")
            signed = F.when(sign > 0, wide).otherwise(-wide)
            total = F.when(F.count(signed) == 0, F.lit(0)).otherwise(F.sum(signed))
            stats.append(total.cast(sum_type(arg_type)).alias(f"{SUM_PREFIX}{j}"))
        counted = F.when(value.isNull(), F.lit(0)).otherwise(sign)
        stats.append(F.coalesce(F.sum(counted), F.lit(0)).cast("bigint")
                     .alias(f"{COUNT_PREFIX}{j}"))
    stats.append(F.coalesce(F.sum(sign), F.lit(0)).cast("bigint").alias(ROWS))
    return rows.groupBy(*[f"{GROUP_PREFIX}{i}" for i in range(len(form.groups))]).agg(*stats)


def _total(column: str) -> Column:
    """The sum of a state column over a group's rows; NULL when one of them is (an overflow)."""
    return F.when(F.max(F.col(column).isNull()), F.lit(None)).otherwise(F.sum(column))


def _groups(rows: DataFrame) -> list[str]:
    return [c for c in rows.columns if c.startswith(GROUP_PREFIX)]
