"""Two refreshes of one view from the same frontier: exactly one commits, per sink.

The sinks remember the table version their frontier was read from, and their commit is
refused when the table moved since (Iceberg, Arrow path: one pyiceberg commit with
``assert-ref-snapshot-id`` main == that snapshot and no retry; Iceberg, Spark path: a branch
published with the same requirement; Delta: a commit without retries on that version).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.table import Table
from pyspark.sql import SparkSession

from sinks.delta import DeltaSink
from sinks.errors import SinkError
from sinks.frontier import FRONTIER_KEY, decode_frontier
from sinks.iceberg import KEPT_PROPERTIES, IcebergSink
from sinks.iceberg_publish import BRANCH_PREFIX
from tests.spark_frames import spark_frame

pytestmark = pytest.mark.spark

ROWS = "k string, v int"


def _rows(table: Table) -> Counter[tuple[object, ...]]:
    return Counter(tuple(r.values()) for r in table.scan().to_arrow().to_pylist())


def _data_files(location: str) -> set[Path]:
    return set(Path(location.removeprefix("file://"), "data").rglob("*.parquet"))


@pytest.mark.parametrize("key", [None, ["k"]])
def test_iceberg_arrow_commit_from_a_stale_frontier_is_refused(
    spark: SparkSession, rest_catalog: RestCatalog, catalog_namespace: str,
    key: list[str] | None,
) -> None:
    identifier = f"{catalog_namespace}.v"

    def sink() -> IcebergSink:
        return IcebergSink(spark, rest_catalog, "lakehouse", identifier)

    first = sink()
    assert first.frontier() is None
    first.ensure_table(pa.schema([("k", pa.string()), ("v", pa.int32())]))
    first.replace(pa.table({"k": ["a", "b"], "v": pa.array([1, 2], pa.int32())}), {"s": 1})
    winner, loser = sink(), sink()
    assert winner.frontier() == loser.frontier() == {"s": 1}
    delta = pa.table({"k": ["b", "c"], "v": pa.array([2, 3], pa.int32()),
                      "_weight": pa.array([-1, 1], pa.int64())})
    winner.apply(delta, key, {"s": 2})
    table = rest_catalog.load_table(identifier)
    files = _data_files(table.location())
    with pytest.raises(SinkError, match="committed first"):
        loser.apply(delta, key, {"s": 2})
    assert _data_files(table.location()) == files  # the loser's data files were removed
    table = rest_catalog.load_table(identifier)
    assert _rows(table) == Counter({("a", 1): 1, ("c", 3): 1})
    assert sink().frontier() == {"s": 2}
    assert decode_frontier(table.properties[FRONTIER_KEY]) == {"s": 2}  # same commit as data


def test_iceberg_arrow_commit_on_a_table_that_allowed_retries_is_refused_too(
    spark: SparkSession, rest_catalog: RestCatalog, catalog_namespace: str,
) -> None:
    """A view table created before ``commit.retry.num-retries=0`` (and the cleanup of old
    metadata files) gets them before committing."""
    identifier = f"{catalog_namespace}.legacy"
    spark.sql(f"CREATE TABLE lakehouse.{identifier} (k string, v int) USING iceberg "
              f"TBLPROPERTIES ('format-version' = '2')")
    first = IcebergSink(spark, rest_catalog, "lakehouse", identifier, arrow_max_rows=0)
    assert first.frontier() is None
    first.replace(spark_frame(spark, [("a", 1)], ROWS), {"s": 1})
    assert KEPT_PROPERTIES.keys().isdisjoint(rest_catalog.load_table(identifier).properties)
    winner = IcebergSink(spark, rest_catalog, "lakehouse", identifier)
    loser = IcebergSink(spark, rest_catalog, "lakehouse", identifier)
    assert winner.frontier() == loser.frontier() == {"s": 1}
    delta = pa.table({"k": ["b"], "v": pa.array([2], pa.int32()),
                      "_weight": pa.array([1], pa.int64())})
    winner.apply(delta, None, {"s": 2})
    with pytest.raises(SinkError, match="committed first"):
        loser.apply(delta, None, {"s": 2})
    table = rest_catalog.load_table(identifier)
    assert _rows(table) == Counter({("a", 1): 1, ("b", 2): 1})
    assert table.properties.items() >= KEPT_PROPERTIES.items()


def test_iceberg_spark_commit_from_a_stale_frontier_is_refused(
    spark: SparkSession, rest_catalog: RestCatalog, catalog_namespace: str,
) -> None:
    identifier = f"{catalog_namespace}.v"

    def sink() -> IcebergSink:
        return IcebergSink(spark, rest_catalog, "lakehouse", identifier, arrow_max_rows=0)

    first = sink()
    assert first.frontier() is None
    first.ensure_table(spark_frame(spark, [], ROWS).schema)
    first.replace(spark_frame(spark, [("a", 1)], ROWS), {"s": 1})
    winner, loser = sink(), sink()
    assert winner.frontier() == loser.frontier() == {"s": 1}
    delta = spark_frame(spark, [("b", 2, 1)], f"{ROWS}, _weight bigint")
    winner.apply(delta, None, {"s": 2})
    with pytest.raises(SinkError, match="committed first"):
        loser.apply(delta, None, {"s": 2})
    table = rest_catalog.load_table(identifier)
    rows = Counter(tuple(r.values()) for r in table.scan().to_arrow().to_pylist())
    assert rows == Counter({("a", 1): 1, ("b", 2): 1})
    assert sink().frontier() == {"s": 2}
    assert decode_frontier(table.properties[FRONTIER_KEY]) == {"s": 2}  # same commit as data
    assert not [ref for ref in table.metadata.refs if ref.startswith(BRANCH_PREFIX)]


def test_delta_commit_from_a_stale_frontier_is_refused(tmp_path: Path) -> None:
    uri = str(tmp_path / "v")

    def sink() -> DeltaSink:
        return DeltaSink(uri, app_id="lakehouse:ns.v")

    sink().replace(pa.table({"k": ["a"], "v": [1]}), {"s": 1})
    winner, loser = sink(), sink()
    assert winner.frontier() == loser.frontier() == {"s": 1}
    delta = pa.table({"k": ["b"], "v": [2], "_weight": pa.array([2], pa.int64())})
    winner.apply(delta, None, {"s": 2})
    with pytest.raises(SinkError):
        loser.apply(delta, None, {"s": 2})
    rows = Counter(tuple(r.values()) for r in DeltaTable(uri).to_pyarrow_table().to_pylist())
    assert rows == Counter({("a", 1): 1, ("b", 2): 2})
    assert sink().frontier() == {"s": 2}
