"""Refreshes on several workers: views sharing a source tick at once, each equal to a recompute.

The scheduler of ``lakehouse run`` (:class:`lakehouse.scheduler.Scheduler`) runs the ticks
of views that share no view on worker threads of one :class:`Runtime`: the source readers,
caches and scratch folder they share must keep each tick's reads apart. A SIGTERM while
ticks are in flight lets them commit to every sink before the process ends.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from deltalake import DeltaTable, write_deltalake
from pyiceberg.catalog.rest import RestCatalog
from pyspark.sql import SparkSession

from lakehouse.config import Config, ViewConfig, parse_config
from lakehouse.failpoints import ENV as FAILPOINTS_ENV
from lakehouse.refresh import current_frontier
from lakehouse.runtime import Runtime
from lakehouse.scheduler import Scheduler
from tests.conftest import multiset
from tests.conftest_catalog import CatalogServerHandle

pytestmark = pytest.mark.spark

FRESH_TIMEOUT_S = 120.0


def _config_data(server: CatalogServerHandle, namespace: str, airlines: Path,
                 workers: int) -> dict[str, object]:
    """Five views over one Iceberg source and a Delta one; three read a view (a diamond)."""
    by_carrier = ("SELECT f.carrier, a.name, COUNT(*) AS n, SUM(f.dep_delay) AS total_delay "
                  "FROM flights f JOIN airlines a ON f.carrier = a.carrier "
                  "GROUP BY f.carrier, a.name")
    return {
        "warehouse": str(server.warehouse), "workers": workers,
        "catalog": {"embedded": False, "uri": server.uri},
        "sources": {"flights": {"iceberg": f"{namespace}.flights"},
                    "airlines": {"delta": str(airlines)},
                    "by_carrier": {"view": f"{namespace}.by_carrier"},
                    "busy": {"view": f"{namespace}.busy"}},
        "views": [
            {"name": f"{namespace}.by_carrier", "sql": by_carrier},
            {"name": f"{namespace}.busy", "sql": "SELECT carrier, n FROM by_carrier WHERE n > 1"},
            {"name": f"{namespace}.diamond", "sql": (
                "SELECT b.carrier, b.n, x.total_delay FROM busy b "
                "JOIN by_carrier x ON b.carrier = x.carrier")},
            {"name": f"{namespace}.late", "sql": (
                "SELECT carrier, flight, dep_delay FROM flights WHERE dep_delay > 2")},
            {"name": f"{namespace}.per_carrier", "sql": (
                "SELECT carrier, COUNT(*) AS flights, MAX(dep_delay) AS worst "
                "FROM flights GROUP BY carrier")},
        ],
    }


@pytest.fixture
def sources(spark: SparkSession, catalog_namespace: str, tmp_path: Path) -> tuple[str, Path]:
    """An Iceberg ``flights`` table and a Delta ``airlines`` table (change data feed on)."""
    spark.sql(f"CREATE TABLE lakehouse.{catalog_namespace}.flights "
              "(carrier string, flight int, dep_delay double) USING iceberg "
              "TBLPROPERTIES ('format-version' = '2')")
    spark.sql(f"INSERT INTO lakehouse.{catalog_namespace}.flights VALUES "
              "('AA', 1, 5.0), ('AA', 2, 30.0), ('UA', 3, NULL), ('DL', 4, 1.5)")
    airlines = tmp_path / "airlines"
    write_deltalake(str(airlines), pa.table({"carrier": ["AA", "UA", "DL"],
                                             "name": ["American", "United", "Delta"]}),
                    configuration={"delta.enableChangeDataFeed": "true"})
    return catalog_namespace, airlines


def _fresh(runtime: Runtime, view: ViewConfig) -> bool:
    target = current_frontier(runtime.readers, runtime.plan(view).sources)
    return all(f == target for f in runtime.sinks(view).frontiers().values())


def _assert_equal_recompute(runtime: Runtime, catalog: RestCatalog, view: ViewConfig) -> None:
    expected = multiset(tuple(r.values()) for r in runtime.recompute(view).to_pylist())
    iceberg = catalog.load_table(view.name).scan().to_arrow()
    delta = DeltaTable(runtime.delta_uri(view)).to_pyarrow_table()
    assert multiset(tuple(r.values()) for r in iceberg.to_pylist()) == expected, view.name
    assert multiset(tuple(r.values()) for r in delta.to_pylist()) == expected, view.name


class _Ticks:
    """Runs ``runtime.refresh`` for the scheduler, recording each tick's interval."""

    def __init__(self, runtime: Runtime):
        self.runtime = runtime
        self.intervals: list[tuple[str, float, float]] = []
        self.errors: list[BaseException] = []

    def __call__(self, view: ViewConfig) -> None:
        started = time.monotonic()
        try:
            self.runtime.refresh(view)
        except Exception as error:  # reported by the test, not lost in a worker thread
            self.errors.append(error)
        self.intervals.append((view.name, started, time.monotonic()))

    def overlapped(self, first: str, second: str) -> bool:
        return any(a0 < b1 and b0 < a1
                   for n1, a0, a1 in self.intervals if n1.endswith(first)
                   for n2, b0, b1 in self.intervals if n2.endswith(second))


@contextmanager
def _scheduled(config: Config, ticks: _Ticks) -> Iterator[Scheduler]:
    scheduler = Scheduler.for_config(config)
    runner = threading.Thread(target=scheduler.run, args=(ticks,), name="scheduler")
    runner.start()
    try:
        yield scheduler
    finally:
        scheduler.stop()
        runner.join(FRESH_TIMEOUT_S)


def _wait_fresh(runtime: Runtime, ticks: _Ticks) -> None:
    deadline = time.monotonic() + FRESH_TIMEOUT_S
    while not all(_fresh(runtime, view) for view in runtime.config.views):
        assert not ticks.errors, ticks.errors
        assert time.monotonic() < deadline, "the views did not catch up"
        time.sleep(0.2)


def test_views_sharing_a_source_refresh_at_once_and_each_equals_a_recompute(
    spark: SparkSession, catalog_server: CatalogServerHandle, rest_catalog: RestCatalog,
    sources: tuple[str, Path],
) -> None:
    namespace, airlines = sources
    config = parse_config(_config_data(catalog_server, namespace, airlines, workers=4))
    runtime = Runtime(config)
    ticks = _Ticks(runtime)
    flights = f"lakehouse.{namespace}.flights"
    changes = [f"INSERT INTO {flights} VALUES ('UA', 5, 12.0), ('DL', 6, 3.0), ('AA', 7, NULL)",
               f"DELETE FROM {flights} WHERE flight = 2",
               f"UPDATE {flights} SET dep_delay = dep_delay + 10 WHERE carrier = 'DL'"]
    with _scheduled(config, ticks):
        _wait_fresh(runtime, ticks)
        for change in changes:
            spark.sql(change)
            _wait_fresh(runtime, ticks)
    assert not ticks.errors, ticks.errors
    for view in config.views:
        _assert_equal_recompute(runtime, rest_catalog, view)
    assert ticks.overlapped(".late", ".per_carrier") or ticks.overlapped(".late", ".diamond")
    for first, second in [(".by_carrier", ".busy"), (".busy", ".diamond"),
                          (".by_carrier", ".diamond")]:
        assert not ticks.overlapped(first, second), (first, second)


def test_sigterm_lets_the_ticks_in_flight_commit_to_every_sink(
    spark: SparkSession, catalog_server: CatalogServerHandle, rest_catalog: RestCatalog,
    sources: tuple[str, Path], tmp_path: Path,
) -> None:
    namespace, airlines = sources
    data = _config_data(catalog_server, namespace, airlines, workers=2)
    path = tmp_path / "lakehouse.yaml"
    path.write_text(yaml.safe_dump(data))
    env = {**os.environ, FAILPOINTS_ENV: "iceberg-committed@1=term"}  # mid-tick
    done = subprocess.run(
        [sys.executable, "-m", "lakehouse", "run", "-c", str(path), "--metrics-listen", ""],
        env=env, capture_output=True, text=True, timeout=300, check=False,
        cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "stopped" in done.stdout and "Traceback" not in done.stdout + done.stderr
    runtime = Runtime(parse_config(data))
    committed = 0
    for view in runtime.config.views:
        frontiers = runtime.sinks(view).frontiers()
        assert frontiers["iceberg"] == frontiers["delta"], view.name  # nothing half committed
        if frontiers["iceberg"] is not None:
            committed += 1
            _assert_equal_recompute(runtime, rest_catalog, view)
    assert committed >= 1


def test_the_progress_bar_counts_the_tasks_of_its_own_view(spark: SparkSession) -> None:
    from lakehouse.progress_display import _tasks

    context = spark.sparkContext
    finished = threading.Event()

    def tick() -> None:  # a view's tick on a worker thread: its jobs in its job group
        context.setJobGroup("ns.slow", "refresh ns.slow")
        try:  # two tasks sleeping 3 s each, no Python worker
            spark.sql("SELECT reflect('java.lang.Thread', 'sleep', CAST(3000 AS BIGINT)) "
                      "FROM range(0, 2, 1, 2)").collect()
        finally:
            context.setJobGroup("", "")
            finished.set()

    worker = threading.Thread(target=tick)
    worker.start()
    counted, deadline = "", time.monotonic() + 30
    while not counted and not finished.is_set() and time.monotonic() < deadline:
        counted = _tasks(context.statusTracker(), "ns.slow")
        time.sleep(0.1)
    other = _tasks(context.statusTracker(), "ns.other")
    worker.join()
    assert counted.startswith(", Spark tasks ") and counted.endswith("/2"), counted
    assert other == ""
