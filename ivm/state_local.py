"""Aggregate state on the driver: the local implementation of :class:`StateEngine`.

Most aggregate views have few groups (a dashboard's dimensions), so their state fits
the driver's memory. A tick then runs at most one Spark query, the block's input delta
(none when the local engine computes it, :mod:`ivm.driver_delta`); the law's operations
on the state (:mod:`ivm.aggregate_state`) are SQL run on DuckDB
(:func:`ivm.local_engine.run_sql`) over Arrow tables. Every sum is computed in the type of
Spark's ``SUM``, so where DuckDB stops on an overflow (Spark wraps a bigint and makes a
decimal NULL) the operation answers why, and Spark takes the state.

State columns as in :mod:`ivm.aggregate_state`: ``__g*`` the grouping values, ``__s*``
the sums (bigint, or a decimal in the type of Spark's ``SUM``), ``__c*`` and ``__n``
the counts (bigint).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

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
from ivm.local_engine import run_sql
from ivm.zset import WEIGHT

if TYPE_CHECKING:
    from ivm.engine_rule import Engine

DRIVER_DELTA_MAX_ROWS = 1_000_000
"""Largest change (rows of the sources' change feeds) whose input rows are collected to
the driver and aggregated there; a larger one is aggregated by Spark first."""

DRIVER_STATE_MAX_ROWS = 250_000
"""Default for the largest aggregate state (in groups) kept on the driver.

A tick costs the driver a pass over the state and the state's memory (tens of bytes per
group); larger states stay on Spark.
"""

_POSITION = "__position"


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


class LocalStateEngine:
    """The invertible-aggregate law's operations on Arrow tables, run by DuckDB in process.

    Every sum is computed in 38 digits (a decimal) or 128 bits (an integer) and cast to
    the state's type, where DuckDB stops on an overflow; such an operation answers why,
    and Spark takes the state.
    """

    name: Engine = "local"

    def partial(self, form: AggregateForm, delta: pa.Table, arg_types: Sequence[str] = ()
                ) -> pa.Table | str:
        """The partial aggregate of ``delta`` (``__g*``, ``__a*``, ``_weight``), as Spark's.

        Args:
            form: The aggregate block.
            delta: The block's input rows' delta, its arguments typed as Spark types them.
            arg_types: Unused: the types are ``delta``'s.

        Returns:
            One row per group of ``delta`` with a row of nonzero weight (NULL is a group):
            ``__g*``, per argument its weighted sum ``__s<j>`` (if summed:
            ``decimal(38, s)`` for a decimal, bigint for an integer; 0 when none) and
            weighted count ``__c<j>`` of non-null values, and ``__n`` the sum of the
            weights (bigint); or why Spark must aggregate the delta (a sum overflows those
            types).
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
            stats.append(f"CAST(COALESCE(SUM(CASE WHEN {value} IS NULL THEN 0 ELSE {weight} "
                         f"END), 0) AS BIGINT) AS {_quoted(f'{COUNT_PREFIX}{j}')}")
        stats.append(f"CAST(COALESCE(SUM({weight}), 0) AS BIGINT) AS {_quoted(ROWS)}")
        groups = [_quoted(f"{GROUP_PREFIX}{i}") for i in range(len(form.groups))]
        sql = (f"SELECT {', '.join([*groups, *stats])} FROM delta WHERE {weight} <> 0"
               f"{_group_by(groups)} HAVING COUNT(*) > 0")
        return bounded(run_sql(sql, {"delta": delta}), bounds)

    def split(self, state: pa.Table, change: pa.Table) -> tuple[pa.Table, pa.Table]:
        """The state rows whose group occurs in ``change`` (NULL matches NULL), and the rest.

        A semi join on DuckDB of the grouping columns alone; the state's rows are then
        taken by position, without a pass of DuckDB over their sums.
        """
        if change.num_rows == 0:
            return state.slice(0, 0), state
        groups = _groups(state.schema)
        if not groups:  # the one global group
            return state, state.slice(0, 0)
        keys = state.select(groups).append_column(_POSITION, pa.array(np.arange(state.num_rows)))
        matched = " AND ".join(f"s.{_quoted(g)} IS NOT DISTINCT FROM c.{_quoted(g)}"
                               for g in groups)
        rows = run_sql(f"SELECT s.{_POSITION} FROM state s SEMI JOIN change c ON {matched}",
                       {"state": keys, "change": change.select(groups)})
        assert not isinstance(rows, str), "a join stops on no value"
        mask = np.full(state.num_rows, False)
        mask[rows[_POSITION].to_numpy()] = True
        affected = pa.array(mask)
        return state.filter(affected), state.filter(pc.invert(affected))

    def summed(self, parts: Sequence[pa.Table]) -> pa.Table | str:
        """``parts`` added up group by group, in the types of ``parts[0]``.

        Returns:
            One row per group; or why Spark must add them: a sum overflows its state
            type, or one is NULL already (Spark's SUM made it so).
        """
        schema = parts[0].schema
        if all(part.num_rows == 0 for part in parts[1:]):
            return parts[0]
        if any(part.column(f.name).null_count for part in parts for f in schema
               if f.name.startswith(SUM_PREFIX)):
            return "a sum is NULL (Spark's SUM overflowed its type)"
        groups = [_quoted(name) for name in _groups(schema)]
        stats: list[str] = []
        bounds: dict[str, float] = {}
        for field in schema:
            if not field.name.startswith(GROUP_PREFIX):
                stats += _sum(_quoted(field.name), field.type, field.name,
                              _state_type(field.type))
                bounds[bound_name(field.name)] = sum_limit(field.type)
        names = ", ".join(_quoted(f.name) for f in schema)
        tables = {f"part{i}": part for i, part in enumerate(parts)}
        rows = " UNION ALL ".join(f"SELECT {names} FROM {name}" for name in tables)
        sql = (f"SELECT {', '.join([*groups, *stats])} FROM ({rows}){_group_by(groups)}"
               " HAVING COUNT(*) > 0")
        added = bounded(run_sql(sql, tables), bounds)
        return added if isinstance(added, str) else added.cast(schema)

    def nonempty(self, rows: pa.Table) -> pa.Table:
        """``rows`` without groups of no rows (a global aggregate's group stays)."""
        return rows.filter(pc.not_equal(rows[ROWS], 0)) if _groups(rows.schema) else rows

    def union(self, first: pa.Table, second: pa.Table) -> pa.Table:
        """The rows of both, in ``first``'s types."""
        return pa.concat_tables([first, second.cast(first.schema)])

    def settled(self, rows: pa.Table) -> pa.Table:
        """``rows`` in one chunk per column."""
        return rows.combine_chunks()

    def settled_nulls(self, rows: pa.Table, names: Sequence[str]
                      ) -> tuple[pa.Table, list[bool]]:
        """``rows`` in one chunk per column, and whether each column of ``names`` has a NULL."""
        return self.settled(rows), [rows.column(name).null_count > 0 for name in names]


LOCAL_STATE_ENGINE = LocalStateEngine()
"""The local engine's state operations (it holds no state of its own)."""


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


def _state_type(data_type: pa.DataType) -> str:
    """The DuckDB type of a sum or count column of the state."""
    if pa.types.is_decimal(data_type):
        return f"DECIMAL({data_type.precision}, {data_type.scale})"
    return "BIGINT"


def _groups(schema: pa.Schema) -> list[str]:
    return [name for name in schema.names if name.startswith(GROUP_PREFIX)]


def _group_by(groups: Sequence[str]) -> str:
    return f" GROUP BY {', '.join(groups)}" if groups else ""


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
