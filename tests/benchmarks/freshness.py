"""End-to-end freshness (part 5): source commit -> new view snapshot visible to pyiceberg.

The real deployment: ``lakehouse serve`` runs the catalog, ``lakehouse run`` maintains the
view (TPC-H Q1 over SF 0.1 ``lineitem``, ``every: on_change``, Iceberg and Delta sinks) in
its own process. This process commits one row at a time to the source with pyiceberg and
polls the view's table through the REST catalog until its current snapshot's frontier
names the new source snapshot. The scheduler checks ``on_change`` views every
``lakehouse.scheduler.ON_CHANGE_POLL_S`` (recorded as ``on_change_poll_s``), so on average
half of it is part of the lag.
"""

from __future__ import annotations

import math
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import NoSuchTableError

from lakehouse.scheduler import ON_CHANGE_POLL_S
from sinks.frontier import FRONTIER_KEY, decode_frontier
from tests.benchmarks.common import (
    WORK,
    MemoryProbe,
    free_port,
    lakehouse_process,
    load_average,
)
from tests.benchmarks.tpch_refresh import generate_cached, view_sql

SCALE_FACTOR = 0.1
VIEW = "fresh.q1"
SOURCE = "fresh.lineitem"
TIMEOUT_S = 180.0


def _wait(check: Any, what: str, timeout_s: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout_s} s for {what}")
        time.sleep(0.1)


def _frontier(catalog: RestCatalog) -> dict[str, int] | None:
    try:
        snapshot = catalog.load_table(VIEW).current_snapshot()
    except NoSuchTableError:
        return None
    return decode_frontier(snapshot.summary[FRONTIER_KEY]) if snapshot else None


def _config(root: Path, port: int) -> Path:
    path = root / "lakehouse.yaml"
    path.write_text(yaml.safe_dump({
        "warehouse": str(root / "warehouse"),
        "catalog": {"listen": f"127.0.0.1:{port}"},
        "spark": {"conf": {"spark.driver.memory": "4g"}},
        "sources": {"lineitem": {"iceberg": SOURCE}},
        "views": [{"name": VIEW, "sql": view_sql("q1"), "every": "on_change",
                   "refresh": "incremental"}],
    }))
    return path


def _ok(uri: str) -> bool:
    try:
        return httpx.get(uri.removesuffix("/iceberg") + "/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def run(commits: int = 50) -> dict[str, Any]:
    """``commits`` one-row commits, each waited for; lag percentiles and memory."""
    root = WORK / "freshness_run"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    port = free_port()
    config = _config(root, port)
    uri = f"http://127.0.0.1:{port}/iceberg"
    lineitem = pq.read_table(generate_cached(SCALE_FACTOR) / "lineitem.parquet")
    with lakehouse_process("serve", "--config", str(config), log=root / "serve.log"):
        _wait(lambda: _ok(uri), "the catalog")
        catalog = RestCatalog("bench", uri=uri)
        catalog.create_namespace("fresh")
        source = catalog.create_table(SOURCE, schema=lineitem.schema)
        source.append(lineitem)
        with lakehouse_process("run", "--config", str(config), "--metrics-listen", "",
                      log=root / "run.log") as runner:
            _wait(lambda: _frontier(catalog) is not None, "the initial load")
            probe = MemoryProbe(pid=runner.pid, interval_s=0.25)
            with probe.active():
                lags = _commits(catalog, lineitem, commits)
            memory = probe.result()
    return {"commits": commits, "lags_s": [round(x, 3) for x in lags],
            "p50_s": round(statistics.median(lags), 3),
            "p95_s": round(sorted(lags)[math.ceil(0.95 * len(lags)) - 1], 3),
            "max_s": round(max(lags), 3), "source_rows": lineitem.num_rows,
            "on_change_poll_s": ON_CHANGE_POLL_S,
            "load": load_average(), "memory": {"run_process_rss_mib": memory["driver_rss_mib"],
                                               "jvm_rss_mib": memory["children_rss_mib"]}}


def _commits(catalog: RestCatalog, rows: pa.Table, count: int) -> list[float]:
    lags = []
    for i in range(count):
        table = catalog.load_table(SOURCE)
        table.append(rows.slice(i, 1))
        committed = time.perf_counter()
        snapshot = table.current_snapshot().snapshot_id  # type: ignore[union-attr]
        _wait(lambda s=snapshot: (_frontier(catalog) or {}).get("lineitem") == s,
              f"commit {i} to reach the view")
        lags.append(time.perf_counter() - committed)
        print(f"  commit {i}: {lags[-1]:.2f} s", flush=True)
    return lags
