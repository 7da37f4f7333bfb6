"""Sink commits on a helper thread run their Spark jobs as the view's (lakehouse.sink_commits)."""

from __future__ import annotations

import threading
import uuid

from pyspark.sql import SparkSession

from lakehouse.sink_commits import commit_all


def test_a_helper_threads_jobs_are_in_the_callers_job_group_and_pool(
    spark: SparkSession,
) -> None:
    context = spark.sparkContext
    group, pool = f"view-{uuid.uuid4().hex}", "ns.view"
    seen: dict[str, object] = {}

    def iceberg() -> None:  # on a helper thread
        seen["thread"] = threading.current_thread()
        seen["pool"] = context.getLocalProperty("spark.scheduler.pool")
        spark.range(10).collect()

    context.setLocalProperty("spark.scheduler.pool", pool)
    context.setJobGroup(group, f"refresh {pool}")
    try:
        landed, error = commit_all([("iceberg", iceberg), ("delta", lambda: None)],
                                   on_spark=True)
    finally:
        context.setJobGroup("", "")
        context.setLocalProperty("spark.scheduler.pool", None)  # type: ignore[arg-type]
    assert (landed, error) == (["iceberg", "delta"], None)
    assert seen["thread"] is not threading.current_thread()
    assert seen["pool"] == pool
    context._jsc.sc().listenerBus().waitUntilEmpty()  # the tracker learns of jobs from it
    assert len(context.statusTracker().getJobIdsForGroup(group)) >= 1
