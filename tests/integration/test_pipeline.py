"""The main job end to end: sources -> refresh -> Iceberg and Delta sinks -> status.

Each step builds a new :class:`Runtime`, as a restarted process would: all it knows
is what the sinks committed. A crash with the Iceberg commit landed and the Delta one not
is reproduced by refreshing once with the Iceberg sink only.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pyarrow as pa
import pytest
import yaml
from deltalake import DeltaTable, write_deltalake
from pyiceberg.catalog.rest import RestCatalog
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from catalog_api.in_process import InProcessCatalog
from ivm import WEIGHT
from ivm.laws import Law
from lakehouse.api import Pipeline
from lakehouse.cli import app
from lakehouse.config import ViewConfig, parse_config
from lakehouse.errors import (
    ConfigError,
    RefreshError,
    SourceError,
    SubscriptionError,
    WaitTimeoutError,
)
from lakehouse.reflected import FULL_CHECK_EVERY_S, ReflectedFrontiers
from lakehouse.refresh import refresh_view
from lakehouse.runtime import Runtime
from lakehouse.sources.delta import DeltaSourceReader
from lakehouse.sources.iceberg import IcebergSourceReader
from lakehouse.status import view_status
from tests.conftest import multiset
from tests.conftest_catalog import CatalogServerHandle

pytestmark = pytest.mark.spark

SQL = ("SELECT f.carrier, a.name, COUNT(*) AS n, SUM(f.dep_delay) AS total_delay "
       "FROM flights f JOIN airlines a ON f.carrier = a.carrier GROUP BY f.carrier, a.name")


def _config_data(server: CatalogServerHandle, namespace: str, airlines: Path,
                 sinks: list[str], refresh: str = "incremental") -> dict[str, object]:
    return {
        "warehouse": str(server.warehouse),
        "catalog": {"embedded": False, "uri": server.uri},
        "sources": {"flights": {"iceberg": f"{namespace}.flights"},
                    "airlines": {"delta": str(airlines)}},
        "views": [{"name": f"{namespace}.by_carrier", "sql": SQL, "sinks": sinks,
                   "refresh": refresh}],
    }


@pytest.fixture
def sources(spark: SparkSession, catalog_namespace: str, tmp_path: Path) -> tuple[str, Path]:
    """An Iceberg ``flights`` table and a Delta ``airlines`` table (change data feed on)."""
    spark.sql(f"CREATE TABLE lakehouse.{catalog_namespace}.flights "
              "(carrier string, flight int, dep_delay double) USING iceberg TBLPROPERTIES "
              "('format-version' = '2', 'write.delete.mode' = 'copy-on-write', "
              "'write.update.mode' = 'copy-on-write')")
    spark.sql(f"INSERT INTO lakehouse.{catalog_namespace}.flights VALUES "
              "('AA', 1, 5.0), ('AA', 2, 30.0), ('UA', 3, NULL), ('DL', 4, 1.5)")
    airlines = tmp_path / "airlines"
    write_deltalake(str(airlines), pa.table({"carrier": ["AA", "UA"],
                                             "name": ["American", "United"]}),
                    configuration={"delta.enableChangeDataFeed": "true"})
    return catalog_namespace, airlines


def _runtime(server: CatalogServerHandle, namespace: str, airlines: Path,
             sinks: list[str], refresh: str = "incremental") -> Runtime:
    return Runtime(parse_config(_config_data(server, namespace, airlines, sinks, refresh)))


def _expected(runtime: Runtime, view: ViewConfig) -> object:
    return multiset(tuple(r.values()) for r in runtime.recompute(view).to_pylist())


def _iceberg_rows(catalog: RestCatalog, view: str) -> object:
    return multiset(tuple(r.values()) for r in catalog.load_table(view).scan().to_arrow()
                    .to_pylist())


def _delta_rows(runtime: Runtime, view: ViewConfig) -> object:
    table = DeltaTable(runtime.delta_uri(view)).to_pyarrow_table()
    return multiset(tuple(r.values()) for r in table.to_pylist())


def test_restarts_resume_and_a_sink_left_behind_catches_up(
    spark: SparkSession, catalog_server: CatalogServerHandle, rest_catalog: RestCatalog,
    sources: tuple[str, Path],
) -> None:
    namespace, airlines = sources
    flights = f"lakehouse.{namespace}.flights"
    both = _runtime(catalog_server, namespace, airlines, ["iceberg", "delta"])
    view = both.config.views[0]
    first = both.refresh(view)
    assert (first.mode, sorted(first.sinks)) == ("full", ["delta", "iceberg"])
    delta_uri = both.delta_uri(view)
    initial_version = DeltaTable(delta_uri).version()
    listed = httpx.get(f"{catalog_server.uri}/polaris/v1/namespaces/{namespace}/generic-tables/"
                       f"by_carrier_delta").json()["table"]
    assert (listed["format"], listed["base-location"]) == ("delta", Path(delta_uri).as_uri())

    spark.sql(f"INSERT INTO {flights} VALUES ('UA', 5, 12.0), ('AA', 6, 1.0)")
    DeltaTable(str(airlines)).update({"name": "'United Airlines'"}, predicate="carrier = 'UA'")
    iceberg_only = _runtime(catalog_server, namespace, airlines, ["iceberg"])
    behind = iceberg_only.refresh(iceberg_only.config.views[0])
    assert (behind.mode, behind.sinks) == ("incremental", ["iceberg"])
    assert behind.rows_in == 2 + 2  # two flights inserted; the airline update's -1/+1
    assert DeltaTable(delta_uri).version() == initial_version  # the Delta copy is left behind

    spark.sql(f"DELETE FROM {flights} WHERE flight = 2")
    restarted = _runtime(catalog_server, namespace, airlines, ["iceberg", "delta"])
    caught_up = restarted.refresh(view)
    assert caught_up.mode == "incremental" and sorted(caught_up.sinks) == ["delta", "iceberg"]
    expected = _expected(restarted, restarted.config.views[0])
    assert _iceberg_rows(rest_catalog, view.name) == expected
    assert _delta_rows(restarted, restarted.config.views[0]) == expected
    assert DeltaTable(delta_uri).version() == initial_version + 1  # one commit, not two
    assert restarted.refresh(view).mode == "skipped"

    status = view_status(restarted.config, rest_catalog, view)
    assert status.behind == () and status.lag_s == 0.0
    assert status.frontier == caught_up.frontier
    assert status.rows == sum(expected.values())


def _sink_versions(runtime: Runtime, rest_catalog: RestCatalog, view: ViewConfig
                  ) -> dict[str, int | None]:
    """The view's current Iceberg snapshot id and Delta version."""
    snapshot = rest_catalog.load_table(view.name).current_snapshot()
    return {"iceberg": snapshot.snapshot_id if snapshot is not None else None,
            "delta": DeltaTable(runtime.delta_uri(view)).version()}


@pytest.mark.parametrize("rival_wins", ["delta", "iceberg"])
def test_a_refresh_losing_one_sinks_race_commits_to_the_other(
    spark: SparkSession, catalog_server: CatalogServerHandle, rest_catalog: RestCatalog,
    sources: tuple[str, Path], rival_wins: str,
) -> None:
    namespace, airlines = sources
    runtime = _runtime(catalog_server, namespace, airlines, ["iceberg", "delta"])
    view = runtime.config.views[0]
    runtime.refresh(view)  # the initial load
    spark.sql(f"INSERT INTO lakehouse.{namespace}.flights VALUES ('UA', 5, 12.0)")
    sinks = runtime.sinks(view)
    committed = sinks.frontiers()  # this refresh starts here ...
    rival = _runtime(catalog_server, namespace, airlines, [rival_wins])
    assert rival.refresh(rival.config.views[0]).sinks == [rival_wins]  # ... another wins one
    before = _sink_versions(runtime, rest_catalog, view)

    with pytest.raises(RefreshError) as raised:  # the sinks commit at once: the other lands
        refresh_view(view, runtime.plan(view), runtime.readers, sinks, committed=committed)
    other = "iceberg" if rival_wins == "delta" else "delta"
    assert raised.value.committed == (other,)
    assert f"committed to {other} nonetheless" in str(raised.value)
    after = _sink_versions(runtime, rest_catalog, view)
    assert after[rival_wins] == before[rival_wins]  # nothing written where the rival won
    assert after[other] != before[other]

    assert runtime.refresh(view).mode == "skipped"  # both sinks reflect the sources
    expected = _expected(runtime, runtime.config.views[0])
    assert _iceberg_rows(rest_catalog, view.name) == expected
    assert _delta_rows(runtime, runtime.config.views[0]) == expected


def test_auto_policy_recomputes_a_large_change_in_full(
    spark: SparkSession, catalog_server: CatalogServerHandle, rest_catalog: RestCatalog,
    sources: tuple[str, Path],
) -> None:
    namespace, airlines = sources
    runtime = _runtime(catalog_server, namespace, airlines, ["iceberg"], refresh="auto")
    view = runtime.config.views[0]
    assert runtime.refresh(view).mode == "full"  # the initial load
    spark.sql(f"INSERT INTO lakehouse.{namespace}.flights VALUES ('AA', 7, 2.0)")
    small = runtime.refresh(view)
    assert small.mode == "incremental", small.reason
    spark.sql(f"INSERT INTO lakehouse.{namespace}.flights SELECT carrier, flight + 100, "
              f"dep_delay FROM lakehouse.{namespace}.flights")
    large = runtime.refresh(view)
    assert large.mode == "full"
    assert "full_refresh_ratio" in (large.reason or "")
    assert _iceberg_rows(rest_catalog, view.name) == _expected(runtime, view)


def test_the_engine_setting_chooses_where_ticks_run(
    spark: SparkSession, catalog_server: CatalogServerHandle, rest_catalog: RestCatalog,
    sources: tuple[str, Path],
) -> None:
    """``auto`` runs a small change on the local engine, ``spark`` on Spark: same rows."""
    namespace, airlines = sources
    data = _config_data(catalog_server, namespace, airlines, ["iceberg", "delta"])
    sql = "SELECT carrier, COUNT(*) AS n, SUM(flight) AS flights FROM flights GROUP BY carrier"
    data["views"] = [{"name": f"{namespace}.on_{engine}", "sql": sql, "engine": engine,
                      "full_refresh_ratio": 10}  # the change is large against 4 rows
                     for engine in ("auto", "spark")]
    data["views"].append({"name": f"{namespace}.late_on_spark", "engine": "spark",
                          "full_refresh_ratio": 10,
                          "sql": "SELECT carrier, flight FROM flights WHERE dep_delay > 2"})
    data["views"].append({"name": f"{namespace}.extremes", "full_refresh_ratio": 10,
                          "sql": "SELECT carrier, MAX(flight) AS top, MIN(dep_delay) AS low "
                                 "FROM flights GROUP BY carrier HAVING COUNT(*) > 0"})
    runtime = Runtime(parse_config(data))
    views = runtime.config.views
    assert [runtime.refresh(v).engine for v in views] == ["spark"] * 4  # initial loads
    spark.sql(f"INSERT INTO lakehouse.{namespace}.flights VALUES ('AA', 9, 1.0), ('KL', 8, 2.0)")
    spark.sql(f"DELETE FROM lakehouse.{namespace}.flights WHERE flight = 3")
    auto, on_spark, late, extremes = (runtime.refresh(v) for v in views)
    assert (auto.mode, auto.engine) == ("incremental", "local"), auto.engine_reason
    assert auto.engine_reason.startswith("a change of 3 rows; a state of 3 groups")
    # MIN and MAX: the affected groups recomputed from Iceberg reads on the driver
    assert (extremes.mode, extremes.engine) == ("incremental", "local"), extremes.engine_reason
    assert _iceberg_rows(rest_catalog, views[3].name) == _expected(runtime, views[3])
    assert _delta_rows(runtime, views[3]) == _expected(runtime, views[3])
    for kept_on_spark in (on_spark, late):  # a filter the local engine takes, too
        assert (kept_on_spark.mode, kept_on_spark.engine) == ("incremental", "spark")
        assert kept_on_spark.engine_reason.startswith("engine: spark is set")
    expected = _expected(runtime, views[0])
    for view in views[:2]:
        assert _iceberg_rows(rest_catalog, view.name) == expected
        assert _delta_rows(runtime, view) == expected
    assert _iceberg_rows(rest_catalog, views[2].name) == _expected(runtime, views[2])
    views = views[:2]
    # each commit records its engine, and ``status`` reports it
    engines = [view_status(runtime.config, runtime.catalog, v).engine for v in views]
    assert engines == ["local", "spark"]
    history = [DeltaTable(runtime.delta_uri(v)).history(1)[0] for v in views]
    assert [json.loads(h["userMetadata"])["lakehouse.engine"] for h in history] == engines
    data["views"] = [{"name": f"{namespace}.top", "engine": "local",
                      "sql": "SELECT carrier, SUM(DISTINCT flight) AS n FROM flights "
                             "GROUP BY carrier"}]
    refusing = Runtime(parse_config(data))
    with pytest.raises(ConfigError) as refused:
        refusing.refresh(refusing.config.views[0])
    assert refused.value.key == "views.0.engine"
    assert "DISTINCT inside an aggregate" in str(refused.value)


def test_a_join_with_a_small_delta_table_runs_on_the_local_engine(
    spark: SparkSession, catalog_server: CatalogServerHandle, rest_catalog: RestCatalog,
    sources: tuple[str, Path],
) -> None:
    """The Delta partner of a small change is read by delta-rs, restricted to its keys."""
    namespace, airlines = sources
    data = _config_data(catalog_server, namespace, airlines, ["iceberg", "delta"])
    data["views"] = [{"name": f"{namespace}.named", "full_refresh_ratio": 10, "sql": (
        "SELECT a.name, COUNT(*) AS n, SUM(f.flight) AS flights "
        "FROM flights f JOIN airlines a ON f.carrier = a.carrier GROUP BY a.name")}]
    first = Runtime(parse_config(data))
    assert first.refresh(first.config.views[0]).mode == "full"
    spark.sql(f"INSERT INTO lakehouse.{namespace}.flights VALUES ('UA', 21, 3.0), "
              "('KL', 22, 1.0)")
    second = Runtime(parse_config(data))  # a new process: the state is read from the warehouse
    view = second.config.views[0]
    result = second.refresh(view)
    assert (result.mode, result.engine) == ("incremental", "local"), result.engine_reason
    assert not second.session.started  # no JVM for this tick
    expected = _expected(second, view)
    assert _iceberg_rows(rest_catalog, view.name) == expected
    assert _delta_rows(second, view) == expected
    assert expected[("United", 2, 24)] == 1


def test_filter_and_join_views_run_on_the_local_engine_in_a_new_process(
    spark: SparkSession, catalog_server: CatalogServerHandle, rest_catalog: RestCatalog,
    sources: tuple[str, Path],
) -> None:
    """Views of filters, projections and inner joins tick on DuckDB: no JVM, no state.

    Inserts, a delete and an update (a copy-on-write rewrite: +1 and -1 rows) of the
    Iceberg source, and an update of the Delta partner, each equal a recompute in both
    sinks; rows keep their multiplicity.
    """
    namespace, airlines = sources
    data = _config_data(catalog_server, namespace, airlines, ["iceberg", "delta"])
    data["views"] = [
        {"name": f"{namespace}.late", "full_refresh_ratio": 10,
         "sql": "SELECT carrier, dep_delay FROM flights WHERE dep_delay > 2"},
        {"name": f"{namespace}.named", "full_refresh_ratio": 10, "sql": (
            "SELECT a.name, f.flight, f.dep_delay FROM flights f "
            "JOIN airlines a ON f.carrier = a.carrier WHERE f.flight >= 2")}]
    first = Runtime(parse_config(data))
    for view in first.config.views:
        assert first.refresh(view).mode == "full"
    flights = f"lakehouse.{namespace}.flights"
    changes = [  # each change, and how many of the views read what it changed
        (lambda: spark.sql(f"INSERT INTO {flights} VALUES ('UA', 7, 45.0), ('UA', 7, 45.0), "
                           "('AA', 8, 0.5)"), 2),
        (lambda: spark.sql(f"DELETE FROM {flights} WHERE flight = 2"), 2),
        (lambda: spark.sql(f"UPDATE {flights} SET dep_delay = 3.0 WHERE flight = 8"), 2),
        (lambda: DeltaTable(str(airlines)).update({"name": "'United Airlines'"},
                                                  predicate="carrier = 'UA'"), 1),
    ]
    for change, reading in changes:
        change()
        runtime = Runtime(parse_config(data))  # a new process for every tick
        results = [runtime.refresh(view) for view in runtime.config.views]
        assert [(r.mode, r.engine) for r in results if r.mode != "skipped"] == [
            ("incremental", "local")] * reading, [r.engine_reason for r in results]
        assert not runtime.session.started  # no JVM for these ticks
        for view in runtime.config.views:
            expected = _expected(runtime, view)
            assert _iceberg_rows(rest_catalog, view.name) == expected, view.name
            assert _delta_rows(runtime, view) == expected, view.name
    assert _iceberg_rows(rest_catalog, f"{namespace}.named")[
        ("United Airlines", 7, 45.0)] == 2


def test_a_poll_skips_from_the_sources_versions_and_checks_the_sinks_every_30_s(
    spark: SparkSession, catalog_server: CatalogServerHandle, rest_catalog: RestCatalog,
    sources: tuple[str, Path],
) -> None:
    """A scheduled poll compares the sources' versions with the frontier its last full
    check saw, reading no sink; a refresh asked for, or 30 s on, checks the sinks."""
    namespace, airlines = sources
    data = _config_data(catalog_server, namespace, airlines, ["iceberg"])
    data["views"] = [{"name": f"{namespace}.polled", "full_refresh_ratio": 10,
                      "sql": "SELECT carrier, flight FROM flights WHERE flight > 1"}]
    runtime = Runtime(parse_config(data))
    view = runtime.config.views[0]
    now = [time.time()]
    runtime.reflected = ReflectedFrontiers(runtime.readers, clock=lambda: now[0],
                                           monotonic=lambda: now[0])
    assert runtime.refresh(view, poll=True).mode == "full"
    rest_catalog.drop_table(view.name)  # a sink dropped by hand: only a full check sees it
    now[0] += 1
    assert runtime.refresh(view, poll=True).mode == "skipped"
    now[0] += FULL_CHECK_EVERY_S
    assert runtime.refresh(view, poll=True).mode == "full"  # rebuilt
    spark.sql(f"INSERT INTO lakehouse.{namespace}.flights VALUES ('KL', 9, 1.0)")
    now[0] += 1
    polled = runtime.refresh(view, poll=True)
    assert (polled.mode, polled.rows_in) == ("incremental", 1)  # a source moved
    assert _iceberg_rows(rest_catalog, view.name) == _expected(runtime, view)
    rest_catalog.drop_table(view.name)
    now[0] += 1
    assert runtime.refresh(view, poll=True).mode == "skipped"
    assert runtime.refresh(view).mode == "full"  # not a poll: the sinks are read


def test_a_new_process_resumes_from_the_aggregate_state_in_the_warehouse(
    spark: SparkSession, catalog_server: CatalogServerHandle, rest_catalog: RestCatalog,
    sources: tuple[str, Path],
) -> None:
    """A new Runtime reads the state the last one stored: its small tick needs no Spark."""
    namespace, airlines = sources
    data = _config_data(catalog_server, namespace, airlines, ["iceberg", "delta"])
    data["views"] = [{"name": f"{namespace}.counts", "full_refresh_ratio": 10,
                      "sql": "SELECT carrier, COUNT(*) AS n, SUM(flight) AS flights "
                             "FROM flights GROUP BY carrier"}]
    first = Runtime(parse_config(data))
    assert first.refresh(first.config.views[0]).mode == "full"  # builds and stores the state
    spark.sql(f"INSERT INTO lakehouse.{namespace}.flights VALUES ('AA', 11, 3.0)")
    second = Runtime(parse_config(data))  # as a new process: nothing in memory
    view = second.config.views[0]
    context = spark.sparkContext
    context.setJobGroup("resumed tick", "resumed tick")
    try:
        result = second.refresh(view)
        jobs = context.statusTracker().getJobIdsForGroup("resumed tick")
    finally:
        context.setJobGroup("other", "other")
    assert (result.mode, result.engine, jobs) == ("incremental", "local", [])
    assert not second.session.started  # the tick needed no Spark: this Runtime started none
    assert _iceberg_rows(rest_catalog, view.name) == _expected(second, view)
    assert [r["previous"] is not None for r in _state_records(catalog_server, view)] == [
        False, True]  # the state at the load, and the tick's change on top of it
    data["views"][0]["engine"] = "spark"  # the same view, now kept on Spark
    for tick, carrier in enumerate(["UA", "KL"]):
        runtime = Runtime(parse_config(data))  # a new process each time
        view = runtime.config.views[0]
        frontier = runtime.sinks(view).frontiers()["iceberg"]
        kept = runtime.states.get(view.name, runtime.plan(view).sql, frontier)
        assert (kept is not None and kept.rows is not None) == (tick == 1)  # stored on Spark
        spark.sql(f"INSERT INTO lakehouse.{namespace}.flights VALUES ('{carrier}', 12, 4.0)")
        on_spark = runtime.refresh(view)
        assert (on_spark.mode, on_spark.engine) == ("incremental", "spark")
        assert _iceberg_rows(rest_catalog, view.name) == _expected(runtime, view)
        records = _state_records(catalog_server, view)
        assert all(r["on_spark"] for r in records)  # written by the executors
        assert [r["previous"] is not None for r in records] == [False, *[True] * tick]


def test_a_top_k_view_is_maintained_by_its_buffer_in_both_sinks(
    spark: SparkSession, catalog_server: CatalogServerHandle, rest_catalog: RestCatalog,
    sources: tuple[str, Path],
) -> None:
    """ORDER BY ... LIMIT: incremental ticks in one process and in a new one."""
    namespace, airlines = sources
    data = _config_data(catalog_server, namespace, airlines, ["iceberg", "delta"])
    data["views"] = [{"name": f"{namespace}.worst", "full_refresh_ratio": 10,
                      "sql": "SELECT f.carrier, a.name, f.dep_delay FROM flights f "
                             "JOIN airlines a ON f.carrier = a.carrier "
                             "ORDER BY f.dep_delay DESC NULLS LAST LIMIT 2"}]
    runtime = Runtime(parse_config(data))
    view = runtime.config.views[0]
    assert runtime.refresh(view).mode == "full"
    table = f"lakehouse.{namespace}.flights"
    for change in (f"INSERT INTO {table} VALUES ('UA', 5, 99.0), ('AA', 6, 0.5)",
                   f"DELETE FROM {table} WHERE dep_delay > 50",  # the top row leaves
                   f"UPDATE {table} SET dep_delay = 60.0 WHERE flight = 1"):
        spark.sql(change)
        result = runtime.refresh(view)
        assert (result.mode, result.engine) == ("incremental", "spark"), result
        assert _iceberg_rows(rest_catalog, view.name) == _expected(runtime, view)
        assert _delta_rows(runtime, view) == _expected(runtime, view)
    write_deltalake(str(airlines), pa.table({"carrier": ["AA"], "name": ["American II"]}),
                    mode="overwrite", configuration={"delta.enableChangeDataFeed": "true"})
    fresh = Runtime(parse_config(data))  # a new process: the buffer is filled again
    assert fresh.refresh(view).mode == "incremental"
    rows = _iceberg_rows(rest_catalog, view.name)
    assert rows == _expected(fresh, view) == _delta_rows(fresh, view)
    assert {row[1] for row in rows} == {"American II"}


def _state_records(catalog_server: CatalogServerHandle, view: ViewConfig) -> list[dict]:
    """The view's stored state records (:mod:`lakehouse.state_store`), base first."""
    [folder] = (catalog_server.warehouse / "_state" / view.name).iterdir()
    records = [json.loads(path.read_text()) for path in folder.glob("*.json")]
    return sorted(records, key=lambda record: record["changes"])


def test_a_diamond_of_views_refreshes_upstream_first(
    spark: SparkSession, catalog_server: CatalogServerHandle, rest_catalog: RestCatalog,
    sources: tuple[str, Path],
) -> None:
    namespace, airlines = sources
    data = _config_data(catalog_server, namespace, airlines, ["iceberg"])
    data["sources"].update({  # type: ignore[attr-defined]
        "by_carrier": {"view": f"{namespace}.by_carrier"},
        "busy": {"view": f"{namespace}.busy"}, "named": {"view": f"{namespace}.named"}})
    data["views"] += [  # type: ignore[operator]
        {"name": f"{namespace}.busy", "sql": "SELECT carrier, n FROM by_carrier WHERE n > 1",
         "sinks": ["iceberg"], "refresh": "incremental"},
        {"name": f"{namespace}.named", "sql": "SELECT name, total_delay FROM by_carrier",
         "sinks": ["iceberg"], "refresh": "incremental"},
        {"name": f"{namespace}.diamond", "sinks": ["iceberg"], "refresh": "incremental", "sql": (
            "SELECT b.carrier, b.n, c.total_delay FROM busy b JOIN by_carrier x "
            "ON b.carrier = x.carrier JOIN named c ON x.name = c.name")},
    ]
    runtime = Runtime(parse_config(data))
    diamond = runtime.config.view(f"{namespace}.diamond")
    assert runtime.refresh(diamond).mode == "full"
    spark.sql(f"INSERT INTO lakehouse.{namespace}.flights VALUES ('UA', 8, 3.0), ('UA', 9, 4.0)")
    assert runtime.refresh(diamond).mode == "incremental"
    for view in runtime.config.views:
        expected = multiset(tuple(r.values()) for r in runtime.recompute(view).to_pylist())
        assert _iceberg_rows(rest_catalog, view.name) == expected, view.name
    assert ("UA", 3) in {row[:2] for row in _iceberg_rows(rest_catalog, diamond.name)}


def test_views_reading_each_other_in_a_cycle_are_refused(
    catalog_server: CatalogServerHandle, sources: tuple[str, Path],
) -> None:
    namespace, airlines = sources
    data = _config_data(catalog_server, namespace, airlines, ["iceberg"])
    data["sources"].update({"a": {"view": f"{namespace}.a"},  # type: ignore[attr-defined]
                            "b": {"view": f"{namespace}.b"}})
    data["views"] = [{"name": f"{namespace}.a", "sql": "SELECT * FROM b"},
                     {"name": f"{namespace}.b", "sql": "SELECT * FROM a"}]
    with pytest.raises(ConfigError, match="cycle") as raised:
        Runtime(parse_config(data))
    assert raised.value.key == "views"


@pytest.fixture
def config_file(catalog_server: CatalogServerHandle, sources: tuple[str, Path],
                tmp_path: Path) -> Path:
    """``lakehouse.yaml`` for the one-view config, with the Iceberg sink only."""
    namespace, airlines = sources
    path = tmp_path / "lakehouse.yaml"
    path.write_text(yaml.safe_dump(_config_data(catalog_server, namespace, airlines, ["iceberg"])))
    return path


def test_status_command_prints_each_view(config_file: Path) -> None:
    result = CliRunner().invoke(app, ["status", "--config", str(config_file)])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if "by_carrier" in line)
    assert "never" in row and "flights" in row  # not refreshed yet: both sources are behind


def test_status_names_a_missing_source_and_sql_that_does_not_parse(
    catalog_server: CatalogServerHandle, sources: tuple[str, Path], tmp_path: Path
) -> None:
    """Neither is "fresh": each view is listed as stopped, with its reason, and no traceback."""
    namespace, airlines = sources
    data = _config_data(catalog_server, namespace, airlines, ["iceberg"])
    data["sources"]["gone"] = {"iceberg": f"{namespace}.gone"}  # type: ignore[index]
    data["sources"]["up"] = {"view": f"{namespace}.by_carrier"}  # type: ignore[index]
    data["views"] = [  # type: ignore[index]
        {"name": f"{namespace}.reads_gone", "sql": "SELECT carrier FROM gone"},
        {"name": f"{namespace}.bad_sql", "sql": "SELECT carrier FROM flights WHERE ("},
        {"name": f"{namespace}.unterminated", "sql": "SELECT 'abc FROM flights"},
        {"name": f"{namespace}.typo", "sql": "SELECT carrier FROM flighst"},
        {"name": f"{namespace}.by_carrier", "sql": SQL},
        {"name": f"{namespace}.downstream", "sql": "SELECT carrier FROM up"}]
    path = tmp_path / "lakehouse.yaml"
    path.write_text(yaml.safe_dump(data))
    result = CliRunner().invoke(app, ["status", "--config", str(path)])
    assert result.exit_code == 0, result.output
    assert result.exception is None, result.exception
    lines = result.output.splitlines()
    stopped = ("reads_gone", "bad_sql", "unterminated", "typo")
    row = {view: next(line for line in lines if f"{view} " in line and "│" in line)
           for view in (*stopped, "by_carrier", "downstream")}
    assert all("stopped" in row[view] and "fresh" not in row[view] for view in stopped), \
        result.output
    assert "stopped" not in row["by_carrier"] + row["downstream"], result.output  # not built
    assert f"{namespace}.typo stopped: it reads 'flighst', which is not among the sources" \
        in result.output, result.output
    assert f"{namespace}.reads_gone stopped: source 'gone': its table is missing " \
           f"(sources.gone: {namespace}.gone)" in result.output, result.output
    assert f"{namespace}.bad_sql stopped: SQL does not parse" in result.output, result.output
    for command in ("explain", "refresh", "tick"):
        for view in ("reads_gone", "bad_sql"):
            failed = CliRunner().invoke(app, [command, f"{namespace}.{view}", "-c", str(path)])
            assert failed.exit_code == 1 and isinstance(failed.exception, SystemExit), \
                (command, view, failed.output, failed.exception)
            assert failed.output.startswith("error: "), (command, view, failed.output)


def test_explain_command_prints_every_node_with_its_law(
    config_file: Path, sources: tuple[str, Path]
) -> None:
    """Laws are printed in brackets, which Rich's markup would read as tags and drop."""
    namespace, _ = sources
    result = CliRunner().invoke(app, ["explain", f"{namespace}.by_carrier",
                                      "--config", str(config_file)])
    assert result.exit_code == 0, result.output
    nodes = [line for line in result.output.splitlines() if line.lstrip().startswith("- ")]
    laws = [re.match(r"\s*- .*? \[([^\]:]+)", line) for line in nodes]
    assert nodes and all(laws), result.output  # every node names its law
    named = {law.group(1) for law in laws if law}
    assert named <= {law.value for law in Law}, result.output
    assert named == {Law.CHANGE_FEED, Law.BILINEAR_JOIN, Law.AFFECTED_KEY_RECOMPUTE}, \
        result.output


def test_explain_reads_an_embedded_catalog_without_serving_it_or_starting_spark(
    catalog_server: CatalogServerHandle, sources: tuple[str, Path], tmp_path: Path,
) -> None:
    """The embedded catalog's port is taken and Java is not on the path: neither is needed."""
    namespace, airlines = sources
    data = _config_data(catalog_server, namespace, airlines, ["iceberg"])
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        data["catalog"] = {"embedded": True, "database_url": catalog_server.database_url,
                           "listen": f"127.0.0.1:{taken.getsockname()[1]}"}
        path = tmp_path / "embedded.yaml"
        path.write_text(yaml.safe_dump(data))
        env = {key: value for key, value in os.environ.items() if key != "JAVA_HOME"}
        env["PATH"] = str(Path(sys.executable).parent)  # no java, no spark-submit
        done = subprocess.run([sys.executable, "-m", "lakehouse", "explain", "--json",
                               f"{namespace}.by_carrier", "-c", str(path)], env=env,
                              capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    tree = json.loads(done.stdout)
    assert tree["view"] == f"{namespace}.by_carrier" and tree["incremental"]
    assert tree["root"]["law"] == Law.AFFECTED_KEY_RECOMPUTE


def test_refresh_writes_through_an_embedded_catalog_nothing_serves_from_its_own_process(
    spark: SparkSession, catalog_server: CatalogServerHandle, sources: tuple[str, Path],
    rest_catalog: RestCatalog, tmp_path: Path,
) -> None:
    """The embedded catalog's port is taken by something else: ``refresh`` needs no service.

    A tick on the local engine writes through the catalog in its own process; a tick on
    Spark serves it on a free port for Spark's REST client. Both land in the catalog the
    test's service reads, the Delta copy listed there too.
    """
    namespace, airlines = sources
    view = f"{namespace}.by_carrier"
    data = _config_data(catalog_server, namespace, airlines, ["iceberg", "delta"])
    path = tmp_path / "embedded.yaml"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        data["catalog"] = {"embedded": True, "database_url": catalog_server.database_url,
                           "listen": f"127.0.0.1:{taken.getsockname()[1]}"}
        for engine in ("spark", "local"):
            data["views"][0]["engine"] = engine  # type: ignore[index]
            path.write_text(yaml.safe_dump(data))
            if engine == "local":  # a change for an incremental tick
                spark.sql(f"INSERT INTO lakehouse.{namespace}.flights VALUES ('UA', 7, 2.0)")
            done = subprocess.run([sys.executable, "-m", "lakehouse", "refresh", view, "-c",
                                   str(path), "--json"], capture_output=True, text=True,
                                  timeout=300, check=False)
            assert done.returncode == 0, done.stdout + done.stderr
            summary = json.loads(done.stdout.splitlines()[-1])
            assert summary["sinks"] == ["iceberg", "delta"], summary
        assert summary["mode"] == "incremental" and summary["engine"] == "local", summary
        spark.sql(f"INSERT INTO lakehouse.{namespace}.flights VALUES ('AA', 8, 4.0)")
        with Runtime(parse_config(data)) as embedded:  # the Python API: the same choice
            result = embedded.refresh(embedded.config.views[0])
            assert (result.mode, result.engine) == ("incremental", "local")
            assert isinstance(embedded.catalog, InProcessCatalog)
            assert embedded.server is None and not embedded.session.started  # no JVM either
    oracle = Runtime(parse_config(_config_data(catalog_server, namespace, airlines, ["iceberg"])))
    assert _iceberg_rows(rest_catalog, view) == _expected(oracle, oracle.config.views[0])
    copies = httpx.get(f"{catalog_server.uri}/polaris/v1/namespaces/{namespace}/generic-tables")
    assert {"namespace": [namespace], "name": "by_carrier_delta"} in copies.json()["identifiers"]


def test_tick_of_an_unknown_view_names_the_views(
    config_file: Path, sources: tuple[str, Path]
) -> None:
    namespace, _ = sources
    result = CliRunner().invoke(app, ["tick", "nope.nope", "--config", str(config_file)])
    assert result.exit_code == 1
    assert f"{namespace}.by_carrier" in result.output


def _cli(*args: str) -> str:
    """Run ``lakehouse ARGS``; its output (it must succeed)."""
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0 and result.exception is None, (args, result.output)
    return result.output


def test_refresh_full_swaps_the_content_and_history_records_each_refresh(
    spark: SparkSession, config_file: Path, sources: tuple[str, Path],
    rest_catalog: RestCatalog,
) -> None:
    """``refresh --full`` recomputes a view already fresh; every refresh is a history row.

    The CLI's refresh runs in its own process: it stops the Spark session it used.
    """
    namespace, airlines = sources
    view = f"{namespace}.by_carrier"
    history_table = f"history_{namespace}.refreshes"  # this test's own
    data = yaml.safe_load(config_file.read_text()) | {"history_table": history_table}
    config_file.write_text(yaml.safe_dump(data))
    runtime = Runtime(parse_config(data))
    assert runtime.refresh(runtime.config.views[0]).mode == "full"
    spark.sql(f"INSERT INTO lakehouse.{namespace}.flights VALUES ('UA', 9, 4.0)")
    second = runtime.refresh(runtime.config.views[0])
    assert second.mode == "incremental" and second.rows_in == 1
    built = rest_catalog.load_table(view).current_snapshot()
    command = [sys.executable, "-m", "lakehouse", "refresh", view, "-c", str(config_file),
               "--full", "--json"]
    ran = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    forced = json.loads(ran.stdout)
    assert (forced["mode"], forced["reason"]) == ("full", "full refresh requested")
    assert forced["frontier"] == second.frontier  # no source moved: the same frontier
    table = rest_catalog.load_table(view)
    assert built is not None and table.current_snapshot().parent_snapshot_id == \
        built.snapshot_id  # one commit swapped the content
    assert _iceberg_rows(rest_catalog, view) == _expected(runtime, runtime.config.views[0])
    assert runtime.refresh(runtime.config.views[0]).mode == "skipped"
    assert runtime.history_writer is not None
    runtime.history_writer.flush()  # rows are appended off the refresh's path

    rows = json.loads(_cli("history", view, "-c", str(config_file), "--json"))
    assert [r["mode"] for r in rows] == ["full", "incremental", "full"]  # newest first; the
    assert rows[2]["frontier_before"] is None  # skipped refresh is not recorded
    assert json.loads(rows[1]["frontier_before"]) != json.loads(rows[1]["frontier_after"])
    assert rows[0]["frontier_before"] == rows[0]["frontier_after"]
    assert rows[1]["rows_in"] == 1 and rows[0]["reason"] == "full refresh requested"
    assert rest_catalog.load_table(history_table).scan().to_arrow().num_rows == 3  # by name
    printed = _cli("history", "-c", str(config_file), "--limit", "1")  # a table, cells wrap
    assert printed.count("requested") == 1 and "incremental" not in printed, printed


def test_a_full_refresh_reads_the_new_snapshots_and_no_change_feed(
    spark: SparkSession, catalog_server: CatalogServerHandle, sources: tuple[str, Path],
    rest_catalog: RestCatalog, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An initial load, a forced full refresh and a ``refresh: full`` view recompute from the
    sources' snapshots: a change feed computed for them would be thrown away (for an
    initial load, the whole table consolidated and materialized; for a forced one, a change
    that may span the table)."""
    namespace, airlines = sources
    feeds: list[tuple[str, int | None, int]] = []
    for reader in (IcebergSourceReader, DeltaSourceReader):
        def spy(self: object, old: int | None, new: int, *args: object,
                _read: object = reader.change_feed, **kwargs: object) -> object:
            feeds.append((self.name, old, new))  # type: ignore[attr-defined]
            return _read(self, old, new, *args, **kwargs)  # type: ignore[operator]
        monkeypatch.setattr(reader, "change_feed", spy)
    runtime = _runtime(catalog_server, namespace, airlines, ["iceberg", "delta"])
    view = runtime.config.views[0]
    assert runtime.refresh(view).mode == "full" and feeds == []  # the initial load
    spark.sql(f"INSERT INTO lakehouse.{namespace}.flights VALUES ('UA', 9, 4.0)")
    forced = runtime.refresh(view, full=True)
    assert (forced.mode, forced.reason, feeds) == ("full", "full refresh requested", [])
    assert _iceberg_rows(rest_catalog, view.name) == _expected(runtime, view) == \
        _delta_rows(runtime, view)
    spark.sql(f"INSERT INTO lakehouse.{namespace}.flights VALUES ('AA', 10, 2.0)")
    assert runtime.refresh(view).mode == "incremental"
    assert [name for name, _, _ in feeds] == ["flights"]  # only the source that moved
    policy = _runtime(catalog_server, namespace, airlines, ["iceberg"], refresh="full")
    spark.sql(f"INSERT INTO lakehouse.{namespace}.flights VALUES ('DL', 11, 3.0)")
    assert policy.refresh(policy.config.views[0]).mode == "full" and len(feeds) == 1
    assert _iceberg_rows(rest_catalog, view.name) == _expected(policy, policy.config.views[0])


def test_a_view_whose_change_was_expired_recomputes_from_the_new_snapshots(
    spark: SparkSession, catalog_server: CatalogServerHandle, sources: tuple[str, Path],
    rest_catalog: RestCatalog,
) -> None:
    """The source snapshot a view reflects is expired: its change is gone, so the next tick
    recomputes the view in full, says why, and the frontier moves on."""
    namespace, airlines = sources
    runtime = _runtime(catalog_server, namespace, airlines, ["iceberg", "delta"])
    view = runtime.config.views[0]
    reflected = runtime.refresh(view).frontier["flights"]
    spark.sql(f"INSERT INTO lakehouse.{namespace}.flights VALUES ('UA', 9, 4.0)")
    spark.sql(f"CALL lakehouse.system.expire_snapshots(table => '{namespace}.flights', "
              f"snapshot_ids => array({reflected}))")
    result = runtime.refresh(view)
    assert result.mode == "full" and "expired" in (result.reason or ""), result.reason
    assert result.frontier["flights"] != reflected
    assert _iceberg_rows(rest_catalog, view.name) == _expected(runtime, view) == \
        _delta_rows(runtime, view)
    spark.sql(f"INSERT INTO lakehouse.{namespace}.flights VALUES ('AA', 10, 2.0)")
    assert runtime.refresh(view).mode == "incremental"  # from the recomputed frontier
    assert _iceberg_rows(rest_catalog, view.name) == _expected(runtime, view)


def test_a_suspended_view_is_not_refreshed_by_the_schedule_until_resumed(
    spark: SparkSession, config_file: Path, sources: tuple[str, Path],
) -> None:
    """The suspension is in the catalog: a new Runtime (a restarted process) still sees it."""
    namespace, _ = sources
    view = f"{namespace}.by_carrier"
    data = yaml.safe_load(config_file.read_text()) | {
        "history_table": f"history_{namespace}.refreshes"}
    config_file.write_text(yaml.safe_dump(data))
    assert _cli("suspend", view, "-c", str(config_file)).strip() == f"{view}: suspended"
    status = json.loads(_cli("status", "-c", str(config_file), "--json"))
    assert status[0]["suspended_since"] is not None
    assert "suspended" in _cli("status", "-c", str(config_file))
    runtime = Runtime(parse_config(data))
    scheduled = runtime.refresh(runtime.config.views[0])
    assert scheduled.mode == "skipped" and "suspended since" in (scheduled.reason or "")
    assert runtime.refresh(runtime.config.views[0], manual=True).mode == "full"  # asked for
    _cli("resume", view, "-c", str(config_file))
    spark.sql(f"INSERT INTO lakehouse.{namespace}.flights VALUES ('UA', 9, 4.0)")
    restarted = Runtime(parse_config(data))
    assert restarted.refresh(restarted.config.views[0]).mode == "incremental"
    assert json.loads(_cli("status", "-c", str(config_file), "--json"))[0][
        "suspended_since"] is None


def test_explain_json_names_each_node_law(config_file: Path, sources: tuple[str, Path]) -> None:
    namespace, _ = sources
    tree = json.loads(_cli("explain", f"{namespace}.by_carrier", "-c", str(config_file),
                           "--json"))
    laws, stack = set(), [tree["root"]]
    while stack:
        node = stack.pop()
        laws.add(node["law"])
        stack.extend(node["children"])
    assert tree["incremental"] and tree["key"] == ["carrier", "name"]
    assert laws == {Law.CHANGE_FEED, Law.BILINEAR_JOIN, Law.AFFECTED_KEY_RECOMPUTE}


def test_the_python_api_subscribes_to_each_snapshot_and_waits_for_a_source_snapshot(
    spark: SparkSession, config_file: Path, sources: tuple[str, Path],
    rest_catalog: RestCatalog,
) -> None:
    """Subscriptions replay each view snapshot once as a Z-set; waits answer read-your-writes.

    The pipeline is not closed: that would stop the test session's Spark.
    """
    namespace, airlines = sources
    view, flights = f"{namespace}.by_carrier", f"{namespace}.flights"
    data = yaml.safe_load(config_file.read_text()) | {
        "history_table": f"history_{namespace}.refreshes"}
    config_file.write_text(yaml.safe_dump(data))
    pipeline = Pipeline(parse_config(data))
    before = rest_catalog.load_table(flights).current_snapshot().snapshot_id
    assert pipeline.refresh(view).mode == "full"
    (initial,) = list(pipeline.subscribe(view, follow=False))
    content = pipeline.snapshot(view)
    assert initial.rows.column(WEIGHT).to_pylist() == [1] * content.num_rows
    assert multiset(tuple(r.values()) for r in initial.rows.drop([WEIGHT]).to_pylist()) == \
        multiset(tuple(r.values()) for r in content.to_pylist())

    spark.sql(f"INSERT INTO lakehouse.{flights} VALUES ('UA', 9, 4.0), ('KL', 10, 1.0)")
    produced = rest_catalog.load_table(flights).current_snapshot().snapshot_id
    with pytest.raises(WaitTimeoutError) as late:
        pipeline.wait(view, "flights", produced, timeout_s=0.3)
    assert late.value.reason.startswith("refreshing"), late.value.reason
    assert pipeline.refresh(view).mode == "incremental"
    current = rest_catalog.load_table(view).current_snapshot().snapshot_id
    assert json.loads(_cli("wait", view, "--source", f"flights={produced}", "-c",
                           str(config_file), "--json"))["snapshot_id"] == current
    assert pipeline.wait(view, "flights", before, timeout_s=1) == initial.snapshot_id
    (change,) = list(pipeline.subscribe(view, since=initial.snapshot_id, follow=False))
    assert change.snapshot_id == current and change.frontier is not None
    old, new = (multiset(tuple(r.values()) for r in table.to_pylist())
                for table in (content, pipeline.snapshot(view)))
    delta = {row: n - old.get(row, 0) for row, n in new.items() if n != old.get(row, 0)}
    delta |= {row: -n for row, n in old.items() if row not in new}
    assert {tuple(r[:-1]): r[-1] for r in (tuple(x.values()) for x in change.rows.to_pylist())
            } == delta  # UA's group changed (-1 old, +1 new); KL has no airline: no row

    with pytest.raises(SourceError, match="has no snapshot 12345"):
        pipeline.wait(view, "flights", 12345, timeout_s=1)
    with pytest.raises(ConfigError, match="does not read source"):
        pipeline.wait(view, "nope", 1, timeout_s=1)
    with pytest.raises(SubscriptionError, match="no longer in the table's history"):
        list(pipeline.subscribe(view, since=12345, follow=False))
    pipeline.suspend(view)
    spark.sql(f"INSERT INTO lakehouse.{flights} VALUES ('AA', 11, 2.0)")
    latest = rest_catalog.load_table(flights).current_snapshot().snapshot_id
    with pytest.raises(WaitTimeoutError) as suspended:
        pipeline.wait(view, "flights", latest, timeout_s=0.2)
    assert suspended.value.reason.startswith("suspended since"), suspended.value.reason
    pipeline.resume(view)


def test_a_spark_tick_compiles_no_code_the_previous_tick_compiled(
    spark: SparkSession, catalog_server: CatalogServerHandle, sources: tuple[str, Path],
) -> None:
    """Spark's generated classes outlive a tick (``spark.sql.codegen.cache.maxEntries``).

    A tick of a join and aggregate view runs more distinct generated classes than Spark's
    default cache of 100 holds, the same ones every tick: at that size each tick compiled
    them all again.
    """
    namespace, airlines = sources
    data = _config_data(catalog_server, namespace, airlines, ["iceberg", "delta"])
    data["views"] = [{"name": f"{namespace}.compiled_once", "engine": "spark",
                      "sql": SQL.replace("COUNT(*) AS n", "COUNT(*) AS n, MIN(f.flight) AS lo, "
                                         "AVG(f.dep_delay) AS mean_delay")}]
    runtime = Runtime(parse_config(data))
    view = runtime.config.views[0]
    compiled = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics \
        .METRIC_COMPILATION_TIME()  # type: ignore[union-attr]
    runtime.refresh(view)
    counts = []
    for flight in (10, 11, 12):
        spark.sql(f"INSERT INTO lakehouse.{namespace}.flights VALUES ('AA', {flight}, 2.0)")
        spark.sql(f"DELETE FROM lakehouse.{namespace}.flights WHERE flight = {flight - 9}")
        before = compiled.getCount()
        assert runtime.refresh(view).mode == "incremental"
        counts.append(compiled.getCount() - before)
    # at Spark's default cache size every tick compiled 157 classes, the first one too
    assert counts[2] < 20, counts
    assert _delta_rows(runtime, view) == _expected(runtime, view)
