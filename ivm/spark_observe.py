"""Measure rows in the Spark action that computes them anyway (a checkpoint, a write).

A tick on Spark materializes its intermediate rows (``localCheckpoint``) so that later
queries read them without recomputing their lineage, or writes them out; then it often
needs a number about them: how many rows, whether a column holds a NULL. Asking for it
with a second action (``count``, ``first``) costs a job of its own, two with adaptive
execution (a shuffle stage, then the result), each paying the scheduler's fixed cost on a
cluster. An observed metric (``Dataset.observe``, Spark 3.3+) is computed by the action
that runs the rows instead: its aggregate runs over the rows as they pass, and only the one
result row reaches the driver.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

__all__ = ["checkpointed", "counted_checkpoint", "observed"]


def observed(rows: DataFrame, /, **metrics: Column
             ) -> tuple[DataFrame, Callable[[], dict[str, Any]]]:
    """``rows`` measured by ``metrics`` when the next action runs them.

    Args:
        rows: Any rows.
        metrics: Aggregate expressions over ``rows`` by name (``F.count(F.lit(1))``,
            ``F.max(F.col("x").isNull())``); at least one.

    Returns:
        The rows to run one action on, and a function giving each metric's value by name
        once that action succeeded (an aggregate over no rows as Spark gives it: a count
        0, a max NULL). Call it only after the action: it waits for its result.

    Raises:
        ValueError: No metric is asked for.
    """
    if not metrics:
        raise ValueError("an observation needs at least one metric")
    observation = Observation()
    measured = rows.observe(observation, *(c.alias(name) for name, c in metrics.items()))
    return measured, lambda: dict(observation.get)


def checkpointed(rows: DataFrame, /, **metrics: Column) -> tuple[DataFrame, dict[str, Any]]:
    """``rows`` checkpointed on the executors, and ``metrics`` over them, in one action.

    Returns:
        The rows, materialized (``localCheckpoint(eager=True)``): their lineage ends
        there; and each metric's value by name (:func:`observed`).

    Raises:
        ValueError: No metric is asked for.
        pyspark.errors.PySparkException: Spark failed to compute the rows (nothing is
            checkpointed).
    """
    measured, values = observed(rows, **metrics)
    held = measured.localCheckpoint(eager=True)
    return held, values()


def counted_checkpoint(rows: DataFrame) -> tuple[DataFrame, int]:
    """``rows`` checkpointed on the executors, and their number, in one Spark action.

    Raises:
        pyspark.errors.PySparkException: Spark failed to compute the rows.
    """
    held, metrics = checkpointed(rows, count=F.count(F.lit(1)))
    return held, int(metrics["count"])
