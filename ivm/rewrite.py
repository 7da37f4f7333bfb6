"""Pure rewrites of a qualified view query into the queries that compute its delta.

Every function takes and returns sqlglot expressions and never touches Spark.
Table references are replaced by the names of the relations that hold a source's
snapshot or change feed; the aliases (and so every qualified column) stay as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlglot import exp

from ivm.compiler import block_tables, group_expressions
from ivm.zset import WEIGHT

Naming = Callable[[int, str], str]
"""Given a table's position in FROM order and its source name, the relation to read."""

KEY_PREFIX = "__k"


def substitute(query: exp.Select, naming: Naming) -> exp.Select:
    """Return a copy of ``query`` whose i-th table reads relation ``naming(i, source)``."""
    copy = query.copy()
    for position, table in enumerate(block_tables(copy)):
        table.set("this", exp.to_identifier(naming(position, table.name)))
        table.set("db", None)
        table.set("catalog", None)
    return copy


def delta_term(query: exp.Select, changed: int, relation: Callable[[str, str], str]) -> exp.Select:
    """One term of the telescoping delta of an inner-join block.

    d(T0 x ... x Tn) = sum over i of: T0..T(i-1) at new, dTi, T(i+1)..Tn at old
    (the bilinear rule generalised to N inputs). The term's weight is dTi's weight.

    Args:
        query: The qualified SELECT (no grouping).
        changed: Position of the table read as a change feed in this term.
        relation: ``relation(role, source)`` gives the relation name for a role
            ``new``, ``old`` or ``delta``.

    Returns:
        The term's query: the block's outputs plus ``_weight``.
    """
    def naming(position: int, source: str) -> str:
        role = "delta" if position == changed else ("new" if position < changed else "old")
        return relation(role, source)

    term = substitute(query, naming)
    alias = block_tables(term)[changed].alias_or_name
    return term.select(exp.column(WEIGHT, table=alias).as_(WEIGHT), copy=False)


def affected_keys_term(
    query: exp.Select, changed: int, relation: Callable[[str, str], str]
) -> exp.Select:
    """The grouping keys touched by one delta term of a grouping block.

    Returns:
        ``SELECT DISTINCT <group expr> AS __k0, ...`` over the term's input rows.
    """
    term = delta_term(query, changed, relation)
    groups = group_expressions(query) or []
    for clause in ("group", "having", "order", "limit"):
        term.set(clause, None)
    term.set("expressions", [g.copy().as_(f"{KEY_PREFIX}{i}") for i, g in enumerate(groups)])
    term.set("distinct", exp.Distinct())
    return term


def affected_groups(
    query: exp.Select, role: str, keys: str | None, weight: int,
    relation: Callable[[str, str], str],
) -> exp.Select:
    """The block's output rows for the affected groups, at one version, as a Z-set.

    Args:
        query: The qualified grouping SELECT.
        role: ``new`` or ``old``: which snapshot of every source to read.
        keys: Relation holding the affected keys (``__k0``...), or None to keep all
            groups (an aggregate without GROUP BY has one group).
        weight: +1 for the new rows, -1 for the old ones.
        relation: As for :func:`delta_term`.
    """
    side = substitute(query, lambda _, source: relation(role, source))
    groups = group_expressions(query) or []
    if keys is not None and groups:
        on = exp.and_(*[
            exp.NullSafeEQ(this=exp.column(f"{KEY_PREFIX}{i}", table="__keys"), expression=g.copy())
            for i, g in enumerate(groups)
        ])
        side = side.join(exp.to_table(keys).as_("__keys"), on=on, join_type="left semi",
                         copy=False)
    literal = exp.cast(exp.Literal.number(weight), exp.DataType.build("bigint"))
    return side.select(literal.as_(WEIGHT), copy=False)


def union_all(queries: Sequence[exp.Query]) -> exp.Query:
    """Combine queries with UNION ALL (at least one query)."""
    result = queries[0]
    for query in queries[1:]:
        result = exp.union(result, query, distinct=False)
    return result
