"""Restrict the tables a delta term joins to the key range of the change.

In a delta term ``dA join B``, only rows of ``B`` whose join key equals a key of
``dA`` can contribute. Adding ``B.k BETWEEN min(dA.k) AND max(dA.k)`` (literals) does
not change the term, but lets the table format skip whole data files by their
column statistics (Iceberg manifests keep each file's lower and upper bounds;
Parquet row groups too). A small change to a large table then reads the files whose
key range it overlaps instead of all of them: sideways information passing
(Ives and Taylor, "Sideways Information Passing for Push-Style Query Processing",
ICDE 2008), with the filter made static so that file pruning can use it.

Pure functions over sqlglot expressions; the bounds are computed by the evaluator.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from decimal import Decimal

from sqlglot import exp

from ivm.shape import block_tables

Bound = tuple[object, object]
"""The lowest and highest value of a column in a change feed (None: no rows)."""


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
               bounds: Mapping[str, Bound]) -> exp.Select:
    """``term`` with ``other.col BETWEEN lo AND hi`` for each pair whose bounds are known.

    Args:
        term: A delta term (its tables already point at their relations).
        pairs: From :func:`join_columns` for the term's changed table.
        bounds: Bounds by the changed table's column name; a column whose change has
            no non-null value makes the term empty (``FALSE``: NULL never joins).
    """
    others = {t.alias_or_name for t in block_tables(term)}
    conditions: list[exp.Expr] = []
    for mine, other in pairs:
        if other.table not in others or mine.name not in bounds:
            continue
        low, high = bounds[mine.name]
        if low is None or high is None:
            conditions.append(exp.false())
            continue
        low_literal, high_literal = _literal(low), _literal(high)
        if low_literal is None or high_literal is None:
            continue
        conditions.append(exp.Between(this=other.copy(), low=low_literal, high=high_literal))
    return term.where(*conditions, copy=False) if conditions else term


def _literal(value: object) -> exp.Expr | None:
    """A Spark SQL literal of ``value``; None for types this rule does not handle."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | Decimal):
        return exp.Literal.number(str(value))
    if isinstance(value, str):
        return exp.Literal.string(value)
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return exp.cast(exp.Literal.string(value.isoformat()), "date")
    return None
