"""Exactly once under crashes: refreshes killed with SIGKILL at random points, 20 seeds.

Each seed changes the sources, then releases a child process to refresh the view
(:mod:`tests.integration.refresh_worker`: its own Spark JVM, kept across rounds). A child
runs rounds until it is killed with SIGKILL, at one of two kinds of random points:

- at a failpoint (before the sink commits, as the Iceberg or the Delta commit lands while
  the other one runs, after both), at its N-th hit with N random up to
  :data:`KILL_WITHIN_ROUNDS`, so that it dies in its first or a later refresh
  (``LAKEHOUSE_FAILPOINTS=NAME@N``); the failpoints are dealt in shuffled rounds, each
  round all of them, so every one of them kills some child;
- for one child in four, a random time into one of its first :data:`KILL_WITHIN_ROUNDS`
  refreshes (anywhere: inside a Spark job, inside a commit), measured from the refresh's
  start so that no kill is wasted on the JVM starting up.

The next seed starts a new child, whose first refresh must repair the crash: after every
such recovery, and at the end, both sinks must equal a full recompute and carry the
current frontier. The view keeps duplicates (no key), so a change applied twice would show
as extra rows, and a lost one as missing.

A SIGKILL ends the JVM with its driver, so each kill costs one JVM start; children that
live through several rounds, and the C1-only JIT (``-XX:TieredStopAtLevel=1``: a
short-lived JVM's start and first refresh take half the time or less under load; the JIT
tier changes no semantics), are what keep the test affordable.
"""

from __future__ import annotations

import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from deltalake import DeltaTable, write_deltalake
from pyiceberg.catalog.rest import RestCatalog
from pyspark.sql import SparkSession

from lakehouse.config import ViewConfig, load_config
from lakehouse.failpoints import ENV, FAILPOINTS, LOG_ENV
from lakehouse.refresh import current_frontier
from lakehouse.runtime import Runtime
from sinks.delta_commit import commit_frontier
from tests.conftest import multiset
from tests.conftest_catalog import CatalogServerHandle

pytestmark = pytest.mark.spark

SEEDS = range(20)
KILL_WITHIN_ROUNDS = 3
TIMER_SHARE = 0.25
CHILD_TIMEOUT_S = 600
ROOT = Path(__file__).resolve().parents[2]
SQL = ("SELECT f.carrier, f.flight, f.dep_delay, a.name FROM flights f "
       "JOIN airlines a ON f.carrier = a.carrier")
CHILD_SPARK_CONF = {"spark.driver.memory": "1g",
                    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"}


@pytest.fixture
def config_file(spark: SparkSession, catalog_server: CatalogServerHandle,
                catalog_namespace: str, tmp_path: Path) -> Path:
    """Sources (Iceberg flights, Delta airlines) and a config with one view, both sinks."""
    spark.sql(f"CREATE TABLE lakehouse.{catalog_namespace}.flights "
              "(carrier string, flight int, dep_delay double) USING iceberg TBLPROPERTIES "
              "('format-version' = '2')")
    spark.sql(f"INSERT INTO lakehouse.{catalog_namespace}.flights VALUES "
              "('AA', 1, 5.0), ('UA', 2, 7.0), ('DL', 3, NULL)")
    airlines = tmp_path / "airlines"
    write_deltalake(str(airlines), pa.table({"carrier": ["AA", "UA", "DL"],
                                             "name": ["American", "United", "Delta"]}),
                    configuration={"delta.enableChangeDataFeed": "true"})
    path = tmp_path / "lakehouse.yaml"
    path.write_text(yaml.safe_dump({
        "warehouse": str(catalog_server.warehouse),
        "catalog": {"embedded": False, "uri": catalog_server.uri},
        "spark": {"conf": CHILD_SPARK_CONF},
        "sources": {"flights": {"iceberg": f"{catalog_namespace}.flights"},
                    "airlines": {"delta": str(airlines)}},
        "views": [{"name": f"{catalog_namespace}.crash", "sql": SQL, "refresh": "incremental"}],
    }))
    return path


def _change_sources(spark: SparkSession, rng: random.Random, table: str, airlines: str,
                    seed: int) -> None:
    rows = ", ".join(f"('{rng.choice(['AA', 'UA', 'DL'])}', {100 * seed + i}, "
                     f"{rng.choice(['NULL', '1.0', '30.0'])})" for i in range(rng.randint(1, 4)))
    spark.sql(f"INSERT INTO {table} VALUES {rows}")
    if rng.random() < 0.4:
        spark.sql(f"DELETE FROM {table} WHERE flight % 3 = {rng.randint(0, 2)} AND flight < "
                  f"{100 * seed}")
    if rng.random() < 0.3:
        carrier = rng.choice(["AA", "UA", "DL"])
        DeltaTable(airlines).update({"name": f"'{carrier} {seed}'"},
                                    predicate=f"carrier = '{carrier}'")


@dataclass
class Child:
    """A worker process and how it is to die."""

    name: str
    process: subprocess.Popen[bytes]
    failpoint: str | None  # ``NAME@N``; None: killed by a timer instead
    timer_round: int = 0  # which of its rounds the timer kills it in
    rounds: int = 0  # rounds it completed


class Crashes:
    """Starts children, runs rounds, and records every kill."""

    def __init__(self, config_file: Path, view: str, folder: Path):
        self.config_file, self.view, self.folder = config_file, view, folder
        self.kills: list[str] = []
        self.starts = 0
        self.dealt: list[str] = []

    def start(self, seed: int, rng: random.Random) -> Child:
        failpoint = None
        if rng.random() >= TIMER_SHARE:
            if not self.dealt:
                self.dealt = rng.sample(FAILPOINTS, len(FAILPOINTS))
            failpoint = f"{self.dealt.pop()}@{rng.randint(1, KILL_WITHIN_ROUNDS)}"
        name = f"child{seed}"
        env = {**os.environ, ENV: failpoint or "", LOG_ENV: str(self.folder / "failpoints.log")}
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.refresh_worker", str(self.config_file),
             self.view, str(self.folder), name, str(seed)], cwd=ROOT, env=env,
            stdout=subprocess.DEVNULL, stderr=(self.folder / f"{name}.stderr").open("wb"))
        self.starts += 1
        child = Child(name, process, failpoint, rng.randrange(KILL_WITHIN_ROUNDS))
        self._until(child, self.folder / f"{name}.ready", "start")
        return child

    def round(self, child: Child, seed: int, rng: random.Random) -> bool:
        """Release ``child`` for round ``seed``; True when it was killed in it."""
        (self.folder / f"go-{seed}").touch()
        done = self.folder / f"{child.name}.done-{seed}"
        if child.failpoint is None and child.rounds == child.timer_round:
            if not self._until(child, self.folder / f"{child.name}.started-{seed}", "round"):
                return True
            delay_s = rng.uniform(0.0, self.refresh_estimate_s())
            if not self._until(child, done, "round", timeout_s=delay_s):
                if child.process.poll() is None:
                    child.process.send_signal(signal.SIGKILL)
                    child.process.wait()
                    self.kills.append(f"timer {delay_s:.1f} s into round {seed}")
                return True
            child.timer_round += 1  # the refresh beat the timer: it tries again next round
        elif not self._until(child, done, "round"):
            return True
        child.rounds += 1
        return False

    def _until(self, child: Child, path: Path, what: str,
               timeout_s: float = CHILD_TIMEOUT_S) -> bool:
        """Wait for ``path``: True when it appears, False when ``child`` died by SIGKILL."""
        deadline = time.monotonic() + timeout_s
        while not path.exists():
            code = child.process.poll()
            if code is not None:
                stderr = (self.folder / f"{child.name}.stderr").read_text()[-3000:]
                assert code == -signal.SIGKILL, f"{child.name} exited {code} in {what}: {stderr}"
                if child.failpoint is not None:
                    self.kills.append(self._logged_kill())
                return False
            if time.monotonic() > deadline:
                assert timeout_s < CHILD_TIMEOUT_S, f"{child.name}: no {path.name} in time"
                return False
            time.sleep(0.05)
        return True

    def _logged_kill(self) -> str:
        lines = (self.folder / "failpoints.log").read_text().splitlines()
        return f"failpoint {lines[-1]}"

    def refresh_estimate_s(self) -> float:
        """The median duration of the refreshes that completed so far (5 s before any)."""
        durations = [json.loads(line)["duration_s"]
                     for log in self.folder.glob("*.jsonl")
                     for line in log.read_text().splitlines()]
        return statistics.median(durations) if durations else 5.0


def _assert_recovered(runtime: Runtime, catalog: RestCatalog, view: ViewConfig) -> None:
    """Both sinks equal the full recompute and reflect the sources' current versions.

    No frontier was committed twice to the Delta table: a tick replayed after its Delta
    commit landed (killed after it) added no second commit.
    """
    frontier = current_frontier(runtime.readers, runtime.plan(view).sources)
    expected = multiset(tuple(r.values()) for r in runtime.recompute(view).to_pylist())
    iceberg = catalog.load_table(view.name).scan().to_arrow().to_pylist()
    delta = DeltaTable(runtime.delta_uri(view)).to_pyarrow_table().to_pylist()
    assert multiset(tuple(r.values()) for r in iceberg) == expected
    assert multiset(tuple(r.values()) for r in delta) == expected
    assert runtime.sinks(view).frontiers() == {"iceberg": frontier, "delta": frontier}
    history = DeltaTable(runtime.delta_uri(view)).history()
    committed = [json.dumps(f, sort_keys=True) for c in history if (f := commit_frontier(c))]
    assert len(committed) == len(set(committed)), "a frontier was committed twice to Delta"


def test_refreshes_killed_at_random_points_lose_and_duplicate_nothing(
    spark: SparkSession, rest_catalog: RestCatalog, config_file: Path, tmp_path: Path,
) -> None:
    config = load_config(config_file)
    view = config.views[0]
    table = f"lakehouse.{config.sources['flights'].iceberg}"  # type: ignore[union-attr]
    airlines = config.sources["airlines"].delta  # type: ignore[union-attr]
    folder = tmp_path / "rounds"
    folder.mkdir()
    crashes = Crashes(config_file, view.name, folder)
    oracle = Runtime(config)  # this process's: the recompute and the sinks' state
    child: Child | None = None
    recoveries = 0
    started_s = time.monotonic()
    try:
        for seed in SEEDS:
            rng = random.Random(seed)
            _change_sources(spark, rng, table, airlines, seed)
            recovering = child is None and bool(crashes.kills)
            child = child or crashes.start(seed, rng)
            if crashes.round(child, seed, rng):
                child = None
            elif recovering:  # a new process repaired the crash, exactly once
                _assert_recovered(oracle, rest_catalog, view)
                recoveries += 1
        if child is not None:
            (folder / "stop").touch()
            assert child.process.wait(timeout=120) == 0
    finally:
        if child is not None and child.process.poll() is None:
            child.process.kill()

    oracle.refresh(view)
    _assert_recovered(oracle, rest_catalog, view)
    print(f"\n{len(SEEDS)} rounds, {len(crashes.kills)} kills, {crashes.starts} JVM starts, "
          f"{recoveries} recoveries checked, {time.monotonic() - started_s:.0f} s: "
          + "; ".join(crashes.kills))
    killed_at = {kill.split()[1] for kill in crashes.kills if kill.startswith("failpoint")}
    assert killed_at == set(FAILPOINTS)  # as either sink's commit lands included
    assert len(crashes.kills) >= len(SEEDS) // KILL_WITHIN_ROUNDS
    assert recoveries >= 3
