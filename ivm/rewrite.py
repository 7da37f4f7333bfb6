"""Pure rewrites of a qualified view query into the queries that compute its delta.

Every function takes and returns sqlglot expressions and never touches Spark.
Table references are replaced by the names of the relations that hold a source's
snapshot or change feed; the aliases (and so every qualified column) stay as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlglot import exp

from ivm.shape import OuterJoin, block_tables
from ivm.zset import WEIGHT

Naming = Callable[[int, str], str]
"""Given a table's position in FROM order and its source name, the relation to read."""

Relation = Callable[[str, str], str]
"""``relation(role, source)``: the relation holding a source at role ``new``, ``old`` or
``delta``."""

KEY_PREFIX = "__k"
KEYS_ALIAS = "__keys"


def substitute(query: exp.Select, naming: Naming) -> exp.Select:
    """Return a copy of ``query`` whose i-th table reads relation ``naming(i, source)``."""
    copy = query.copy()
    for position, table in enumerate(block_tables(copy)):
        _point(table, naming(position, table.name))
    return copy


def at_role(query: exp.Query, role: str, relation: Relation) -> exp.Query:
    """A copy of ``query`` (any shape, set operations too) reading every source at ``role``."""
    copy = query.copy()
    ctes = {cte.alias for cte in copy.find_all(exp.CTE)}
    for table in list(copy.find_all(exp.Table)):
        if table.name not in ctes:
            _point(table, relation(role, table.name))
    return copy


def _point(table: exp.Table, name: str) -> None:
    table.set("this", exp.to_identifier(name))
    table.set("db", None)
    table.set("catalog", None)


def weighted(query: exp.Select, weight: int) -> exp.Select:
    """``query`` with one more output, the constant ``_weight`` (+1 or -1, bigint)."""
    literal = exp.cast(exp.Literal.number(weight), exp.DataType.build("bigint"))
    return query.select(literal.as_(WEIGHT), copy=False)


def delta_term(query: exp.Select, changed: int, relation: Relation,
               order: Sequence[int] | None = None) -> exp.Select:
    """One term of the telescoping delta of an inner-join block.

    d(T0 x ... x Tn) = sum over i of: T0..T(i-1) at new, dTi, T(i+1)..Tn at old
    (the bilinear rule generalised to N inputs). The term's weight is dTi's weight.
    The sum telescopes in any order of the tables: with ``order``, the tables before
    the changed one in it are read at new, those after it at old.

    Args:
        query: The qualified SELECT (no grouping).
        changed: Position of the table read as a change feed in this term.
        relation: Gives the relation name of a source at a role.
        order: The block's table positions in the order the terms telescope in (the
            same for every term of one delta); None for their order in the query.

    Returns:
        The term's query: the block's outputs plus ``_weight``.
    """
    rank = {position: index for index, position in enumerate(order)} if order else None

    def naming(position: int, source: str) -> str:
        if position == changed:
            return relation("delta", source)
        before = rank[position] < rank[changed] if rank else position < changed
        return relation("new" if before else "old", source)

    term = substitute(query, naming)
    alias = block_tables(term)[changed].alias_or_name
    return term.select(exp.column(WEIGHT, table=alias).as_(WEIGHT), copy=False)


def key_projection(query: exp.Select, keys: Sequence[exp.Expr]) -> exp.Select:
    """``SELECT DISTINCT <key> AS __k0, ... FROM <the block's FROM, JOINs and WHERE>``."""
    projection = query.copy()
    for clause in ("group", "having", "order", "limit", "qualify"):
        projection.set(clause, None)
    projection.set("expressions", [k.copy().as_(f"{KEY_PREFIX}{i}") for i, k in enumerate(keys)])
    projection.set("distinct", exp.Distinct())
    return projection


def affected_groups(
    query: exp.Select, keys: Sequence[exp.Expr], role: str, keys_view: str | None,
    weight: int, relation: Relation,
) -> exp.Select:
    """The block's output for the affected keys, at one version, as a Z-set.

    The rows are restricted before grouping or windowing, so whole groups (or window
    partitions) are recomputed.

    Args:
        query: The qualified SELECT.
        keys: The grouping or PARTITION BY expressions.
        role: ``new`` or ``old``: which snapshot of every source to read.
        keys_view: Relation holding the affected keys (``__k0``...), or None to keep all
            rows (an aggregate without GROUP BY has one group).
        weight: +1 for the new rows, -1 for the old ones.
        relation: Gives the relation name of a source at a role.
    """
    side = substitute(query, lambda _, source: relation(role, source))
    if keys_view is not None and keys:
        on = exp.and_(*[
            exp.NullSafeEQ(this=exp.column(f"{KEY_PREFIX}{i}", table=KEYS_ALIAS),
                           expression=k.copy())
            for i, k in enumerate(keys)
        ])
        side = side.join(exp.to_table(keys_view).as_(KEYS_ALIAS), on=on, join_type="left semi",
                         copy=False)
    return weighted(side, weight)


def join_keys_term(
    query: exp.Select, outer: OuterJoin, alias: str, relation: Relation
) -> exp.Select:
    """The join keys of one table's change feed: ``SELECT DISTINCT <its keys> AS __k0 ...``."""
    table = next(t for t in block_tables(query) if t.alias_or_name == alias)
    keys = outer.left_keys if alias == outer.left else outer.right_keys
    source = exp.to_table(relation("delta", table.name)).as_(alias)
    return exp.select(*[k.copy().as_(f"{KEY_PREFIX}{i}") for i, k in enumerate(keys)]).from_(
        source).distinct()


def restrict_to_join_keys(
    query: exp.Select, outer: OuterJoin, role: str, keys_view: str, relation: Relation
) -> exp.Select:
    """The block at ``role`` with both join inputs cut down to rows whose key is affected.

    Every output row of an outer equi-join comes from input rows sharing one join key
    (or from one unmatched row), so the output for the affected keys is the join of
    the inputs restricted to those keys. Null keys compare equal here (``<=>``) so that
    unmatched rows with a null key are recomputed too.
    """
    copy = query.copy()
    for table in block_tables(copy):
        alias = table.alias_or_name
        keys = outer.left_keys if alias == outer.left else outer.right_keys
        on = exp.and_(*[
            exp.NullSafeEQ(this=k.copy(), expression=exp.column(f"{KEY_PREFIX}{i}",
                                                                  table=KEYS_ALIAS))
            for i, k in enumerate(keys)
        ])
        inner = (exp.select(exp.Star()).from_(exp.to_table(relation(role, table.name)).as_(alias))
                 .join(exp.to_table(keys_view).as_(KEYS_ALIAS), on=on, join_type="left semi"))
        table.replace(exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(alias))))
    return copy


def union_all(queries: Sequence[exp.Query]) -> exp.Query:
    """Combine queries with UNION ALL (at least one query)."""
    result = queries[0]
    for query in queries[1:]:
        result = exp.union(result, query, distinct=False)
    return result
