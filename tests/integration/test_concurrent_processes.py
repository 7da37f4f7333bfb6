"""Two OS processes, each with its own Spark JVM, refresh the same view at the same time.

Each round the test commits to the sources and releases both workers at once
(:mod:`tests.integration.refresh_worker`); in the first rounds it commits again while they
run. Both read the same frontier and compute the same change; the sinks' optimistic
concurrency lets one commit per sink and the other fail cleanly, and its retry starts from
the winner's frontier. Afterwards: both sinks equal the full recompute, the frontiers of
the committed snapshots and Delta versions strictly advance, and the number of commits
to each sink equals the number of attempts that reported committing to it (nothing applied
twice). The sinks commit at once, so an attempt can win the Iceberg commit and lose the
Delta one, or the reverse: it fails, and its error names the commit it won.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from deltalake import DeltaTable, write_deltalake
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.table import Table
from pyspark.sql import SparkSession

from lakehouse.config import load_config
from lakehouse.runtime import Runtime
from sinks.delta_commit import commit_frontier
from sinks.frontier import FRONTIER_KEY, decode_frontier
from tests.conftest import multiset
from tests.conftest_catalog import CatalogServerHandle

pytestmark = pytest.mark.spark

ROUNDS = 3
WORKERS = ("a", "b")
START_TIMEOUT_S = 600
ROUND_TIMEOUT_S = 600
ROOT = Path(__file__).resolve().parents[2]
SQL = ("SELECT f.carrier, f.flight, f.dep_delay, a.name FROM flights f "
       "JOIN airlines a ON f.carrier = a.carrier")


def _wait_for(paths: list[Path], timeout_s: float, workers: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + timeout_s
    while not all(p.exists() for p in paths):
        dead = [w.args for w in workers if w.poll() is not None]
        assert not dead, f"a worker exited early: {dead}"
        assert time.monotonic() < deadline, f"timed out waiting for {paths}"
        time.sleep(0.1)


def _change(spark: SparkSession, table: str, airlines: Path, rng: random.Random, tag: int) -> None:
    rows = ", ".join(f"('{rng.choice(['AA', 'UA', 'DL'])}', {100 * tag + i}, {rng.random():.3f})"
                     for i in range(rng.randint(1, 3)))
    spark.sql(f"INSERT INTO {table} VALUES {rows}")
    if rng.random() < 0.5:
        spark.sql(f"DELETE FROM {table} WHERE flight % 4 = {rng.randint(0, 3)} "
                  f"AND flight < {100 * tag}")
    if rng.random() < 0.5:
        carrier = rng.choice(["AA", "UA", "DL"])
        DeltaTable(str(airlines)).update({"name": f"'{carrier} {tag}'"},
                                         predicate=f"carrier = '{carrier}'")


def _iceberg_frontiers(table: Table) -> list[dict[str, int]]:
    """The frontiers of the snapshots on ``main``, oldest first."""
    frontiers = []
    snapshot = table.current_snapshot()
    while snapshot is not None:
        summary = snapshot.summary.additional_properties if snapshot.summary else {}
        frontier = decode_frontier(summary.get(FRONTIER_KEY))
        assert frontier is not None, f"snapshot {snapshot.snapshot_id} carries no frontier"
        frontiers.append(frontier)
        parent = snapshot.parent_snapshot_id
        snapshot = table.metadata.snapshot_by_id(parent) if parent is not None else None
    return frontiers[::-1]


def _delta_frontiers(uri: str) -> list[dict[str, int]]:
    """The frontiers of the Delta table's versions, oldest first."""
    found = [commit_frontier(commit) for commit in DeltaTable(uri).history()]
    assert None not in found
    return [f for f in found if f is not None][::-1]


def _strictly_advancing(frontiers: list[dict[str, int]], order: dict[str, dict[int, int]]) -> None:
    """Each frontier is at or past the previous one for every source, and past it for one."""
    for before, after in zip(frontiers, frontiers[1:], strict=False):
        steps = [order[s][after[s]] - order[s][before[s]] for s in after]
        assert min(steps) >= 0 and max(steps) > 0, (before, after)


def test_two_processes_refreshing_one_view_apply_each_change_once(
    spark: SparkSession, catalog_server: CatalogServerHandle, rest_catalog: RestCatalog,
    catalog_namespace: str, tmp_path: Path,
) -> None:
    table = f"lakehouse.{catalog_namespace}.flights"
    spark.sql(f"CREATE TABLE {table} (carrier string, flight int, dep_delay double) "
              "USING iceberg TBLPROPERTIES ('format-version' = '2')")
    spark.sql(f"INSERT INTO {table} VALUES ('AA', 1, 5.0), ('UA', 2, 7.0), ('DL', 3, NULL)")
    airlines = tmp_path / "airlines"
    write_deltalake(str(airlines), pa.table({"carrier": ["AA", "UA", "DL"],
                                             "name": ["American", "United", "Delta"]}),
                    configuration={"delta.enableChangeDataFeed": "true"})
    config_file = tmp_path / "lakehouse.yaml"
    config_file.write_text(yaml.safe_dump({
        "warehouse": str(catalog_server.warehouse),
        "catalog": {"embedded": False, "uri": catalog_server.uri},
        "spark": {"conf": {"spark.driver.memory": "768m",  # short-lived JVMs: C1 JIT only
                           "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"}},
        "sources": {"flights": {"iceberg": f"{catalog_namespace}.flights"},
                    "airlines": {"delta": str(airlines)}},
        "views": [{"name": f"{catalog_namespace}.shared", "sql": SQL, "refresh": "incremental"}],
    }))
    runtime = Runtime(load_config(config_file))
    view = runtime.config.views[0]
    assert runtime.refresh(view).mode == "full"  # the initial load, before the race

    folder = tmp_path / "rounds"
    folder.mkdir()
    workers = [subprocess.Popen(
        [sys.executable, "-m", "tests.integration.refresh_worker", str(config_file), view.name,
         str(folder), name], cwd=ROOT, stdout=subprocess.DEVNULL,
        stderr=(folder / f"{name}.stderr").open("wb")) for name in WORKERS]
    try:
        _wait_for([folder / f"{n}.ready" for n in WORKERS], START_TIMEOUT_S, workers)
        rng = random.Random(5)
        for round_ in range(ROUNDS):
            _change(spark, table, airlines, rng, 2 * round_ + 1)
            (folder / f"go-{round_}").touch()
            if round_ < ROUNDS - 1:  # and once more while they run
                time.sleep(rng.uniform(0.5, 3.0))
                _change(spark, table, airlines, rng, 2 * round_ + 2)
            _wait_for([folder / f"{n}.done-{round_}" for n in WORKERS], ROUND_TIMEOUT_S, workers)
        (folder / "stop").touch()
        assert [w.wait(timeout=120) for w in workers] == [0, 0]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()

    attempts = [json.loads(line) for name in WORKERS
                for line in (folder / f"{name}.jsonl").read_text().splitlines()]
    failed = [a for a in attempts if not a["ok"]]
    succeeded = [a for a in attempts if a["ok"]]
    assert len(succeeded) == len(WORKERS) * ROUNDS  # every round, each worker got through
    assert failed, "the two processes never raced (no refresh lost a commit)"
    for attempt in failed:  # the loser fails cleanly: a refresh error, nothing half written
        assert attempt["type"] == "RefreshError" and view.name in attempt["error"], attempt
    print(f"attempts: {len(attempts)}, lost races: {len(failed)}: "
          + "; ".join(a["error"][:120] for a in failed))

    expected = multiset(tuple(r.values()) for r in runtime.recompute(view).to_pylist())
    iceberg = rest_catalog.load_table(view.name)
    assert multiset(tuple(r.values()) for r in iceberg.scan().to_arrow().to_pylist()) == expected
    delta_uri = runtime.delta_uri(view)
    assert multiset(tuple(r.values()) for r in DeltaTable(delta_uri).to_pyarrow_table()
                    .to_pylist()) == expected

    source = rest_catalog.load_table(f"{catalog_namespace}.flights").metadata
    order = {"flights": {s.snapshot_id: s.sequence_number or 0 for s in source.snapshots},
             "airlines": {v: v for v in range(DeltaTable(str(airlines)).version() + 1)}}
    iceberg_frontiers, delta_frontiers = _iceberg_frontiers(iceberg), _delta_frontiers(delta_uri)
    _strictly_advancing(iceberg_frontiers, order)
    _strictly_advancing(delta_frontiers, order)
    # One commit per attempt that reported committing to that sink (a refresh that lost
    # one sink's race reports its commit to the other), plus the initial load.
    assert len(iceberg_frontiers) == 1 + sum("iceberg" in a["sinks"] for a in attempts)
    assert len(delta_frontiers) == 1 + sum("delta" in a["sinks"] for a in attempts)
    assert iceberg_frontiers[-1] == delta_frontiers[-1] == runtime.refresh(view).frontier
