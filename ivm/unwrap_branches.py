"""Rewrite rule: drop the parentheses around a SELECT that is a branch of a set operation.

``(SELECT ...) EXCEPT (SELECT ...)`` parses with each branch wrapped in a subquery node;
the set operation's laws read its branches as SELECT blocks, so a wrapped SELECT is
unwrapped. A wrapped set operation is kept (its parentheses fix the grouping, as in
``a EXCEPT (b EXCEPT c)``), and the compiler names it as not a SELECT block.

A pure function over a qualified sqlglot tree, in the style of sqlglot's optimizer rules.
"""

from __future__ import annotations

from sqlglot import exp

from ivm.shape import SET_OPERATIONS

__all__ = ["unwrap_branches"]


def unwrap_branches(query: exp.Query) -> exp.Query:
    """Unwrap every parenthesized SELECT branch of a set operation in ``query`` (in place)."""
    for operation in list(query.find_all(SET_OPERATIONS)):
        for side in ("this", "expression"):
            branch = operation.args.get(side)
            while (isinstance(branch, exp.Subquery) and not branch.alias
                   and isinstance(branch.this, exp.Select | exp.Subquery)
                   and not branch.args.get("order") and not branch.args.get("limit")):
                branch = branch.this
            if branch is not operation.args.get(side):
                operation.set(side, branch)
    return query
