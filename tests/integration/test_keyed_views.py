"""A view keyed by its sources' keys is maintained by keyed MERGE and equals a full recompute.

The view joins Iceberg ``flights`` (key: its identifier field ``flight``) to Delta
``airlines`` (key from the config) on the airline's key, so its inferred key is
``flight``. Both sinks apply each delta with a keyed MERGE that deletes every row of a
changed key; a key that was not unique would lose rows, which the control view (declared
key ``carrier``, shared by several flights) shows.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyiceberg.catalog.rest import RestCatalog
from pyspark.sql import SparkSession

from ivm import explain
from lakehouse.config import parse_config
from lakehouse.runtime import Runtime
from tests.conftest import multiset
from tests.conftest_catalog import CatalogServerHandle

pytestmark = pytest.mark.spark

SQL = ("SELECT f.flight, f.carrier, a.name, f.dep_delay "
       "FROM flights f JOIN airlines a ON f.carrier = a.carrier")


@pytest.fixture
def keyed_runtime(spark: SparkSession, catalog_server: CatalogServerHandle,
                  catalog_namespace: str, tmp_path: Path) -> Runtime:
    flights = f"lakehouse.{catalog_namespace}.flights"
    spark.sql(f"CREATE TABLE {flights} (flight int NOT NULL, carrier string, dep_delay double) "
              "USING iceberg TBLPROPERTIES ('format-version' = '2')")
    spark.sql(f"ALTER TABLE {flights} SET IDENTIFIER FIELDS flight")
    spark.sql(f"INSERT INTO {flights} VALUES (1, 'AA', 5.0), (2, 'AA', 30.0), (3, 'UA', NULL), "
              "(4, 'DL', 1.5), (5, 'UA', 2.0)")
    airlines = tmp_path / "airlines"
    write_deltalake(str(airlines), pa.table({"carrier": ["AA", "UA"],
                                             "name": ["American", "United"]}),
                    configuration={"delta.enableChangeDataFeed": "true"})
    view = {"sql": SQL, "refresh": "incremental"}
    return Runtime(parse_config({
        "warehouse": str(catalog_server.warehouse),
        "catalog": {"embedded": False, "uri": catalog_server.uri},
        "sources": {"flights": {"iceberg": f"{catalog_namespace}.flights"},
                    "airlines": {"delta": str(airlines), "key": ["carrier"]}},
        "views": [{**view, "name": f"{catalog_namespace}.keyed"},
                  {**view, "name": f"{catalog_namespace}.wrong_key", "key": ["carrier"],
                   "sinks": ["delta"]}],
    }))


def _rows(table: pa.Table) -> Counter[tuple[object, ...]]:
    return multiset(tuple(r.values()) for r in table.to_pylist())


def test_a_keyed_join_view_equals_a_full_recompute(
    spark: SparkSession, rest_catalog: RestCatalog, keyed_runtime: Runtime,
) -> None:
    runtime = keyed_runtime
    view, control = runtime.config.views
    plan = runtime.plan(view)
    assert plan.incremental and plan.key == ("flight",)
    assert runtime.source_key("flights") == ("flight",)  # the Iceberg identifier field
    assert "key: (flight)" in explain(plan) and "key: (carrier)" in explain(plan)
    for v in (view, control):
        assert runtime.refresh(v).mode == "full"

    flights = f"lakehouse.{view.name.split('.')[0]}.flights"
    airlines = DeltaTable(str(runtime.config.sources["airlines"].delta))  # type: ignore[union-attr]
    changes = [
        lambda: spark.sql(f"INSERT INTO {flights} VALUES (6, 'AA', 7.0), (7, 'DL', 3.0)"),
        lambda: spark.sql(f"UPDATE {flights} SET dep_delay = 99.0 WHERE flight = 2"),
        lambda: airlines.update({"name": "'United Airlines'"}, predicate="carrier = 'UA'"),
        lambda: write_deltalake(airlines, pa.table({"carrier": ["DL"], "name": ["Delta"]}),
                                mode="append"),
        lambda: spark.sql(f"DELETE FROM {flights} WHERE flight IN (1, 3)"),
    ]
    for change in changes:
        change()
        result = runtime.refresh(view)
        assert result.mode == "incremental", result.reason
        expected = _rows(runtime.recompute(view))
        assert _rows(rest_catalog.load_table(view.name).scan().to_arrow()) == expected
        assert _rows(DeltaTable(runtime.delta_uri(view)).to_pyarrow_table()) == expected
        assert runtime.refresh(control).mode == "incremental"
    assert expected.total() == 5
    kept = _rows(DeltaTable(runtime.delta_uri(control)).to_pyarrow_table())
    assert kept.total() < 5, "a key shared by several rows loses rows under keyed MERGE"
