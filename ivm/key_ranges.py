"""Restrict the tables a delta term joins to the key range of the change.

In a delta term ``dA join B``, only rows of ``B`` whose join key equals a key of
``dA`` can contribute. Adding ``B.k BETWEEN min(dA.k) AND max(dA.k)`` (literals) does
not change the term, but lets the table format skip whole data files by their
column statistics (Iceberg manifests keep each file's lower and upper bounds;
Parquet row groups too). A small change to a large table then reads the files whose
key range it overlaps instead of all of them: sideways information passing
(Ives and Taylor, "Sideways Information Passing for Push-Style Query Processing",
ICDE 2008), with the filter made static so that file pruning can use it.

When the change has few distinct keys, ``B.k IN (...)`` is added as well: Spark then
drops every partner row that cannot join before the join (Iceberg also prunes files
with an ``IN`` of up to 200 values, and keeps the ``BETWEEN`` for larger ones).

Pure functions over sqlglot expressions; the keys are found by :mod:`ivm.change_keys`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from sqlglot import exp

from ivm.shape import block_tables


@dataclass(frozen=True)
class KeyValues:
    """The values of one join column in a change feed.

    Attributes:
        low: The lowest non-null value (None: the change has none).
        high: The highest non-null value (None: the change has none).
        values: Every distinct non-null value, when there are few enough to list
            (:data:`ivm.change_keys.IN_LIST_MAX`); None otherwise.
    """

    low: object
    high: object
    values: tuple[object, ...] | None = None


def join_columns(query: exp.Select, alias: str) -> list[tuple[exp.Column, exp.Column]]:
    """Equi-join pairs ``(alias.col, other.col)`` of an inner-join block.

    Only top-level conjuncts of the ON clauses and of WHERE count: an equality under OR
    or NOT does not restrict the join.
    """
    conditions = [j.args.get("on") for j in query.args.get("joins") or []]
    where = query.args.get("where")
    conditions.append(where.this if where is not None else None)
    pairs = []
    for condition in conditions:
        if condition is None:
            continue
        for conjunct in (condition.flatten() if isinstance(condition, exp.And) else [condition]):
            pair = _column_pair(conjunct, alias)
            if pair is not None:
                pairs.append(pair)
    return pairs


def _column_pair(conjunct: exp.Expr, alias: str) -> tuple[exp.Column, exp.Column] | None:
    if not isinstance(conjunct, exp.EQ):
        return None
    left, right = conjunct.this, conjunct.expression
    if not (isinstance(left, exp.Column) and isinstance(right, exp.Column)):
        return None
    if left.table == alias and right.table != alias:
        return left, right
    if right.table == alias and left.table != alias:
        return right, left
    return None


def restricted(term: exp.Select, pairs: Sequence[tuple[exp.Column, exp.Column]],
               keys: Mapping[str, KeyValues]) -> exp.Select:
    """``term`` with ``other.col BETWEEN lo AND hi`` (and ``IN``) for each known pair.

    Args:
        term: A delta term (its tables already point at their relations).
        pairs: From :func:`join_columns` for the term's changed table.
        keys: Values by the changed table's column name; a column whose change has
            no non-null value makes the term empty (``FALSE``: NULL never joins).
    """
    others = {t.alias_or_name for t in block_tables(term)}
    conditions: list[exp.Expr] = []
    for mine, other in pairs:
        if other.table in others and mine.name in keys and comparable(mine, other):
            conditions += _conditions(other, keys[mine.name])
    return term.where(*conditions, copy=False) if conditions else term


def comparable(mine: exp.Column, other: exp.Column) -> bool:
    """Whether a value of ``mine`` restricts ``other`` as the join's ``=`` compares them.

    Only when both have one type, or both are numbers: Spark's ``=`` casts a string to
    the other side's type, but ``IN`` and ``BETWEEN`` with string literals compare as
    strings (``7 = '007'`` holds, ``7 IN ('007')`` does not).
    """
    mine_type, other_type = mine.type, other.type
    if mine_type is None or other_type is None:
        return False
    if mine_type.is_type(*exp.DataType.NUMERIC_TYPES):
        return other_type.is_type(*exp.DataType.NUMERIC_TYPES)
    return mine_type.this == other_type.this and mine_type.this != exp.DataType.Type.UNKNOWN


def _conditions(column: exp.Column, keys: KeyValues) -> list[exp.Expr]:
    """What restricts ``column`` to ``keys``: a range, and the values when listed."""
    if keys.low is None or keys.high is None:
        return [exp.false()]
    low, high = _literal(keys.low), _literal(keys.high)
    if low is None or high is None:
        return []
    conditions: list[exp.Expr] = [exp.Between(this=column.copy(), low=low, high=high)]
    literals = [_literal(v) for v in keys.values or ()]
    if len(literals) > 1 and all(literal is not None for literal in literals):
        conditions.append(exp.In(this=column.copy(), expressions=literals))
    return conditions


def _literal(value: object) -> exp.Expr | None:
    """A Spark SQL literal of ``value``; None for types this rule does not handle."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return exp.Literal.number(str(value))
    if isinstance(value, Decimal):  # str() may write 1E-7: Spark would read a double
        return exp.Literal.number(format(value, "f"))
    if isinstance(value, str):
        return exp.Literal.string(value)
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return exp.cast(exp.Literal.string(value.isoformat()), "date")
    return None
