"""Reduce a failing fuzz case to a smallest one that still fails (delta debugging, greedy).

In turn, until nothing more can go: ticks (a snapshot dropped merges two ticks' changes;
the snapshots before the failing tick are cut), rows (a row removed from every snapshot),
then the SQL (a WHERE, HAVING or join condition's conjunct or disjunct dropped, an output
column dropped). A reduction is kept when the smaller case still fails; each try runs the
case once, so the number of tries is bounded. Source: Zeller and Hildebrandt,
"Simplifying and Isolating Failure-Inducing Input" (IEEE TSE 2002).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

import sqlglot
from sqlglot import exp

from tests.fuzz.cases import Case

__all__ = ["minimize"]


def minimize(case: Case, fails: Callable[[Case], bool], max_tries: int = 200) -> Case:
    """The smallest case found that still ``fails``, trying at most ``max_tries`` cases."""
    tries = 0
    progress = True
    while progress and tries < max_tries:
        progress = False
        for candidate in _reductions(case):
            tries += 1
            if fails(candidate):
                case, progress = candidate, True
                break
            if tries >= max_tries:
                break
    return case


def _reductions(case: Case) -> Iterator[Case]:
    """Smaller cases than ``case``, the coarsest first."""
    snapshots = case.snapshots
    for start in range(1, len(snapshots) - 1):  # drop the ticks before
        yield replace(case, snapshots=snapshots[start:])
    for position in range(1, len(snapshots)):  # merge two ticks (or drop the last)
        if len(snapshots) > 2:
            yield replace(case, snapshots=snapshots[:position] + snapshots[position + 1:])
    rows = {(table, row) for snapshot in snapshots for table, table_rows in snapshot.items()
            for row in table_rows}
    for table, row in sorted(rows, key=repr):
        yield replace(case, snapshots=tuple(
            {t: [r for r in table_rows if (t, r) != (table, row)]
             for t, table_rows in snapshot.items()} for snapshot in snapshots))
    for sql in _smaller_sql(case.sql):
        yield replace(case, sql=sql)


def _smaller_sql(sql: str) -> Iterator[str]:
    """The SQL with one predicate operand or one output column less."""
    tree = sqlglot.parse_one(sql, read="spark")
    for node in list(tree.find_all(exp.And, exp.Or)):
        for kept in (node.left, node.right):
            smaller = tree.copy()
            target: exp.Expr = next(n for n in smaller.find_all(type(node)) if n == node)
            if isinstance(target.parent, exp.Paren):
                target = target.parent
            target.replace(kept.copy())
            yield smaller.sql("spark")
    for clause in ("where", "having"):
        for select in tree.find_all(exp.Select):
            if select.args.get(clause) is not None:
                smaller = tree.copy()
                found = next(s for s in smaller.find_all(exp.Select) if s == select)
                found.set(clause, None)
                yield smaller.sql("spark")
    for select in tree.find_all(exp.Select):
        if len(select.expressions) > 1 and not isinstance(select.parent, exp.SetOperation):
            for position in range(len(select.expressions)):
                smaller = tree.copy()
                found = next(s for s in smaller.find_all(exp.Select) if s == select)
                found.expressions[position].pop()
                yield smaller.sql("spark")
