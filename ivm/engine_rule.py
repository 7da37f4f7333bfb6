"""Which engine may run a view's ticks: the part of the rule a plan decides alone.

Two engines compute a view's delta: Spark, which runs every plan, and the local engine
(DuckDB in process, :mod:`ivm.local_engine`), which runs a tick with no Spark job when the
plan allows it (:func:`local_refusal`: a block of filters, projections and inner joins, or
an aggregate over one, by the invertible law or by affected-key recompute
(:mod:`ivm.local_recompute`), each expression in :mod:`ivm.spark_types`'s subset) and the
tick's sizes do (:data:`LOCAL_LIMITS`).
``lakehouse explain`` and ``docs/sql-coverage.md`` show this rule's verdict.
"""

from __future__ import annotations

from typing import Literal

from sqlglot import exp

from ivm import driver_output
from ivm.aggregate_form import aggregate_form
from ivm.driver_delta import DRIVER_READ_MAX_ROWS, block_refusal
from ivm.laws import Law
from ivm.local_recompute import GroupedBlock, grouped_block
from ivm.plan import ViewPlan, block_input
from ivm.state_local import DRIVER_DELTA_MAX_ROWS, DRIVER_STATE_MAX_ROWS

__all__ = ["LOCAL_LIMITS", "Engine", "local_refusal", "plain_block", "recomputed_block"]

Engine = Literal["local", "spark"]
"""The engine a tick ran on."""

LOCAL_LIMITS = (
    f"aggregate state of at most {DRIVER_STATE_MAX_ROWS:,} groups, change feeds in Arrow of "
    f"at most {DRIVER_DELTA_MAX_ROWS:,} rows, each join partner read in at most "
    f"{DRIVER_READ_MAX_ROWS:,} rows (the default)")
"""The sizes within which a tick the plan allows runs on the local engine."""


def plain_block(plan: ViewPlan) -> exp.Select | None:
    """The view's query when its plan is one block of filters, projections and inner joins.

    Read from the plan's root: a projection (:data:`Law.LINEAR`) over an inner join
    (:data:`Law.BILINEAR_JOIN`) or one item, through a filter, so its delta is the union
    of its delta terms, with no state: no grouping, DISTINCT, window or outer join. None
    for any other view.
    """
    root = plan.root
    below = block_input(root)
    if root.operator != "project" or root.law is not Law.LINEAR or below is None \
            or below.law is Law.AFFECTED_KEY_RECOMPUTE or not isinstance(root.query, exp.Select):
        return None  # not a projection, or over an outer join
    return root.query


def recomputed_block(plan: ViewPlan) -> GroupedBlock | str | None:
    """The view's grouping, split for the local engine (:mod:`ivm.local_recompute`).

    Only for a view whose top node is an aggregate maintained by affected-key recompute.

    Returns:
        The split, or why the local engine cannot take it; None for any other view.
    """
    root = plan.root
    if root.law != Law.AFFECTED_KEY_RECOMPUTE or root.operator != "aggregate" \
            or not isinstance(root.query, exp.Select):
        return None
    return grouped_block(root.query)


def local_refusal(plan: ViewPlan) -> str | None:
    """Why no tick of the view can run on the local engine, or None when small ones can.

    Args:
        plan: The compiled view.

    Returns:
        The reason, naming the construct at fault; None when ticks within
        :data:`LOCAL_LIMITS` run on the local engine.
    """
    if not plan.incremental:
        return "a full recompute runs on Spark"
    block = plain_block(plan)
    if block is not None:
        return block_refusal(block)
    grouped = recomputed_block(plan)
    if grouped is not None:
        return grouped if isinstance(grouped, str) else None
    root = plan.root
    form = (aggregate_form(root.query)
            if root.law == Law.INVERTIBLE_AGGREGATE and root.query is not None else None)
    if form is None:
        return (f"only filters, projections, inner joins and aggregates over them run "
                f"locally yet (this view's top node: {plan.root.operator}, {plan.root.law})")
    if driver_output.plain_outputs(form) is None:
        return "an output computed from aggregates, or HAVING: the aggregate state stays on Spark"
    return block_refusal(form.rows())
