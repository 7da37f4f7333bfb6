"""A checkpoint measures its rows in its own Spark job (ivm.spark_observe)."""

from __future__ import annotations

import uuid

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ivm.spark_observe import checkpointed, counted_checkpoint


def _grouped(spark: SparkSession, rows: int) -> DataFrame:
    """A plan with a shuffle (adaptive execution runs it as more than one job)."""
    frame = spark.range(rows).withColumn("g", F.col("id") % 7)
    return frame.groupBy("g").agg(F.sum("id").alias("s"), F.max("id").alias("m"))


def _jobs(spark: SparkSession, action: object) -> int:
    """The Spark jobs ``action`` (a callable) runs."""
    context = spark.sparkContext
    group = f"checkpoint-{uuid.uuid4().hex}"
    context.setJobGroup(group, group)
    try:
        action()  # type: ignore[operator]
    finally:
        context.setJobGroup("", "")
    context._jsc.sc().listenerBus().waitUntilEmpty()  # the tracker learns of jobs from it
    return len(context.statusTracker().getJobIdsForGroup(group))


def test_the_count_comes_with_the_checkpoint_and_no_job_of_its_own(spark: SparkSession) -> None:
    checkpoint_only = _jobs(spark, lambda: _grouped(spark, 1000).localCheckpoint(eager=True))
    found: list[tuple[DataFrame, int]] = []
    counted = _jobs(spark, lambda: found.append(counted_checkpoint(_grouped(spark, 1000))))
    held, count = found[0]
    assert count == 7 == held.count()
    assert counted == checkpoint_only
    # the rows are materialized: reading them again runs no aggregation
    assert "HashAggregate" not in held._jdf.queryExecution().executedPlan().toString()


def test_metrics_see_every_row_and_an_empty_result(spark: SparkSession) -> None:
    rows = _grouped(spark, 1000).withColumn("n", F.when(F.col("g") == 3, None).otherwise(1))
    _, found = checkpointed(rows, nulls=F.max(F.col("n").isNull()),
                            none=F.max(F.col("s").isNull()), top=F.max("m"))
    assert found == {"nulls": True, "none": False, "top": 999}
    assert isinstance(found["top"], int) and isinstance(found["nulls"], bool)
    empty, counted = counted_checkpoint(rows.where("g > 100"))
    assert counted == 0 == empty.count()


def test_a_checkpoint_without_a_metric_is_refused(spark: SparkSession) -> None:
    with pytest.raises(ValueError, match="at least one metric"):
        checkpointed(spark.range(3))

