"""A view's rows from aggregate state rows held on the driver, with Spark's results.

For views whose every output is a grouping expression or a plain ``SUM``, ``AVG`` or
``COUNT`` and that have no ``HAVING`` (:func:`plain_outputs`), the rows of the affected
groups are computed here from their state, without Spark. Each output equals what
Spark computes from the same state with :func:`ivm.aggregate_form.state_output`,
including the rounding of a decimal average (:func:`decimal_average`). Views with other
outputs keep their state on Spark.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Context, Decimal
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from ivm.aggregate_form import (
    COUNT_PREFIX,
    GROUP_PREFIX,
    INVERTIBLE,
    ROWS,
    SUM_PREFIX,
    AggregateForm,
    decimal_parts,
)
from ivm.zset import WEIGHT, consolidate

Kind = Literal["group", "sum", "count", "rows", "avg"]

_EXACT = Context(prec=80)
"""Enough digits to move a 38-digit decimal's point without rounding."""


@dataclass(frozen=True)
class Output:
    """One output column of an aggregate view, as a read of its state.

    Attributes:
        kind: ``group`` (grouping value ``__g<index>``), ``sum``, ``avg`` or ``count`` (of
            argument ``index``), or ``rows`` (``COUNT(*)``).
        index: The grouping expression's or the argument's position.
    """

    kind: Kind
    index: int = 0


def plain_outputs(form: AggregateForm) -> tuple[Output, ...] | None:
    """The view's outputs as reads of its state, or None when one is an expression.

    Also None with a ``HAVING`` clause: such views keep their state on Spark.
    """
    if form.query.args.get("having") is not None:
        return None
    outputs = []
    for select in form.query.selects:
        node = select.this if isinstance(select, exp.Alias) else select
        output = _as_output(form, node)
        if output is None:
            return None
        outputs.append(output)
    return tuple(outputs)


def _as_output(form: AggregateForm, node: exp.Expr) -> Output | None:
    if node in form.groups:
        return Output("group", form.groups.index(node))
    if not isinstance(node, INVERTIBLE):
        return None
    arg = node.this
    if arg is None or isinstance(arg, exp.Star):
        return Output("rows") if isinstance(node, exp.Count) else None
    if arg not in form.args:
        return None
    kind: Kind = "count" if isinstance(node, exp.Count) else (
        "avg" if isinstance(node, exp.Avg) else "sum")
    return Output(kind, form.args.index(arg))


def view_rows(form: AggregateForm, outputs: Sequence[Output], arg_types: Sequence[str],
              state: pa.Table, columns: Sequence[tuple[str, bool]]) -> pa.Table:
    """The view's rows of the groups in ``state`` (groups with no rows left drop out).

    Args:
        form: The aggregate block.
        outputs: Its :func:`plain_outputs`.
        arg_types: The Spark type of each argument.
        state: State rows (``__g*``, ``__s*``, ``__c*``, ``__n``).
        columns: The view's columns, one per output: name and whether Spark types it
            nullable (the Arrow fields say the same, as Spark's collector would).

    Returns:
        One row per group with ``__n > 0`` (every row for a global aggregate): the view's
        columns, typed as Spark types them (a grouping value keeps its state type).
    """
    rows = state if form.is_global else state.filter(pc.greater(state[ROWS], 0))
    arrays = [_column(output, rows, arg_types) for output in outputs]
    schema = pa.schema([pa.field(name, array.type, nullable)
                        for (name, nullable), array in zip(columns, arrays, strict=True)])
    return pa.Table.from_arrays(arrays, schema=schema)


def delta_rows(form: AggregateForm, outputs: Sequence[Output], arg_types: Sequence[str],
               before: pa.Table, after: pa.Table, columns: Sequence[tuple[str, bool]]
               ) -> pa.Table:
    """The view's delta from the affected groups' state before and after a tick.

    Returns:
        A consolidated Z-set: the view's columns plus ``_weight`` (int64); a group whose
        row did not change contributes nothing.
    """
    sides = []
    for rows, weight in ((after, 1), (before, -1)):
        view = view_rows(form, outputs, arg_types, rows, columns)
        sides.append(view.append_column(WEIGHT, pa.array([weight] * view.num_rows, pa.int64())))
    return consolidate(pa.concat_tables(sides))


def _column(output: Output, rows: pa.Table, arg_types: Sequence[str]) -> pa.ChunkedArray:
    if output.kind == "group":
        return rows[f"{GROUP_PREFIX}{output.index}"]
    if output.kind == "rows":
        return rows[ROWS]
    count = rows[f"{COUNT_PREFIX}{output.index}"]
    if output.kind == "count":
        return count
    total = rows[f"{SUM_PREFIX}{output.index}"]
    empty = pc.equal(count, 0)
    if output.kind == "sum":
        return pc.if_else(empty, pa.scalar(None, total.type), total)
    if pa.types.is_decimal(total.type):
        return decimal_average(total, count, arg_types[output.index])
    # CAST(sum AS DOUBLE) rounds past 2^53, as Spark's cast does
    quotient = pc.divide(total.cast(pa.float64(), safe=False),
                         pc.if_else(empty, 1, count).cast(pa.float64()))
    return pc.if_else(empty, pa.scalar(None, pa.float64()), quotient)


def decimal_average(total: pa.ChunkedArray, count: pa.ChunkedArray, arg_type: str
                    ) -> pa.ChunkedArray:
    """``AVG`` of a ``decimal(p, s)`` argument from its sum and count, as Spark rounds it.

    Spark computes ``CAST(sum / CAST(count AS DECIMAL(20, 0)) AS DECIMAL(p + 4, s + 4))``
    (``Average.evaluateExpression``): Java's ``BigDecimal.divide`` at scale 38, then the
    quotient's type (``DecimalPrecision``: scale ``max(6, s + 21)``, cut to fit 38 digits),
    then the cast, each rounding half up (away from zero) and giving NULL when the value
    does not fit (outside ANSI mode). Each step is done here on the unscaled integers, so
    the result is exact. Sources: Spark ``Decimal./``, ``Divide``'s
    ``resultDecimalType`` and ``DecimalType.adjustPrecisionScale``.

    Returns:
        ``decimal(min(38, p + 4), min(38, s + 4))``; NULL where the count is 0.
    """
    precision, scale = decimal_parts(arg_type)
    assert precision is not None, arg_type
    sum_precision = min(38, precision + 10)
    quotient_scale = _quotient_scale(sum_precision, scale)
    result = pa.decimal128(min(38, precision + 4), min(38, scale + 4))
    values: list[Decimal | None] = []
    for value, rows in zip(total.to_pylist(), count.to_pylist(), strict=True):
        digits = None
        if rows and value is not None:
            digits = _half_up(int(value.scaleb(scale, _EXACT)) * 10 ** (38 - scale), rows)
            digits = _fitted(_rescaled(digits, 38, quotient_scale), 38)
        if digits is not None:
            digits = _fitted(_rescaled(digits, quotient_scale, result.scale), result.precision)
        values.append(None if digits is None else Decimal(digits).scaleb(-result.scale, _EXACT))
    return pa.chunked_array([pa.array(values, result)])


def _quotient_scale(sum_precision: int, scale: int) -> int:
    """The scale of ``decimal(sum_precision, scale) / decimal(20, 0)`` in Spark."""
    quotient_scale = max(6, scale + 20 + 1)
    quotient_precision = sum_precision - scale + quotient_scale
    if quotient_precision <= 38:
        return quotient_scale
    return max(38 - (quotient_precision - quotient_scale), min(quotient_scale, 6))


def _rescaled(digits: int, scale: int, new_scale: int) -> int:
    """Unscaled ``digits`` at ``scale`` as unscaled digits at ``new_scale``, half up."""
    if new_scale >= scale:
        return digits * 10 ** (new_scale - scale)
    return _half_up(digits, 10 ** (scale - new_scale))


def _fitted(digits: int, precision: int) -> int | None:
    """Unscaled ``digits`` if they fit ``precision`` digits, else None (Spark's overflow)."""
    return digits if abs(digits) < 10 ** precision else None


def _half_up(numerator: int, denominator: int) -> int:
    """``numerator / denominator`` rounded to an integer, halves away from zero."""
    quotient, remainder = divmod(abs(numerator), denominator)
    if 2 * remainder >= denominator:
        quotient += 1
    return quotient if numerator >= 0 else -quotient
