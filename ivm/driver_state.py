"""The aggregate state on the driver: an Arrow table, advanced by the local engine.

Most aggregate views have few groups (a dashboard's dimensions), so their state fits
the driver's memory. A tick then runs at most one Spark query, the block's input delta
(none when the local engine computes it, :mod:`ivm.driver_delta`); the delta's partial
aggregate (:func:`change_aggregate`) and its addition to the affected groups' sums and
counts (:func:`advance`) are SQL run on DuckDB (:func:`ivm.local_engine.run_sql`) over the
Arrow tables. Every sum is computed in the type of Spark's ``SUM``, so where DuckDB stops
on an overflow (Spark wraps a bigint and makes a decimal NULL) the function answers why,
and Spark takes the tick.

State columns as in :mod:`ivm.aggregate_state`: ``__g*`` the grouping values, ``__s*``
the sums (bigint, or a decimal in the type of Spark's ``SUM``), ``__c*`` and ``__n``
the counts (bigint).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
from ivm.local_engine import run_sql
from ivm.zset import WEIGHT

DRIVER_DELTA_MAX_ROWS = 1_000_000
"""Largest change (rows of the sources' change feeds) whose input rows are collected to
the driver and aggregated there; a larger one is aggregated by Spark first."""

DRIVER_STATE_MAX_ROWS = 250_000
"""Default for the largest aggregate state (in groups) kept on the driver.

A tick costs the driver a pass over the state and the state's memory (tens of bytes per
group); larger states stay on Spark.
"""

_POSITION = "__position"


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


def change_aggregate(form: AggregateForm, delta: pa.Table) -> pa.Table | str:
    """The input delta's partial aggregate, as its Spark namesake computes it.

    Args:
        form: The aggregate block.
        delta: The block's input rows' delta, collected: ``__g*``, ``__a*``, ``_weight``.

    Returns:
        One row per group of ``delta`` with a row of nonzero weight (NULL is a group):
        ``__g*``, per argument its weighted sum ``__s<j>`` (if summed: ``decimal(38, s)``
        for a decimal, bigint for an integer; 0 when none) and weighted count ``__c<j>``
        of non-null values, and ``__n`` the sum of the weights (bigint); or why Spark
        must aggregate the delta (a sum overflows those types).
    """
    weight = _quoted(WEIGHT)
    stats: list[str] = []
    bounds: dict[str, float] = {}
    for j, summed in enumerate(form.summed):
        value = _quoted(f"{ARG_PREFIX}{j}")
        if summed:
            arg = delta.schema.field(f"{ARG_PREFIX}{j}").type
            total, bound = _sum(value, arg, f"{SUM_PREFIX}{j}", weight=weight)
            stats += [total, bound]
            bounds[bound_name(f"{SUM_PREFIX}{j}")] = sum_limit(arg)
        stats.append(f"CAST(COALESCE(SUM(CASE WHEN {value} IS NULL THEN 0 ELSE {weight} END),"
                     f" 0) AS BIGINT) AS {_quoted(f'{COUNT_PREFIX}{j}')}")
    stats.append(f"CAST(COALESCE(SUM({weight}), 0) AS BIGINT) AS {_quoted(ROWS)}")
    groups = [_quoted(f"{GROUP_PREFIX}{i}") for i in range(len(form.groups))]
    sql = (f"SELECT {', '.join([*groups, *stats])} FROM delta WHERE {weight} <> 0"
           f"{_group_by(groups)} HAVING COUNT(*) > 0")
    return bounded(run_sql(sql, {"delta": delta}), bounds)


def _sum(value: str, arg: pa.DataType, name: str, target: str | None = None,
         weight: str | None = None) -> tuple[str, str]:
    """SQL of the sum of ``value`` (of type ``arg``, times ``weight`` if given), and its bound.

    The sum is computed in 38 digits (a decimal) or 128 bits (an integer) and cast to
    ``target`` (default: 38 digits, or bigint), where DuckDB stops on an overflow. Its
    bound, the sum of the values' magnitudes as doubles, is checked by :func:`bounded`:
    DuckDB 1.5 adds the partial sums of separate chunks without an overflow check.
    """
    wide = f"DECIMAL(38, {arg.scale})" if pa.types.is_decimal(arg) else "HUGEINT"
    target = target or ("BIGINT" if wide == "HUGEINT" else wide)
    times = f" * {weight}" if weight else ""
    total = (f"CAST(COALESCE(SUM(CAST({value} AS {wide}){times}), 0) AS {target}) "
             f"AS {_quoted(name)}")
    return total, bound_sql(f"{value}{times}", name)


def bound_sql(value: str, name: str) -> str:
    """SQL of the bound of sum ``name``: the sum of ``value``'s magnitudes, as doubles.

    :func:`bounded` checks it: DuckDB 1.5 adds the partial sums of separate chunks of a
    ``DECIMAL(38)`` or ``HUGEINT`` sum without an overflow check.
    """
    return f"SUM(ABS(CAST({value} AS DOUBLE))) AS {_quoted(bound_name(name))}"


def bound_name(name: str) -> str:
    """The column of sum ``name``'s bound."""
    return f"{name}__bound"


def sum_limit(arg: pa.DataType) -> float:
    """The magnitude under which a sum's partial sums all fit 38 digits (128 bits)."""
    return 10.0 ** (38 - (arg.scale if pa.types.is_decimal(arg) else 0))


def bounded(rows: pa.Table | str, bounds: dict[str, float]) -> pa.Table | str:
    """``rows`` without their bound columns, or why Spark must sum: a bound at its limit."""
    if isinstance(rows, str):
        return rows
    for name, limit in bounds.items():
        largest = pc.max(rows[name]).as_py()
        if largest is not None and largest >= limit / 2:
            return f"{name.removesuffix('__bound')} near the range of its type"
    return rows.drop_columns(list(bounds))


def advance(state: pa.Table, change: pa.Table, is_global: bool) -> DriverAdvanced | str:
    """Add the change's partial aggregate to the state.

    Args:
        state: The state at the old frontier, one row per group.
        change: The input delta's partial aggregate (same columns, one row per group),
            from :func:`change_aggregate` or :func:`ivm.aggregate_state.change_aggregate`.
        is_global: The view aggregates without GROUP BY: its one group stays at zero rows.

    Returns:
        The state at the new frontier and the affected groups before and after; or why
        Spark must advance the state: a sum overflows the state's type (a bigint Spark
        wraps, a decimal Spark makes NULL).
    """
    if change.num_rows == 0:
        return DriverAdvanced(state, state.slice(0, 0), state.slice(0, 0))
    affected = _affected(state, change)
    before = state.filter(affected)
    after = _summed(state.schema, ["before", "change"], {"before": before, "change": change})
    if isinstance(after, str):
        return after
    after = after.cast(state.schema)
    kept = after if is_global else after.filter(pc.not_equal(after[ROWS], 0))
    rows = pa.concat_tables([state.filter(pc.invert(affected)), kept]).combine_chunks()
    return DriverAdvanced(rows, before, after)


def _affected(state: pa.Table, change: pa.Table) -> pa.Array:
    """Whether each state row's group occurs in ``change`` (NULL matches NULL, as in GROUP BY).

    A semi join on DuckDB of the grouping columns alone; the state's rows are then taken
    by position, without a pass of DuckDB over their sums.
    """
    groups = [name for name in state.column_names if name.startswith(GROUP_PREFIX)]
    if not groups:  # the one global group
        return pa.array(np.full(state.num_rows, True))
    keys = state.select(groups).append_column(_POSITION, pa.array(np.arange(state.num_rows)))
    matched = " AND ".join(f"s.{_quoted(g)} IS NOT DISTINCT FROM c.{_quoted(g)}"
                           for g in groups)
    rows = run_sql(f"SELECT s.{_POSITION} FROM state s SEMI JOIN change c ON {matched}",
                   {"state": keys, "change": change.select(groups)})
    assert not isinstance(rows, str), "a join stops on no value"
    mask = np.full(state.num_rows, False)
    mask[rows[_POSITION].to_numpy()] = True
    return pa.array(mask)


def with_changes(state: pa.Table, changes: Sequence[pa.Table]) -> pa.Table:
    """``state`` plus the partial aggregates ``changes``: the state they lead to.

    The driver form of :func:`ivm.aggregate_state.with_changes`: sums and counts add up
    group by group; a group whose row count reaches 0 leaves the state, except the one
    group of a global aggregate.

    Raises:
        IvmError: A sum overflows its type in the state.
    """
    if not changes:
        return state
    names = [f"part{i}" for i in range(len(changes) + 1)]
    rows = _summed(state.schema, names, dict(zip(names, [state, *changes], strict=True)))
    if isinstance(rows, str):
        raise IvmError(f"the stored aggregate state cannot be added up on the driver: {rows}")
    if any(name.startswith(GROUP_PREFIX) for name in state.column_names):
        rows = rows.filter(pc.not_equal(rows[ROWS], 0))
    return rows.cast(state.schema)


def _summed(schema: pa.Schema, parts: Sequence[str], tables: Mapping[str, pa.Table]
            ) -> pa.Table | str:
    """The state rows of ``parts`` added up group by group, in ``schema``'s types.

    Returns:
        One row per group; or why Spark must add them: a sum overflows its state type, or
        one is NULL already (Spark's SUM made it so: :mod:`ivm.aggregate_state`).
    """
    if any(tables[part].column(f.name).null_count for part in parts for f in schema
           if f.name.startswith(SUM_PREFIX)):
        return "a sum is NULL (Spark's SUM overflowed its type)"
    groups = [_quoted(f.name) for f in schema if f.name.startswith(GROUP_PREFIX)]
    stats: list[str] = []
    bounds: dict[str, float] = {}
    for field in schema:
        if not field.name.startswith(GROUP_PREFIX):
            stats += _sum(_quoted(field.name), field.type, field.name, _state_type(field.type))
            bounds[bound_name(field.name)] = sum_limit(field.type)
    names = ", ".join(_quoted(f.name) for f in schema)
    rows = " UNION ALL ".join(f"SELECT {names} FROM {part}" for part in parts)
    sql = (f"SELECT {', '.join([*groups, *stats])} FROM ({rows}){_group_by(groups)}"
           " HAVING COUNT(*) > 0")
    return bounded(run_sql(sql, tables), bounds)


def _state_type(data_type: pa.DataType) -> str:
    """The DuckDB type of a sum or count column of the state."""
    if pa.types.is_decimal(data_type):
        return f"DECIMAL({data_type.precision}, {data_type.scale})"
    return "BIGINT"


def _group_by(groups: Sequence[str]) -> str:
    return f" GROUP BY {', '.join(groups)}" if groups else ""


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
