"""Rewrite rule: ``ROW_NUMBER()`` ordered by a key of its block's rows becomes ``RANK()``.

A row's ``ROW_NUMBER`` over the whole input is one plus the number of rows ordered before
it, with ties numbered in no fixed order; its ``RANK`` is one plus the number of rows
ordered strictly before it. When the one ORDER BY expression is a key of the block's
rows (a source's key carried through filters and inner joins: never NULL, never
repeated), no two rows tie and the two functions agree on every row. As ``RANK`` the
window is maintained by the affected-range law (:mod:`ivm.rank_ranges`); a ROW_NUMBER
over values that may tie stays refused by name.

Only blocks without GROUP BY, DISTINCT or outer joins (whose NULL-extended rows could
repeat a key's NULL) are rewritten. A pure function over a qualified sqlglot tree, typed
by :func:`ivm.keys.annotate`, in the style of sqlglot's optimizer rules.
"""

from __future__ import annotations

from sqlglot import exp

from ivm.keys import SourceKeys, block_key
from ivm.shape import join_kinds, windows

__all__ = ["rank_unique_row_numbers"]


def rank_unique_row_numbers(query: exp.Query, source_keys: SourceKeys) -> exp.Query:
    """Apply the rewrite to every SELECT block of ``query`` (in place), and return it."""
    for select in query.find_all(exp.Select):
        for window in windows(select):
            if _numbered_by_key(select, window, source_keys):
                window.set("this", exp.Rank())
    return query


def _numbered_by_key(select: exp.Select, window: exp.Window, source_keys: SourceKeys) -> bool:
    """Whether ``window`` is ROW_NUMBER over the whole block, ordered by a key of its rows."""
    order = window.args.get("order")
    terms = order.expressions if order is not None else []
    if (not isinstance(window.this, exp.RowNumber) or window.args.get("partition_by")
            or window.args.get("spec") or len(terms) != 1
            or not isinstance(terms[0].this, exp.Column)):
        return False
    if select.args.get("group") or select.args.get("distinct") or any(
            kind not in {"INNER", "CROSS"} for kind in join_kinds(select)):
        return False
    column = terms[0].this
    return block_key(select, source_keys, with_where=False) == (f"{column.table}.{column.name}",)
