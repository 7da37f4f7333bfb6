"""Evaluate a block's rows on the driver, in Arrow, where the result is Spark's exactly.

A small change needs no Spark job when the block can be evaluated over Arrow tables (its
change feed and, for a join, its partners' rows read on the driver): :func:`evaluate`
does so for inner-join blocks whose every expression is in :mod:`ivm.arrow_expressions`'
subset, and returns None for anything else, which Spark then evaluates. Each table is
filtered by the conditions on it alone, then the tables are joined on the equalities
between their columns (:mod:`ivm.arrow_join`), and the remaining conditions are evaluated
on the joined rows.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
from sqlglot import exp

from ivm.arrow_expressions import (
    NODE_TYPES,
    FallbackError,
    broadcast,
    expression_value,
    qualified_name,
    require,
)
from ivm.arrow_join import JoinKeyError, hash_join


def evaluate(query: exp.Select, tables: Mapping[str, pa.Table]) -> pa.Table | None:
    """The rows of ``SELECT ... FROM t1, t2, ... [WHERE ...]``, computed in Arrow.

    Tables joined by ``CROSS JOIN`` or ``[INNER] JOIN ... ON`` are joined on the
    equalities between their columns (``ivm.arrow_join``), after each is filtered by the
    conditions on it alone; the other conditions are evaluated on the joined rows.

    Args:
        query: A qualified SELECT of an inner-join block (no grouping, ordering or
            DISTINCT), whose outputs have names (aliases or columns).
        tables: The table each relation name of the FROM clause reads, e.g. a change
            feed (its columns plus ``_weight`` int64) or a source's rows.

    Returns:
        One column per output, named as the output, with Spark's type for it (decimals
        as ``decimal128``; strings as Arrow ``string`` or ``large_string``, as read), one
        row per combination of rows that passes the conditions; None when the query or
        one of its values is outside the subset in the module docstring, or two tables
        have no equality between them (Spark must evaluate it).
    """
    try:
        return _select(query, tables)
    except (FallbackError, JoinKeyError, pa.ArrowInvalid, pa.ArrowNotImplementedError,
            pa.ArrowTypeError, OverflowError):
        return None


def evaluable(query: exp.Select) -> bool:
    """Whether the block's clauses and every node of its expressions are in the subset.

    Checked before anything is read: :func:`evaluate` may still fall back over the
    actual types and values (a decimal Spark would round, an integer overflow).
    """
    try:
        _tables(query)
    except FallbackError:
        return False
    where = query.args.get("where")
    conditions = [j.args.get("on") for j in query.args.get("joins") or []]
    expressions = [*query.selects, *(c for c in conditions if c is not None),
                   *([where.this] if where is not None else [])]
    return all(isinstance(node, (exp.Alias, *NODE_TYPES))
               for expression in expressions for node in expression.walk())


def _select(query: exp.Select, tables: Mapping[str, pa.Table]) -> pa.Table:
    relations = _relations(_tables(query), tables)
    rows, residual = _joined(relations, _conjuncts(query, set(relations)))
    for conjunct in residual:
        rows = _filtered(rows, conjunct)
    names = [select.alias_or_name for select in query.selects]
    values = [broadcast(expression_value(_unaliased(s), rows), rows.num_rows)
              for s in query.selects]
    return pa.table(dict(zip(names, values, strict=True)))


def _tables(query: exp.Select) -> list[exp.Table]:
    """The block's tables, when it is a plain inner-join block (else FallbackError)."""
    clauses = {name for name, value in query.args.items() if value}
    require(clauses <= {"expressions", "from_", "from", "joins", "where"},
            f"clauses {sorted(clauses)} of more than an inner-join block")
    source = query.args.get("from_") or query.args.get("from")
    if source is None:
        raise FallbackError("no FROM")
    items = [source.this]
    for join in query.args.get("joins") or []:
        parts = {name for name, value in join.args.items() if value}
        require(parts <= {"this", "on", "kind"} and join.kind in ("", "CROSS", "INNER"),
                f"{join.sql()} is not an inner join")
        items.append(join.this)
    for item in items:
        require(isinstance(item, exp.Table)
                and {n for n, v in item.args.items() if v} <= {"this", "alias", "db", "catalog"},
                f"{item.sql()} is not a plain table")
    return items


def _relations(items: list[exp.Table], tables: Mapping[str, pa.Table]
               ) -> dict[str, pa.Table]:
    """Each table of the block by its alias, with columns renamed ``alias.column``."""
    relations: dict[str, pa.Table] = {}
    for item in items:
        require(item.name in tables, f"{item.sql()} is not a given table")
        alias = item.alias_or_name.lower()
        require(alias not in relations, f"alias {alias} twice")
        rows = tables[item.name]
        names = [f"{alias}.{name.lower()}" for name in rows.column_names]
        require(len(set(names)) == len(names), f"columns of {alias} differ only by case")
        relations[alias] = rows.rename_columns(names)
    return relations


def _conjuncts(query: exp.Select, aliases: set[str]) -> list[exp.Expr]:
    """The top-level conjuncts of WHERE and of every ON, with their columns qualified."""
    conditions = [j.args.get("on") for j in query.args.get("joins") or []]
    where = query.args.get("where")
    conditions.append(where.this if where is not None else None)
    conjuncts = [c for condition in conditions if condition is not None
                 for c in _flattened(condition)]
    for conjunct in conjuncts:
        for column in conjunct.find_all(exp.Column):
            require(column.table.lower() in aliases or (not column.table and len(aliases) == 1),
                    f"column {column.sql()} of no table of the block")
    return conjuncts


def _flattened(condition: exp.Expr) -> list[exp.Expr]:
    """The conjuncts of ``a AND (b AND c)``: a, b, c (parentheses removed)."""
    while isinstance(condition, exp.Paren):
        condition = condition.this
    if isinstance(condition, exp.And):
        return _flattened(condition.this) + _flattened(condition.expression)
    return [condition]


def _aliases(conjunct: exp.Expr, relations: Mapping[str, pa.Table]) -> set[str]:
    columns = list(conjunct.find_all(exp.Column))
    return {c.table.lower() if c.table else next(iter(relations)) for c in columns}


def _joined(relations: dict[str, pa.Table], conjuncts: list[exp.Expr]
            ) -> tuple[pa.Table, list[exp.Expr]]:
    """The relations filtered by their own conditions and joined on their equalities.

    Returns:
        The joined rows and the conditions left to evaluate on them.
    """
    equalities: list[tuple[exp.EQ, str, str]] = []
    residual = []
    for conjunct in conjuncts:
        aliases = _aliases(conjunct, relations)
        if len(aliases) == 1:
            alias = next(iter(aliases))
            relations[alias] = _filtered(relations[alias], conjunct)
        elif len(aliases) == 2 and _is_column_equality(conjunct):
            assert isinstance(conjunct, exp.EQ)
            first, second = (c.table.lower() for c in (conjunct.this, conjunct.expression))
            equalities.append((conjunct, first, second))
        else:
            residual.append(conjunct)
    rows, used = _join_steps(relations, equalities)
    residual += [eq for i, (eq, _, _) in enumerate(equalities) if i not in used]
    return rows, residual


def _join_steps(relations: Mapping[str, pa.Table], equalities: list[tuple[exp.EQ, str, str]]
                ) -> tuple[pa.Table, set[int]]:
    """Join from the smallest relation, adding one connected relation at a time.

    Returns:
        The joined rows and the positions of the equalities the joins used (one that
        closes a cycle is not: the caller evaluates it on the joined rows).
    """
    start = min(relations, key=lambda a: relations[a].num_rows)
    rows, done, used = relations[start], {start}, set()
    while len(done) < len(relations):
        keys = [(i, eq, a, b) for i, (eq, a, b) in enumerate(equalities)
                if (a in done) != (b in done)]
        require(bool(keys), "tables without an equality between them")
        alias = next(b if a in done else a for _, _, a, b in keys)
        step = [(i, eq) for i, eq, a, b in keys if alias in (a, b)]
        pairs = [_key_names(eq, done) for _, eq in step]
        rows = hash_join(rows, relations[alias], [p[0] for p in pairs], [p[1] for p in pairs])
        used |= {i for i, _ in step}
        done.add(alias)
    return rows, used


def _is_column_equality(conjunct: exp.Expr) -> bool:
    return (isinstance(conjunct, exp.EQ) and isinstance(conjunct.this, exp.Column)
            and isinstance(conjunct.expression, exp.Column))


def _key_names(equality: exp.EQ, done: set[str]) -> tuple[str, str]:
    """(joined side's column, new side's column) of an equality between the two."""
    first, second = (qualified_name(c) for c in (equality.this, equality.expression))
    return (first, second) if first.split(".", 1)[0] in done else (second, first)


def _filtered(rows: pa.Table, conjunct: exp.Expr) -> pa.Table:
    mask = expression_value(conjunct, rows)
    require(pa.types.is_boolean(mask.type), f"{conjunct.sql()} is not boolean")
    return rows.filter(broadcast(mask, rows.num_rows))


def _unaliased(select: exp.Expr) -> exp.Expr:
    return select.this if isinstance(select, exp.Alias) else select
