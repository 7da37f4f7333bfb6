"""Incremental plans: a tree of nodes, each with the law that maintains it."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from sqlglot import exp

from ivm.laws import Law
from ivm.top_k import Ordering


@dataclass(frozen=True)
class PlanNode:
    """One operator of a view's plan.

    Attributes:
        operator: ``scan``, ``derived table``, ``join``, ``left outer join`` (``right``,
            ``full``), ``filter``, ``project``, ``aggregate``, ``window``, a set operation
            (``union all``, ``union``, ``intersect``, ``except``, ``... all``), ``top-k``,
            or ``query`` (a full recompute).
        detail: The SQL fragment the node stands for.
        law: How the node's delta is computed.
        reason: Why the node is not incremental (only with ``Law.FULL_RECOMPUTE``).
        key: The unique key of the node's output, when known.
        state: What the node reads besides its inputs' deltas, e.g. ``flights@old``.
        children: Input nodes.
        query: The SQL the node's law runs over (:func:`ivm.execute.delta` runs the tree
            node by node, by law): a set operation for its node; the block's SELECT for
            the block's top node (project, aggregate, window) and the nodes below it
            (filter, join); a derived table's body for its node; the view's query for a
            top-K or full-recompute root; None for a scan.
    """

    operator: str
    detail: str
    law: Law
    reason: str | None = None
    key: tuple[str, ...] | None = None
    state: tuple[str, ...] = ()
    children: tuple[PlanNode, ...] = ()
    query: exp.Query | None = field(default=None, repr=False, compare=False)


def block_input(node: PlanNode) -> PlanNode | None:
    """The node under a block's top node (project, aggregate, window) and its filter.

    Returns:
        A join, an outer join, a scan or a derived table; None when the node has not one
        child (it is not a block's top node), or its filter has not one.
    """
    if len(node.children) != 1:
        return None
    child = node.children[0]
    if child.operator != "filter":
        return child
    return child.children[0] if len(child.children) == 1 else None


@dataclass(frozen=True)
class ViewPlan:
    """A view compiled for incremental maintenance.

    Attributes:
        view: The view's name.
        sql: The view's SQL, qualified against the source schemas (Spark dialect).
        sources: Names of the sources the view reads, in FROM order.
        columns: The view's output column names, in order.
        key: Output columns that identify a row uniquely, or None: rows are kept
            with multiplicities (duplicates allowed).
        root: The plan tree.
        reason: Why the view is not incremental, or None when it is.
        query: The qualified sqlglot expression, as rewritten for maintenance (the root
            node's ``query``).
        original: The SQL as written, only qualified (columns resolved, ``*`` expanded):
            what a full recompute runs, so that a rewrite rule's mistake cannot hide in
            the oracle.
        top_k: How an ``ORDER BY ... LIMIT K`` view is maintained by the top-K law;
            None for other views.
    """

    view: str
    sql: str
    sources: tuple[str, ...]
    columns: tuple[str, ...]
    key: tuple[str, ...] | None
    root: PlanNode
    reason: str | None
    query: exp.Query = field(repr=False, compare=False)
    original: exp.Query = field(repr=False, compare=False)
    top_k: TopKPlan | None = field(default=None, repr=False, compare=False)

    @cached_property
    def original_sql(self) -> str:
        """:attr:`original` as Spark SQL (generated once: a tick's cache key)."""
        return self.original.sql("spark")

    @property
    def incremental(self) -> bool:
        """Whether every node of the plan is maintained incrementally."""
        return self.reason is None



@dataclass(frozen=True)
class TopKPlan:
    """An ``ORDER BY ... LIMIT K`` view as the top-K law maintains it (:mod:`ivm.top_k`).

    Attributes:
        inner: The plan of the view without ORDER BY and LIMIT (plus a hidden column per
            ORDER BY term that is not an output).
        outputs: The view's columns: the inner query's first ones.
        order: The total order of the inner rows: the view's ORDER BY, then every inner
            column ascending.
        limit: K.
        buffer_rows: K', the inner rows the buffer keeps (:func:`ivm.top_k.buffer_rows`).
    """

    inner: ViewPlan
    outputs: tuple[str, ...]
    order: tuple[Ordering, ...]
    limit: int
    buffer_rows: int
