"""View-table maintenance end to end: real catalog server, real Spark, real Delta tables.

Runtimes and pipelines are not closed (that would stop the test session's Spark); the CLI
runs in its own process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
import yaml
from deltalake import DeltaTable
from pyiceberg.catalog.rest import RestCatalog
from pyspark.sql import SparkSession

from catalog_api import serve_in_thread
from ivm import WEIGHT
from lakehouse.api import Pipeline
from lakehouse.config import parse_config
from lakehouse.history import RefreshHistory
from lakehouse.maintenance import RetentionPolicy, expirable_snapshots, maintain
from lakehouse.routes import PREFIX, views_router
from lakehouse.runtime import Runtime
from lakehouse.status import view_status
from lakehouse.subscriptions import Subscription
from sinks.frontier import FRONTIER_KEY
from tests.conftest import multiset
from tests.conftest_catalog import CatalogServerHandle
from tests.sse import change_events, eventually

pytestmark = pytest.mark.spark

UP_SQL = "SELECT k, SUM(v) AS total, COUNT(*) AS n FROM events GROUP BY k"
DOWN_SQL = "SELECT k, total FROM up WHERE total > 0"


def _config(server: CatalogServerHandle, namespace: str, views: list[dict[str, Any]],
            **maintenance: object) -> dict[str, Any]:
    return {
        "warehouse": str(server.warehouse),
        "catalog": {"embedded": False, "uri": server.uri},
        "history_table": f"history_{namespace}.refreshes",
        "sources": {"events": {"iceberg": f"{namespace}.events"},
                    "up": {"view": f"{namespace}.up"}},
        "views": views,
        "maintenance": maintenance,
    }


@pytest.fixture
def events(spark: SparkSession, catalog_namespace: str) -> str:
    """An Iceberg source ``events(k, v)`` with four rows."""
    table = f"lakehouse.{catalog_namespace}.events"
    spark.sql(f"CREATE TABLE {table} (k string, v int) USING iceberg "
              "TBLPROPERTIES ('format-version' = '2')")
    spark.sql(f"INSERT INTO {table} VALUES ('a', 1), ('b', 2), ('c', 3), ('a', 4)")
    return table


def _insert(spark: SparkSession, table: str, k: str, v: int) -> None:
    spark.sql(f"INSERT INTO {table} VALUES ('{k}', {v})")


def _rows(catalog: RestCatalog, identifier: str, snapshot_id: int | None = None) -> Counter:
    return multiset(tuple(r.values()) for r in
                    catalog.load_table(identifier).scan(snapshot_id=snapshot_id).to_arrow()
                    .to_pylist())


def _expected(runtime: Runtime, name: str) -> Counter:
    return multiset(tuple(r.values()) for r in
                    runtime.recompute(runtime.config.view(name)).to_pylist())


def _snapshot_ids(catalog: RestCatalog, identifier: str) -> list[int]:
    """The table's snapshots, oldest first."""
    snapshots = catalog.load_table(identifier).metadata.snapshots
    return [s.snapshot_id for s in sorted(snapshots, key=lambda s: s.timestamp_ms)]


def _changes(rows: Iterator[pa.Table]) -> dict[tuple[object, ...], int]:
    """The sum of Z-sets, consolidated (zero weights dropped)."""
    total: Counter = Counter()
    for table in rows:
        for row in table.to_pylist():
            weight = row.pop(WEIGHT)
            total[tuple(row.values())] += weight
    return {row: n for row, n in total.items() if n}


def _difference(old: Counter, new: Counter) -> dict[tuple[object, ...], int]:
    """``new`` - ``old`` as a Z-set (zero weights dropped)."""
    return {row: new[row] - old[row] for row in set(old) | set(new) if new[row] != old[row]}


def test_expiry_keeps_what_downstream_views_and_subscribers_hold(
    spark: SparkSession, catalog_server: CatalogServerHandle, rest_catalog: RestCatalog,
    catalog_namespace: str, events: str,
) -> None:
    ns = catalog_namespace
    data = _config(catalog_server, ns, [
        {"name": f"{ns}.up", "sql": UP_SQL, "sinks": ["iceberg"], "refresh": "incremental"},
        {"name": f"{ns}.down", "sql": DOWN_SQL, "sinks": ["iceberg"],
         "refresh": "incremental"},
    ], retain_for="0s", keep_snapshots=2, compact_min_files=1000)
    runtime, pipeline = Runtime(parse_config(data)), Pipeline(parse_config(data))
    up, down = runtime.config.views
    runtime.refresh(up)
    for value in (5, 6):
        _insert(spark, events, "b", value)
        assert runtime.refresh(up).mode == "incremental"
    assert runtime.refresh(down).mode == "full"  # reads up at U3
    for value in (7, 8, 9):  # up moves on, down stays behind at U3
        _insert(spark, events, "c", value)
        runtime.refresh(up)
    u1, u2, u3, u4, u5, u6 = _snapshot_ids(rest_catalog, up.name)

    result = maintain(runtime, up)
    assert result.expired_snapshot_ids == (u1, u2)  # strictly older than down's frontier
    assert _snapshot_ids(rest_catalog, up.name) == [u3, u4, u5, u6]
    assert result.held[u3] == (f"view {down.name} (iceberg frontier)",)
    assert result.held[u6] == ("the view's frontier",) and result.files_deleted > 0
    assert runtime.metrics.registry.get_sample_value(
        "lakehouse_snapshots_expired_total", {"view": up.name}) == 2
    caught_up = runtime.refresh(down)  # the kept U3 makes the change U3 -> U6 readable
    assert caught_up.mode == "incremental", caught_up.reason
    assert _rows(rest_catalog, down.name) == _expected(runtime, down.name)

    (initial,) = pipeline.subscribe(up.name, name="alice", follow=False)  # acknowledged: U6
    assert initial.snapshot_id == u6
    assert RefreshHistory(rest_catalog, f"history_{ns}.refreshes").subscribers(up.name) == {
        "alice": u6}
    live = Subscription(rest_catalog, up.name, since=u5)  # alive in this process
    _insert(spark, events, "a", 10)
    runtime.refresh(down)  # refreshes up (U7) first: down's frontier is U7
    for value in (11, 12):
        _insert(spark, events, "d", value)
        runtime.refresh(up)
    u7, u8, u9 = _snapshot_ids(rest_catalog, up.name)[-3:]
    result = maintain(runtime, up)
    assert result.expired_snapshot_ids == (u3, u4)  # the live subscription holds U5
    assert result.held[u5] == ("a live subscription",) and "subscriber alice" in result.held[u6]
    assert live.next_change() is not None  # U5 -> U6 still readable
    del live

    resumed = list(pipeline.subscribe(up.name, name="alice", follow=False))
    assert [change.snapshot_id for change in resumed] == [u7, u8, u9]  # each once, in order
    assert all(change.frontier for change in resumed)
    assert _changes(change.rows for change in resumed) == _difference(
        _rows(rest_catalog, up.name, u6), _rows(rest_catalog, up.name))
    assert list(pipeline.subscribe(up.name, name="alice", follow=False)) == []  # caught up
    pipeline.unsubscribe(up.name, "alice")
    assert maintain(runtime, up).expired_snapshot_ids == (u5, u6)  # U7: down's frontier


def test_compaction_changes_no_frontier_and_no_row(
    spark: SparkSession, catalog_server: CatalogServerHandle, rest_catalog: RestCatalog,
    catalog_namespace: str, events: str,
) -> None:
    ns = catalog_namespace
    data = _config(catalog_server, ns, [
        {"name": f"{ns}.up", "sql": "SELECT k, v FROM events WHERE v >= 0",
         "refresh": "incremental"},
        {"name": f"{ns}.down", "sql": "SELECT k, COUNT(*) AS n FROM up GROUP BY k",
         "sinks": ["iceberg"], "refresh": "incremental"},
    ], retain_for="0s", keep_snapshots=1, compact_min_files=4)
    runtime, pipeline = Runtime(parse_config(data)), Pipeline(parse_config(data))
    up, down = runtime.config.views
    runtime.refresh(down)
    for value in range(6):  # each refresh appends one small file to each sink
        _insert(spark, events, "e", value)
        assert runtime.refresh(down).mode == "incremental"
    source = rest_catalog.load_table(f"{ns}.events").current_snapshot().snapshot_id
    reflecting = pipeline.wait(up.name, "events", source, timeout_s=1)
    frontiers = runtime.sinks(up).frontiers()
    base = rest_catalog.load_table(up.name).current_snapshot().snapshot_id
    delta_uri = runtime.delta_uri(up)
    delta_rows = multiset(tuple(r.values()) for r in
                          DeltaTable(delta_uri).to_pyarrow_table().to_pylist())
    content = _rows(rest_catalog, up.name)

    result = maintain(runtime, up)
    assert result.data_files_after < result.data_files_before >= 7, result
    assert result.delta_files_after < result.delta_files_before >= 7, result
    assert result.delta_files_removed >= 7 and result.snapshots_expired > 0
    table = rest_catalog.load_table(up.name)
    current = table.current_snapshot()
    assert current.summary.operation.value == "replace" and current.parent_snapshot_id == base
    assert FRONTIER_KEY not in current.summary.additional_properties
    assert runtime.sinks(up).frontiers() == frontiers  # read under the compaction
    assert [c["operation"] for c in DeltaTable(delta_uri).history(4)] == [
        "VACUUM END", "VACUUM START", "SET TBLPROPERTIES", "OPTIMIZE"]
    assert multiset(tuple(r.values()) for r in
                    DeltaTable(delta_uri).to_pyarrow_table().to_pylist()) == delta_rows
    assert _rows(rest_catalog, up.name) == content
    status = view_status(runtime.config, rest_catalog, up)
    assert (status.frontier, status.behind, status.lag_s) == (frontiers["iceberg"], (), 0.0)
    assert pipeline.wait(up.name, "events", source, timeout_s=1) == reflecting
    assert list(pipeline.subscribe(up.name, since=base, follow=False)) == []  # no change

    quiet = runtime.refresh(down)  # up moved (to the compaction), its rows did not
    assert (quiet.mode, quiet.rows_in) == ("incremental", 0)
    assert runtime.refresh(up).mode == "skipped"
    _insert(spark, events, "f", 1)
    after = runtime.refresh(down)
    assert after.mode == "incremental" and sorted(after.sinks) == ["iceberg"]
    assert _rows(rest_catalog, up.name) == _expected(runtime, up.name)
    assert multiset(tuple(r.values()) for r in DeltaTable(delta_uri).to_pyarrow_table()
                    .to_pylist()) == _expected(runtime, up.name)
    assert _rows(rest_catalog, down.name) == _expected(runtime, down.name)
    again = maintain(runtime, up)  # 2 files now: below compact_min_files, no commit
    assert again.files_compacted == 0 and again.data_files_after == again.data_files_before


def test_the_maintain_command_prints_the_result_as_json(
    spark: SparkSession, catalog_server: CatalogServerHandle, rest_catalog: RestCatalog,
    catalog_namespace: str, events: str, tmp_path: Path,
) -> None:
    ns = catalog_namespace
    data = _config(catalog_server, ns, [
        {"name": f"{ns}.up", "sql": UP_SQL, "sinks": ["iceberg"], "refresh": "incremental"},
    ], retain_for="0s", keep_snapshots=1)
    runtime = Runtime(parse_config(data))
    for value in range(3):
        _insert(spark, events, "z", value)
        runtime.refresh(runtime.config.views[0])
    path = tmp_path / "lakehouse.yaml"
    path.write_text(yaml.safe_dump(data))
    command = [sys.executable, "-m", "lakehouse", "maintain", f"{ns}.up", "-c", str(path),
               "--json"]
    ran = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    printed = json.loads(ran.stdout)
    assert printed["view"] == f"{ns}.up" and printed["snapshots_expired"] == 2
    assert len(printed["expired_snapshot_ids"]) == 2 and printed["duration_s"] > 0
    assert len(rest_catalog.load_table(f"{ns}.up").metadata.snapshots) == 1
    unknown = subprocess.run([*command[:4], "nope.nope", "-c", str(path)], capture_output=True,
                             text=True, timeout=300, check=False)
    assert unknown.returncode == 1 and unknown.stdout.startswith("error: views: no view")
    assert "Traceback" not in unknown.stdout + unknown.stderr


def test_expirable_snapshots_keeps_heads_the_newest_and_from_the_oldest_held(
    rest_catalog: RestCatalog, catalog_namespace: str,
) -> None:
    table = rest_catalog.create_table(f"{catalog_namespace}.t",
                                      pa.schema([pa.field("x", pa.int64())]))
    for x in range(6):
        table.append(pa.table({"x": pa.array([x], pa.int64())}))
    s1, s2, s3, s4, s5, s6 = _snapshot_ids(rest_catalog, f"{catalog_namespace}.t")
    table = rest_catalog.load_table(f"{catalog_namespace}.t")
    table.manage_snapshots().create_tag(s1, "kept").commit()
    metadata = rest_catalog.load_table(f"{catalog_namespace}.t").metadata
    now_ms = max(s.timestamp_ms for s in metadata.snapshots) + 1
    policy = RetentionPolicy(retain_for_s=0, keep_snapshots=2)
    assert expirable_snapshots(metadata, set(), policy, now_ms) == [s2, s3, s4]  # s1: a tag
    assert expirable_snapshots(metadata, {s4, 999}, policy, now_ms) == [s2, s3]
    assert expirable_snapshots(metadata, {s2}, policy, now_ms) == []
    assert expirable_snapshots(metadata, set(), RetentionPolicy(3600, 2), now_ms) == []


def test_a_named_stream_resumes_from_its_acknowledged_position(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str,
) -> None:
    ns = catalog_namespace
    view = rest_catalog.create_table(f"{ns}.v", pa.schema([pa.field("id", pa.int64())]))
    ids = []
    for x in range(3):
        view.append(pa.table({"id": pa.array([x], pa.int64())}),
                    snapshot_properties={FRONTIER_KEY: json.dumps({"src": x})})
        ids.append(rest_catalog.load_table(f"{ns}.v").current_snapshot().snapshot_id)
    config = parse_config({"warehouse": str(catalog_server.warehouse),
                           "catalog": {"embedded": False, "uri": catalog_server.uri},
                           "history_table": f"history_{ns}.refreshes",
                           "sources": {"src": {"iceberg": f"{ns}.src"}},
                           "views": [{"name": f"{ns}.v", "sql": "SELECT id FROM src"}]})
    running = serve_in_thread(catalog_server.settings, host="127.0.0.1", port=0,
                              routers=[views_router(config)])
    try:
        url = f"{running.uri.removesuffix('/iceberg')}{PREFIX}/views/{ns}.v/changes"
        bad = httpx.get(url, params={"name": "no spaces"}, timeout=30)
        assert bad.status_code == 400 and "name" in bad.text
        history = RefreshHistory(rest_catalog, f"history_{ns}.refreshes")
        with httpx.stream("GET", url, params={"name": "bob", "since": ids[0]},
                          timeout=30) as response:
            first, second = change_events(response.iter_lines(), 2)
            assert [int(first["id"]), int(second["id"])] == ids[1:]
            # each change sent is acknowledged once the next is due: the last one too,
            # while the stream is open (after it closes, it could land after ours below)
            eventually(lambda: history.subscribers(f"{ns}.v").get("bob") == ids[2],
                       "the server acknowledges the second change")
        history.acknowledge(f"{ns}.v", "bob", ids[1])
        with httpx.stream("GET", url, params={"name": "bob"}, timeout=30) as response:
            (resumed,) = change_events(response.iter_lines(), 1)
            assert int(resumed["id"]) == ids[2]
    finally:
        running.stop()

