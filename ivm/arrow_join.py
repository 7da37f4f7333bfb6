"""Inner equi-joins of Arrow tables, with Spark's ``=`` on the keys.

The tables' columns are named ``alias.column`` (see :mod:`ivm.arrow_eval`), so a join
keeps every column of both sides under distinct names. Keys are compared as Spark
compares them: NULL never matches, integers of any width and decimals of any scale by
value; strings, dates and booleans with their own kind only. Source: Acero's hash join
(``pyarrow.Table.join``).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa


class JoinKeyError(Exception):
    """Two key columns that Spark would compare after a cast Arrow does not make."""


def hash_join(left: pa.Table, right: pa.Table, left_keys: Sequence[str],
              right_keys: Sequence[str]) -> pa.Table:
    """The inner join of ``left`` and ``right`` on ``left_keys[i] = right_keys[i]``.

    Args:
        left: Columns named ``alias.column``.
        right: Columns named ``alias.column``, none of ``left``'s names.
        left_keys: Columns of ``left``.
        right_keys: Columns of ``right``, one per left key.

    Returns:
        Every column of ``left`` then of ``right``, one row per matching pair.

    Raises:
        JoinKeyError: A pair of key columns of kinds Spark would cast to compare.
    """
    left_cast, right_cast = dict(zip(left.column_names, left.columns, strict=True)), \
        dict(zip(right.column_names, right.columns, strict=True))
    names_left, names_right = [], []
    for i, (mine, theirs) in enumerate(zip(left_keys, right_keys, strict=True)):
        common = common_key_type(left[mine].type, right[theirs].type)
        names_left.append(f"__key{i}_left")
        names_right.append(f"__key{i}_right")
        left_cast[names_left[-1]] = left[mine].cast(common)
        right_cast[names_right[-1]] = right[theirs].cast(common)
    joined = pa.table(left_cast).join(pa.table(right_cast), keys=names_left,
                                      right_keys=names_right, join_type="inner",
                                      coalesce_keys=False, use_threads=False)
    return joined.select([*left.column_names, *right.column_names])


def common_key_type(left: pa.DataType, right: pa.DataType) -> pa.DataType:
    """The type both key columns are cast to, exactly (no value changes).

    Raises:
        JoinKeyError: The two types are not both integers/decimals, strings, dates or
            booleans.
    """
    if _numeric(left) and _numeric(right):
        if pa.types.is_integer(left) and pa.types.is_integer(right):
            return pa.int64()
        scale = max(_scale(left), _scale(right))
        digits = max(_precision(left) - _scale(left), _precision(right) - _scale(right))
        if digits + scale > 38:
            raise JoinKeyError(f"keys {left} and {right} need more than 38 digits")
        return pa.decimal128(digits + scale, scale)
    for test, common in ((_string, pa.large_string()), (pa.types.is_date32, pa.date32()),
                         (pa.types.is_boolean, pa.bool_())):
        if test(left) and test(right):
            return common
    raise JoinKeyError(f"keys of types {left} and {right}")


def _numeric(data_type: pa.DataType) -> bool:
    return pa.types.is_integer(data_type) or pa.types.is_decimal(data_type)


def _string(data_type: pa.DataType) -> bool:
    return pa.types.is_string(data_type) or pa.types.is_large_string(data_type)


def _scale(data_type: pa.DataType) -> int:
    return data_type.scale if pa.types.is_decimal(data_type) else 0


def _precision(data_type: pa.DataType) -> int:
    return data_type.precision if pa.types.is_decimal(data_type) else 20
