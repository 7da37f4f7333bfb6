"""The Delta sink on Spark (delta-spark): readers agree, replays are skipped, writers interleave.

A view delta held in Spark is committed by delta-spark from the executors; one held in Arrow
by delta-rs. Both carry the frontier in ``userMetadata`` and an application transaction, on a
table created with the change data feed on.
"""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from lakehouse.duckdb_client import connect
from sinks.delta import DeltaSink
from sinks.delta_commit import commit_frontier
from sinks.errors import SinkError
from tests.spark_frames import spark_frame

pytestmark = pytest.mark.spark

APP = "lakehouse:ns.v"
SCHEMA = "k long, n long, _weight long"


def _frame(spark: SparkSession, rows: list[tuple[int | None, int | None, int]]) -> DataFrame:
    return spark_frame(spark, rows, SCHEMA)


def _arrow(rows: list[tuple[int | None, int | None, int]]) -> pa.Table:
    return pa.table({name: pa.array([r[i] for r in rows], pa.int64())
                     for i, name in enumerate(("k", "n", "_weight"))})


def _sink(uri: str, spark: SparkSession) -> DeltaSink:
    sink = DeltaSink(uri, app_id=APP, spark=spark)
    sink.frontier()  # a refresh reads the frontier (its commit's base) first
    return sink


def _readers(spark: SparkSession, uri: str) -> dict[str, Counter]:
    """The table's rows as delta-rs, DuckDB's delta_scan and Spark read them."""
    duck = connect().sql(f"SELECT k, n FROM delta_scan('{uri}')").fetchall()
    via_spark = spark.read.format("delta").load(uri).select("k", "n").collect()
    return {"delta-rs": Counter(tuple(r.values())
                                for r in DeltaTable(uri).to_pyarrow_table().to_pylist()),
            "duckdb": Counter(duck), "spark": Counter(tuple(r) for r in via_spark)}


@pytest.mark.parametrize("key", [None, ["k"]], ids=["multiset", "keyed"])
def test_spark_commits_read_back_equal_by_every_reader(
        spark: SparkSession, tmp_path: Path, key: list[str] | None) -> None:
    uri = str(tmp_path / "v")
    content = spark_frame(spark, [(1, 10), (2, 20), (None, 30)], "k long, n long")
    _sink(uri, spark).replace(content, {"s": 1})
    _sink(uri, spark).apply(_frame(spark, [(1, 10, -1), (1, 11, 1), (3, 30, 1)]), key, {"s": 2})
    expected = Counter({(1, 11): 1, (2, 20): 1, (None, 30): 1, (3, 30): 1})
    assert _readers(spark, uri) == {"delta-rs": expected, "duckdb": expected, "spark": expected}
    table = DeltaTable(uri)
    assert table.metadata().configuration["delta.enableChangeDataFeed"] == "true"
    assert [commit_frontier(c) for c in table.history()] == [{"s": 2}, {"s": 1}]
    assert table.transaction_version(APP) == 2  # the commit at version 1: version + 1
    changes = (spark.read.format("delta").option("readChangeFeed", "true")
               .option("startingVersion", 1).load(uri).collect())
    assert Counter((r["k"], r["n"], r["_change_type"]) for r in changes
                   if r["_change_type"] != "update_preimage") == Counter(
        {(1, 10, "delete"): 1, (1, 11, "insert"): 1, (3, 30, "insert"): 1})


def test_a_replayed_spark_commit_is_skipped_by_delta(spark: SparkSession, tmp_path: Path) -> None:
    """A tick replayed from the same base (it died after committing) adds no second commit."""
    uri = str(tmp_path / "v")
    _sink(uri, spark).replace(spark_frame(spark, [(1, 1)], "k long, n long"), {"s": 1})
    first, replay = _sink(uri, spark), _sink(uri, spark)  # both read version 0 as the base
    delta = _frame(spark, [(2, 2, 1)])  # inserts only: a blind append, no conflict to detect
    first.apply(delta, None, {"s": 2})
    with pytest.raises(SinkError, match="another commit landed first") as error:
        replay.apply(delta, None, {"s": 2})  # skipped by Delta itself, and said so
    assert error.value.table == uri
    table = DeltaTable(uri)
    assert table.version() == 1
    assert _readers(spark, uri)["delta-rs"] == Counter({(1, 1): 1, (2, 2): 1})
    assert commit_frontier(table.history(1)[0]) == {"s": 2}


def test_delta_rs_and_spark_commits_interleave_on_one_table(
        spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "v")
    _sink(uri, spark).replace(pa.table({"k": pa.array([1, 2], pa.int64()),
                                              "n": pa.array([1, 2], pa.int64())}), {"s": 1})
    steps = [("spark", [(1, 1, -1), (1, 5, 1)]), ("arrow", [(2, 2, -1), (4, 4, 1)]),
             ("spark", [(5, 5, 1), (4, 4, -1)]), ("arrow", [(1, 5, -1), (6, 6, 2)])]
    for s, (writer, rows) in enumerate(steps, start=2):
        sink = _sink(uri, spark)
        if writer == "spark":
            sink.apply(_frame(spark, rows), None, {"s": s})
        else:
            sink.apply(_arrow(rows), None, {"s": s})
    expected = Counter({(5, 5): 1, (6, 6): 2})
    assert _readers(spark, uri) == {"delta-rs": expected, "duckdb": expected, "spark": expected}
    table = DeltaTable(uri)
    assert [commit_frontier(c) for c in table.history()] == [{"s": s} for s in range(5, 0, -1)]
    assert table.transaction_version(APP) == table.version() + 1
    feed = (spark.read.format("delta").option("readChangeFeed", "true")
            .option("startingVersion", 1).load(uri).groupBy("_commit_version").count().collect())
    assert sorted(r["_commit_version"] for r in feed) == [1, 2, 3, 4]  # every writer's changes


def test_a_spark_merge_on_a_moved_table_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "v")
    _sink(uri, spark).replace(spark_frame(spark, [(1, 1)], "k long, n long"), {"s": 1})
    stale = _sink(uri, spark)
    _sink(uri, spark).apply(_frame(spark, [(1, 1, -1), (1, 2, 1)]), ["k"], {"s": 2})
    with pytest.raises(SinkError, match="another commit landed first"):
        stale.apply(_frame(spark, [(1, 1, -1), (1, 3, 1)]), ["k"], {"s": 2})
    assert _readers(spark, uri)["delta-rs"] == Counter({(1, 2): 1})


def test_merges_on_threads_at_once_each_carry_their_own_transaction(
        spark: SparkSession, tmp_path: Path) -> None:
    """Ticks of several views MERGE at once: each commit carries its own view's frontier
    and transaction, never another thread's (each MERGE commits from a session of its own)."""
    views = [f"v{i}" for i in range(3)]
    sinks = {}
    for view in views:
        uri = str(tmp_path / view)
        DeltaSink(uri, app_id=f"lakehouse:{view}", spark=spark).replace(
            spark_frame(spark, [(1, 10)], "k long, n long"), {view: 0})
        sinks[view] = uri

    def merge(view: str) -> None:
        for version in range(1, 4):
            sink = DeltaSink(sinks[view], app_id=f"lakehouse:{view}", spark=spark)
            sink.frontier()
            delta = _frame(spark, [(1, 9 + version, -1), (1, 10 + version, 1)]
                           ).localCheckpoint()
            sink.apply(delta, ["k"], {view: version})

    with ThreadPoolExecutor(len(views)) as pool:
        list(pool.map(merge, views))
    for view, uri in sinks.items():
        table = DeltaTable(uri)
        assert [commit_frontier(c) for c in table.history()] == [
            {view: v} for v in (3, 2, 1, 0)], view
        assert table.transaction_version(f"lakehouse:{view}") == 4
        assert table.to_pyarrow_table().to_pylist() == [{"k": 1, "n": 13}]
