"""Evaluate a block's rows on the driver, in Arrow, where the result is Spark's exactly.

A small change needs no Spark job when the block's filters and projections can be
evaluated over its Arrow change feed: :func:`evaluate` does so for a subset of Spark SQL
whose every value it computes exactly as Spark does (non-ANSI mode), and returns None for
anything else, which Spark then evaluates:

- column references, integer, decimal, string and boolean literals, ``DATE '...'`` (a
  cast of an ISO date literal) and a date literal plus or minus ``INTERVAL 'n' DAY``;
- ``+``, ``-``, ``*`` and unary ``-`` over integers (an overflow, which Spark would
  wrap, falls back) and decimals, typed by Spark's rules (``DecimalPrecision``:
  integer literals take their minimal precision, and a result above 38 digits keeps
  ``max(38 - integer digits, min(scale, 6))`` digits of scale). A result Spark would
  round, or that overflows 38 digits (Spark: NULL), falls back;
- comparisons of two numbers, two strings, two booleans, two dates, or a date and an
  ISO date string; ``BETWEEN``, ``IN`` over literals, ``IS [NOT] NULL``, and ``AND``,
  ``OR``, ``NOT`` in three-valued logic.

Floating point, division, functions, CASE, LIKE and casts other than the date literal's
fall back. Source: Spark 3.5 ``DecimalPrecision``, ``DecimalType.adjustPrecisionScale``,
``TypeCoercion.PromoteStrings``; the Arrow compute functions' null semantics.
"""

from __future__ import annotations

import datetime
import decimal
import re
from collections.abc import Callable, Mapping
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


class _FallbackError(Exception):
    """The expression is outside the subset: Spark evaluates the block."""


@dataclass(frozen=True)
class _Value:
    """An evaluated expression: an array (one value per row) or a scalar.

    ``literal`` marks an integer written in the SQL, which Spark types by its digits
    when it meets a decimal.
    """

    datum: Datum
    literal: bool = False

    @property
    def type(self) -> pa.DataType:
        return self.datum.type


def evaluate(query: exp.Select, tables: Mapping[str, pa.Table]) -> pa.Table | None:
    """The rows of a one-table ``SELECT ... FROM t [WHERE ...]``, computed in Arrow.

    Args:
        query: A qualified SELECT without joins, grouping, ordering or DISTINCT, whose
            outputs have names (aliases or columns).
        tables: The table each relation name of the FROM clause reads, e.g. a change
            feed (its columns plus ``_weight`` int64).

    Returns:
        One column per output, named as the output, with Spark's type for it (decimals
        as ``decimal128``; strings as Arrow ``string`` or ``large_string``, as read), and
        the rows that pass the WHERE clause; None when the query or one of its values is
        outside the subset in the module docstring (Spark must evaluate it).
    """
    try:
        return _select(query, tables)
    except (_FallbackError, pa.ArrowInvalid, pa.ArrowNotImplementedError,
            pa.ArrowTypeError):
        return None


def _select(query: exp.Select, tables: Mapping[str, pa.Table]) -> pa.Table:
    source = query.args.get("from_") or query.args.get("from")
    unsupported = ("joins", "group", "having", "order", "limit", "distinct", "qualify",
                   "windows", "with_")
    if source is None or any(query.args.get(a) for a in unsupported):
        raise _FallbackError("not a one-table block")
    table = source.this
    if not isinstance(table, exp.Table) or table.name not in tables:
        raise _FallbackError("FROM is not a given table")
    rows = tables[table.name]
    alias = table.alias_or_name
    where = query.args.get("where")
    if where is not None:
        mask = _value(where.this, alias, rows)
        _require(pa.types.is_boolean(mask.type), "WHERE is not boolean")
        rows = rows.filter(_broadcast(mask, rows.num_rows))
    names = [select.alias_or_name for select in query.selects]
    values = [_broadcast(_value(_unaliased(s), alias, rows), rows.num_rows)
              for s in query.selects]
    return pa.table(dict(zip(names, values, strict=True)))


def _unaliased(select: exp.Expr) -> exp.Expr:
    return select.this if isinstance(select, exp.Alias) else select


def _broadcast(value: _Value, length: int) -> pa.Array | pa.ChunkedArray:
    datum = value.datum
    if isinstance(datum, pa.Scalar):
        return pa.repeat(datum, length)
    return datum


def _require(condition: bool, reason: str) -> None:
    if not condition:
        raise _FallbackError(reason)


def _value(node: exp.Expr, alias: str, rows: pa.Table) -> _Value:
    """Evaluate one expression over ``rows`` (the table ``alias`` names)."""
    def recurse(child: exp.Expr) -> _Value:
        return _value(child, alias, rows)

    if isinstance(node, exp.Paren):
        return recurse(node.this)
    if isinstance(node, exp.Column):
        return _column(node, alias, rows)
    if isinstance(node, (exp.Literal, exp.Boolean, exp.Cast, exp.Interval)):
        return _literal(node)
    handler = _HANDLERS.get(type(node))
    if handler is None:
        raise _FallbackError(f"{type(node).__name__} is not evaluated on the driver")
    return handler(node, recurse)


def _column(node: exp.Column, alias: str, rows: pa.Table) -> _Value:
    _require(node.table in ("", alias), f"column {node.sql()} of another table")
    names = {name.lower(): name for name in rows.column_names}
    name = names.get(node.name.lower())
    _require(name is not None, f"no column {node.name}")
    return _Value(rows[name])


def _literal(node: exp.Expr) -> _Value:
    if isinstance(node, exp.Boolean):
        return _Value(pa.scalar(bool(node.this), pa.bool_()))
    if isinstance(node, exp.Cast):  # DATE '1995-03-15' parses as a cast
        _require(node.to.is_type(exp.DataType.Type.DATE) and isinstance(node.this, exp.Literal)
                 and node.this.is_string, "a cast other than DATE '...'")
        return _Value(pa.scalar(_iso_date(node.this.this), pa.date32()))
    _require(isinstance(node, exp.Literal), f"{node.sql()} is not a literal")
    text = node.this
    if node.is_string:
        return _Value(pa.scalar(text, pa.string()))
    if re.fullmatch(r"\d+", text):
        number = int(text)
        _require(number < 2**63, f"integer literal {text} out of bigint")
        return _Value(pa.scalar(number, pa.int32() if number < 2**31 else pa.int64()),
                      literal=True)
    match = re.fullmatch(r"(\d*)\.(\d+)", text)
    _require(match is not None, f"numeric literal {text} (Spark types it as double)")
    assert match is not None
    digits = (match.group(1) + match.group(2)).lstrip("0") or "0"
    scale = len(match.group(2))
    precision = max(len(digits), scale)
    _require(precision <= MAX_PRECISION, f"decimal literal {text} out of range")
    return _Value(pa.scalar(decimal.Decimal(text), pa.decimal128(precision, scale)))


def _iso_date(text: str) -> datetime.date:
    _require(bool(_ISO_DATE.fullmatch(text)), f"date literal {text!r} is not YYYY-MM-DD")
    try:
        return datetime.date.fromisoformat(text)
    except ValueError as error:
        raise _FallbackError(f"invalid date {text!r}") from error


Recurse = Callable[[exp.Expr], _Value]


def _arithmetic(node: exp.Expr, recurse: Recurse) -> _Value:
    left, right = node.this, node.expression
    if isinstance(right, exp.Interval) or isinstance(left, exp.Interval):
        return _date_shift(node, recurse)
    a, b = recurse(left), recurse(right)
    if _is_decimal(a) or _is_decimal(b):
        return _decimal_arithmetic(node, a, b)
    _require(_is_integer(a) and _is_integer(b), f"{node.sql()} is not integer arithmetic")
    return _Value(_INTEGER_ARITHMETIC[type(node)](a.datum, b.datum), a.literal and b.literal)


_INTEGER_ARITHMETIC: dict[type[exp.Expr], Callable[..., Datum]] = {
    exp.Add: pc.add_checked, exp.Sub: pc.subtract_checked, exp.Mul: pc.multiply_checked}
"""Checked: an overflow (Spark would wrap it) raises ``ArrowInvalid`` and falls back."""


def _date_shift(node: exp.Expr, recurse: Recurse) -> _Value:
    """``DATE 'x' +/- INTERVAL 'n' DAY``: a date literal (what Spark folds it to)."""
    date, interval = node.this, node.expression
    _require(isinstance(interval, exp.Interval) and not isinstance(node, exp.Mul),
             "interval arithmetic")
    assert isinstance(interval, exp.Interval)
    unit = interval.args.get("unit")
    _require(unit is not None and unit.name.upper() == "DAY", "an interval not in days")
    amount = interval.this
    _require(isinstance(amount, exp.Literal) and re.fullmatch(r"-?\d+", amount.this) is not None,
             "an interval that is not a whole number of days")
    base = recurse(date)
    _require(isinstance(base.datum, pa.Scalar) and pa.types.is_date32(base.type),
             "interval arithmetic on a column")
    days = int(amount.this) * (-1 if isinstance(node, exp.Sub) else 1)
    return _Value(pa.scalar(base.datum.as_py() + datetime.timedelta(days=days), pa.date32()))


def _decimal_arithmetic(node: exp.Expr, a: _Value, b: _Value) -> _Value:
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
        _require(adjusted == scale, f"{node.sql()}: Spark rounds it to scale {adjusted}")
        precision = MAX_PRECISION
    exact = function(_as_decimal256(a, p1, s1), _as_decimal256(b, p2, s2))
    return _Value(exact.cast(pa.decimal128(precision, scale)))  # overflow: ArrowInvalid


def _decimal_type(value: _Value) -> tuple[int, int]:
    """(precision, scale) Spark gives an operand of decimal arithmetic."""
    if _is_decimal(value):
        return value.type.precision, value.type.scale
    _require(_is_integer(value), f"{value.type} in decimal arithmetic")
    if value.literal:
        return max(len(str(abs(value.datum.as_py()))), 1), 0
    return _INT_PRECISION[value.type], 0


def _as_decimal256(value: _Value, precision: int, scale: int) -> Datum:
    datum = value.datum
    if _is_integer(value):  # Arrow casts an integer to a decimal of all its type's digits
        datum = datum.cast(pa.decimal256(_INT_PRECISION[value.type], 0))
    return datum.cast(pa.decimal256(precision, scale))


def _negate(node: exp.Expr, recurse: Recurse) -> _Value:
    value = recurse(node.this)
    _require(_is_integer(value) or _is_decimal(value), f"-{value.type}")
    function = pc.negate if _is_decimal(value) else pc.negate_checked
    return _Value(function(value.datum), value.literal)


def _is_decimal(value: _Value) -> bool:
    return pa.types.is_decimal(value.type)


def _is_integer(value: _Value) -> bool:
    return value.type in _INT_PRECISION


_COMPARISONS: dict[type[exp.Expr], Callable[..., Datum]] = {
    exp.EQ: pc.equal, exp.NEQ: pc.not_equal, exp.LT: pc.less, exp.LTE: pc.less_equal,
    exp.GT: pc.greater, exp.GTE: pc.greater_equal}


def _compare(node: exp.Expr, recurse: Recurse) -> _Value:
    a, b = _comparable(recurse(node.this), recurse(node.expression))
    return _Value(_COMPARISONS[type(node)](a, b))


def _comparable(a: _Value, b: _Value) -> tuple[Datum, Datum]:
    """Both sides in one Arrow type that orders them as Spark does."""
    if _is_numeric(a) and _is_numeric(b):
        if _is_integer(a) and _is_integer(b):
            return a.datum, b.datum
        (p1, s1), (p2, s2) = _decimal_type(a), _decimal_type(b)
        scale = max(s1, s2)
        precision = max(p1 - s1, p2 - s2) + scale
        return _as_decimal256(a, precision, scale), _as_decimal256(b, precision, scale)
    a, b = _dated(a, b), _dated(b, a)
    for test in (_is_string, pa.types.is_boolean, pa.types.is_date32):
        if test(a.type) and test(b.type):
            return a.datum, b.datum
    raise _FallbackError(f"comparison of {a.type} with {b.type}")


def _dated(value: _Value, other: _Value) -> _Value:
    """A string literal compared with a date is cast to a date (``PromoteStrings``)."""
    if (pa.types.is_date32(other.type) and _is_string(value.type)
            and isinstance(value.datum, pa.Scalar)):
        return _Value(pa.scalar(_iso_date(value.datum.as_py()), pa.date32()))
    return value


def _is_numeric(value: _Value) -> bool:
    return _is_integer(value) or _is_decimal(value)


def _is_string(data_type: pa.DataType) -> bool:
    return pa.types.is_string(data_type) or pa.types.is_large_string(data_type)


def _between(node: exp.Expr, recurse: Recurse) -> _Value:
    value = recurse(node.this)
    low = pc.greater_equal(*_comparable(value, recurse(node.args["low"])))
    high = pc.less_equal(*_comparable(value, recurse(node.args["high"])))
    return _Value(pc.and_kleene(low, high))


def _in(node: exp.Expr, recurse: Recurse) -> _Value:
    """``x IN (literals)``: NULL when x is NULL (the list has no NULL), else whether found."""
    _require(not node.args.get("query") and not node.args.get("unnest"), "IN (subquery)")
    value = recurse(node.this)
    found = None
    for item in node.expressions:
        literal = recurse(item)
        _require(isinstance(literal.datum, pa.Scalar) and literal.datum.is_valid,
                 "IN over a non-literal or NULL")
        match = pc.equal(*_comparable(value, literal))
        found = match if found is None else pc.or_kleene(found, match)
    _require(found is not None, "IN ()")
    return _Value(found)


def _logic(node: exp.Expr, recurse: Recurse) -> _Value:
    a, b = recurse(node.this), recurse(node.expression)
    _require(pa.types.is_boolean(a.type) and pa.types.is_boolean(b.type), "AND/OR of non-booleans")
    function = pc.and_kleene if isinstance(node, exp.And) else pc.or_kleene
    return _Value(function(a.datum, b.datum))


def _not(node: exp.Expr, recurse: Recurse) -> _Value:
    value = recurse(node.this)
    _require(pa.types.is_boolean(value.type), "NOT of a non-boolean")
    return _Value(pc.invert(value.datum))


def _is(node: exp.Expr, recurse: Recurse) -> _Value:
    _require(isinstance(node.expression, exp.Null), "IS other than IS [NOT] NULL")
    return _Value(pc.is_null(recurse(node.this).datum))


_HANDLERS: dict[type[exp.Expr], Callable[[exp.Expr, Recurse], _Value]] = {
    exp.Add: _arithmetic, exp.Sub: _arithmetic, exp.Mul: _arithmetic, exp.Neg: _negate,
    **{comparison: _compare for comparison in _COMPARISONS},
    exp.Between: _between, exp.In: _in, exp.And: _logic, exp.Or: _logic, exp.Not: _not,
    exp.Is: _is,
}
