"""The state of an invertible aggregate on Spark, and how a delta changes it.

State rows (one per group): ``__g0..`` the grouping values, ``__s<j>`` the sum of the
j-th argument's non-null values (in the type of Spark's ``SUM``; 0 when none),
``__c<j>`` their count (bigint) and ``__n`` the group's row count (bigint). The state
of a view at a frontier is kept by the caller between ticks (:class:`AggregateState`);
a tick adds the aggregate of the input delta to the state of the affected groups
(:func:`advance`) and emits the view rows of those groups before (-1) and after (+1).
A small state is held on the driver instead (:mod:`ivm.driver_state`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce

import pyarrow as pa
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
from ivm.driver_state import supports
from ivm.errors import SumOverflowError
from ivm.spark_arrow import collect_arrow
from ivm.zset import WEIGHT

SIGN = "__sign"


@dataclass(frozen=True)
class AggregateState:
    """The aggregate state of one view at one frontier.

    Held on Spark (``rows``) or, when small, on the driver (``table``): exactly one of
    the two is set.

    Attributes:
        arg_types: The Spark type of each argument, which fixes the state's types.
        rows: State rows (``__g*``, ``__s*``, ``__c*``, ``__n``), checkpointed: their
            lineage does not reach the change feeds they were computed from.
        table: The same state rows as an Arrow table on the driver.
        schema: The view's columns as Spark types them, when known (a state held on the
            driver keeps it, so that a tick computed from it needs no Spark analysis).
        change: The partial aggregate the tick added to the previous state to give this
            one (state columns, one row per affected group; a DataFrame for a state on
            Spark, an Arrow table for one on the driver); None for a state aggregated
            whole. A store keeps it instead of the whole state (:func:`with_changes`).
    """

    arg_types: tuple[str, ...]
    rows: DataFrame | None = None
    table: pa.Table | None = None
    schema: StructType | None = None
    change: DataFrame | pa.Table | None = None


@dataclass(frozen=True)
class Advanced:
    """One tick of an aggregate: the affected groups' state before and after.

    Attributes:
        state: The whole state after the tick.
        before: State rows of the affected groups before the tick (present ones only).
        after: State rows of the affected groups after the tick (``__n`` may be 0).
    """

    state: AggregateState
    before: DataFrame
    after: DataFrame


def build(form: AggregateForm, rows: DataFrame, arg_types: Sequence[str],
          driver_max_rows: int = 0) -> AggregateState:
    """Aggregate the block's input rows into state (a full pass over ``rows``).

    Args:
        form: The aggregate block.
        rows: The block's input rows (``form.rows()`` evaluated): ``__g*``, ``__a*``.
        arg_types: Spark type of each ``__a<j>``.
        driver_max_rows: Collect the state to the driver when it has at most this many
            groups and they compare exactly in Arrow (:func:`ivm.driver_state.supports`);
            0 keeps it on Spark. A larger state is aggregated again, on Spark.
    """
    state = _partial(form, rows.withColumn(SIGN, F.lit(1).cast("bigint")), arg_types)
    if driver_max_rows > 0 and _driver_supports(state.schema):
        table = collect_arrow(state, driver_max_rows)
        if table is not None:
            check_sums(form, arg_types, table)
            return AggregateState(tuple(arg_types), table=table)
    rows = state.localCheckpoint(eager=True)
    check_sums(form, arg_types, rows)
    return AggregateState(tuple(arg_types), rows=rows)


def _driver_supports(schema: StructType) -> bool:
    try:
        return supports(to_arrow_schema(schema))
    except TypeError:  # PySpark has no Arrow type for it (UNSUPPORTED_DATA_TYPE...)
        return False


def change_aggregate(form: AggregateForm, delta: DataFrame, arg_types: Sequence[str]
                     ) -> DataFrame:
    """The input delta's partial aggregate: state rows (one per group) to add to the state.

    Args:
        form: The aggregate block.
        delta: The block's input rows' delta: ``__g*``, ``__a*`` and ``_weight``.
        arg_types: The state's argument types.
    """
    return _partial(form, _unit_rows(delta), arg_types)


def advance(form: AggregateForm, state: AggregateState, delta: DataFrame) -> Advanced:
    """Add the aggregate of the input ``delta`` to ``state``.

    Three Spark actions materialize the delta's partial aggregate, the affected groups
    after, and the new state. Leaving the groups after lazy saves an action but was
    slower on the TPC-H benchmark (the collect of the view's delta then joins the new
    state once more: 0.3-0.4 s more per Q1 refresh at SF 0.1).

    Args:
        form: The aggregate block.
        state: The state at the old frontier.
        delta: The block's input rows' delta: ``__g*``, ``__a*`` and ``_weight``.

    Returns:
        The new state (checkpointed) and the affected groups before and after.

    Raises:
        SumOverflowError: An affected group's decimal sum overflows its type.
    """
    assert state.rows is not None, "a state on the driver advances in ivm.driver_state"
    change = change_aggregate(form, delta, state.arg_types).localCheckpoint(eager=True)
    groups = _group_columns(form)
    before = _matching(state.rows, change, groups, "left_semi")
    stats = [_total(c).cast(t).alias(c) for c, t in _stat_types(form, state.arg_types)]
    after = before.unionByName(change).groupBy(*groups).agg(*stats).localCheckpoint(eager=True)
    check_sums(form, state.arg_types, after)
    kept = after if form.is_global else after.where(F.col(ROWS) != 0)
    untouched = _matching(state.rows, change, groups, "left_anti")
    rows = untouched.unionByName(kept).localCheckpoint(eager=True)
    return Advanced(AggregateState(state.arg_types, rows=rows, change=change), before, after)


def with_changes(state: DataFrame, changes: Sequence[DataFrame]) -> DataFrame:
    """``state`` plus the partial aggregates ``changes``: the state they lead to.

    Sums and counts add up group by group (a Z-set of partial aggregates), so a state
    stored as an older state and the changes of the ticks since reads back exactly; a
    group whose row count reaches 0 leaves the state, except the one group of a global
    aggregate (no ``__g*`` column).

    Args:
        state: State rows (``__g*``, ``__s*``, ``__c*``, ``__n``).
        changes: Partial aggregates with the same columns (:attr:`AggregateState.change`).
    """
    if not changes:
        return state
    groups = [c for c in state.columns if c.startswith(GROUP_PREFIX)]
    stats = [_total(f.name).cast(f.dataType).alias(f.name) for f in state.schema.fields
             if not f.name.startswith(GROUP_PREFIX)]
    rows = reduce(DataFrame.unionByName, changes, state)
    added = rows.groupBy(*groups).agg(*stats)
    return added if not groups else added.where(F.col(ROWS) != 0)


def _unit_rows(delta: DataFrame) -> DataFrame:
    """A row of weight w as |w| rows of sign +1 or -1 (``__sign``); weight 0 as none."""
    copies = F.explode(F.sequence(F.lit(1), F.abs(F.col(WEIGHT))))
    return (delta.where(F.col(WEIGHT) != 0).withColumn(SIGN, F.signum(F.col(WEIGHT)).cast("bigint"))
            .withColumn("__copy", copies).drop("__copy", WEIGHT))


def _partial(form: AggregateForm, rows: DataFrame, arg_types: Sequence[str]) -> DataFrame:
    """Per group: the signed sums and counts of input rows carrying ``__sign`` (+1 or -1).

    Values are added or subtracted one row at a time rather than multiplied by a
    weight, so a decimal sum keeps the type of Spark's ``SUM`` and its scale. A sum is 0
    when the group has no non-null value, and NULL when it overflows (Spark's ``SUM``).
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
    return rows.groupBy(*_group_columns(form)).agg(*stats)


def _total(column: str) -> Column:
    """The sum of a state column over a group's rows; NULL when one of them is (an overflow)."""
    return F.when(F.max(F.col(column).isNull()), F.lit(None)).otherwise(F.sum(column))


def check_sums(form: AggregateForm, arg_types: Sequence[str], rows: DataFrame | pa.Table
                ) -> None:
    """Raise when a sum of state ``rows`` (on Spark, or an Arrow table) overflowed.

    Only sums whose type Spark caps at 38 digits (arguments of more than 28) are checked:
    any other decimal sum, ``decimal(p + 10, s)``, reaches its range only past 10^10 rows
    at the argument type's largest magnitude. A bigint sum wraps as Spark's does.

    Raises:
        SumOverflowError: A checked sum is NULL, naming the argument.
    """
    capped = [j for j, t in enumerate(arg_types)
              if form.summed[j] and (decimal_parts(t)[0] or 0) > 38 - 10]
    if not capped:
        return
    names = [f"{SUM_PREFIX}{j}" for j in capped]
    if isinstance(rows, pa.Table):
        nulls = [rows.column(name).null_count > 0 for name in names]
    else:
        found = rows.select(*[F.max(F.col(name).isNull()) for name in names]).first()
        nulls = [bool(found and found[i]) for i in range(len(names))]
    for j, null in zip(capped, nulls, strict=True):
        if null:
            raise SumOverflowError(f"a SUM overflows {sum_type(arg_types[j])} in a group, "
                                   "which Spark makes NULL", fragment=form.args[j].sql("spark"))


def _matching(state: DataFrame, change: DataFrame, groups: Sequence[str], how: str
              ) -> DataFrame:
    """State rows whose group occurs (``left_semi``) or not (``left_anti``) in ``change``."""
    if not groups:  # the one global group is always affected
        return state if how == "left_semi" else state.limit(0)
    keys = change.select(*groups)
    return state.join(keys, on=_same_groups(state, keys, groups), how=how)


def _same_groups(left: DataFrame, right: DataFrame, groups: Sequence[str]) -> Column:
    """Null-safe equality of the grouping columns: NULL is a group like any other value."""
    return reduce(lambda a, b: a & b, [left[g].eqNullSafe(right[g]) for g in groups])


def _group_columns(form: AggregateForm) -> list[str]:
    return [f"{GROUP_PREFIX}{i}" for i in range(len(form.groups))]


def _stat_types(form: AggregateForm, arg_types: Sequence[str]) -> list[tuple[str, str]]:
    stats = []
    for j, arg_type in enumerate(arg_types):
        if form.summed[j]:
            stats.append((f"{SUM_PREFIX}{j}", sum_type(arg_type)))
        stats.append((f"{COUNT_PREFIX}{j}", "bigint"))
    return stats + [(ROWS, "bigint")]
