"""Measure rows in the Spark action that materializes them anyway (a checkpoint).

A tick on Spark materializes its intermediate rows (``localCheckpoint``) so that later
queries read them without recomputing their lineage, and then often needs a number about
them: how many rows, whether a column holds a NULL. Asking for it with a second action
(``count``, ``first``) costs a job of its own, two with adaptive execution (a shuffle stage,
then the result), each paying the scheduler's fixed cost on a cluster. An observed metric
(``Dataset.observe``) is computed by the checkpoint's own job instead: its aggregate runs
over the rows as they pass, and only the one result row reaches the driver.

The metrics are read from the checkpoint's query execution once it returns, not through a
``pyspark.sql.Observation``: that one waits, without a time limit, for a listener event that
Spark's shared listener queue may drop when it is full.
"""

from __future__ import annotations

import uuid
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ivm.errors import IvmError

__all__ = ["checkpointed", "counted_checkpoint"]


def checkpointed(rows: DataFrame, /, **metrics: Column) -> tuple[DataFrame, dict[str, Any]]:
    """``rows`` checkpointed on the executors, and ``metrics`` over them, in one action.

    Args:
        rows: Any rows.
        metrics: Aggregate expressions over ``rows`` by name (``F.count(F.lit(1))``,
            ``F.max(F.col("x").isNull())``); at least one.

    Returns:
        The rows, materialized (``localCheckpoint(eager=True)``): their lineage ends
        there; and each metric's value by name, in Python types (an aggregate over no
        rows as Spark gives it: a count 0, a max None).

    Raises:
        ValueError: No metric is asked for.
        IvmError: Spark computed the rows but not the metrics.
        Exception: Spark failed to compute the rows (py4j's error, as for any action);
            nothing is checkpointed.
    """
    if not metrics:
        raise ValueError("checkpointed needs at least one metric")
    name = f"__metrics_{uuid.uuid4().hex}"
    measured = rows.observe(name, *(c.alias(metric) for metric, c in metrics.items()))
    held = measured.localCheckpoint(eager=True)  # runs on measured's own query execution
    found = measured._jdf.queryExecution().observedMetrics().get(name)  # noqa: SLF001
    if found.isEmpty():
        raise IvmError(f"Spark checkpointed the rows without computing {', '.join(metrics)}")
    row = found.get()
    return held, {metric: row.get(row.fieldIndex(metric)) for metric in metrics}


def counted_checkpoint(rows: DataFrame) -> tuple[DataFrame, int]:
    """``rows`` checkpointed on the executors, and their number, in one Spark action.

    Raises:
        IvmError: Spark computed the rows but not their number.
        Exception: Spark failed to compute the rows (py4j's error).
    """
    held, metrics = checkpointed(rows, count=F.count(F.lit(1)))
    return held, int(metrics["count"])
