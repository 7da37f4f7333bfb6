"""Source schema changes: added columns are followed; a changed column a view reads stops it.

Iceberg schemas are changed with Spark ``ALTER TABLE`` (add, rename, drop, type widening);
Delta schemas with delta-rs (a merge adds columns; an overwrite with a new schema drops or
renames one, as delta-rs has no rename). Every refresh that runs must leave both sinks equal
to the full recompute ``Runtime.recompute``; a stopped view's sinks must not move.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyiceberg.catalog.rest import RestCatalog
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from lakehouse.cli import app
from lakehouse.config import Config, ViewConfig, parse_config
from lakehouse.errors import RefreshError, SchemaChangedError
from lakehouse.runtime import Runtime
from lakehouse.scheduler import Scheduler
from lakehouse.sources.arrow_bridge import ArrowBridge
from lakehouse.sources.schema import delta_schema, iceberg_schema
from lakehouse.spark.arrow import to_arrow
from lakehouse.status import view_status
from tests.conftest import multiset
from tests.conftest_catalog import CatalogServerHandle

pytestmark = pytest.mark.spark


def _config(server: CatalogServerHandle, namespace: str, airlines: Path,
            views: dict[str, str], sinks: list[str] | None = None) -> Config:
    return parse_config({
        "warehouse": str(server.warehouse),
        "catalog": {"embedded": False, "uri": server.uri},
        "sources": {"flights": {"iceberg": f"{namespace}.flights"},
                    "airlines": {"delta": str(airlines)}},
        "views": [{"name": f"{namespace}.{name}", "sql": sql, "refresh": "incremental",
                   "sinks": sinks or ["iceberg", "delta"]} for name, sql in views.items()],
    })


@pytest.fixture
def sources(spark: SparkSession, catalog_namespace: str, tmp_path: Path) -> tuple[str, Path]:
    """Iceberg ``flights`` (merge-on-read) and Delta ``airlines`` (change data feed on)."""
    spark.sql(f"CREATE TABLE lakehouse.{catalog_namespace}.flights (carrier string, flight int, "
              "dep_delay double, tail string, seats int) USING iceberg TBLPROPERTIES "
              "('format-version' = '2', 'write.delete.mode' = 'merge-on-read', "
              "'write.update.mode' = 'merge-on-read')")
    spark.sql(f"INSERT INTO lakehouse.{catalog_namespace}.flights VALUES "
              "('AA', 1, 5.0, 'N1', 100), ('AA', 2, 30.0, 'N2', 150), ('UA', 3, NULL, 'N1', 90), "
              "('DL', 4, 1.5, 'N3', 200)")
    airlines = tmp_path / "airlines"
    write_deltalake(str(airlines), pa.table({"carrier": ["AA", "UA", "DL"],
                                             "name": ["American", "United", "Delta"],
                                             "country": ["US", "US", "US"]}),
                    configuration={"delta.enableChangeDataFeed": "true"})
    return catalog_namespace, airlines


def _rows(table: pa.Table) -> object:
    return multiset(tuple(r.values()) for r in table.to_pylist())


def _assert_equals_recompute(runtime: Runtime, catalog: RestCatalog, view: ViewConfig) -> None:
    expected = _rows(runtime.recompute(view))
    assert _rows(catalog.load_table(view.name).scan().to_arrow()) == expected, view.name
    if "delta" in view.sinks:
        assert _rows(DeltaTable(runtime.delta_uri(view)).to_pyarrow_table()) == expected


def _sink_versions(runtime: Runtime, catalog: RestCatalog, view: ViewConfig) -> tuple[object, ...]:
    snapshot = catalog.load_table(view.name).current_snapshot()
    delta = DeltaTable(runtime.delta_uri(view)).version() if "delta" in view.sinks else None
    return snapshot.snapshot_id if snapshot else None, delta


def test_spark_types_from_metadata_match_what_spark_reads(
    spark: SparkSession, rest_catalog: RestCatalog, catalog_namespace: str, tmp_path: Path,
) -> None:
    """Plans compile from metadata now, so its Spark types must be Spark's own."""
    table = f"lakehouse.{catalog_namespace}.types"
    spark.sql(f"CREATE TABLE {table} (a int, b bigint, c double, d float, e string, "
              "f decimal(9, 2), g date, h timestamp, i timestamp_ntz, j boolean, k binary, "
              "l array<int>, m map<string, bigint>, n struct<x: int, y: string>) USING iceberg")
    spark.sql(f"INSERT INTO {table} SELECT 1, 2, 3.0, 4.0, 'e', 6.5, DATE '2024-01-01', "
              "TIMESTAMP '2024-01-01 00:00:00', TIMESTAMP_NTZ '2024-01-01 00:00:00', true, "
              "X'00', array(1), map('k', 1L), named_struct('x', 1, 'y', 'z')")
    metadata = rest_catalog.load_table(f"{catalog_namespace}.types").metadata
    spark_schema = spark.table(table).schema
    found = iceberg_schema(metadata, metadata.current_snapshot_id)
    assert found is not None
    assert found.spark_types() == {f.name: f.dataType.simpleString() for f in spark_schema}
    path = str(tmp_path / "types")
    write_deltalake(path, to_arrow(spark.table(table).drop("i", "n")))
    bridge = ArrowBridge(spark, tmp_path / "scratch")  # how Delta sources reach Spark
    read = bridge.to_spark(DeltaTable(path).to_pyarrow_table()).schema
    assert delta_schema(DeltaTable(path)).spark_types() == {
        f.name: f.dataType.simpleString() for f in read}


def test_added_columns_do_not_disturb_views_that_do_not_read_them(
    spark: SparkSession, catalog_server: CatalogServerHandle, rest_catalog: RestCatalog,
    sources: tuple[str, Path],
) -> None:
    namespace, airlines = sources
    flights = f"lakehouse.{namespace}.flights"
    views = {
        "joined": "SELECT f.carrier, f.flight, f.dep_delay, a.name FROM flights f "
                  "JOIN airlines a ON f.carrier = a.carrier",
        "by_carrier": "SELECT carrier, COUNT(*) AS n, SUM(dep_delay) AS total FROM flights "
                      "GROUP BY carrier",
        "all_airlines": "SELECT * FROM airlines",  # * means the columns it was built with
    }
    runtime = Runtime(_config(catalog_server, namespace, airlines, views))
    for view in runtime.config.views:
        assert runtime.refresh(view).mode == "full"

    spark.sql(f"ALTER TABLE {flights} ADD COLUMN origin string")
    spark.sql(f"INSERT INTO {flights} VALUES ('UA', 5, 12.0, 'N4', 80, 'JFK'), "
              "('AA', 6, NULL, 'N5', 70, 'LGA')")
    spark.sql(f"UPDATE {flights} SET origin = 'EWR' WHERE flight = 1")  # an unread column only
    spark.sql(f"DELETE FROM {flights} WHERE flight = 2")
    write_deltalake(str(airlines), pa.table({"carrier": ["B6"], "name": ["JetBlue"],
                                             "country": ["US"], "alliance": ["none"]}),
                    mode="append", schema_mode="merge")
    DeltaTable(str(airlines)).update({"alliance": "'oneworld'"}, predicate="carrier = 'AA'")
    spark.sql(f"INSERT INTO {flights} VALUES ('B6', 7, 3.0, 'N6', 60, 'JFK')")
    for view in runtime.config.views:
        result = runtime.refresh(view)
        assert result.mode == "incremental", (view.name, result.reason)
        _assert_equals_recompute(runtime, rest_catalog, view)
        assert view_status(runtime.config, rest_catalog, view).stopped is None

    # A restarted process compiles against the schemas at the frontier: the same columns.
    restarted = Runtime(_config(catalog_server, namespace, airlines, views))
    spark.sql(f"INSERT INTO {flights} VALUES ('DL', 8, 2.0, 'N7', 50, 'JFK')")
    write_deltalake(str(airlines), pa.table({"carrier": ["WN"], "name": ["Southwest"],
                                             "country": ["US"], "alliance": [None]},
                                            schema=pa.schema([("carrier", pa.string()),
                                                              ("name", pa.string()),
                                                              ("country", pa.string()),
                                                              ("alliance", pa.string())])),
                    mode="append")
    for view in restarted.config.views:
        assert restarted.refresh(view).mode == "incremental"
        _assert_equals_recompute(restarted, rest_catalog, view)
    all_airlines = restarted.config.views[2]
    assert restarted.plan(all_airlines).columns == ("carrier", "name", "country")
    assert restarted.recompute(all_airlines).num_rows == 5


ICEBERG_VIEWS = {
    "delays": "SELECT carrier, SUM(dep_delay) AS total FROM flights GROUP BY carrier",
    "flights_by_carrier": "SELECT carrier, flight FROM flights",
    "tails": "SELECT tail, COUNT(*) AS n FROM flights GROUP BY tail",
    "counts": "SELECT carrier, COUNT(*) AS n FROM flights GROUP BY carrier",
}


def _stopped(runtime: Runtime, catalog: RestCatalog, view: ViewConfig, column: str,
             change: str, detail: str) -> None:
    """``view`` refuses to refresh, names the change, and its sinks do not move."""
    before = _sink_versions(runtime, catalog, view)
    with pytest.raises(SchemaChangedError) as raised:
        runtime.refresh(view)
    error = raised.value
    assert isinstance(error, RefreshError)
    assert (error.view, error.column, error.change) == (view.name, column, change)
    assert view.name in str(error) and f"column {column!r} {detail}" in str(error)
    assert "nothing was written" in str(error)
    assert _sink_versions(runtime, catalog, view) == before
    status = view_status(runtime.config, catalog, view)
    assert status.stopped is not None and f"column {column!r} {detail}" in status.stopped


def test_iceberg_rename_drop_and_widening_stop_only_the_views_reading_the_column(
    spark: SparkSession, catalog_server: CatalogServerHandle, rest_catalog: RestCatalog,
    sources: tuple[str, Path],
) -> None:
    namespace, airlines = sources
    flights = f"lakehouse.{namespace}.flights"
    runtime = Runtime(_config(catalog_server, namespace, airlines, ICEBERG_VIEWS, ["iceberg"]))
    delays, by_carrier, tails, counts = runtime.config.views
    for view in runtime.config.views:
        runtime.refresh(view)

    spark.sql(f"ALTER TABLE {flights} RENAME COLUMN dep_delay TO delay")
    spark.sql(f"ALTER TABLE {flights} DROP COLUMN seats")  # read by no view
    spark.sql(f"INSERT INTO {flights} VALUES ('UA', 5, 12.0, 'N4')")
    _stopped(runtime, rest_catalog, delays, "dep_delay", "renamed", "renamed to 'delay'")
    for view in (by_carrier, tails, counts):
        assert runtime.refresh(view).mode == "incremental"
        _assert_equals_recompute(runtime, rest_catalog, view)

    spark.sql(f"ALTER TABLE {flights} ALTER COLUMN flight TYPE bigint")  # type widening
    spark.sql(f"ALTER TABLE {flights} DROP COLUMN tail")
    spark.sql(f"DELETE FROM {flights} WHERE flight = 1")
    _stopped(runtime, rest_catalog, by_carrier, "flight", "retyped", "retyped from int to long")
    _stopped(runtime, rest_catalog, tails, "tail", "dropped", "dropped")
    assert runtime.refresh(counts).mode == "incremental"
    _assert_equals_recompute(runtime, rest_catalog, counts)

    # A restarted process (whose plan would no longer compile) stops the view the same way.
    restarted = Runtime(runtime.config)
    _stopped(restarted, rest_catalog, delays, "dep_delay", "renamed", "renamed to 'delay'")


def test_the_scheduler_runs_the_other_views_and_status_names_the_stop(
    spark: SparkSession, catalog_server: CatalogServerHandle, rest_catalog: RestCatalog,
    sources: tuple[str, Path], tmp_path: Path,
) -> None:
    """The loop of ``lakehouse run``: a stopped view is reported, the others refresh."""
    from lakehouse.commands.service import _report

    namespace, airlines = sources
    config = _config(catalog_server, namespace, airlines, ICEBERG_VIEWS, ["iceberg"])
    runtime = Runtime(config)
    for view in config.views:
        runtime.refresh(view)
    spark.sql(f"ALTER TABLE lakehouse.{namespace}.flights RENAME COLUMN tail TO tail_number")
    spark.sql(f"INSERT INTO lakehouse.{namespace}.flights VALUES ('UA', 5, 12.0, 'N4', 10)")
    scheduler = Scheduler(config.views)
    ran: list[str] = []

    def refresh(view: ViewConfig) -> None:
        _report(runtime, view)
        ran.append(view.name)
        if len(ran) == len(config.views):
            scheduler.stop()

    scheduler.run(refresh)
    assert ran == [v.name for v in config.views]
    for view in config.views:
        fresh = view_status(config, rest_catalog, view)
        if view.name.endswith(".tails"):
            assert fresh.behind == ("flights",) and fresh.stopped is not None
        else:
            assert fresh.behind == () and fresh.stopped is None
            _assert_equals_recompute(runtime, rest_catalog, view)

    path = tmp_path / "lakehouse.yaml"
    path.write_text(config.model_dump_json())  # JSON is YAML
    result = CliRunner().invoke(app, ["status", "--config", str(path)])
    assert result.exit_code == 0, result.output
    assert (f"{namespace}.tails stopped: source 'flights': column 'tail' renamed to "
            "'tail_number'") in " ".join(result.output.split())
    rows = {line.split()[1]: line for line in result.output.splitlines() if namespace in line}
    assert "stopped" in rows[f"{namespace}.tails"] and "ok" in rows[f"{namespace}.counts"]


def test_delta_drop_and_rename_by_overwrite_stop_only_the_views_reading_the_column(
    spark: SparkSession, catalog_server: CatalogServerHandle, rest_catalog: RestCatalog,
    sources: tuple[str, Path],
) -> None:
    namespace, airlines = sources
    views = {
        "names": "SELECT f.flight, a.name FROM flights f JOIN airlines a ON f.carrier = a.carrier",
        "countries": "SELECT country, COUNT(*) AS n FROM airlines GROUP BY country",
        "carriers": "SELECT carrier FROM airlines",
    }
    runtime = Runtime(_config(catalog_server, namespace, airlines, views))
    names, countries, carriers = runtime.config.views
    for view in runtime.config.views:
        runtime.refresh(view)

    renamed = DeltaTable(str(airlines)).to_pyarrow_table().rename_columns(
        ["carrier", "airline_name", "country"])
    write_deltalake(str(airlines), renamed, mode="overwrite", schema_mode="overwrite")
    _stopped(runtime, rest_catalog, names, "name", "dropped", "dropped or renamed")
    for view in (countries, carriers):
        assert runtime.refresh(view).mode == "incremental"
        _assert_equals_recompute(runtime, rest_catalog, view)

    dropped = DeltaTable(str(airlines)).to_pyarrow_table().drop_columns(["country"])
    write_deltalake(str(airlines), dropped.slice(0, 2), mode="overwrite", schema_mode="overwrite")
    _stopped(runtime, rest_catalog, countries, "country", "dropped", "dropped or renamed")
    assert runtime.refresh(carriers).mode == "incremental"
    _assert_equals_recompute(runtime, rest_catalog, carriers)
