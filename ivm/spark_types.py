"""The type-level guard of the local engine: Spark's type of each expression, or a refusal.

The local engine (:mod:`ivm.local_engine`) runs a block's SQL on DuckDB. DuckDB's answer
equals Spark's (non-ANSI mode) only where both type the expression alike, so before a
query runs each expression is typed here by Spark's rules and rewritten so that DuckDB
computes in exactly that type; anything whose Spark type or value DuckDB could not match
is refused with a reason, and Spark evaluates it. Nothing is evaluated here: the values
are DuckDB's.

The subset:

- column references and literals: integers, decimals (``1.25``), strings, booleans,
  ``DATE 'YYYY-MM-DD'``, and a date literal plus or minus ``INTERVAL 'n' DAY|MONTH|YEAR``
  (Spark's ``DateAddYMInterval``: the day is clamped to the month's last, as DuckDB does;
  a date, where DuckDB would give a timestamp);
- ``+``, ``-``, ``*`` and unary ``-`` over integers and decimals, typed by Spark's
  ``DecimalPrecision`` (integer literals take their minimal precision; a result above 38
  digits keeps ``max(38 - integer digits, min(scale, 6))`` digits of scale). DuckDB computes
  them in Spark's result type, 38-digit intermediates for decimals, so an integer overflow
  (Spark wraps) or a 38-digit overflow (Spark: NULL) is a DuckDB error, and the block falls
  back to Spark (the local engine turns off DuckDB's expression rewriter, which would move a
  constant across a comparison, ``x + 1 < 0`` into ``x < -1``, and so never compute the
  overflowing sum). Literals are cast to their Spark type (DuckDB would type ``2147483648``
  as a bigint, or a long decimal literal as a double). A decimal result Spark would round
  is refused;
- comparisons of two numbers (their wider decimal type at most 38 digits), two strings
  (both engines compare UTF-8 bytes), two booleans, two dates, two doubles of one table
  (NaN equals NaN and sorts last, -0.0 equals 0.0 in both; an equality of doubles of two
  tables is refused: DuckDB's hash join matches neither NaN with NaN nor -0.0 with 0.0, where
  Spark normalizes join keys), a double and an integer or a decimal literal of at most 15
  digits (both become doubles, ``ImplicitTypeCasts``), or a date and an ISO date string
  (``PromoteStrings``);
  ``BETWEEN``, ``IN`` over literals, ``IS [NOT] NULL``, ``AND``, ``OR`` and ``NOT``
  (three-valued logic in both).

Refused: arithmetic on doubles, division, functions, CASE, LIKE, casts other than the date
literal's. Source: Spark 3.5 ``DecimalPrecision``, ``DecimalType.adjustPrecisionScale``,
``TypeCoercion.PromoteStrings`` and ``InConversion``; DuckDB 1.5's decimal arithmetic
(inputs of at most 18 digits are computed in 64 bits, hence the 38-digit casts).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

import pyarrow as pa
from sqlglot import exp

from ivm.errors import IvmError

MAX_PRECISION = 38
"""Spark's (and DuckDB's) largest decimal precision."""
MIN_ADJUSTED_SCALE = 6
"""Spark keeps at least this many digits of scale when it cuts a result to 38 digits."""
INTERVAL_LIMITS = {"DAY": 36_600, "MONTH": 1_200, "YEAR": 100}
"""Largest interval amount taken, by unit: with dates of years 200-9800, a shift stays
inside years 1-9999, where both engines' calendars agree."""
YEARS = (200, 9800)
EXACT_DOUBLE_DIGITS = 15
"""Most digits of a decimal literal compared with a double: it and its power of ten are
then exact doubles, so every conversion rounds once, to the same nearest double."""

_INT_PRECISION = {pa.int8(): 3, pa.int16(): 5, pa.int32(): 10, pa.int64(): 20}
"""The decimal precision of an integer in decimal arithmetic (Spark's ``forType``)."""
_SQL_INTEGERS = {pa.int8(): exp.DataType.Type.TINYINT, pa.int16(): exp.DataType.Type.SMALLINT,
                 pa.int32(): exp.DataType.Type.INT, pa.int64(): exp.DataType.Type.BIGINT}
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


class RefusedError(IvmError):
    """The expression is outside the local engine's subset: Spark evaluates the block.

    Internal to :mod:`ivm.local_engine`, which turns it into a fallback; never raised to a
    caller of :mod:`ivm`.
    """


@dataclass(frozen=True)
class Typed:
    """An expression rewritten for DuckDB, with the type Spark gives it.

    Attributes:
        sql: The expression as DuckDB should compute it (casts to Spark's types added).
        type: Spark's type of it, as an Arrow type (decimals as ``decimal128``).
        integer_literal: The value of an integer literal (Spark types it by its digits
            in decimal arithmetic), else None.
        decimal_literal: The value of a decimal literal, else None.
        date_literal: The value of a date literal, else None (also for a date literal
            shifted by an interval, which is not shifted again).
    """

    sql: exp.Expr
    type: pa.DataType
    integer_literal: int | None = None
    decimal_literal: str | None = None
    date_literal: datetime.date | None = None


Columns = Mapping[tuple[str, str], pa.DataType]
"""The Arrow type of each column, by (table alias, column name), both in lower case."""


def require(condition: bool, reason: str, *nodes: exp.Expr) -> None:
    """Raise :class:`RefusedError` with ``reason`` unless ``condition`` holds.

    Each ``{}`` of ``reason`` is filled with the SQL of one of ``nodes``, generated only
    when the condition fails (generating SQL costs more than the checks).
    """
    if not condition:
        raise RefusedError(reason.format(*(node.sql() for node in nodes)) if nodes else reason)


def typed(node: exp.Expr, columns: Columns) -> Typed:
    """Spark's type of ``node``, and ``node`` rewritten to compute it so on DuckDB.

    Args:
        node: A qualified expression of a block (an unqualified column when the block
            reads one table).
        columns: The types of the block's columns.

    Returns:
        The rewritten expression and its type.

    Raises:
        RefusedError: The expression is outside the subset (module docstring).
    """
    if isinstance(node, exp.Paren):
        inner = typed(node.this, columns)
        return Typed(exp.Paren(this=inner.sql), inner.type, inner.integer_literal,
                     inner.decimal_literal, inner.date_literal)
    if isinstance(node, exp.Column):
        return Typed(node.copy(), _column_type(node, columns))
    if isinstance(node, (exp.Literal, exp.Boolean, exp.Cast)):
        return _literal(node)
    rule = _RULES.get(type(node))
    if rule is None:
        raise RefusedError(f"{type(node).__name__} is not taken by the local engine")
    return rule(node, columns)


def _column_type(node: exp.Column, columns: Columns) -> pa.DataType:
    name = node.name.lower()
    if node.table:
        found = [columns[key] for key in [(node.table.lower(), name)] if key in columns]
    else:
        found = [t for (_, column), t in columns.items() if column == name]
    require(len(found) == 1, "column {} is missing or ambiguous", node)
    return found[0]


def _literal(node: exp.Expr) -> Typed:
    if isinstance(node, exp.Boolean):
        return Typed(node.copy(), pa.bool_())
    if isinstance(node, exp.Cast):  # DATE '1995-03-15' parses as a cast
        require(node.to.is_type(exp.DataType.Type.DATE) and isinstance(node.this, exp.Literal)
                and node.this.is_string, "a cast other than DATE '...'")
        day = _iso_date(node.this.this)
        return Typed(_date_sql(day), pa.date32(), date_literal=day)
    assert isinstance(node, exp.Literal)
    text = node.this
    if node.is_string:
        return Typed(node.copy(), pa.string())
    if re.fullmatch(r"\d+", text):
        number = int(text)
        require(number < 2**63, f"integer literal {text} out of bigint")
        data_type = pa.int32() if number < 2**31 else pa.int64()
        return Typed(_cast(node.copy(), data_type), data_type, integer_literal=number)
    match = re.fullmatch(r"(\d*)\.(\d+)", text)
    require(match is not None, f"numeric literal {text} (Spark types it as double)")
    assert match is not None
    digits = (match.group(1) + match.group(2)).lstrip("0") or "0"
    scale = len(match.group(2))
    precision = max(len(digits), scale)
    require(precision <= MAX_PRECISION, f"decimal literal {text} out of range")
    decimal = pa.decimal128(precision, scale)  # from text: DuckDB reads long literals as doubles
    return Typed(_cast(exp.Literal.string(text), decimal), decimal, decimal_literal=text)


def _iso_date(text: str) -> datetime.date:
    require(bool(_ISO_DATE.fullmatch(text)), f"date literal {text!r} is not YYYY-MM-DD")
    try:
        day = datetime.date.fromisoformat(text)
    except ValueError as error:
        raise RefusedError(f"invalid date {text!r}") from error
    require(YEARS[0] <= day.year <= YEARS[1], f"date literal {text!r} near the calendar's ends")
    return day


def _date_sql(day: datetime.date) -> exp.Expr:
    return exp.cast(exp.Literal.string(day.isoformat()), exp.DataType.Type.DATE)


def _cast(node: exp.Expr, data_type: pa.DataType) -> exp.Expr:
    """``CAST(node AS <data_type>)`` in SQL types (built, not parsed: this runs per tick)."""
    if pa.types.is_decimal(data_type):
        params = [exp.DataTypeParam(this=exp.Literal.number(n))
                  for n in (data_type.precision, data_type.scale)]
        target = exp.DataType(this=exp.DataType.Type.DECIMAL, expressions=params)
    else:
        target = exp.DataType(this=_SQL_INTEGERS[data_type])
    return exp.Cast(this=node, to=target)


def _arithmetic(node: exp.Expr, columns: Columns) -> Typed:
    left, right = node.this, node.expression
    if isinstance(left, exp.Interval) or isinstance(right, exp.Interval):
        return _date_shift(node, columns)
    a, b = typed(left, columns), typed(right, columns)
    if _is_decimal(a) or _is_decimal(b):
        return _decimal_arithmetic(node, a, b)
    require(_is_integer(a) and _is_integer(b), "{} is not integer arithmetic", node)
    wider = max(a.type, b.type, key=lambda t: _INT_PRECISION[t])
    sql = type(node)(this=_cast(a.sql, wider), expression=_cast(b.sql, wider))
    return Typed(sql, wider)


def _date_shift(node: exp.Expr, columns: Columns) -> Typed:
    """``DATE 'x' +/- INTERVAL 'n' DAY|MONTH|YEAR``: a date, as Spark types it."""
    date, interval = node.this, node.expression
    require(isinstance(interval, exp.Interval) and not isinstance(node, exp.Mul),
            "interval arithmetic")
    assert isinstance(interval, exp.Interval)
    unit = interval.args.get("unit")
    unit_name = unit.name.upper() if unit is not None else ""
    require(unit_name in INTERVAL_LIMITS, "an interval not in days, months or years")
    amount = interval.this
    require(isinstance(amount, exp.Literal) and re.fullmatch(r"-?\d{1,6}", amount.this) is not None
            and abs(int(amount.this)) <= INTERVAL_LIMITS[unit_name],
            "an interval that is not a small whole number")
    base = typed(date, columns)
    require(base.date_literal is not None, "interval arithmetic on a column")
    shifted = type(node)(this=base.sql, expression=exp.Interval(
        this=exp.Literal.string(amount.this), unit=exp.var(unit_name)))
    return Typed(exp.cast(shifted, exp.DataType.Type.DATE), pa.date32())


def _decimal_arithmetic(node: exp.Expr, a: Typed, b: Typed) -> Typed:
    """Spark's decimal ``+``, ``-``, ``*``: 38-digit operands on DuckDB, Spark's result type."""
    (p1, s1), (p2, s2) = _decimal_type(a), _decimal_type(b)
    if isinstance(node, exp.Mul):
        precision, scale = p1 + p2 + 1, s1 + s2
    else:
        scale = max(s1, s2)
        precision = max(p1 - s1, p2 - s2) + scale + 1
    if precision > MAX_PRECISION:  # Spark cuts the type; it rounds if the scale shrinks
        adjusted = max(MAX_PRECISION - (precision - scale), min(scale, MIN_ADJUSTED_SCALE))
        require(adjusted == scale, "{}: Spark rounds it to scale " + str(adjusted), node)
        precision = MAX_PRECISION
    result = pa.decimal128(precision, scale)
    operands = (_cast(a.sql, pa.decimal128(MAX_PRECISION, s1)),
                _cast(b.sql, pa.decimal128(MAX_PRECISION, s2)))
    return Typed(_cast(type(node)(this=operands[0], expression=operands[1]), result), result)


def _decimal_type(value: Typed) -> tuple[int, int]:
    """(precision, scale) Spark gives an operand of decimal arithmetic."""
    if _is_decimal(value):
        return value.type.precision, value.type.scale
    require(_is_integer(value), f"{value.type} in decimal arithmetic")
    if value.integer_literal is not None:
        return max(len(str(abs(value.integer_literal))), 1), 0
    return _INT_PRECISION[value.type], 0


def _negate(node: exp.Expr, columns: Columns) -> Typed:
    """``-x``; ``-<digits>`` is one literal to Spark's parser, typed by its signed value."""
    value = typed(node.this, columns)
    require(_is_integer(value) or _is_decimal(value), f"-{value.type}")
    if isinstance(node.this, exp.Literal) and value.integer_literal is not None:
        number = -value.integer_literal  # cast after the minus: 2147483648 is no int
        data_type = pa.int32() if number >= -2**31 else pa.int64()
        return Typed(_cast(exp.Neg(this=node.this.copy()), data_type), data_type,
                     integer_literal=number)
    literal = f"-{value.decimal_literal}" if value.decimal_literal is not None else None
    return Typed(exp.Neg(this=exp.Paren(this=value.sql)), value.type, decimal_literal=literal)


def _is_decimal(value: Typed) -> bool:
    return pa.types.is_decimal(value.type)


def _is_integer(value: Typed) -> bool:
    return value.type in _INT_PRECISION


def _is_numeric(value: Typed) -> bool:
    return _is_integer(value) or _is_decimal(value)


def _compare(node: exp.Expr, columns: Columns) -> Typed:
    a, b = _comparable(typed(node.this, columns), typed(node.expression, columns))
    tables = {c.table.lower() for c in node.find_all(exp.Column)}
    require(not (isinstance(node, (exp.EQ, exp.NEQ)) and pa.types.is_floating(a.type)
                 and len(tables) > 1),
            "{}: an equality of doubles of two tables (a join on NaN or -0.0)", node)
    return Typed(type(node)(this=a.sql, expression=b.sql), pa.bool_())


def _comparable(a: Typed, b: Typed) -> tuple[Typed, Typed]:
    """Both sides, when Spark and DuckDB order them alike (else :class:`RefusedError`).

    Numbers compare by value in both when their wider decimal type has at most 38 digits;
    an integer against a decimal literal outside bigint is refused (Spark folds the
    comparison to a constant). A string literal compared with a date becomes a date.
    """
    a, b = _opaque(a), _opaque(b)
    if _is_numeric(a) and _is_numeric(b):
        if not (_is_integer(a) and _is_integer(b)):
            require(not (_beyond_bigint(a) and _is_integer(b))
                    and not (_beyond_bigint(b) and _is_integer(a)),
                    "an integer compared with a decimal literal outside bigint")
            _wider_decimal([_decimal_type(a), _decimal_type(b)])
        return a, b
    if pa.types.is_float64(a.type) != pa.types.is_float64(b.type):
        return _as_double(a), _as_double(b)
    a, b = _dated(a, b), _dated(b, a)
    same_kind = (_is_string, pa.types.is_boolean, pa.types.is_date32, pa.types.is_float64)
    require(any(test(a.type) and test(b.type) for test in same_kind),
            f"comparison of {a.type} with {b.type}")
    return a, b


def _opaque(value: Typed) -> Typed:
    """A double column as an expression DuckDB keeps out of the Arrow scan's filters.

    DuckDB pushes ``column <op> constant`` (and what it derives from ``NOT``/``BETWEEN``)
    into the scan of a registered Arrow table, where Arrow's compute evaluates it under
    IEEE rules: NaN > 5 is false there, true in Spark and in DuckDB's own comparisons
    (NaN is greater than every number). ``column + 0.0`` compares as the column does
    (-0.0 becomes 0.0, which equals it) and is not pushed: the expression rewriter that
    would fold it is off (:data:`ivm.local_engine.NO_REWRITES`).
    """
    if not (pa.types.is_float64(value.type) and isinstance(value.sql, exp.Column)):
        return value
    zero = exp.Cast(this=exp.Literal.number(0), to=exp.DataType(this=exp.DataType.Type.DOUBLE))
    return Typed(exp.Paren(this=exp.Add(this=value.sql, expression=zero)), value.type)


def _as_double(value: Typed) -> Typed:
    """A number compared with a double, as a double (Spark's ``ImplicitTypeCasts``).

    Both engines convert an integer to the nearest double. A decimal literal of at most
    :data:`EXACT_DOUBLE_DIGITS` digits has one nearest double, which both find (Spark
    divides its unscaled value by a power of ten, both exact doubles; DuckDB parses the
    text); a longer one, or a decimal column, is refused.
    """
    if pa.types.is_float64(value.type):
        return value
    double = exp.DataType(this=exp.DataType.Type.DOUBLE)
    if _is_integer(value):
        return Typed(exp.Cast(this=value.sql, to=double), pa.float64())
    text = value.decimal_literal
    require(text is not None and pa.types.is_decimal(value.type)
            and value.type.precision <= EXACT_DOUBLE_DIGITS,
            f"comparison of {value.type} with double")
    assert text is not None
    return Typed(exp.Cast(this=exp.Literal.string(text), to=double), pa.float64())


def _wider_decimal(types: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """The decimal type every ``(precision, scale)`` fits in; at most 38 digits."""
    scale = max(s for _, s in types)
    precision = max(p - s for p, s in types) + scale
    require(precision <= MAX_PRECISION, f"a comparison in {precision} digits")
    return precision, scale


def _beyond_bigint(value: Typed) -> bool:
    text = value.decimal_literal
    return text is not None and not -2**63 <= Decimal(text) <= 2**63 - 1


def _dated(value: Typed, other: Typed) -> Typed:
    """A string literal compared with a date is cast to a date (``PromoteStrings``)."""
    if (pa.types.is_date32(other.type) and _is_string(value.type)
            and isinstance(value.sql, exp.Literal)):
        day = _iso_date(value.sql.this)
        return Typed(_date_sql(day), pa.date32(), date_literal=day)
    return value


def _is_string(data_type: pa.DataType) -> bool:
    return pa.types.is_string(data_type) or pa.types.is_large_string(data_type)


def _between(node: exp.Expr, columns: Columns) -> Typed:
    """``x BETWEEN low AND high`` as Spark runs it: ``x >= low AND x <= high``.

    Each comparison is coerced by itself (a bigint against a double bound and an integer
    bound: a double comparison, then an exact one).
    """
    value = typed(node.this, columns)
    low, above = _comparable(typed(node.args["low"], columns), value)
    high, below = _comparable(typed(node.args["high"], columns), value)
    both = exp.and_(exp.GTE(this=above.sql, expression=low.sql),
                    exp.LTE(this=below.sql.copy(), expression=high.sql))
    return Typed(exp.Paren(this=both), pa.bool_())


def _in(node: exp.Expr, columns: Columns) -> Typed:
    """``x IN (literals)``: each item compared as Spark would, one wider type for all."""
    require(not node.args.get("query") and not node.args.get("unnest"), "IN (subquery)")
    value = typed(node.this, columns)
    items = [typed(item, columns) for item in node.expressions]
    require(bool(items) and all(_is_literal(i) for i in items), "IN over a non-literal or NULL")
    numbers = [value, *items]
    if all(_is_numeric(v) for v in numbers) and any(_is_decimal(v) for v in numbers):
        # one wider type for all (InConversion), integer literals at their type's precision
        _wider_decimal([_decimal_type(Typed(v.sql, v.type)) for v in numbers])
    compared = [_comparable(item, value)[0] for item in items]
    return Typed(exp.In(this=_opaque(value).sql, expressions=[c.sql for c in compared]),
                 pa.bool_())


def _is_literal(value: Typed) -> bool:
    return (value.integer_literal is not None or value.decimal_literal is not None
            or value.date_literal is not None or isinstance(value.sql, (exp.Literal, exp.Boolean)))


def _logic(node: exp.Expr, columns: Columns) -> Typed:
    a, b = typed(node.this, columns), typed(node.expression, columns)
    require(pa.types.is_boolean(a.type) and pa.types.is_boolean(b.type), "AND/OR of non-booleans")
    return Typed(type(node)(this=a.sql, expression=b.sql), pa.bool_())


def _not(node: exp.Expr, columns: Columns) -> Typed:
    value = typed(node.this, columns)
    require(pa.types.is_boolean(value.type), "NOT of a non-boolean")
    return Typed(exp.Not(this=value.sql), pa.bool_())


def _is(node: exp.Expr, columns: Columns) -> Typed:
    require(isinstance(node.expression, exp.Null), "IS other than IS [NOT] NULL")
    value = typed(node.this, columns)
    return Typed(exp.Is(this=value.sql, expression=exp.Null()), pa.bool_())


_RULES: dict[type[exp.Expr], Callable[[exp.Expr, Columns], Typed]] = {
    exp.Add: _arithmetic, exp.Sub: _arithmetic, exp.Mul: _arithmetic, exp.Neg: _negate,
    **{comparison: _compare for comparison in (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT,
                                               exp.GTE)},
    exp.Between: _between, exp.In: _in, exp.And: _logic, exp.Or: _logic, exp.Not: _not,
    exp.Is: _is,
}

NODE_TYPES: tuple[type[exp.Expr], ...] = (
    exp.Paren, exp.Column, exp.Identifier, exp.Literal, exp.Boolean, exp.Cast, exp.DataType,
    exp.DataTypeParam, exp.Interval, exp.Var, exp.Null, *_RULES)
"""Every kind of node an expression of the subset is made of (checked before reading)."""
