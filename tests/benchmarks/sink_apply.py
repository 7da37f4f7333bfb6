"""Time one small-delta apply to the Iceberg sink: Spark path (before) vs Arrow path (now).

``python -m tests.benchmarks.sink_apply [--rows 100000] [--delta 10] [--repeats 5] [--nodelay]``

A view table of ``--rows`` rows (bigint key, string, decimal, date, timestamp, int) is
loaded once per path and variant; then ``--repeats`` times one refresh's sink work is timed:
``frontier()``, ``ensure_table()`` and the apply of a ``--delta``-row consolidated Z-set
(keyed: half the rows -1 old, half +1 new for the same keys; keyless: delete half existing
rows, insert half new ones). The Spark path is what every refresh ran before: Spark SQL
``CREATE NAMESPACE/TABLE IF NOT EXISTS``, then a ``MERGE`` on a refresh branch published to
main (3 catalog commits). The Arrow path is one pyiceberg commit; the delta reaches it
collected by ``to_arrow`` (timed apart: a refresh collects it once for both sinks).
The floor is the median one-row Spark ``INSERT`` into a small Iceberg table (as
``tests/benchmarks/tpch_refresh.py``).

``--nodelay`` starts the catalog on a socket created with ``IPPROTO_TCP``, so asyncio sets
``TCP_NODELAY`` on its connections as it does under ``lakehouse serve``; without it every
keep-alive request of the in-process catalog (``serve_in_thread``) waits ~40 ms (Nagle's
algorithm meeting delayed ACKs).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import socket
import statistics
import tempfile
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from pyiceberg.catalog.rest import RestCatalog
from pyspark.sql import DataFrame, SparkSession

import catalog_api.server as catalog_server
from catalog_api import CatalogSettings, serve_in_thread
from lakehouse.spark.arrow import to_arrow
from lakehouse.spark.session import build_spark_session
from sinks.iceberg import IcebergSink

SCHEMA = "k bigint, name string, amount decimal(12,2), day date, at timestamp, n int"


def _row(k: int, name: str) -> tuple[Any, ...]:
    start = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    return (k, name, Decimal(f"{k % 10000}.25"), dt.date(2024, 1, 1) + dt.timedelta(days=k % 900),
            start + dt.timedelta(seconds=k), k % 7)


def _table_rows(spark: SparkSession, rows: int) -> DataFrame:
    return spark.sql(
        f"SELECT id AS k, concat('r', id) AS name, CAST(id % 10000 + 0.25 AS decimal(12,2)) AS "
        f"amount, date_add(DATE'2024-01-01', CAST(id % 900 AS int)) AS day, "
        f"timestamp_seconds(1704067200 + id) AS at, CAST(id % 7 AS int) AS n FROM range({rows})")


def _delta(spark: SparkSession, size: int, rows: int, round_: int, keyed: bool) -> DataFrame:
    half = size // 2
    keys = [(round_ * 7919 + i * 104729) % rows for i in range(half)]
    if keyed:  # update: old row -1, new row +1, same key
        old = [(*_row(k, f"r{k}" if round_ == 0 else f"v{round_ - 1}"), -1) for k in keys]
        new = [(*_row(k, f"v{round_}"), 1) for k in keys]
    else:  # delete existing rows, insert new ones
        old = [(*_row(k, f"r{k}"), -1) for k in keys]
        new = [(*_row(rows + round_ * half + i, "new"), 1) for i in range(half)]
    return spark.createDataFrame(old + new, f"{SCHEMA}, _weight bigint")


def _timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def _old_ensure_table(spark: SparkSession, identifier: str, frame: DataFrame) -> None:
    """What the sink ran before every refresh: two Spark SQL statements."""
    namespace = identifier.rsplit(".", 1)[0]
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lakehouse.{namespace}")
    columns = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in frame.schema.fields)
    spark.sql(f"CREATE TABLE IF NOT EXISTS lakehouse.{identifier} ({columns}) USING iceberg "
              f"TBLPROPERTIES ('format-version' = '2', 'write.merge.mode' = 'copy-on-write', "
              f"'write.delete.mode' = 'copy-on-write', 'write.update.mode' = 'copy-on-write')")


def _run_path(spark: SparkSession, catalog: RestCatalog, path: str, keyed: bool,
              args: argparse.Namespace) -> dict[str, Any]:
    identifier = f"bench.{path}_{'keyed' if keyed else 'multiset'}"
    key = ["k"] if keyed else None
    sink = IcebergSink(spark, catalog, "lakehouse", identifier)
    sink.frontier()
    sink.ensure_table(_table_rows(spark, 0).schema)
    sink.replace(to_arrow(_table_rows(spark, args.rows)), {"s": 0})
    times, collects = [], []
    for round_ in range(args.repeats + 1):
        delta = _delta(spark, args.delta, args.rows, round_, keyed).cache()
        delta.count()
        elapsed, collect = _one_refresh(spark, catalog, identifier, path, delta, key, round_)
        times.append(elapsed)
        collects += [collect] if collect is not None else []
        delta.unpersist()
    times, collects = times[1:], collects[1:]  # the first round warms up
    result = {"median_s": round(statistics.median(times), 3),
              "runs_s": [round(t, 3) for t in times], "load": os.getloadavg()[0]}
    if collects:
        result["to_arrow_median_s"] = round(statistics.median(collects), 3)
    rows = catalog.load_table(identifier).scan().to_arrow().num_rows
    result["rows_after"] = rows
    return result


def _one_refresh(spark: SparkSession, catalog: RestCatalog, identifier: str, path: str,
                 delta: DataFrame, key: list[str] | None,
                 round_: int) -> tuple[float, float | None]:
    """Seconds of one refresh's sink work, and of collecting the delta (Arrow path)."""
    sink = IcebergSink(spark, catalog, "lakehouse", identifier,  # a refresh's new sink
                       arrow_max_rows=0 if path == "spark" else 1_000_000)
    frontier = {"s": round_ + 1}
    if path == "spark":
        def work() -> None:
            sink.frontier()
            _old_ensure_table(spark, identifier, delta.drop("_weight"))
            sink.apply(delta, key, frontier)
        return _timed(work), None
    started = time.perf_counter()
    arrow = to_arrow(delta)
    collect_s = time.perf_counter() - started

    def apply() -> None:
        sink.frontier()
        sink.ensure_table(delta.drop("_weight").schema)
        sink.apply(arrow, key, frontier)
    return _timed(apply), collect_s


def _floor(spark: SparkSession, repeats: int) -> dict[str, Any]:
    spark.sql("CREATE TABLE lakehouse.bench.floor_probe (id bigint, note string) USING iceberg "
              "TBLPROPERTIES ('format-version' = '2')")
    times = [_timed(lambda i=i: spark.sql(f"INSERT INTO lakehouse.bench.floor_probe "
                                          f"VALUES ({i}, 'x')")) for i in range(repeats + 1)]
    return {"median_s": round(statistics.median(times[1:]), 3),
            "runs_s": [round(t, 3) for t in times[1:]], "load": os.getloadavg()[0]}


def _nodelay_bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.sink_apply",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--delta", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--nodelay", action="store_true")
    args = parser.parse_args()
    if args.nodelay:
        catalog_server._bind = _nodelay_bind  # type: ignore[assignment]
    root = Path(tempfile.mkdtemp(prefix="sink_apply_"))
    (root / "warehouse").mkdir()
    settings = CatalogSettings(warehouse=(root / "warehouse").as_uri(),
                               database_url=f"sqlite:///{root / 'catalog.db'}")
    server = serve_in_thread(settings)
    spark = build_spark_session(app_name="sink-apply", catalog_name="lakehouse",
                                catalog_uri=server.uri, warehouse=settings.warehouse)
    spark.sparkContext.setLogLevel("ERROR")
    catalog = RestCatalog("bench", uri=server.uri)
    catalog.create_namespace("bench")
    try:
        print(f"floor: {_floor(spark, args.repeats)}", flush=True)
        for keyed in (True, False):
            for path in ("spark", "arrow"):
                result = _run_path(spark, catalog, path, keyed, args)
                print(f"{path} {'keyed' if keyed else 'multiset'}: {result}", flush=True)
    finally:
        spark.stop()
        server.stop()


if __name__ == "__main__":
    main()
