"""Which columns of each source a view reads."""

from __future__ import annotations

from collections.abc import Iterable

from sqlglot import exp
from sqlglot.optimizer.scope import traverse_scope


def used_columns(query: exp.Query, sources: Iterable[str]) -> dict[str, set[str]]:
    """The columns of each source that a qualified view query reads.

    A view is a function of these columns only, so a source's change feed can be
    projected onto them before the view reads it: the projection of a Z-set is the
    Z-set of the projections (rows that differ in other columns only cancel or add up).

    Args:
        query: The view's query qualified against the sources (``ViewPlan.query``): every
            column names its table and ``*`` is expanded.
        sources: Source names.

    Returns:
        Source name -> column names read anywhere in the query (select list, joins,
        filters, grouping, subqueries).
    """
    used: dict[str, set[str]] = {name: set() for name in sources}
    for scope in traverse_scope(query):
        for column in scope.columns:
            table = scope.sources.get(column.table)
            if isinstance(table, exp.Table) and table.name in used:
                used[table.name].add(column.name)
    return used
