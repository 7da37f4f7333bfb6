"""TPC-H refreshes: incremental vs Spark full refresh vs DuckDB full recompute (parts 1-3, 6).

Per scale factor: the TPC-H tables are loaded into Iceberg through Spark and the REST catalog;
views Q1, Q3 (ORDER BY/LIMIT dropped: a view has no order) and Q5 are declared once
``refresh: full`` and once ``refresh: incremental`` per engine of ``engines`` (``engine: auto``,
``engine: spark``, ...; docs/config.md), each with the Iceberg and Delta sinks: a query's views
all see the same commits. Then, on the pristine tables:

- scaling: a fixed change (``FIXED_ORDERS`` new orders with their line items, ~1,000 rows;
  then the same number deleted, and, when asked, deleted once more under copy-on-write for
  contrast) refreshed incrementally by every engine's view, repeated;
- floor: a one-row pyiceberg append (``table.append`` of a one-row Arrow table) to a small
  Iceberg table through the same catalog; and, labelled apart, the former floor, a one-row
  Spark ``INSERT`` into another one;
- batches (when asked): RF1 inserts ``f`` x orders new orders with their line items (Spark
  appends), refresh; RF2 deletes ``f`` x orders orders with their line items (Spark DELETE,
  merge-on-read: position delete files), refresh; ``f`` in 0.1%, 1%, 10%. Each refresh is
  timed for every engine's incremental view, the full view, and DuckDB's recompute of the
  same SQL over the same Iceberg tables (ATTACH to the REST catalog); then (untimed) each
  incremental view's rows are checked against the full view's and DuckDB's
  (:mod:`tests.benchmarks.verify`);
- profile: one more fixed change refreshed under cProfile (driver side), every engine's views.

Every incremental refresh records the engine it ran on and why (``RefreshResult.engine``,
``engine_reason``): ``engine: auto`` runs a tick on the local engine or on Spark by its
sizes. After each change the engines' views refresh one after the other, in an order rotated
by change (``order`` in the results): the second one finds the manifests the first decoded.
The Spark session is built from :class:`SparkSetup`: ``--master`` (a standalone cluster's
``spark://host:7077``; its workers must read the benchmark folder, ``BENCH_DIR``, at the same
path: the generated Parquet files and the ``file:`` warehouse are there) and
``--driver-memory``. The driver's peak RSS (Python and its JVM) is recorded per refresh and
over each scale factor's run.

``orders`` and ``lineitem``, the tables RF1 and RF2 change, are merge-on-read (as
docs/change-feeds.md recommends for sources); the other six are never changed.
"""

from __future__ import annotations

import cProfile
import re
import shutil
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from catalog_api import CatalogSettings, serve_in_thread
from ivm import local_refusal
from lakehouse.config import parse_config
from lakehouse.duckdb_client import attach_catalog, connect
from lakehouse.runtime import Runtime
from tests.benchmarks.common import (
    WORK,
    MemoryProbe,
    jvm_heap_peak,
    load_average,
    median_sample,
    process_cpu_s,
    read_results,
    reset_jvm_peak,
    save_part,
    worst_check,
)
from tests.benchmarks.profile import breakdown, top_functions
from tests.benchmarks.verify import compare
from tests.tpch.data import generate
from tests.tpch.queries import load
from tests.tpch.schema import SCHEMAS, TABLES

QUERIES = {"q1": 1, "q3": 3, "q5": 5}
FRACTIONS = (0.001, 0.01, 0.1)
FIXED_ORDERS = 250
"""Orders per fixed change: with their line items (4 per order on average) ~1,000 rows."""
KEY_OFFSET = 1_000_000_000
"""New orders get ``key + n * KEY_OFFSET``: above every generated key (SF 3: 18M)."""
SPARK_CONF = {"spark.driver.memory": "8g", "spark.sql.shuffle.partitions": "4"}
"""The Spark settings of a local run (:class:`SparkSetup`'s defaults)."""
ENGINES = ("auto", "spark")
"""The engines whose incremental views are timed side by side (``--engines``)."""
CHANGED = ("orders", "lineitem")
"""The tables RF1 and RF2 change: merge-on-read (deletes write position delete files)."""
ROW_LEVEL = ("delete", "update", "merge")


def view_sql(query: str) -> str:
    """The view's SQL: the query file without comments; Q3 without ORDER BY ... LIMIT."""
    lines = [ln for ln in load(QUERIES[query]).sql.splitlines() if not ln.startswith("--")]
    return re.split(r"\bORDER BY\b", "\n".join(lines))[0].strip()


def namespace(sf: float) -> str:
    """``sf0_1`` for SF 0.1."""
    return "sf" + f"{sf:g}".replace(".", "_")


@dataclass(frozen=True)
class SparkSetup:
    """The Spark session of the TPC-H part (the pipeline's ``spark`` config section).

    Attributes:
        master: ``spark.master``; None leaves the pipeline's default (``local[2]``).
        driver_memory: ``spark.driver.memory`` (only the first session of the process).
        conf: More ``spark.conf`` properties (``--spark-conf``), over the defaults.
    """

    master: str | None = None
    driver_memory: str = SPARK_CONF["spark.driver.memory"]
    conf: dict[str, str] = field(default_factory=dict)

    def section(self) -> dict[str, Any]:
        """The ``spark`` section of the pipeline's config."""
        conf = {**SPARK_CONF, "spark.driver.memory": self.driver_memory, **self.conf}
        return {"conf": conf, **({"master": self.master} if self.master else {})}


class TpchBench:
    """One scale factor's tables, views and runtime.

    Args:
        sf: The TPC-H scale factor.
        uri: The REST catalog's base URI.
        warehouse: The warehouse folder the catalog serves.
        engines: The engines to declare an incremental view of each query for; the first
            is the default of the methods taking an ``engine``.
        spark: The Spark session's settings.
    """

    def __init__(self, sf: float, uri: str, warehouse: Path,
                 engines: tuple[str, ...] = ("auto",), spark: SparkSetup | None = None):
        self.sf, self.uri, self.ns = sf, uri, namespace(sf)
        self.engines = engines
        self.data = generate_cached(sf)
        views = [{"name": self.view_name(q, "full"), "sql": view_sql(q), "refresh": "full"}
                 for q in QUERIES]
        views += [{"name": self.view_name(q, "incremental", e), "sql": view_sql(q),
                   "refresh": "incremental", "engine": e} for q in QUERIES for e in engines]
        config = parse_config({
            "warehouse": str(warehouse), "catalog": {"embedded": False, "uri": uri},
            "spark": (spark or SparkSetup()).section(),
            "sources": {t: {"iceberg": f"{self.ns}.{t}"} for t in TABLES},
            "views": views,
        })
        self.runtime = Runtime(config)
        self.spark = self.runtime.spark
        self.probe = MemoryProbe()
        self.duck = connect()
        self.batch_number = 0

    def view_name(self, query: str, mode: str, engine: str | None = None) -> str:
        """``sf1.q1_full``; ``sf1.q1_incremental_spark`` (an incremental view per engine)."""
        if mode == "full":
            return f"{self.ns}.{query}_full"
        return f"{self.ns}.{query}_incremental_{engine or self.engines[0]}"

    def order(self) -> tuple[str, ...]:
        """The engines in the order their views refresh after the latest change: rotated by
        change, so neither always finds the manifests and caches the other warmed."""
        shift = self.batch_number % len(self.engines)
        return self.engines[shift:] + self.engines[:shift]

    def session(self) -> dict[str, Any]:
        """The Spark session the part runs on: master, driver memory, executors."""
        context = self.spark.sparkContext
        try:  # the driver is listed too
            executors = len(context._jsc.sc().statusTracker().getExecutorInfos()) - 1
        except Exception:  # noqa: BLE001 - best effort, for the report only
            executors = None
        return {"master": context.master,
                "driver_memory": context.getConf().get("spark.driver.memory"),
                "default_parallelism": context.defaultParallelism, "executors": executors}

    def table(self, name: str) -> str:
        """The Spark name of a source table."""
        return f"lakehouse.{self.ns}.{name}"

    def load_tables(self) -> dict[str, Any]:
        """Create the eight Iceberg tables from the generated Parquet files."""
        self.runtime.catalog.create_namespace(self.ns)
        started = time.perf_counter()
        files: dict[str, dict[str, Any]] = {}
        for name in TABLES:
            frame = self.spark.read.parquet(str(self.data / f"{name}.parquet"))
            frame = frame.select(*[frame[c].cast(t).alias(c) for c, t in SCHEMAS[name].items()])
            writer = frame.writeTo(self.table(name)).using("iceberg") \
                .tableProperty("format-version", "2")
            mode = "merge-on-read" if name in CHANGED else "copy-on-write"
            for operation in ROW_LEVEL:
                writer = writer.tableProperty(f"write.{operation}.mode", mode)
            writer.create()
            table = self.runtime.catalog.load_table(f"{self.ns}.{name}")
            snapshot = table.current_snapshot()
            assert snapshot is not None and snapshot.summary is not None, name
            files[name] = {k: int(snapshot.summary[k] or 0)
                           for k in ("total-data-files", "total-records")}
            files[name]["row_groups"] = row_groups(table)
        return {"load_s": round(time.perf_counter() - started, 2), "tables": files}

    def view(self, query: str, mode: str, engine: str | None = None) -> Any:
        """The config of one view (an incremental one: of ``engine``, else the first)."""
        return self.runtime.config.view(self.view_name(query, mode, engine))

    def refresh(self, query: str, mode: str, expect: str,
                engine: str | None = None) -> dict[str, Any]:
        """Refresh one view; wall time, CPU time (driver and JVM), rows, peak memory, load,
        and the engine the refresh ran on (``engine``) and why (``engine_reason``)."""
        reset_jvm_peak(self.spark)
        view = self.view(query, mode, engine)
        with self.probe.active(), self.jobs(view.name) as jobs:
            started, cpu_s = time.perf_counter(), process_cpu_s()
            result = self.runtime.refresh(view)
            seconds, cpu_s = time.perf_counter() - started, process_cpu_s() - cpu_s
        assert result.mode == expect, (query, mode, result.mode, result.reason)
        return {"s": round(seconds, 3), "cpu_s": round(cpu_s, 3), "rows_in": result.rows_in,
                "rows_out": result.rows_out, "engine": result.engine,
                "engine_reason": result.engine_reason,
                "spark_jobs": len(jobs), "load": load_average()[0],
                **self.probe.result(jvm_heap_peak(self.spark))}

    @contextmanager
    def jobs(self, view: str) -> Iterator[set[int]]:
        """Collects the ids of the Spark jobs a refresh of ``view`` runs inside the block.

        The runtime runs a view's jobs in a job group named after the view
        (``Runtime._spark_pool``, for its progress bar): the jobs of that group started
        meanwhile.
        """
        context = self.spark.sparkContext
        tracker, bus = context.statusTracker(), context._jsc.sc().listenerBus()
        bus.waitUntilEmpty()  # the tracker learns of jobs from the listener bus
        before, started = set(tracker.getJobIdsForGroup(view)), set[int]()
        yield started
        bus.waitUntilEmpty()
        started.update(set(tracker.getJobIdsForGroup(view)) - before)

    def refresh_engines(self, query: str) -> dict[str, dict[str, Any]]:
        """Refresh ``query``'s incremental view of every engine, in :meth:`order`."""
        return {e: self.refresh(query, "incremental", "incremental", e) for e in self.order()}

    def duckdb(self, query: str) -> tuple[dict[str, Any], Any]:
        """DuckDB's full recompute of the view's SQL over the same Iceberg tables; its rows."""
        with self.probe.active():
            started = time.perf_counter()
            rows = self.duck.execute(view_sql(query)).fetch_arrow_table()
            seconds = time.perf_counter() - started
        return {"s": round(seconds, 3), "rows_out": rows.num_rows, "load": load_average()[0],
                **self.probe.result()}, rows

    def view_rows(self, query: str, mode: str, engine: str | None = None) -> Any:
        """The rows of a view's Iceberg table (pyiceberg, at its current snapshot)."""
        name = self.view_name(query, mode, engine)
        return self.runtime.catalog.load_table(name).scan().to_arrow()

    def check(self, query: str, duckdb_rows: Any | None = None,
              engine: str | None = None) -> dict[str, Any]:
        """An incremental view's rows (``engine``'s, else the first engine's) against the
        full view's (and DuckDB's, if given)."""
        incremental = self.view_rows(query, "incremental", engine)
        out = {"full": compare(incremental, self.view_rows(query, "full"))}
        if duckdb_rows is not None:
            out["duckdb"] = compare(incremental, duckdb_rows)
        return out

    def check_engines(self, query: str, duckdb_rows: Any | None = None) -> dict[str, Any]:
        """:meth:`check` of every engine's view of ``query``, by engine."""
        return {e: self.check(query, duckdb_rows, e) for e in self.engines}

    def attach_duckdb(self) -> None:
        """ATTACH the REST catalog and make the scale factor's namespace the default."""
        attach_catalog(self.duck, self.uri, "lake")
        self.duck.execute(f"USE lake.{self.ns}")

    def laws(self) -> dict[str, str]:
        """How each view's top node is maintained (``lakehouse explain``'s law)."""
        out = {}
        for q in QUERIES:
            root = self.runtime.plan(self.view(q, "incremental")).root
            out[q] = f"{getattr(root.law, 'value', root.law)}: {root.detail[:70]}"
        return out

    def local_refusals(self) -> dict[str, str | None]:
        """Why the local engine can take no tick of each view, or None when small ones can
        run on it (``lakehouse explain``'s verdict; the plan is the same for every engine)."""
        return {q: local_refusal(self.runtime.plan(self.view(q, "incremental")))
                for q in QUERIES}

    def initial(self) -> dict[str, Any]:
        """The first (full) refresh of every view."""
        out = {f"{q}_full": self.refresh(q, "full", "full") for q in QUERIES}
        for q in QUERIES:
            for e in self.engines:
                out[f"{q}_incremental_{e}"] = self.refresh(q, "incremental", "full", e)
        return out

    # -- changes -----------------------------------------------------------------------

    def _keys(self, count: int, seed: int) -> None:
        """Temp view ``bench_keys(k)``: ``count`` existing original order keys, by hash."""
        keys = self.spark.sql(
            f"SELECT o_orderkey AS k FROM {self.table('orders')} WHERE o_orderkey < {KEY_OFFSET}"
            f" ORDER BY xxhash64(o_orderkey, {seed}) LIMIT {count}").localCheckpoint(eager=True)
        keys.createOrReplaceTempView("bench_keys")

    def insert_orders(self, count: int) -> dict[str, Any]:
        """RF1: ``count`` new orders (copies under unused keys) with their line items."""
        self.batch_number += 1
        offset = self.batch_number * KEY_OFFSET
        self._keys(count, seed=self.batch_number)
        started = time.perf_counter()
        rows = {}
        for name, key in (("orders", "o_orderkey"), ("lineitem", "l_orderkey")):
            columns = ", ".join(f"{c} + {offset} AS {c}" if c == key else c
                                for c in SCHEMAS[name])
            frame = self.spark.sql(f"SELECT {columns} FROM {self.table(name)} "
                                   f"JOIN bench_keys ON {key} = k").localCheckpoint(eager=True)
            rows[name] = frame.count()
            frame.writeTo(self.table(name)).append()
        return {"kind": "insert", "orders": count, "rows": rows,
                "commit_s": round(time.perf_counter() - started, 2)}

    def delete_orders(self, count: int, mode: str = "merge-on-read") -> dict[str, Any]:
        """RF2: delete ``count`` original orders with their line items.

        ``mode`` is the tables' ``write.delete.mode`` for this delete: ``merge-on-read``
        (as loaded: position delete files) or ``copy-on-write`` (set for this delete only:
        every data file holding a deleted row is rewritten).
        """
        self.batch_number += 1
        self._keys(count, seed=1000 + self.batch_number)
        items = self.spark.sql(f"SELECT count(*) FROM {self.table('lineitem')} "
                               "JOIN bench_keys ON l_orderkey = k").first()[0]  # type: ignore
        self._delete_mode(mode)
        started = time.perf_counter()
        self.spark.sql(f"DELETE FROM {self.table('lineitem')} "
                       "WHERE l_orderkey IN (SELECT k FROM bench_keys)")
        self.spark.sql(f"DELETE FROM {self.table('orders')} "
                       "WHERE o_orderkey IN (SELECT k FROM bench_keys)")
        commit_s = time.perf_counter() - started
        self._delete_mode("merge-on-read")
        return {"kind": "delete", "mode": mode, "orders": count,
                "rows": {"orders": count, "lineitem": items}, "commit_s": round(commit_s, 2)}

    def _delete_mode(self, mode: str) -> None:
        """Set ``write.delete.mode`` of the changed tables (a metadata-only commit)."""
        for name in CHANGED:
            current = self.runtime.catalog.load_table(f"{self.ns}.{name}").properties
            if current.get("write.delete.mode") != mode:
                self.spark.sql(f"ALTER TABLE {self.table(name)} SET TBLPROPERTIES "
                               f"('write.delete.mode' = '{mode}')")

    # -- parts ---------------------------------------------------------------------------

    def scaling(self, repeats: int, delete: bool, cow_delete: bool) -> dict[str, Any]:
        """Refresh every incremental view after a fixed insert, ``repeats`` times, then after
        ``1 + repeats`` fixed deletes (when ``delete``), then after a copy-on-write one
        (``cow_delete``). The report takes the median of each kind's refreshes.

        One untimed fixed insert and refresh of every view comes first: the first
        incremental refreshes of a session run cold (class loading, JIT), which would make
        the first scale factor look slower than the next. Likewise the first delete decodes
        the data files' columns that the refresher then keeps (``column_cache_bytes``): it
        is recorded apart (``delete_first``), and ``delete`` holds the next ones, the steady
        state of a running refresher. The full views are caught up at the end and every
        incremental view is checked against its full view (untimed). Each run's
        ``refresh`` holds, by query, each engine's refresh.
        """
        self.insert_orders(FIXED_ORDERS)
        for q in QUERIES:
            for e in self.engines:
                self.runtime.refresh(self.view(q, "incremental", e))
        runs: dict[str, Any] = {"insert": [], "delete_first": [], "delete": [], "delete_cow": []}
        plan = [("insert", r) for r in range(repeats)]
        if delete:
            plan += [("delete_first", 0)] + [("delete", r) for r in range(repeats)]
        for kind, repeat in plan + [("delete_cow", 0)] * cow_delete:
            if kind == "insert":
                change = self.insert_orders(FIXED_ORDERS)
            else:
                mode = "copy-on-write" if kind == "delete_cow" else "merge-on-read"
                change = self.delete_orders(FIXED_ORDERS, mode)
            order = self.order()
            refreshes = {q: self.refresh_engines(q) for q in QUERIES}
            runs[kind].append({"change": change, "refresh": refreshes, "repeat": repeat,
                               "order": list(order)})
            print(f"  SF {self.sf} fixed {kind}: " + ", ".join(
                f"{q} {e} {r['s']:.2f}s ({r['engine']})" for q in QUERIES
                for e, r in refreshes[q].items()), flush=True)
        for q in QUERIES:  # catch the full views up outside the measurements
            self.runtime.refresh(self.view(q, "full"))
        runs["check"] = {q: self.check_engines(q) for q in QUERIES}
        return runs

    def floor(self, repeats: int = 5) -> dict[str, Any]:
        """A one-row pyiceberg append (``table.append``) to a small Iceberg table through the
        same catalog, the commit a tick cannot beat; ``with_load_table_s``: the same with
        the table loaded from the catalog first, as a tick loads its view's table."""
        schema = Schema(NestedField(1, "id", LongType(), required=False),
                        NestedField(2, "note", StringType(), required=False))
        catalog = self.runtime.catalog
        table = catalog.create_table(f"{self.ns}.floor_append", schema,
                                     properties={"format-version": "2"})
        times, loaded = [], []
        for i in range(repeats + 1):  # the held table stays current: it made every commit
            row = pa.table({"id": pa.array([i], pa.int64()), "note": ["x"]})
            started = time.perf_counter()
            table.append(row)
            times.append(time.perf_counter() - started)
        for i in range(repeats + 1):
            row = pa.table({"id": pa.array([i], pa.int64()), "note": ["y"]})
            started = time.perf_counter()
            catalog.load_table(f"{self.ns}.floor_append").append(row)
            loaded.append(time.perf_counter() - started)
        times, loaded = times[1:], loaded[1:]  # the first ones run cold
        return {"kind": "pyiceberg append", "s": round(statistics.median(times), 3),
                "runs_s": [round(t, 3) for t in times],
                "with_load_table_s": round(statistics.median(loaded), 3),
                "load": load_average()[0]}

    def floor_spark_insert(self, repeats: int = 5) -> dict[str, Any]:
        """The former floor: a one-row Spark INSERT into a small Iceberg table through the
        same catalog."""
        name = self.table("floor_probe")
        self.spark.sql(f"CREATE TABLE {name} (id bigint, note string) USING iceberg "
                       "TBLPROPERTIES ('format-version' = '2')")
        times = []
        for i in range(repeats + 1):
            started = time.perf_counter()
            self.spark.sql(f"INSERT INTO {name} VALUES ({i}, 'x')")
            times.append(time.perf_counter() - started)
        times = times[1:]  # the first one plans and compiles cold
        return {"kind": "spark insert", "s": round(statistics.median(times), 3),
                "runs_s": [round(t, 3) for t in times], "load": load_average()[0]}

    def batches(self, fractions: tuple[float, ...], delete_fractions: tuple[float, ...],
                small_repeats: int = 1) -> list[dict[str, Any]]:
        """RF1 (and RF2 at ``delete_fractions``) at each fraction; after each, every view and
        DuckDB, side by side.

        The smallest fraction, the one the speed-up targets are about, runs
        ``small_repeats`` batches of each kind: its row holds the median sample of each
        refresh (see :func:`median_sample`), so one slow tick does not decide a target.
        """
        orders = self.spark.table(self.table("orders")).count()
        out = []
        for fraction in fractions:
            count = max(1, round(fraction * orders))
            kinds = ("insert", "delete") if fraction in delete_fractions else ("insert",)
            repeats = small_repeats if fraction == min(fractions) else 1
            for kind in kinds:
                samples = [self._batch(kind, count) for _ in range(repeats)]
                row: dict[str, Any] = {"fraction": fraction, "kind": kind,
                                       "change": samples[0]["change"], "repeats": repeats}
                row["orders"] = [s["order"] for s in samples]
                for q in QUERIES:
                    row[q] = {mode: median_sample([s[q][mode] for s in samples])
                              for mode in ("full", "duckdb")}
                    row[q]["incremental"] = {
                        e: median_sample([s[q]["incremental"][e] for s in samples])
                        for e in self.engines}
                    row[q]["check"] = {e: worst_check([s[q]["check"][e] for s in samples])
                                       for e in self.engines}
                out.append(row)
                print(f"  SF {self.sf} {fraction:.1%} {kind} (x{repeats}): " + ", ".join(
                    f"{q} " + " ".join(f"{e} {r['s']:.2f}s ({r['engine']})"
                                       for e, r in row[q]["incremental"].items())
                    + f" full {row[q]['full']['s']:.1f}s duck {row[q]['duckdb']['s']:.2f}s"
                    for q in QUERIES), flush=True)
        return out

    def _batch(self, kind: str, count: int) -> dict[str, Any]:
        """One batch of ``count`` orders (``insert`` or ``delete``); every view refreshed
        incrementally (each engine's) and fully, DuckDB's recompute, and the untimed checks."""
        change = (self.insert_orders if kind == "insert" else self.delete_orders)(count)
        sample: dict[str, Any] = {"change": change, "order": list(self.order())}
        for q in QUERIES:
            sample[q] = {"incremental": self.refresh_engines(q),
                         "full": self.refresh(q, "full", "full")}
            sample[q]["duckdb"], duckdb_rows = self.duckdb(q)
            sample[q]["check"] = self.check_engines(q, duckdb_rows)
        return sample

    def budgets(self) -> dict[str, int]:
        """The driver's budgets (``column_cache_bytes``, the partner read limit) and the bytes
        of decoded columns, key indexes and delete positions the cache holds now."""
        config = self.runtime.config
        return {"column_cache_bytes": config.column_cache_bytes,
                "kept_bytes": self.runtime.column_cache.size_bytes,
                "driver_read_max_rows": config.driver_read_max_rows}

    def profile(self, delete_views: tuple[str, ...]) -> dict[str, Any]:
        """A fixed insert (every view) and a fixed delete (``delete_views``), each refreshed
        under cProfile (driver side), every engine's view; keys ``q1_spark_insert``."""
        out = {}
        for kind, views in (("insert", tuple(QUERIES)), ("delete", delete_views)):
            (self.insert_orders if kind == "insert" else self.delete_orders)(FIXED_ORDERS)
            for q in views:
                for e in self.order():
                    profiler, view = cProfile.Profile(), self.view(q, "incremental", e)
                    with self.jobs(view.name) as jobs:
                        started = time.perf_counter()
                        result = profiler.runcall(self.runtime.refresh, view)
                        seconds = time.perf_counter() - started  # not the jobs' counting
                    out[f"{q}_{e}_{kind}"] = {
                        "s": round(seconds, 3), "engine": e,
                        "ran_on": result.engine, "engine_reason": result.engine_reason,
                        "spark_jobs": len(jobs),
                        "load": load_average()[0], "top": top_functions(profiler),
                        "breakdown": breakdown(profiler)}
        return out


def row_groups(table: Any) -> dict[str, int]:
    """Parquet row groups of a table's current data files: count and largest, in rows.

    A change feed of merge-on-read deletes reads whole row groups (those holding a deleted
    position), so their size bounds its cost.
    """
    groups = []
    for task in table.scan().plan_files():
        with table.io.new_input(task.file.file_path).open() as stream:
            metadata = pq.ParquetFile(stream).metadata
            groups += [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
    return {"count": len(groups), "max_rows": max(groups, default=0)}


def generate_cached(sf: float) -> Path:
    """The TPC-H Parquet files at ``sf``, generated once into the benchmark folder."""
    folder = WORK / "tpch" / namespace(sf)
    if not (folder / "lineitem.parquet").exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        generate(folder, sf)
    return folder


@contextmanager
def fresh_catalog(name: str) -> Iterator[tuple[str, Path]]:
    """A REST catalog (SQLite) over an empty warehouse under the benchmark folder ``name``.

    Yields:
        The catalog's URI and the warehouse folder; the catalog stops on exit.
    """
    root = WORK / name
    shutil.rmtree(root, ignore_errors=True)
    (root / "warehouse").mkdir(parents=True)
    settings = CatalogSettings(warehouse=(root / "warehouse").as_uri(),
                               database_url=f"sqlite:///{root / 'catalog.db'}")
    server = serve_in_thread(settings, host="127.0.0.1", port=0)
    try:
        yield server.uri, root / "warehouse"
    finally:
        server.stop()


def run(scale_factors: list[float], batch_scale_factors: list[float], repeats: int = 5,
        fractions: tuple[float, ...] = FRACTIONS, delete_fractions: tuple[float, ...] = FRACTIONS,
        delete_scaling_below: float = 10.0, profile_deletes: tuple[str, ...] = tuple(QUERIES),
        large_fraction_below: float = 10.0, cow_delete_below: float = 1.0,
        batch_repeats: int = 3, engines: tuple[str, ...] = ENGINES,
        spark: SparkSetup | None = None) -> dict[str, Any]:
    """Every scale factor in one catalog and one Spark session; results by scale factor.

    Scale factors not run keep their entries from the results file. From
    ``delete_scaling_below`` on, only the first of ``delete_fractions`` runs RF2 and the
    fixed-delete scaling run is skipped; from ``large_fraction_below`` on, fractions of 10%
    and more are skipped; below ``cow_delete_below`` the scaling run adds one copy-on-write
    fixed delete. The fixed changes run ``repeats`` times each, the smallest batch
    ``batch_repeats`` times. The delete profile covers ``profile_deletes``. Every
    incremental refresh runs once per engine of ``engines``; ``spark`` sets the session.
    """
    sessions: list[TpchBench] = []
    results: dict[str, Any] = {"scale_factors": dict(
        read_results().get("tpch", {}).get("scale_factors", {}))}
    with fresh_catalog("tpch_run") as (uri, warehouse):
        try:
            for sf in scale_factors:
                started, load = time.time(), load_average()
                print(f"TPC-H SF {sf}: load", flush=True)
                whole = MemoryProbe(interval_s=0.5)  # the driver's peak over the whole run
                with whole.active():
                    bench = TpchBench(sf, uri, warehouse, engines, spark)
                    sessions.append(bench)
                    entry: dict[str, Any] = {"engines": list(engines),
                                             "load": bench.load_tables(),
                                             "initial": bench.initial()}
                    entry["laws"] = bench.laws()
                    entry["local_refusals"] = bench.local_refusals()
                    bench.attach_duckdb()
                    print(f"TPC-H SF {sf}: scaling, floor", flush=True)
                    entry["scaling"] = bench.scaling(repeats, delete=sf < delete_scaling_below,
                                                     cow_delete=sf < cow_delete_below)
                    entry["floor"] = bench.floor()
                    entry["floor_spark_insert"] = bench.floor_spark_insert()
                    print(f"TPC-H SF {sf}: floor {entry['floor']['s']:.3f}s (pyiceberg "
                          f"append), {entry['floor_spark_insert']['s']:.3f}s (Spark INSERT)",
                          flush=True)
                    if sf in batch_scale_factors:
                        print(f"TPC-H SF {sf}: batches", flush=True)
                        deletes = (delete_fractions if sf < delete_scaling_below
                                   else delete_fractions[:1])
                        sizes = tuple(f for f in fractions
                                      if f < 0.1 or sf < large_fraction_below)
                        entry["batches"] = bench.batches(sizes, deletes, batch_repeats)
                    print(f"TPC-H SF {sf}: profile", flush=True)
                    entry["profile"] = bench.profile(profile_deletes)
                    entry["budgets"] = bench.budgets()
                entry["meta"] = {"started": time.strftime("%H:%M:%S", time.localtime(started)),
                                 "wall_s": round(time.time() - started), "load_before": load,
                                 "load_after": load_average(), **bench.session(),
                                 "engines": list(engines), "driver_peak": whole.result(),
                                 "children_peak_mib": {n: round(b / 2**20, 1)
                                                       for n, b in sorted(whole.seen.items())}}
                previous = results["scale_factors"].get(f"{sf:g}", {})
                results["scale_factors"][f"{sf:g}"] = {**previous, **entry}  # keeps parts not run
                save_part("tpch", results)  # a later scale factor may not finish in time
                bench.duck.close()
                bench.spark.catalog.clearCache()
        finally:  # before the catalog stops: closing flushes the refresh history to it
            if sessions:  # the next part builds its own session, wired to its own catalog
                sessions[-1].runtime.close()
    return results
