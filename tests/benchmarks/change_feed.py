"""Time the change feed of a scattered lineitem delete: ``python -m tests.benchmarks.change_feed``.

TPC-H ``lineitem`` is loaded twice into Iceberg through Spark and the REST catalog, once with
copy-on-write and once with merge-on-read deletes; then Spark deletes the line items of a
random 0.1% of the orders (TPC-H RF2) from each. Timed, per table, from the change feed call
to its row count (what a refresh does first):

- *before*: the Spark form (engine ``spark``): every changed data file read by the
  executors at both snapshots (:mod:`lakehouse.sources.iceberg_staged`), consolidated there
  (group by all);
- *after*: :meth:`IcebergSourceReader.change_feed` in Arrow (:mod:`lakehouse.sources.iceberg_feed`).

Both must give the same rows. Results go to ``<BENCH_DIR>/change_feed.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import time
from typing import Any

import pyarrow.parquet as pq
from pyiceberg.catalog import load_catalog
from pyspark.sql import DataFrame

from catalog_api import CatalogSettings, serve_in_thread
from lakehouse.sources.arrow_bridge import ArrowBridge
from lakehouse.sources.iceberg import IcebergSourceReader
from lakehouse.spark.session import build_spark_session
from tests.benchmarks.common import WORK, load_average
from tests.benchmarks.tpch_refresh import SPARK_CONF, generate_cached
from tests.tpch.schema import SCHEMAS

MODES = ("copy-on-write", "merge-on-read")


def on_spark(reader: IcebergSourceReader, old: int, new: int) -> DataFrame:
    """The change feed as engine ``spark`` computes it: the changed files read by executors."""
    return reader.change_feed(old, new, in_arrow=False).rows


def _timed(feed: Any, old: int, new: int) -> tuple[float, set[tuple[Any, ...]]]:
    started = time.perf_counter()
    frame = feed(old, new)
    frame.count()
    seconds = time.perf_counter() - started
    return seconds, {tuple(r) for r in frame.collect()}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.change_feed",
                                     description=__doc__)
    parser.add_argument("--scale-factor", type=float, default=0.2)
    parser.add_argument("--fraction", type=float, default=0.001)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    root = WORK / "change_feed_run"
    shutil.rmtree(root, ignore_errors=True)
    (root / "warehouse").mkdir(parents=True)
    server = serve_in_thread(CatalogSettings(warehouse=(root / "warehouse").as_uri(),
                                             database_url=f"sqlite:///{root / 'catalog.db'}"),
                             host="127.0.0.1", port=0)
    spark = build_spark_session(app_name="change-feed-bench", catalog_name="lakehouse",
                                catalog_uri=server.uri, warehouse=(root / "warehouse").as_uri(),
                                extra_conf=SPARK_CONF)
    catalog = load_catalog("bench", type="rest", uri=server.uri)
    catalog.create_namespace("bench")
    data = generate_cached(args.scale_factor) / "lineitem.parquet"
    orders = sorted(set(pq.read_table(data, columns=["l_orderkey"])["l_orderkey"].to_pylist()))
    deleted = random.Random(7).sample(orders, max(1, int(len(orders) * args.fraction)))
    results = []
    try:
        for mode in MODES:
            name = "lineitem_" + mode.replace("-", "_")
            frame = spark.read.parquet(str(data))
            frame = frame.select(*[frame[c].cast(t).alias(c)
                                   for c, t in SCHEMAS["lineitem"].items()])
            writer = frame.writeTo(f"lakehouse.bench.{name}").using("iceberg") \
                .tableProperty("format-version", "2")
            for operation in ("delete", "update", "merge"):
                writer = writer.tableProperty(f"write.{operation}.mode", mode)
            writer.create()
            reader = IcebergSourceReader(spark, catalog, "lakehouse", name, f"bench.{name}",
                                         bridge=ArrowBridge(spark, root / "scratch"))
            old = reader.current_version()
            spark.sql(f"DELETE FROM lakehouse.bench.{name} WHERE l_orderkey IN "
                      f"({', '.join(map(str, deleted))})")
            new = reader.current_version()
            assert old is not None and new is not None
            metadata = reader._table().metadata
            loaded = metadata.snapshot_by_id(old).summary  # type: ignore[union-attr]
            summary = metadata.snapshot_by_id(new).summary  # type: ignore[union-attr]
            for repeat in range(args.repeats):
                timings = {}
                rows = {}
                for label, feed in (("before", lambda o, n, r=reader: on_spark(r, o, n)),
                                    ("after", lambda o, n, r=reader: r.change_feed(o, n).rows)):
                    timings[label], rows[label] = _timed(feed, old, new)
                assert rows["before"] == rows["after"], mode
                result = {"mode": mode, "repeat": repeat,
                          "rows_table": int(loaded["total-records"] or 0),
                          "rows_changed": len(rows["after"]),
                          "data_files": int(summary["total-data-files"] or 0),
                          **{f"{k}_s": round(v, 2) for k, v in timings.items()},
                          "load": load_average()[0]}
                results.append(result)
                print(json.dumps(result), flush=True)
    finally:
        server.stop()
    (WORK / "change_feed.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
