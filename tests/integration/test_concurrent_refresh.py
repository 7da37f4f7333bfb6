"""Two refreshes of one view from the same frontier: exactly one commits, per sink.

The sinks remember the table version their frontier was read from, and their commit is
refused when the table moved since (Iceberg: a branch published with
``assert-ref-snapshot-id`` on main; Delta: a commit without retries on that version).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyiceberg.catalog.rest import RestCatalog
from pyspark.sql import SparkSession

from sinks.delta import DeltaSink
from sinks.errors import SinkError
from sinks.frontier import FRONTIER_KEY, decode_frontier
from sinks.iceberg import IcebergSink
from sinks.iceberg_publish import BRANCH_PREFIX

pytestmark = pytest.mark.spark

ROWS = "k string, v int"


def test_iceberg_commit_from_a_stale_frontier_is_refused(
    spark: SparkSession, rest_catalog: RestCatalog, catalog_namespace: str,
) -> None:
    identifier = f"{catalog_namespace}.v"

    def sink() -> IcebergSink:
        return IcebergSink(spark, rest_catalog, "lakehouse", identifier)

    first = sink()
    assert first.frontier() is None
    first.ensure_table(spark.createDataFrame([], ROWS).schema)
    first.replace(spark.createDataFrame([("a", 1)], ROWS), {"s": 1})
    winner, loser = sink(), sink()
    assert winner.frontier() == loser.frontier() == {"s": 1}
    delta = spark.createDataFrame([("b", 2, 1)], f"{ROWS}, _weight bigint")
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
