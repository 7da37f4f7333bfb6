"""Time one small refresh's commit to each sink of a long-lived view, step by step.

``python -m tests.benchmarks.sink_commit [--rows 100] [--history 80] [--delta 8] [--repeats 7]
[--key k] [--profile] [--floor]``

A keyed view table of ``--rows`` rows (bigint key, string, decimal, date, int) gets
``--history`` small commits first (a long-lived view's sink: that many snapshots, manifests
and Delta log entries); then ``--repeats`` refreshes (after one warm-up) are timed, each
with a fresh sink object as a refresh makes: ``frontier()``, ``ensure_table()`` (Iceberg)
and the apply of a consolidated keyed ``--delta``-row Z-set (half the rows -1 old, half +1
new, same keys; ``--key k,n`` for a two-column key as ``GROUP BY a, b`` gives), Iceberg and
Delta apart. For Iceberg the catalog requests of each step are
counted (the pyiceberg HTTP session's responses). ``--profile`` prints one more refresh of
each sink under cProfile. ``--floor`` also starts Spark and times the floor (median one-row
Spark ``INSERT`` into Iceberg through the same catalog), as ``tests/benchmarks/sink_apply.py``.

The catalog runs in this process (``serve_in_thread``), as under an embedded
``lakehouse run``; the delta is already Arrow (its collection is not timed here).
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import io
import os
import pstats
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import requests
from pyiceberg.catalog.rest import RestCatalog
from pyspark.sql import SparkSession

from catalog_api import CatalogSettings, serve_in_thread
from sinks.delta import DeltaSink
from sinks.delta_tables import DeltaTables
from sinks.iceberg import IcebergSink

SCHEMA = pa.schema([("k", pa.int64()), ("name", pa.string()), ("amount", pa.decimal128(12, 2)),
                    ("day", pa.date32()), ("n", pa.int32())])
NO_SPARK = cast(SparkSession, None)
"""The Arrow path of the Iceberg sink never touches Spark."""


def _rows(keys: list[int], tag: str) -> dict[str, list[Any]]:
    return {"k": keys, "name": [f"{tag}{k}" for k in keys],
            "amount": [Decimal(f"{k % 1000}.25") for k in keys],
            "day": [dt.date(2024, 1, 1) + dt.timedelta(days=k % 900) for k in keys],
            "n": [k % 7 for k in keys]}


def _content(rows: int) -> pa.Table:
    return pa.table(_rows(list(range(rows)), "r"), schema=SCHEMA)


def _delta(size: int, rows: int, round_: int) -> pa.Table:
    """A keyed update of ``size // 2`` keys: the old row -1, the new row +1."""
    keys = [(round_ * 7 + i * 13) % rows for i in range(size // 2)]
    old = pa.table(_rows(keys, "x"), schema=SCHEMA)  # keyed: the old row's values don't matter
    new = pa.table(_rows(keys, f"v{round_}-"), schema=SCHEMA)
    weights = pa.array([-1] * len(keys) + [1] * len(keys), pa.int64())
    return pa.concat_tables([old, new]).append_column("_weight", weights)


class RequestLog:
    """Counts the catalog requests of pyiceberg's HTTP session (a response hook)."""

    def __init__(self, catalog: RestCatalog):
        self.requests: list[str] = []
        session = cast(requests.Session, catalog._session)
        session.hooks["response"].append(self._seen)

    def _seen(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        request = response.request
        self.requests.append(f"{request.method} {request.path_url.split('/v1/', 1)[-1]}")

    def take(self) -> list[str]:
        """The requests since the last call."""
        taken, self.requests = self.requests, []
        return taken


def _timed(steps: dict[str, float], name: str, fn: Callable[[], object]) -> None:
    started = time.perf_counter()
    fn()
    steps[name] = steps.get(name, 0.0) + time.perf_counter() - started


def _iceberg_refresh(catalog: RestCatalog, identifier: str, delta: pa.Table, round_: int,
                     key: list[str], log: RequestLog | None = None) -> dict[str, Any]:
    sink = IcebergSink(NO_SPARK, catalog, "lakehouse", identifier)
    steps: dict[str, Any] = {}
    requests_by_step: dict[str, list[str]] = {}
    for name, fn in (("frontier", sink.frontier),
                     ("ensure_table", lambda: sink.ensure_table(SCHEMA)),
                     ("apply", lambda: sink.apply(delta, key, {"s": round_}))):
        _timed(steps, name, fn)
        if log is not None:
            requests_by_step[name] = log.take()
    steps["total"] = sum(steps.values())
    if log is not None:
        steps["requests"] = requests_by_step
    return steps


_DELTA_TABLES = DeltaTables()
"""The Delta tables kept between refreshes, as the runtime keeps them."""


def _delta_refresh(uri: str, delta: pa.Table, round_: int, key: list[str]) -> dict[str, Any]:
    sink = DeltaSink(uri, app_id="lakehouse:bench", tables=_DELTA_TABLES)
    steps: dict[str, Any] = {}
    _timed(steps, "frontier", sink.frontier)
    _timed(steps, "apply", lambda: sink.apply(delta, key, {"s": round_}))
    sink.release()
    steps["total"] = sum(steps.values())
    return steps


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    names = [n for n in runs[0] if n != "requests"]
    out: dict[str, Any] = {f"{n}_s": round(statistics.median(r[n] for r in runs), 3)
                           for n in names}
    out["total_runs_s"] = [round(r["total"], 3) for r in runs]
    if "requests" in runs[-1]:
        out["requests"] = runs[-1]["requests"]
    return out


def _profile(fn: Callable[[], object], top: int) -> str:
    profiler = cProfile.Profile()
    profiler.runcall(fn)
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(top)
    return text.getvalue()


def _floor(settings: CatalogSettings, uri: str, repeats: int) -> dict[str, Any]:
    from lakehouse.spark.session import build_spark_session

    spark = build_spark_session(app_name="sink-commit", catalog_name="lakehouse",
                                catalog_uri=uri, warehouse=settings.warehouse)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        spark.sql("CREATE TABLE lakehouse.bench.floor_probe (id bigint, note string) USING "
                  "iceberg TBLPROPERTIES ('format-version' = '2')")
        times = []
        for i in range(repeats + 1):
            started = time.perf_counter()
            spark.sql(f"INSERT INTO lakehouse.bench.floor_probe VALUES ({i}, 'x')")
            times.append(time.perf_counter() - started)
        return {"median_s": round(statistics.median(times[1:]), 3)}
    finally:
        spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.sink_commit",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("--history", type=int, default=80)
    parser.add_argument("--delta", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--key", default="k", help="the view's key columns (k, name, n, ...)")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--top", type=int, default=35, help="cProfile lines shown")
    parser.add_argument("--floor", action="store_true")
    args = parser.parse_args()
    key = args.key.split(",")
    root = Path(tempfile.mkdtemp(prefix="sink_commit_"))
    (root / "warehouse").mkdir()
    settings = CatalogSettings(warehouse=(root / "warehouse").as_uri(),
                               database_url=f"sqlite:///{root / 'catalog.db'}")
    server = serve_in_thread(settings)
    catalog = RestCatalog("bench", uri=server.uri)
    catalog.create_namespace("bench")
    identifier, uri = "bench.view", str(root / "delta_view")
    try:
        first = IcebergSink(NO_SPARK, catalog, "lakehouse", identifier)
        first.frontier()
        first.ensure_table(SCHEMA)
        first.replace(_content(args.rows), {"s": 0})
        DeltaSink(uri, app_id="lakehouse:bench").replace(_content(args.rows), {"s": 0})
        for round_ in range(1, args.history + 1):
            delta = _delta(args.delta, args.rows, round_)
            _iceberg_refresh(catalog, identifier, delta, round_, key)
            _delta_refresh(uri, delta, round_, key)
        log = RequestLog(catalog)
        start = args.history + 1
        rounds = range(start, start + args.repeats + 1)
        iceberg = [_iceberg_refresh(catalog, identifier, _delta(args.delta, args.rows, r), r,
                                    key, log) for r in rounds][1:]
        delta_runs = [_delta_refresh(uri, _delta(args.delta, args.rows, r), r, key)
                      for r in rounds][1:]
        print(f"history: {args.history} commits, {args.rows} rows, key {key}, "
              f"delta {args.delta} rows, "
              f"load {[round(x, 2) for x in os.getloadavg()]}")
        print(f"iceberg: {_summary(iceberg)}")
        print(f"delta:   {_summary(delta_runs)}")
        if args.profile:
            last = rounds[-1] + 1
            print(_profile(lambda: _iceberg_refresh(
                catalog, identifier, _delta(args.delta, args.rows, last), last, key), args.top))
            print(_profile(lambda: _delta_refresh(
                uri, _delta(args.delta, args.rows, last), last, key), args.top))
        if args.floor:
            print(f"floor: {_floor(settings, server.uri, args.repeats)}")
        print(f"load {[round(x, 2) for x in os.getloadavg()]}")
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
