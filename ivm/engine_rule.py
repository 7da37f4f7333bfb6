"""Which engine may run a view's ticks: the part of the rule a plan decides alone.

Two engines compute a view's delta: Spark, which runs every plan, and the local engine
(DuckDB in process, :mod:`ivm.local_engine`), which runs a tick with no Spark job when the
plan allows it (:func:`local_refusal`: a block of filters, projections and inner joins, or
an aggregate over one, by the invertible law or by affected-key recompute
(:mod:`ivm.local_rules`), each expression in :mod:`ivm.spark_types`'s subset) and the
tick's sizes do (:data:`LOCAL_LIMITS`).
``lakehouse explain`` and ``docs/sql-coverage.md`` show this rule's verdict.
"""

from __future__ import annotations

from typing import Literal

from ivm import driver_output, local_rules
from ivm.aggregate_form import aggregate_form
from ivm.driver_delta import DRIVER_READ_MAX_ROWS, block_refusal
from ivm.laws import Law
from ivm.plan import ViewPlan
from ivm.state_local import DRIVER_DELTA_MAX_ROWS, DRIVER_STATE_MAX_ROWS

__all__ = ["LOCAL_LIMITS", "Engine", "local_refusal"]

Engine = Literal["local", "spark"]
"""The engine a tick ran on."""

LOCAL_LIMITS = (
    f"aggregate state of at most {DRIVER_STATE_MAX_ROWS:,} groups, change feeds in Arrow of "
    f"at most {DRIVER_DELTA_MAX_ROWS:,} rows, each join partner read in at most "
    f"{DRIVER_READ_MAX_ROWS:,} rows (the default)")
"""The sizes within which a tick the plan allows runs on the local engine."""


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
    root = plan.root
    form = (aggregate_form(root.query)
            if root.law == Law.INVERTIBLE_AGGREGATE and root.query is not None else None)
    if form is None:
        return local_rules.refusal(root)
    if driver_output.plain_outputs(form) is None:
        return "an output computed from aggregates, or HAVING: the aggregate state stays on Spark"
    return block_refusal(form.rows())
