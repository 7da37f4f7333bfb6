"""Evaluate one SQL expression over Arrow columns exactly as Spark does, or refuse.

The values of :mod:`ivm.arrow_eval`'s subset of Spark SQL (non-ANSI mode):

- column references (``alias.column``), integer, decimal, string and boolean literals,
  ``DATE '...'`` (a cast of an ISO date literal) and a date literal plus or minus
  ``INTERVAL 'n' DAY|MONTH|YEAR``;
- ``+``, ``-``, ``*`` and unary ``-`` over integers (an overflow, which Spark would
  wrap, falls back) and decimals, typed by Spark's rules (``DecimalPrecision``:
  integer literals take their minimal precision, and a result above 38 digits keeps
  ``max(38 - integer digits, min(scale, 6))`` digits of scale). A result Spark would
  round, or that overflows 38 digits (Spark: NULL), falls back;
- comparisons of two numbers (in their wider decimal type, at most 38 digits), two
  strings, two booleans, two dates, or a date and an ISO date string; ``BETWEEN``,
  ``IN`` over literals, ``IS [NOT] NULL``, and ``AND``, ``OR``, ``NOT`` in three-valued
  logic.

Anything else raises :class:`FallbackError`: floating point, division, functions, CASE,
LIKE, casts other than the date literal's. Source: Spark 3.5 ``DecimalPrecision``,
``DecimalType.adjustPrecisionScale``, ``TypeCoercion.PromoteStrings`` and
``InConversion``, ``DateAddYMInterval``; the Arrow compute functions' null semantics.
"""

from __future__ import annotations

import calendar
import datetime
import decimal
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

MAX_PRECISION = 38
"""Spark's largest decimal precision."""
MIN_ADJUSTED_SCALE = 6
"""Spark keeps at least this many digits of scale when it cuts a result to 38 digits."""

_INT_PRECISION = {pa.int8(): 3, pa.int16(): 5, pa.int32(): 10, pa.int64(): 20}
"""The decimal precision of an integer column in decimal arithmetic (Spark's ``forType``)."""
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")

Datum: TypeAlias = Any
"""A ``pa.Array``, ``pa.ChunkedArray`` or ``pa.Scalar`` (pyarrow has no type stubs)."""


class FallbackError(Exception):
    """The expression is outside the subset: Spark evaluates the block.

    Internal to the driver evaluation (:func:`ivm.arrow_eval.evaluate` turns it into
    None); it never reaches a caller of :mod:`ivm`.
    """


@dataclass(frozen=True)
class Value:
    """An evaluated expression: an array (one value per row) or a scalar.

    ``literal`` marks an integer written in the SQL, which Spark types by its digits
    when it meets a decimal.
    """

    datum: Datum
    literal: bool = False

    @property
    def type(self) -> pa.DataType:
        """The Arrow type of the value."""
        return self.datum.type


def qualified_name(column: exp.Column) -> str:
    """``alias.column`` in lower case: the name of the column in the evaluated rows."""
    return f"{column.table.lower()}.{column.name.lower()}"


def broadcast(evaluated: Value, length: int) -> pa.Array | pa.ChunkedArray:
    """The value as one entry per row (a scalar repeated ``length`` times)."""
    datum = evaluated.datum
    if isinstance(datum, pa.Scalar):
        return pa.repeat(datum, length)
    return datum


def require(condition: bool, reason: str) -> None:
    """Raise :class:`FallbackError` with ``reason`` unless ``condition`` holds."""
    if not condition:
        raise FallbackError(reason)


def expression_value(node: exp.Expr, rows: pa.Table) -> Value:
    """Evaluate one expression over ``rows`` as Spark would.

    Args:
        node: A qualified expression (an unqualified column when ``rows`` has one table).
        rows: Columns named ``alias.column`` (:func:`qualified_name`).

    Returns:
        An array of one value per row, or a scalar (an expression of literals).

    Raises:
        FallbackError: The expression is outside the subset (module docstring), or Spark
            would type or compute it differently.
        pyarrow.ArrowInvalid: An overflow of an integer or of 38 digits (Spark would wrap
            or give NULL): the caller falls back too.
    """
    def recurse(child: exp.Expr) -> Value:
        return expression_value(child, rows)

    if isinstance(node, exp.Paren):
        return recurse(node.this)
    if isinstance(node, exp.Column):
        return _column(node, rows)
    if isinstance(node, (exp.Literal, exp.Boolean, exp.Cast, exp.Interval)):
        return _literal(node)
    handler = _HANDLERS.get(type(node))
    if handler is None:
        raise FallbackError(f"{type(node).__name__} is not evaluated on the driver")
    return handler(node, recurse)


def _column(node: exp.Column, rows: pa.Table) -> Value:
    if node.table:
        name = qualified_name(node)
    else:  # one table: its only alias
        found = [n for n in rows.column_names if n.split(".", 1)[1] == node.name.lower()]
        require(len(found) == 1, f"column {node.name} is ambiguous or missing")
        name = found[0]
    require(name in rows.column_names, f"no column {node.sql()}")
    return Value(rows[name])


def _literal(node: exp.Expr) -> Value:
    if isinstance(node, exp.Boolean):
        return Value(pa.scalar(bool(node.this), pa.bool_()))
    if isinstance(node, exp.Cast):  # DATE '1995-03-15' parses as a cast
        require(node.to.is_type(exp.DataType.Type.DATE) and isinstance(node.this, exp.Literal)
                and node.this.is_string, "a cast other than DATE '...'")
        return Value(pa.scalar(_iso_date(node.this.this), pa.date32()))
    require(isinstance(node, exp.Literal), f"{node.sql()} is not a literal")
    text = node.this
    if node.is_string:
        return Value(pa.scalar(text, pa.string()))
    if re.fullmatch(r"\d+", text):
        number = int(text)
        require(number < 2**63, f"integer literal {text} out of bigint")
        return Value(pa.scalar(number, pa.int32() if number < 2**31 else pa.int64()),
                      literal=True)
    match = re.fullmatch(r"(\d*)\.(\d+)", text)
    require(match is not None, f"numeric literal {text} (Spark types it as double)")
    assert match is not None
    digits = (match.group(1) + match.group(2)).lstrip("0") or "0"
    scale = len(match.group(2))
    precision = max(len(digits), scale)
    require(precision <= MAX_PRECISION, f"decimal literal {text} out of range")
    return Value(pa.scalar(decimal.Decimal(text), pa.decimal128(precision, scale)))


def _iso_date(text: str) -> datetime.date:
    require(bool(_ISO_DATE.fullmatch(text)), f"date literal {text!r} is not YYYY-MM-DD")
    try:
        return datetime.date.fromisoformat(text)
    except ValueError as error:
        raise FallbackError(f"invalid date {text!r}") from error


Recurse = Callable[[exp.Expr], Value]


def _arithmetic(node: exp.Expr, recurse: Recurse) -> Value:
    left, right = node.this, node.expression
    if isinstance(right, exp.Interval) or isinstance(left, exp.Interval):
        return _date_shift(node, recurse)
    a, b = recurse(left), recurse(right)
    if _is_decimal(a) or _is_decimal(b):
        return _decimal_arithmetic(node, a, b)
    require(_is_integer(a) and _is_integer(b), f"{node.sql()} is not integer arithmetic")
    return Value(_INTEGER_ARITHMETIC[type(node)](a.datum, b.datum))


_INTEGER_ARITHMETIC: dict[type[exp.Expr], Callable[..., Datum]] = {
    exp.Add: pc.add_checked, exp.Sub: pc.subtract_checked, exp.Mul: pc.multiply_checked}
"""Checked: an overflow (Spark would wrap it) raises ``ArrowInvalid`` and falls back."""


def _date_shift(node: exp.Expr, recurse: Recurse) -> Value:
    """``DATE 'x' +/- INTERVAL 'n' DAY|MONTH|YEAR``: the date literal Spark folds it to.

    Months and years as ``LocalDate.plusMonths`` adds them (``DateAddYMInterval``): the
    day is clamped to the new month's last day.
    """
    date, interval = node.this, node.expression
    require(isinstance(interval, exp.Interval) and not isinstance(node, exp.Mul),
            "interval arithmetic")
    assert isinstance(interval, exp.Interval)
    unit = interval.args.get("unit")
    unit_name = unit.name.upper() if unit is not None else ""
    require(unit_name in ("DAY", "MONTH", "YEAR"), "an interval not in days, months or years")
    amount = interval.this
    require(isinstance(amount, exp.Literal)
            and re.fullmatch(r"-?\d{1,6}", amount.this) is not None,
            "an interval that is not a small whole number")
    base = recurse(date)
    require(isinstance(base.datum, pa.Scalar) and pa.types.is_date32(base.type)
            and base.datum.is_valid, "interval arithmetic on a column")
    count = int(amount.this) * (-1 if isinstance(node, exp.Sub) else 1)
    day: datetime.date = base.datum.as_py()
    try:
        if unit_name == "DAY":
            return Value(pa.scalar(day + datetime.timedelta(days=count), pa.date32()))
        months = day.year * 12 + day.month - 1 + count * (12 if unit_name == "YEAR" else 1)
        year, month = divmod(months, 12)
        last = calendar.monthrange(year, month + 1)[1]
        return Value(pa.scalar(datetime.date(year, month + 1, min(day.day, last)), pa.date32()))
    except (OverflowError, ValueError) as error:  # outside years 1..9999
        raise FallbackError(f"{node.sql()} leaves the calendar") from error


def _decimal_arithmetic(node: exp.Expr, a: Value, b: Value) -> Value:
    """Spark's decimal ``+``, ``-``, ``*``: exact in 76 digits, then Spark's result type."""
    (p1, s1), (p2, s2) = _decimal_type(a), _decimal_type(b)
    if isinstance(node, exp.Mul):
        precision, scale = p1 + p2 + 1, s1 + s2
        function = pc.multiply
    else:
        scale = max(s1, s2)
        precision = max(p1 - s1, p2 - s2) + scale + 1
        function = pc.add if isinstance(node, exp.Add) else pc.subtract
    if precision > MAX_PRECISION:  # Spark cuts the type; it rounds if the scale shrinks
        adjusted = max(MAX_PRECISION - (precision - scale), min(scale, MIN_ADJUSTED_SCALE))
        require(adjusted == scale, f"{node.sql()}: Spark rounds it to scale {adjusted}")
        precision = MAX_PRECISION
    exact = function(_as_decimal256(a, p1, s1), _as_decimal256(b, p2, s2))
    return Value(exact.cast(pa.decimal128(precision, scale)))  # overflow: ArrowInvalid


def _decimal_type(value: Value) -> tuple[int, int]:
    """(precision, scale) Spark gives an operand of decimal arithmetic."""
    if _is_decimal(value):
        return value.type.precision, value.type.scale
    require(_is_integer(value), f"{value.type} in decimal arithmetic")
    if value.literal:
        return max(len(str(abs(value.datum.as_py()))), 1), 0
    return _INT_PRECISION[value.type], 0


def _as_decimal256(value: Value, precision: int, scale: int) -> Datum:
    datum = value.datum
    if _is_integer(value):  # Arrow casts an integer to a decimal of all its type's digits
        datum = datum.cast(pa.decimal256(_INT_PRECISION[value.type], 0))
    return datum.cast(pa.decimal256(precision, scale))


def _negate(node: exp.Expr, recurse: Recurse) -> Value:
    """``-x``; ``-<digits>`` is one literal to Spark's parser, typed by its signed value."""
    value = recurse(node.this)
    require(_is_integer(value) or _is_decimal(value), f"-{value.type}")
    if isinstance(node.this, exp.Literal) and _is_integer(value):  # one literal to Spark
        number = -value.datum.as_py()
        return Value(pa.scalar(number, pa.int32() if number >= -2**31 else pa.int64()),
                     literal=True)
    function = pc.negate if _is_decimal(value) else pc.negate_checked
    return Value(function(value.datum))  # -(2147483648) stays a bigint, as UnaryMinus


def _is_decimal(value: Value) -> bool:
    return pa.types.is_decimal(value.type)


def _is_integer(value: Value) -> bool:
    return value.type in _INT_PRECISION


_COMPARISONS: dict[type[exp.Expr], Callable[..., Datum]] = {
    exp.EQ: pc.equal, exp.NEQ: pc.not_equal, exp.LT: pc.less, exp.LTE: pc.less_equal,
    exp.GT: pc.greater, exp.GTE: pc.greater_equal}


def _compare(node: exp.Expr, recurse: Recurse) -> Value:
    a, b = _comparable(recurse(node.this), recurse(node.expression))
    return Value(_COMPARISONS[type(node)](a, b))


def _comparable(a: Value, b: Value) -> tuple[Datum, Datum]:
    """Both sides in one Arrow type that orders them as Spark does.

    Numbers in their wider decimal type (``DecimalPrecision``); one wider than 38 digits
    (Spark would cast a value to NULL) or an integer against a decimal literal outside
    bigint (Spark folds the comparison to a constant) falls back.
    """
    if _is_numeric(a) and _is_numeric(b):
        if _is_integer(a) and _is_integer(b):
            return a.datum, b.datum
        require(not (_beyond_bigint(a) and _is_integer(b))
                and not (_beyond_bigint(b) and _is_integer(a)),
                "an integer compared with a decimal literal outside bigint")
        precision, scale = _wider_decimal([_decimal_type(a), _decimal_type(b)])
        return _as_decimal256(a, precision, scale), _as_decimal256(b, precision, scale)
    a, b = _dated(a, b), _dated(b, a)
    for test in (_is_string, pa.types.is_boolean, pa.types.is_date32):
        if test(a.type) and test(b.type):
            return a.datum, b.datum
    raise FallbackError(f"comparison of {a.type} with {b.type}")


def _wider_decimal(types: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """The decimal type every ``(precision, scale)`` fits in; at most 38 digits."""
    scale = max(s for _, s in types)
    precision = max(p - s for p, s in types) + scale
    require(precision <= MAX_PRECISION, f"a comparison in {precision} digits")
    return precision, scale


def _beyond_bigint(value: Value) -> bool:
    datum = value.datum
    return (_is_decimal(value) and isinstance(datum, pa.Scalar) and datum.is_valid
            and not -2**63 <= datum.as_py() <= 2**63 - 1)


def _dated(value: Value, other: Value) -> Value:
    """A string literal compared with a date is cast to a date (``PromoteStrings``)."""
    if (pa.types.is_date32(other.type) and _is_string(value.type)
            and isinstance(value.datum, pa.Scalar)):
        return Value(pa.scalar(_iso_date(value.datum.as_py()), pa.date32()))
    return value


def _is_numeric(value: Value) -> bool:
    return _is_integer(value) or _is_decimal(value)


def _is_string(data_type: pa.DataType) -> bool:
    return pa.types.is_string(data_type) or pa.types.is_large_string(data_type)


def _between(node: exp.Expr, recurse: Recurse) -> Value:
    value = recurse(node.this)
    low = pc.greater_equal(*_comparable(value, recurse(node.args["low"])))
    high = pc.less_equal(*_comparable(value, recurse(node.args["high"])))
    return Value(pc.and_kleene(low, high))


def _in(node: exp.Expr, recurse: Recurse) -> Value:
    """``x IN (literals)``: NULL when x is NULL (the list has no NULL), else whether found."""
    require(not node.args.get("query") and not node.args.get("unnest"), "IN (subquery)")
    value = recurse(node.this)
    items = [recurse(item) for item in node.expressions]
    require(bool(items) and all(isinstance(i.datum, pa.Scalar) and i.datum.is_valid
                                 for i in items), "IN over a non-literal or NULL")
    numbers = [value, *items]
    if all(_is_numeric(v) for v in numbers) and any(_is_decimal(v) for v in numbers):
        # one wider type for all (InConversion), integer literals at their type's precision
        _wider_decimal([_decimal_type(Value(v.datum)) for v in numbers])
    found = pc.equal(*_comparable(value, items[0]))
    for item in items[1:]:
        found = pc.or_kleene(found, pc.equal(*_comparable(value, item)))
    return Value(found)


def _logic(node: exp.Expr, recurse: Recurse) -> Value:
    a, b = recurse(node.this), recurse(node.expression)
    require(pa.types.is_boolean(a.type) and pa.types.is_boolean(b.type), "AND/OR of non-booleans")
    function = pc.and_kleene if isinstance(node, exp.And) else pc.or_kleene
    return Value(function(a.datum, b.datum))


def _not(node: exp.Expr, recurse: Recurse) -> Value:
    value = recurse(node.this)
    require(pa.types.is_boolean(value.type), "NOT of a non-boolean")
    return Value(pc.invert(value.datum))


def _is(node: exp.Expr, recurse: Recurse) -> Value:
    require(isinstance(node.expression, exp.Null), "IS other than IS [NOT] NULL")
    return Value(pc.is_null(recurse(node.this).datum))


_HANDLERS: dict[type[exp.Expr], Callable[[exp.Expr, Recurse], Value]] = {
    exp.Add: _arithmetic, exp.Sub: _arithmetic, exp.Mul: _arithmetic, exp.Neg: _negate,
    **{comparison: _compare for comparison in _COMPARISONS},
    exp.Between: _between, exp.In: _in, exp.And: _logic, exp.Or: _logic, exp.Not: _not,
    exp.Is: _is,
}

NODE_TYPES: tuple[type[exp.Expr], ...] = (
    exp.Paren, exp.Column, exp.Identifier, exp.Literal, exp.Boolean, exp.Cast, exp.DataType,
    exp.Interval, exp.Var, exp.Null, *_HANDLERS)
"""Every kind of node an expression of the subset is made of."""
