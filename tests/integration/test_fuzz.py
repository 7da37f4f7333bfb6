"""The random-query fuzzer (issue 20), bounded: fixed seeds, and the kept regressions.

Each generated view goes through an initial load and four random ticks of inserts,
deletes and updates, compared with a full recompute after each, on the local engine and
on Spark where the plan allows (:mod:`tests.fuzz.check`). ``make fuzz N=10000`` runs
more; its minimized failures land in ``tests/fuzz/regressions/`` and are replayed here.
"""

from __future__ import annotations

import os

import pytest
from pyspark.sql import SparkSession

from tests.fuzz.check import run_case
from tests.fuzz.run import fuzz, regression_cases

pytestmark = pytest.mark.spark

VIEWS = int(os.environ.get("LAKEHOUSE_FUZZ_VIEWS", "30"))
"""Views generated in a test run (seeds 0 to VIEWS - 1)."""


def test_generated_views_equal_a_full_recompute_after_every_tick(spark: SparkSession) -> None:
    report = fuzz(spark, range(VIEWS))
    print(report.summary())
    assert not report.failures, report.summary()
    # the run checked something: most views are incremental and ticked on both engines
    assert sum(report.incremental.values()) >= VIEWS // 2, report.summary()
    assert report.ticks >= VIEWS, report.summary()
    assert report.engines["local"] and report.engines["spark"], report.summary()


@pytest.mark.parametrize(("name", "case"), regression_cases() or [pytest.param(
    "", None, marks=pytest.mark.skip(reason="no failure kept yet"))])
def test_kept_failures_stay_fixed(spark: SparkSession, name: str, case) -> None:
    outcome = run_case(spark, case)
    assert outcome.incremental, (name, outcome.reason)
    assert outcome.failure is None, (name, case.sql, outcome.failure)
