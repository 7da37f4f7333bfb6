"""Exactly once under crashes: refreshes killed with SIGKILL at random points, 20 seeds.

Each seed changes the sources, then runs ``lakehouse tick`` in a child process that
dies with SIGKILL either at a failpoint (before the Iceberg commit, between the Iceberg
and the Delta commit, after both) or after a random delay. A final tick without
failpoints must leave both sinks equal to a full recompute. The view keeps duplicates
(no key), so a change applied twice would show as extra rows, and a lost one as missing.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from deltalake import DeltaTable, write_deltalake
from pyiceberg.catalog.rest import RestCatalog
from pyspark.sql import SparkSession

from lakehouse.config import parse_config
from lakehouse.failpoints import ENV, FAILPOINTS
from lakehouse.refresh import current_frontier
from lakehouse.runtime import Runtime
from tests.conftest import multiset
from tests.conftest_catalog import CatalogServerHandle

pytestmark = pytest.mark.spark

SEEDS = range(20)
SQL = ("SELECT f.carrier, f.flight, f.dep_delay, a.name FROM flights f "
       "JOIN airlines a ON f.carrier = a.carrier")
CHILD_TIMEOUT_S = 300
LAKEHOUSE = str(Path(sys.executable).parent / "lakehouse")


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
        "spark": {"conf": {"spark.driver.memory": "1g"}},
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


def _crashing_tick(config_file: Path, view: str, rng: random.Random) -> None:
    """Run one tick in a child process that is killed at a failpoint or after a delay."""
    point = rng.choice([*FAILPOINTS, "timer"])
    env = {**os.environ, ENV: point if point != "timer" else ""}
    child = subprocess.Popen([LAKEHOUSE, "tick", view, "--config", str(config_file)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        child.wait(timeout=rng.uniform(4.0, 14.0) if point == "timer" else CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        child.send_signal(signal.SIGKILL)
        child.wait()


def test_refreshes_killed_at_random_points_lose_and_duplicate_nothing(
    spark: SparkSession, rest_catalog: RestCatalog, config_file: Path,
) -> None:
    config = parse_config(yaml.safe_load(config_file.read_text()))
    view = config.views[0]
    table = f"lakehouse.{config.sources['flights'].iceberg}"  # type: ignore[union-attr]
    airlines = config.sources["airlines"].delta  # type: ignore[union-attr]
    for seed in SEEDS:
        rng = random.Random(seed)
        _change_sources(spark, rng, table, airlines, seed)
        _crashing_tick(config_file, view.name, rng)

    runtime = Runtime(config)
    runtime.refresh(view)
    frontier = current_frontier(runtime.readers, runtime.plan(view))
    expected = multiset(tuple(r.values()) for r in runtime.recompute(view).to_pylist())
    iceberg = rest_catalog.load_table(view.name).scan().to_arrow().to_pylist()
    delta = DeltaTable(runtime.delta_uri(view)).to_pyarrow_table().to_pylist()
    assert multiset(tuple(r.values()) for r in iceberg) == expected
    assert multiset(tuple(r.values()) for r in delta) == expected
    sinks = runtime.sinks(view)
    assert sinks.frontiers() == {"iceberg": frontier, "delta": frontier}
