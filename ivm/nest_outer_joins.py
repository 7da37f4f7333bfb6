"""Rewrite rule: an outer join of three or more tables reads the joins before it as one table.

SQL joins a FROM clause's items from left to right (ISO/IEC 9075-2, 7.7 ``<joined
table>``): ``a JOIN b ON p RIGHT JOIN c ON q JOIN d ON r`` is
``((a JOIN b ON p) RIGHT JOIN c ON q) JOIN d ON r``. A block whose outer joins
:mod:`ivm.isolate_outer_join` could not move (a RIGHT or FULL join, or an ON reading
several tables before it) gets that parenthesization spelled out, one level at a time:

- the items before the block's last outer join become a derived table, so that join
  is a two-table outer join: ``(SELECT ... FROM a JOIN b ON p) AS _nested RIGHT JOIN c``;
- when the outer join is the block's first join, it goes into the derived table with
  its two tables, and the inner joins after it read that table.

The derived table gives each column the block reads as ``<table>__<column>``. Each level
is then a two-table outer join, maintained by affected join keys, or a block of inner
joins, maintained by the bilinear rule.

Only blocks of plain ``JOIN ... ON`` items with no subquery outside their FROM items are
rewritten; others are left for :mod:`ivm.checks` to name.

A pure function over a qualified sqlglot tree, in the style of sqlglot's optimizer rules.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlglot import exp
from sqlglot.helper import find_new_name

from ivm.shape import block_columns, block_items, join_kinds, outer_join

__all__ = ["nest_outer_joins"]

OUTER = frozenset({"LEFT", "RIGHT", "FULL"})


def nest_outer_joins(query: exp.Query) -> exp.Query:
    """Apply the rewrite to every SELECT block of ``query`` (in place), and return it.

    A rewrite copies the joins it moves, so the blocks are looked up afresh after each.
    """
    while any(_nest_one(query, select) for select in query.find_all(exp.Select)):
        pass
    return query


def _nest_one(query: exp.Query, select: exp.Select) -> bool:
    """Nest one level of the block's joins; return whether the block was rewritten."""
    kinds = join_kinds(select)
    outer = [i for i, kind in enumerate(kinds) if kind in OUTER]
    if len(kinds) < 2 or not outer or outer_join(select) is not None or not _plain(select):
        return False
    moved = max(outer[-1], 1)  # joins[:moved] go into the derived table
    joins = select.args["joins"]
    prefix = {item.alias_or_name for item in block_items(select)[:moved + 1]}
    read = _output_names(c for c in block_columns(select) if c.table in prefix)
    if not read:  # a derived table needs a column
        return False
    taken = {t.alias_or_name for t in query.find_all(exp.Table, exp.Subquery)}
    alias = find_new_name(taken, "_nested")
    body = exp.select(*(exp.column(name, table=table).as_(output)
                        for (table, name), output in read.items()))
    body.set("from_", select.args["from_"].copy())
    body.set("joins", [join.copy() for join in joins[:moved]])
    select.set("joins", joins[moved:])
    for column in block_columns(select):
        if column.table in prefix:
            column.replace(exp.column(read[column.table, column.name], table=alias))
    select.set("from_", exp.From(this=exp.Subquery(
        this=body, alias=exp.TableAlias(this=exp.to_identifier(alias)))))
    return True


def _output_names(columns: Iterable[exp.Column]) -> dict[tuple[str, str], str]:
    """A distinct output name, ``<table>__<column>``, for each column read.

    Two that would clash (``p.q__x`` and ``p__q.x``) are told apart by a suffix.
    """
    names: dict[tuple[str, str], str] = {}
    for column in columns:
        if (column.table, column.name) not in names:
            names[column.table, column.name] = find_new_name(
                set(names.values()), f"{column.table}__{column.name}")
    return names


def _plain(select: exp.Select) -> bool:
    """Whether the block's joins can be nested.

    Every join is ``[INNER | LEFT | RIGHT | FULL] JOIN ... ON``, and the block holds no
    subquery outside its FROM items (whose columns the rewrite could not rename).
    """
    joins = select.args.get("joins") or []
    if any(kind not in OUTER | {"INNER"} for kind in join_kinds(select)) or any(
            j.args.get("using") or j.args.get("on") is None or j.args.get("method")
            for j in joins):
        return False
    items = set(map(id, block_items(select)))
    nested = select.walk(prune=lambda n: id(n) in items)
    return not any(isinstance(n, exp.Query) and n is not select and id(n) not in items
                   for n in nested)

