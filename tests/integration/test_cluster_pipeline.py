"""The pipeline's core scenario on a Spark standalone cluster, its warehouse on S3 (moto).

A ``lakehouse.yaml`` as a user writes it for a cluster: an ``s3://`` warehouse (``catalog.s3``
says where the S3 server is; the credentials are in the standard AWS variables of every
process, the cluster's workers included), ``engine: spark``, ``spark.master`` the cluster's
master. The catalog is its own process (``lakehouse serve``), as in docs/deploy.md. The
sources, an Iceberg table and a Delta table (change data feed on), are written by pyiceberg
and delta-rs from this process. Three views: a join and aggregate (SUM, COUNT) over both
sources, a MIN/MAX over the same join, and a view joining those two views.

The pipeline runs as a user runs it, each time in a process of its own: ``lakehouse run``
until every view has reported its refresh, then SIGTERM. The initial load; then a round of
changes to both sources (inserts, deletes, updates, several commits each) whose process is
killed with SIGKILL as a view's Iceberg commit lands, its Delta commit (run at once, and
slower: a ``MERGE`` of several jobs) usually still running (``LAKEHOUSE_FAILPOINTS``), and
the next process, which replays it exactly once; then another round of changes and one
``lakehouse tick`` run by ``spark-submit`` (docs/deploy.md), with no ``spark.master`` in the
file: the master is spark-submit's ``--master``. Every refresh runs on Spark (``engine:
spark``), incrementally but for the initial load. After each process, every view's Iceberg
table and Delta table equal a full recompute of its SQL (by DuckDB, over the sources as they
are on S3; a view read by a view is recomputed from the sources too), and both sinks carry
the sources' current versions. Each process costs a Spark application on the cluster (half
a minute to start under load) and its ticks run dozens of small Spark jobs each: the test
takes several minutes.

The workers cannot read the driver's files (``tests/conftest_spark_cluster.py``): a task
that opens a driver-local path fails, and with it the refresh. Every application ran tasks
on the cluster's executors; at the end every file of the views is on S3 under the warehouse,
and the driver's folder holds nothing but the config files, the catalog's database and logs.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pyarrow as pa
import pytest
import yaml
from deltalake import DeltaTable, write_deltalake
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import LongType, NestedField

import lakehouse
from catalog_api.core.config import S3Settings
from lakehouse.failpoints import ENV as FAILPOINTS_ENV
from lakehouse.failpoints import LOG_ENV as FAILPOINT_LOG_ENV
from lakehouse.storage import delta_storage_options, pyiceberg_properties
from sinks.delta_commit import commit_frontier
from sinks.frontier import FRONTIER_KEY, decode_frontier
from tests.benchmarks.common import free_port
from tests.conftest import multiset
from tests.conftest_spark_cluster import (
    ACCESS_KEY,
    REGION,
    SECRET_KEY,
    SPARK_HOME,
    S3Handle,
    SparkClusterHandle,
    cluster_conf,
    free_cluster,
)

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

LAKEHOUSE = [sys.executable, "-m", "lakehouse"]
MAIN_FILE = Path(lakehouse.__file__).with_name("__main__.py")  # what spark-submit runs
ROUND_TIMEOUT_S = 420
APP_NAME = "lakehouse-freshness"
ORDERS, CUSTOMERS = 2000, 200
SEGMENTS = ("S0", "S1", "S2", "S3", "S4")
MOVED_TO = {1: "S9", 2: "S0"}  # round -> the segment some customers move to (S9: a new one)
JOIN = "FROM orders o JOIN customers c ON o.customer_id = c.customer_id"
BY_SEGMENT, AMOUNT_RANGE, SUMMARY = "views.by_segment", "views.amount_range", "views.summary"
VIEWS = {  # name -> SQL, in the config's (and so the refreshes') order
    BY_SEGMENT: f"SELECT c.segment, COUNT(*) AS orders, SUM(o.amount) AS revenue {JOIN} "
                "GROUP BY c.segment",
    AMOUNT_RANGE: f"SELECT c.segment, MIN(o.amount) AS lowest, MAX(o.amount) AS highest {JOIN} "
                  "GROUP BY c.segment",
    SUMMARY: "SELECT b.segment, b.orders, b.revenue, r.lowest, r.highest FROM by_segment b "
             "JOIN amount_range r ON b.segment = r.segment WHERE b.orders > 1",
}
VIEW_SOURCES = {"by_segment": BY_SEGMENT, "amount_range": AMOUNT_RANGE}  # source -> view
REFRESHED = re.compile(r"^\d\d:\d\d:\d\d (\S+): (incremental|full) on (\w+) in ")
REPORTED = re.compile(r"^\d\d:\d\d:\d\d ")  # a line `lakehouse run` prints about a refresh
FAILURE = re.compile(r"fail|error|cannot", re.IGNORECASE)
CHECKSUM_FAILED = "Failed to write the checksum"  # delta-spark could not write to the s3:// log
AWS_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION",
                 "AWS_DEFAULT_REGION")
ORDERS_SCHEMA = pa.schema([pa.field("order_id", pa.int64(), nullable=False),
                           pa.field("customer_id", pa.int64()), pa.field("amount", pa.int64())])


@dataclass
class Scenario:
    """The driver's folder and config, the storage, and this process's clients of both."""

    folder: Path
    config: Path
    s3: S3Handle
    prefix: str  # the warehouse's prefix in the bucket
    catalog: RestCatalog
    env: dict[str, str]
    storage: dict[str, str]  # delta-rs options, credentials included (this process's reads)
    durations: list[str] = field(default_factory=list)

    @property
    def warehouse(self) -> str:
        return f"s3://{self.s3.bucket}/{self.prefix}"

    @property
    def customers_uri(self) -> str:
        return f"{self.warehouse}/sources/customers"

    def delta_uri(self, view: str) -> str:
        namespace, table = view.split(".")
        return f"{self.warehouse}/delta/{namespace}/{table}"

    def delta(self, uri: str) -> DeltaTable:
        return DeltaTable(uri, storage_options=self.storage)

    def orders(self) -> Table:
        return self.catalog.load_table("raw.orders")

    def keys(self, under: str = "") -> list[str]:
        """The object keys under the warehouse (and ``under`` in it)."""
        pages = self.s3.client().get_paginator("list_objects_v2").paginate(
            Bucket=self.s3.bucket, Prefix=f"{self.prefix}/{under}")
        return [item["Key"] for page in pages for item in page.get("Contents", [])]


def _environment() -> dict[str, str]:
    """The pipeline's environment: the S3 credentials in the standard AWS variables only."""
    env = {k: v for k, v in os.environ.items()
           if k not in AWS_VARIABLES and k not in (FAILPOINTS_ENV, "LAKEHOUSE_DEBUG")}
    return {**env, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "PYTHONUNBUFFERED": "1"}


def _config_document(endpoint: str, warehouse: str, port: int,
                     master: str | None) -> dict[str, Any]:
    """The cluster's ``lakehouse.yaml``; without ``spark.master`` when ``master`` is None."""
    spark: dict[str, Any] = {"log_level": "WARN", "conf": cluster_conf()}
    if master is not None:
        spark = {"master": master, **spark}
    return {
        "warehouse": warehouse,
        "engine": "spark",
        # One tick at a time: the SIGKILL lands between the first view's commits with no
        # other view's tick half way (parallel ticks: tests/integration/test_parallel_refresh.py)
        "workers": 1,
        "catalog": {
            "embedded": False,  # `lakehouse serve` is the catalog, as in docs/deploy.md
            "listen": f"127.0.0.1:{port}",
            "uri": f"http://127.0.0.1:{port}/iceberg",
            "s3": {"endpoint": endpoint, "region": REGION, "path_style_access": True,
                   "vend_credentials": False, "remote_signing": False},
        },
        "spark": spark,
        "sources": {
            "orders": {"iceberg": "raw.orders"},
            "customers": {"delta": f"{warehouse}/sources/customers", "key": ["customer_id"]},
            **{name: {"view": view} for name, view in VIEW_SOURCES.items()},
        },
        "views": [{"name": name, "sql": sql, "refresh": "incremental"}
                  for name, sql in VIEWS.items()],
    }


@contextmanager
def _serving(config: Path, env: dict[str, str], folder: Path, port: int) -> Iterator[str]:
    """``lakehouse serve -c config``, its own process; yields its base URI."""
    with (folder / "serve.log").open("wb") as log:
        process = subprocess.Popen([*LAKEHOUSE, "serve", "-c", str(config)], cwd=folder,
                                   env=env, stdout=log, stderr=subprocess.STDOUT)
    uri = f"http://127.0.0.1:{port}/iceberg"
    try:
        deadline = time.monotonic() + 60
        while process.poll() is None and time.monotonic() < deadline:
            try:
                if httpx.get(f"{uri}/v1/config", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        assert process.poll() is None, (folder / "serve.log").read_text()[-3000:]
        yield uri
    finally:
        process.terminate()
        process.wait(20)


@pytest.fixture
def scenario(spark_cluster: SparkClusterHandle, cluster_s3: S3Handle,
             tmp_path: Path) -> Iterator[Scenario]:
    """The config in a driver folder of its own, the catalog serving it, clients of both."""
    free_cluster(spark_cluster)
    folder = tmp_path / "driver"
    folder.mkdir()
    prefix, port = f"pipeline-{uuid.uuid4().hex[:8]}", free_port()
    warehouse = f"s3://{cluster_s3.bucket}/{prefix}"
    config = folder / "lakehouse.yaml"
    config.write_text(yaml.safe_dump(_config_document(
        cluster_s3.endpoint, warehouse, port, spark_cluster.master_url), sort_keys=False))
    env = _environment()
    s3 = S3Settings(endpoint=cluster_s3.endpoint, region=REGION, path_style_access=True)
    with _serving(config, env, folder, port) as uri:
        catalog = RestCatalog("tests", uri=uri, **pyiceberg_properties(s3), **{
            "s3.access-key-id": ACCESS_KEY, "s3.secret-access-key": SECRET_KEY})
        storage = {**delta_storage_options(s3), "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                   "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
        yield Scenario(folder, config, cluster_s3, prefix, catalog, env, storage)


# ------------------------------------------------------------------ the sources


class Sources:
    """The Iceberg ``orders`` and the Delta ``customers``, and the changes of each round."""

    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        self.rng = random.Random(18)
        self.next_order, self.next_customer = ORDERS, CUSTOMERS

    def create(self) -> None:
        sc = self.scenario
        sc.catalog.create_namespace("raw")
        schema = Schema(NestedField(1, "order_id", LongType(), required=True),
                        NestedField(2, "customer_id", LongType(), required=False),
                        NestedField(3, "amount", LongType(), required=False),
                        identifier_field_ids=[1])
        table = sc.catalog.create_table("raw.orders", schema,
                                        properties={"format-version": "2"})
        table.append(self._orders(range(ORDERS)))
        customers = range(CUSTOMERS)
        write_deltalake(sc.customers_uri, pa.table({
            "customer_id": pa.array(customers, pa.int64()),
            "segment": [self.rng.choice(SEGMENTS) for _ in customers],
            "name": [f"customer {i}" for i in customers]}),
            configuration={"delta.enableChangeDataFeed": "true"}, storage_options=sc.storage)

    def _orders(self, ids: range) -> pa.Table:
        """New orders ``ids``, of customers up to 30 past the last one (some not there yet)."""
        customers = self.next_customer + 30
        return pa.table({
            "order_id": list(ids),
            "customer_id": [self.rng.randrange(customers) for _ in ids],
            "amount": [self.rng.randint(1, 10_000) for _ in ids]}, schema=ORDERS_SCHEMA)

    def change(self, round_: int) -> None:
        """Inserts, deletes and updates in both sources (several commits in each)."""
        sc, rng = self.scenario, self.rng
        orders = sc.orders()
        current = orders.scan(selected_fields=("order_id", "amount")).to_arrow().to_pylist()
        by_amount = sorted(current, key=lambda row: (row["amount"], row["order_id"]))
        # the highest amount is deleted and the lowest updated: MIN and MAX groups recompute
        deleted = {by_amount[-1]["order_id"]} | set(rng.sample(
            [r["order_id"] for r in by_amount[1:-1]], 24))
        updated = [by_amount[0]["order_id"]] + rng.sample(
            [r["order_id"] for r in by_amount[1:-1] if r["order_id"] not in deleted], 24)
        orders.append(self._orders(range(self.next_order, self.next_order + 40)))
        self.next_order += 40
        orders = sc.orders()
        orders.delete(_among("order_id", deleted))
        replacement = pa.table({  # the updated rows: new amounts and customers
            "order_id": updated, "customer_id": [rng.randrange(self.next_customer)
                                                 for _ in updated],
            "amount": [rng.randint(2_000, 8_000) for _ in updated]}, schema=ORDERS_SCHEMA)
        with sc.orders().transaction() as transaction:
            transaction.delete(_among("order_id", updated))
            transaction.append(replacement)

        added = range(self.next_customer, self.next_customer + 5)
        self.next_customer += 5
        write_deltalake(sc.customers_uri, pa.table({
            "customer_id": pa.array(added, pa.int64()),
            "segment": [rng.choice(SEGMENTS) for _ in added],
            "name": [f"customer {i}" for i in added]}), mode="append",
            storage_options=sc.storage)
        customers = sc.delta(sc.customers_uri)
        ids = rng.sample(range(CUSTOMERS), 7)
        customers.delete(_among("customer_id", ids[:3]))
        customers.update(updates={"segment": f"'{MOVED_TO[round_]}'"},
                         predicate=_among("customer_id", ids[3:]))


def _among(column: str, values: Iterable[int]) -> str:
    """The predicate ``column IN (values)``, as pyiceberg and delta-rs parse it."""
    return f"{column} IN ({', '.join(str(v) for v in sorted(values))})"


# ------------------------------------------------------------------ running the pipeline


@dataclass
class Round:
    """One process of the pipeline: what it printed and how it ended."""

    refreshed: dict[str, tuple[str, str]]  # view -> (mode, engine)
    returncode: int
    output: str


def _run(sc: Scenario, label: str, failpoint: str | None = None,
         views: Collection[str] = tuple(VIEWS)) -> Round:
    """``lakehouse run`` until each of ``views`` reported a refresh (or the process died),
    then SIGTERM."""
    env = dict(sc.env)
    if failpoint is not None:
        env |= {FAILPOINTS_ENV: failpoint, FAILPOINT_LOG_ENV: str(sc.folder / "failpoints.log")}
    started = time.monotonic()
    process = subprocess.Popen([*LAKEHOUSE, "run", "-c", str(sc.config), "--metrics-listen", ""],
                               cwd=sc.folder, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    stamped: list[str] = []  # the log: each line with the seconds since the start

    def read() -> None:
        for line in process.stdout or ():
            lines.append(line.rstrip("\n"))
            stamped.append(f"{time.monotonic() - started:6.1f} {lines[-1]}")

    reader = threading.Thread(target=read)
    reader.start()
    refreshed: dict[str, tuple[str, str]] = {}
    failed: str | None = None
    try:
        deadline = started + ROUND_TIMEOUT_S
        while process.poll() is None and not set(views) <= set(refreshed) and failed is None:
            for line in list(lines):
                if match := REFRESHED.match(line):
                    refreshed.setdefault(match.group(1), (match.group(2), match.group(3)))
                elif REPORTED.match(line) and FAILURE.search(line):
                    failed = line
            if time.monotonic() > deadline:
                failed = f"no refresh of every view within {ROUND_TIMEOUT_S} s"
            time.sleep(0.2)
        if process.poll() is None:
            process.send_signal(signal.SIGKILL if failed else signal.SIGTERM)
        process.wait(60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        reader.join(10)
    output = "\n".join(lines)
    (sc.folder / f"{label.replace(' ', '-')}.log").write_text("\n".join(stamped))
    sc.durations.append(f"{label}: {time.monotonic() - started:.0f} s")
    assert failed is None, f"{label}: {failed}\n{output[-4000:]}"
    assert "Traceback" not in output, output[-4000:]
    assert CHECKSUM_FAILED not in output, output[-4000:]
    return Round(refreshed, process.returncode, output)


def _spark_submit_tick(sc: Scenario, cluster: SparkClusterHandle, view: str) -> str:
    """``lakehouse tick VIEW`` run by spark-submit on the cluster, as docs/deploy.md says.

    The config sets no ``spark.master``: the master is spark-submit's ``--master``. The jars
    are those ``lakehouse jars`` prints, for the driver's classpath (``--jars``); the
    executors fetch them from the driver.
    """
    document = yaml.safe_load(sc.config.read_text())
    del document["spark"]["master"]
    config = sc.folder / "lakehouse-submit.yaml"
    config.write_text(yaml.safe_dump(document, sort_keys=False))
    started = time.monotonic()
    jars = subprocess.run([*LAKEHOUSE, "jars"], capture_output=True, text=True, check=True,
                          env=sc.env, timeout=ROUND_TIMEOUT_S).stdout.split()
    command = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", cluster.master_url,
               "--driver-memory", "1g", "--jars", ",".join(jars),
               str(MAIN_FILE), "refresh", view, "-c", str(config)]
    env = {k: v for k, v in sc.env.items() if k != "PYSPARK_PYTHON"}
    env |= {"SPARK_HOME": str(SPARK_HOME), "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run(command, cwd=sc.folder, env=env, capture_output=True, text=True,
                          timeout=ROUND_TIMEOUT_S, check=False)
    (sc.folder / "spark-submit.log").write_text(done.stdout + "\n--- stderr\n" + done.stderr)
    sc.durations.append(f"spark-submit refresh: {time.monotonic() - started:.0f} s")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stdout + done.stderr, done.stdout[-3000:] + done.stderr[-3000:]
    assert CHECKSUM_FAILED not in done.stderr, done.stderr[-3000:]
    return done.stdout


# ------------------------------------------------------------------ checks


def _recompute(sc: Scenario) -> dict[str, pa.Table]:
    """Every view's SQL computed in full by DuckDB over the sources as they are on S3.

    A view read by another view is recomputed first and read as that view's source.
    """
    connection = duckdb.connect()
    connection.register("orders", sc.orders().scan().to_arrow())
    connection.register("customers", sc.delta(sc.customers_uri).to_pyarrow_table())
    tables: dict[str, pa.Table] = {}
    for view, sql in VIEWS.items():
        tables[view] = connection.sql(sql).to_arrow_table()
        for source, read in VIEW_SOURCES.items():
            if read == view:
                connection.register(source, tables[view])
    return tables


def _rows(table: pa.Table, columns: list[str]) -> object:
    return multiset(tuple(row[c] for c in columns) for row in table.to_pylist())


def _iceberg_frontier(table: Table) -> dict[str, int] | None:
    snapshot = table.current_snapshot()
    if snapshot is None or snapshot.summary is None:
        return None
    return decode_frontier(snapshot.summary.additional_properties.get(FRONTIER_KEY))


def _delta_frontiers(sc: Scenario, view: str) -> list[dict[str, int]]:
    """The frontiers of the view's Delta commits, newest first."""
    return [f for commit in sc.delta(sc.delta_uri(view)).history()
            if (f := commit_frontier(commit))]


def _frontiers(sc: Scenario) -> dict[str, dict[str, dict[str, int] | None]]:
    """Each view's frontier in each sink."""
    return {view: {"iceberg": _iceberg_frontier(sc.catalog.load_table(view)),
                   "delta": next(iter(_delta_frontiers(sc, view)), None)} for view in VIEWS}


def _source_versions(sc: Scenario) -> dict[str, dict[str, int]]:
    """The frontier each view must have: its sources' current versions."""
    def snapshot(table: Table) -> int:
        current = table.current_snapshot()
        assert current is not None
        return current.snapshot_id

    base = {"orders": snapshot(sc.orders()), "customers": sc.delta(sc.customers_uri).version()}
    views = {source: snapshot(sc.catalog.load_table(view))
             for source, view in VIEW_SOURCES.items()}
    return {BY_SEGMENT: base, AMOUNT_RANGE: base, SUMMARY: views}


def _assert_fresh(sc: Scenario, label: str) -> None:
    """Both sinks of every view equal its full recompute and carry the current frontier.

    No frontier was committed twice to a view's Delta table (a replayed tick whose Delta
    commit had landed adds none).
    """
    expected = _recompute(sc)
    versions, frontiers = _source_versions(sc), _frontiers(sc)
    for view, recomputed in expected.items():
        columns = recomputed.column_names
        rows = _rows(recomputed, columns)
        assert sum(rows.values()) > 0, f"{label}: {view} is empty"  # type: ignore[attr-defined]
        iceberg = sc.catalog.load_table(view)
        assert _rows(iceberg.scan().to_arrow().select(columns), columns) == rows, (label, view)
        delta = sc.delta(sc.delta_uri(view)).to_pyarrow_table().select(columns)
        assert _rows(delta, columns) == rows, (label, view)
        assert frontiers[view] == {"iceberg": versions[view], "delta": versions[view]}, (
            label, view)
        committed = [json.dumps(f, sort_keys=True) for f in _delta_frontiers(sc, view)]
        assert len(committed) == len(set(committed)), f"{label}: {view}: a frontier twice"


def _executor_logs(cluster: SparkClusterHandle, app: str) -> list[Path]:
    return sorted(cluster.root.glob(f"worker-*/work/{app}/*/stderr"))


# ------------------------------------------------------------------ the scenario


def test_views_stay_fresh_on_a_cluster_through_inserts_deletes_updates_and_a_crash(
    spark_cluster: SparkClusterHandle, scenario: Scenario,
) -> None:
    sc = scenario
    sources = Sources(sc)
    sources.create()
    started = time.monotonic()

    first = _run(sc, "initial load")
    assert first.returncode == 0 and first.output.rstrip().endswith("stopped"), first.output
    assert first.refreshed == {view: ("full", "spark") for view in VIEWS}
    _assert_fresh(sc, "initial load")

    # Round 1 dies by SIGKILL as the first view's Iceberg commit lands, its Delta commit in
    # flight (it could have landed first: then nothing of that view is left to replay).
    sources.change(1)
    before = _frontiers(sc)
    killed = _run(sc, "round 1 killed", failpoint="iceberg-committed@1")
    assert killed.returncode == -signal.SIGKILL, killed.output
    assert killed.refreshed == {}
    logged = (sc.folder / "failpoints.log").read_text().split()
    assert logged[0] == "iceberg-committed", logged
    after, targets = _frontiers(sc), _source_versions(sc)
    target = targets[BY_SEGMENT]
    assert after[BY_SEGMENT]["iceberg"] == target != before[BY_SEGMENT]["delta"]
    assert after[BY_SEGMENT]["delta"] in (before[BY_SEGMENT]["delta"], target)
    assert {v: after[v] for v in (AMOUNT_RANGE, SUMMARY)} == {
        v: before[v] for v in (AMOUNT_RANGE, SUMMARY)}
    committed = sc.catalog.load_table(BY_SEGMENT).current_snapshot()
    assert committed is not None

    lagging = [v for v in VIEWS if any(f != targets[v] for f in after[v].values())]
    replayed = _run(sc, "round 1 replayed", views=lagging)
    assert replayed.returncode == 0 and replayed.output.rstrip().endswith("stopped")
    assert replayed.refreshed == {view: ("incremental", "spark") for view in lagging}
    current = sc.catalog.load_table(BY_SEGMENT).current_snapshot()
    assert current is not None and current.snapshot_id == committed.snapshot_id  # not again
    _assert_fresh(sc, "round 1 replayed")

    # Round 2: one tick of the view on views (and so of the views it reads) by spark-submit.
    sources.change(2)
    apps_before = {app["id"] for app in spark_cluster.status().get("completedapps", [])}
    printed = _spark_submit_tick(sc, spark_cluster, SUMMARY)
    assert f"{SUMMARY}: incremental in " in printed, printed
    assert "engine: spark" in printed, printed
    _assert_fresh(sc, "spark-submit tick")

    # Every application of the pipeline ran on the cluster: executors on both workers, tasks.
    status = spark_cluster.status()
    apps = [app for app in status.get("completedapps", []) if app.get("name") == APP_NAME]
    assert len(apps) >= 4 and not [a for a in status.get("activeapps", [])
                                   if a.get("name") == APP_NAME], status
    assert {app["id"] for app in apps} - apps_before  # the spark-submit one among them
    for app in apps:
        logs = {log: log.read_text(errors="replace")
                for log in _executor_logs(spark_cluster, app["id"])}
        assert {log.parents[3].name for log in logs} == {"worker-1", "worker-2"}, app["id"]
        assert any("Running task" in text for text in logs.values()), app["id"]
        # no Python function shipped to the executors: they started no Python worker
        assert not [log for log, text in logs.items() if "PythonRunner" in text
                    or "pyspark.daemon" in text], app["id"]

    # Everything the pipeline wrote is on S3, under the warehouse; nothing on the driver's disk.
    for view in VIEWS:
        table = sc.catalog.load_table(view)
        assert table.metadata_location.startswith(f"{sc.warehouse}/")
        files = table.inspect.files().column("file_path").to_pylist()
        assert files and all(f.startswith(f"{sc.warehouse}/") for f in files), files
        delta_files = sc.delta(sc.delta_uri(view)).file_uris()
        assert delta_files and all(f.startswith(f"{sc.warehouse}/delta/") for f in delta_files)
    left = sorted(path.name for path in sc.folder.iterdir())
    assert [name for name in left if not name.endswith(".log")] == [
        "catalog.db", "lakehouse-submit.yaml", "lakehouse.yaml"], left
    print(f"\n{time.monotonic() - started:.0f} s of rounds: " + "; ".join(sc.durations)
          + f"; scratch objects left on S3: {len(sc.keys('_scratch/'))}")
