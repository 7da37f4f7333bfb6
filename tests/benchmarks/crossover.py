"""Where a full refresh becomes cheaper than an incremental one (the ``crossover`` part).

The ``auto`` policy recomputes a view in full when its change feeds' rows exceed
``full_refresh_ratio`` times its sources' rows (``lakehouse/refresh.py``,
``_large_change_reason``); this part measures where that pays. At TPC-H SF 0.1, with the
tables and views of :mod:`tests.benchmarks.tpch_refresh` (Q1, Q3, Q5, each declared
``incremental`` and ``full``), for each fraction *f* of the orders (5% to 60%):

1. **insert**: RF1, *f* x |orders| new orders with their line items (Spark appends);
2. **delete**: RF2, *f* x |orders| original orders with their line items (Spark
   ``DELETE``, merge-on-read: position delete files);

after each, every view's incremental refresh and its Spark full refresh are timed side by
side, the incremental view is checked against the full one (:mod:`tests.benchmarks.verify`),
and the change's share is recorded as ``auto`` computes it: the change feeds' rows
(``RefreshResult.rows_in``) over the view's sources' rows at the new frontier
(``SourceReader.row_count``). Then (untimed) ``orders`` and ``lineitem`` are overwritten
with their generated Parquet files again and the incremental views catch up, so every
fraction starts from the loaded tables: deletes would otherwise exhaust the orders, and
the leftover position deletes and appended files would slow later full refreshes.
"""

from __future__ import annotations

import time
from typing import Any

from pyspark.sql import functions as F

from lakehouse.refresh import current_frontier
from tests.benchmarks.common import load_average
from tests.benchmarks.tpch_refresh import (
    CHANGED,
    FIXED_ORDERS,
    QUERIES,
    TpchBench,
    fresh_catalog,
)
from tests.tpch.schema import SCHEMAS

SCALE_FACTOR = 0.1
FRACTIONS = (0.05, 0.1, 0.2, 0.3, 0.45, 0.6)


class CrossoverBench(TpchBench):
    """:class:`TpchBench` with the change share of a refresh and a reset of the changed tables."""

    def share(self, query: str, rows_in: int) -> dict[str, Any]:
        """The change's share as ``auto`` computes it, at the sources' current versions."""
        view = self.view(query, "incremental")
        frontier = current_frontier(self.runtime.readers, self.runtime.plan(view).sources)
        input_rows = sum(self.runtime.readers[name].row_count(version)
                         for name, version in frontier.items())
        return {"change_rows": rows_in, "input_rows": input_rows,
                "share": round(rows_in / max(input_rows, 1), 5)}

    def side_by_side(self, query: str) -> dict[str, Any]:
        """Time the incremental and the full refresh of ``query``; share; check."""
        incremental = self.refresh(query, "incremental", "incremental")
        full = self.refresh(query, "full", "full")
        return {"incremental": incremental, "full": full,
                **self.share(query, incremental["rows_in"]), "check": self.check(query)}

    def reset(self) -> float:
        """Overwrite ``orders`` and ``lineitem`` with the generated data; incremental views
        catch up. Returns the seconds it took (untimed in the results' refreshes)."""
        started = time.perf_counter()
        for name in CHANGED:
            frame = self.spark.read.parquet(str(self.data / f"{name}.parquet"))
            frame = frame.select(*[frame[c].cast(t).alias(c) for c, t in SCHEMAS[name].items()])
            frame.writeTo(self.table(name)).overwrite(F.lit(True))
        for q in QUERIES:
            self.runtime.refresh(self.view(q, "incremental"))
        return round(time.perf_counter() - started, 1)

    def fraction(self, fraction: float, orders: int) -> list[dict[str, Any]]:
        """An insert and a delete of ``fraction`` x ``orders`` orders, each measured."""
        out = []
        count = max(1, round(fraction * orders))
        for kind in ("insert", "delete"):
            change = (self.insert_orders if kind == "insert" else self.delete_orders)(count)
            row: dict[str, Any] = {"fraction": fraction, "kind": kind, "change": change}
            for q in QUERIES:
                row[q] = self.side_by_side(q)
            out.append(row)
            print(f"  {fraction:.0%} {kind}: " + ", ".join(
                f"{q} share {row[q]['share']:.1%} inc {row[q]['incremental']['s']:.1f}s "
                f"full {row[q]['full']['s']:.1f}s" for q in QUERIES), flush=True)
        out[-1]["reset_s"] = self.reset()
        return out


def run(sf: float = SCALE_FACTOR, fractions: tuple[float, ...] = FRACTIONS) -> dict[str, Any]:
    """Load SF ``sf``, warm up, and measure every fraction; the part's results."""
    bench = None
    with fresh_catalog("crossover_run") as (uri, warehouse):
        try:
            bench = CrossoverBench(sf, uri, warehouse)
            out: dict[str, Any] = {"scale_factor": sf, "queries": list(QUERIES),
                                   "fractions": list(fractions), "load": bench.load_tables(),
                                   "initial": bench.initial()}
            # The first incremental refreshes of a session run cold (class loading, JIT).
            bench.insert_orders(FIXED_ORDERS)
            for q in QUERIES:
                bench.runtime.refresh(bench.view(q, "incremental"))
            out["warm_up_reset_s"] = bench.reset()
            orders = bench.spark.table(bench.table("orders")).count()
            out["batches"] = []
            for fraction in fractions:
                out["batches"] += bench.fraction(fraction, orders)
            out["load_after"] = load_average()
            bench.duck.close()
            bench.spark.catalog.clearCache()
        finally:  # before the catalog stops: closing flushes the refresh history to it
            if bench is not None:  # a later part builds its own session, wired to its catalog
                bench.runtime.close()
    return out
