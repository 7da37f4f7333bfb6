"""The aggregate state on the driver: an Arrow table, advanced without Spark.

Most aggregate views have few groups (a dashboard's dimensions), so their state fits
the driver's memory. A tick then runs one Spark query, the block's input delta,
collected (large changes are aggregated by Spark first); the rest is done here: the delta's
partial aggregate (:func:`change_aggregate`), a hash join of its groups against the
state's, and exact addition of their sums and counts (:func:`advance`).

State columns as in :mod:`ivm.aggregate_state`: ``__g*`` the grouping values, ``__s*``
the sums (bigint, or a decimal in the type of Spark's ``SUM``), ``__c*`` and ``__n``
the counts (bigint).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ivm.aggregate_form import (
    ARG_PREFIX,
    COUNT_PREFIX,
    GROUP_PREFIX,
    ROWS,
    SUM_PREFIX,
    AggregateForm,
)
from ivm.errors import IvmError
from ivm.zset import WEIGHT

DRIVER_DELTA_MAX_ROWS = 1_000_000
"""Largest change (rows of the sources' change feeds) whose input rows are collected to
the driver and aggregated there; a larger one is aggregated by Spark first."""

DRIVER_STATE_MAX_ROWS = 250_000
"""Default for the largest aggregate state (in groups) kept on the driver.

A tick costs the driver a pass over the state (about 5 ms per 100,000 groups) and the
state's memory (tens of bytes per group); larger states stay on Spark.
"""

_STATE_POSITION = "__state_position"
_CHANGE_POSITION = "__change_position"


@dataclass(frozen=True)
class DriverAdvanced:
    """One tick of an aggregate held on the driver (the tables of :class:`Advanced`).

    Attributes:
        state: The whole state after the tick.
        before: State rows of the affected groups before the tick (present ones only).
        after: State rows of the affected groups after the tick (``__n`` may be 0).
    """

    state: pa.Table
    before: pa.Table
    after: pa.Table


def supports(state: pa.Schema) -> bool:
    """Whether the state's groups can be matched on the driver exactly as Spark groups them.

    Their columns must compare exactly: integers, decimals, strings, binary, dates,
    timestamps and booleans. Not floating point, where Spark's grouping makes NaN equal to
    NaN and -0.0 equal to 0.0, nor nested types.
    """
    exact = (pa.types.is_integer, pa.types.is_decimal, pa.types.is_string,
             pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary,
             pa.types.is_date, pa.types.is_timestamp, pa.types.is_boolean)
    return all(any(test(field.type) for test in exact)
               for field in state if field.name.startswith(GROUP_PREFIX))


def change_aggregate(form: AggregateForm, delta: pa.Table) -> pa.Table:
    """The input delta's partial aggregate in Arrow (as its Spark namesake computes it).

    Args:
        form: The aggregate block.
        delta: The block's input rows' delta, collected: ``__g*``, ``__a*``, ``_weight``.

    Returns:
        One row per group of ``delta`` (NULL is a group): ``__g*``, per argument its signed
        sum ``__s<j>`` (if summed; 0 when none) and count ``__c<j>`` of non-null values,
        and ``__n`` the sum of the weights. Decimals are summed in 76 digits (an overflow
        would take 10^38 rows), wider than the state's: :func:`advance` casts them to its
        types.
    """
    weights = delta[WEIGHT].to_numpy(zero_copy_only=False)
    rows = delta.take(pa.array(np.repeat(np.arange(delta.num_rows), np.abs(weights))))
    sign = pa.array(np.repeat(np.sign(weights), np.abs(weights)).astype(np.int64))
    groups = [f"{GROUP_PREFIX}{i}" for i in range(len(form.groups))]
    columns = {name: rows[name] for name in groups} or {"__global": pa.nulls(len(sign))}
    aggregates = []
    for j, summed in enumerate(form.summed):
        value = rows[f"{ARG_PREFIX}{j}"]
        if summed:  # an integer is negated as bigint: -(-2^31) does not fit an int
            wide = value.cast(_summand_type(value.type))
            columns[f"{SUM_PREFIX}{j}"] = pc.if_else(pc.greater(sign, 0), wide, pc.negate(wide))
            aggregates.append((f"{SUM_PREFIX}{j}", "sum"))
        columns[f"{COUNT_PREFIX}{j}"] = pc.if_else(pc.is_null(value), 0, sign)
        aggregates.append((f"{COUNT_PREFIX}{j}", "sum"))
    columns[ROWS] = sign
    aggregates.append((ROWS, "sum"))
    table = pa.table(columns)
    keys = groups or ["__global"]
    summed_up = table.group_by(keys, use_threads=False).aggregate(aggregates)
    totals = {name: pc.fill_null(summed_up[f"{name}_sum"], 0) for name, _ in aggregates}
    return pa.table({**{name: summed_up[name] for name in groups}, **totals})


def _summand_type(arg: pa.DataType) -> pa.DataType:
    """The type in which an argument's values are negated and summed, exactly."""
    return pa.decimal256(76, arg.scale) if pa.types.is_decimal(arg) else pa.int64()


def advance(state: pa.Table, change: pa.Table, is_global: bool) -> DriverAdvanced:
    """Add the change's partial aggregate to the state.

    Args:
        state: The state at the old frontier, one row per group.
        change: The input delta's partial aggregate (same columns, one row per group),
            from :func:`change_aggregate` or :func:`ivm.aggregate_state.change_aggregate`.
        is_global: The view aggregates without GROUP BY: its one group stays at zero rows.

    Returns:
        The state at the new frontier and the affected groups before and after.

    Raises:
        IvmError: A decimal sum overflows its type.
    """
    try:
        change = change.select(state.column_names).cast(state.schema)
    except pa.ArrowInvalid as error:  # Spark's SUM would be NULL here (outside ANSI mode)
        raise IvmError(f"the change's sums overflow the aggregate state's types: {error}"
                       ) from error
    groups = [name for name in state.column_names if name.startswith(GROUP_PREFIX)]
    in_state, in_change = _matches(state, change, groups)
    before = state.take(pa.array(in_state, pa.int64()))
    summed = _added(before, change.take(pa.array(in_change, pa.int64())), groups)
    new_groups = np.ones(change.num_rows, dtype=bool)
    new_groups[in_change] = False
    after = pa.concat_tables([summed, change.filter(pa.array(new_groups))])
    kept = after if is_global else after.filter(pc.not_equal(after[ROWS], 0))
    untouched = np.ones(state.num_rows, dtype=bool)
    untouched[in_state] = False
    rows = pa.concat_tables([state.filter(pa.array(untouched)), kept]).combine_chunks()
    return DriverAdvanced(rows, before, after)


def with_changes(state: pa.Table, changes: Sequence[pa.Table]) -> pa.Table:
    """``state`` plus the partial aggregates ``changes`` (:func:`advance` in turn).

    The driver form of :func:`ivm.aggregate_state.with_changes`.

    Raises:
        IvmError: A decimal sum overflows its type.
    """
    is_global = not any(name.startswith(GROUP_PREFIX) for name in state.column_names)
    for change in changes:
        state = advance(state, change, is_global).state
    return state


def _matches(state: pa.Table, change: pa.Table, groups: Sequence[str]
             ) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the state rows and change rows of the same group, pairwise.

    A hash join on the grouping columns, null-safe: NULL matches NULL, as GROUP BY puts
    NULLs in one group.
    """
    if not groups:  # the one global group
        pairs = min(state.num_rows, change.num_rows)
        return np.arange(pairs), np.arange(pairs)
    left, right = _null_safe_keys(state, change, groups)
    left = left.append_column(_STATE_POSITION, pa.array(np.arange(state.num_rows)))
    right = right.append_column(_CHANGE_POSITION, pa.array(np.arange(change.num_rows)))
    joined = left.join(right, keys=left.column_names[:-1], join_type="inner",
                       use_threads=False)
    return (joined[_STATE_POSITION].to_numpy().astype(np.int64),
            joined[_CHANGE_POSITION].to_numpy().astype(np.int64))


def _null_safe_keys(state: pa.Table, change: pa.Table, groups: Sequence[str]
                    ) -> tuple[pa.Table, pa.Table]:
    """Join keys on which equality is null-safe.

    A column holding NULLs becomes two: its values with NULL replaced by one of its
    values, and whether it was NULL.
    """
    left: dict[str, pa.ChunkedArray] = {}
    right: dict[str, pa.ChunkedArray] = {}
    for name in groups:
        mine, theirs = state[name], change[name]
        if mine.null_count == 0 and theirs.null_count == 0:
            left[name], right[name] = mine, theirs
            continue
        valid = pc.drop_null(pa.chunked_array(mine.chunks + theirs.chunks, mine.type))
        for keys, column in ((left, mine), (right, theirs)):
            keys[f"{name}__null"] = pc.is_null(column)
            if len(valid):
                keys[name] = pc.fill_null(column, valid[0])
    return pa.table(left), pa.table(right)


def _added(before: pa.Table, change: pa.Table, groups: Sequence[str]) -> pa.Table:
    """Each group's state plus its change: grouping columns kept, statistics added."""
    columns = [before[name] if name in groups else _sum(before[name], change[name], name)
               for name in before.column_names]
    return pa.Table.from_arrays(columns, schema=before.schema)


def _sum(state: pa.ChunkedArray, change: pa.ChunkedArray, name: str) -> pa.ChunkedArray:
    """Exact addition in the state column's type.

    bigint wraps on overflow, as Spark's ``SUM`` does outside ANSI mode; a decimal adds
    in 256 bits (its precision + 1 may exceed 38) and must fit its type again.
    """
    if not pa.types.is_decimal(state.type):
        return pc.add(state, change)
    wide = pa.decimal256(state.type.precision, state.type.scale)
    total = pc.add(state.cast(wide), change.cast(wide))
    try:
        return total.cast(state.type)
    except pa.ArrowInvalid as error:
        raise IvmError(f"the aggregate state's {name} overflows {state.type}: {error}"
                       ) from error
