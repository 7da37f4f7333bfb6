"""The Iceberg sink's Arrow path against the real catalog, read back by Spark, pyiceberg, DuckDB.

Deltas are made by Spark and collected with ``lakehouse.spark.arrow.to_arrow``, as a refresh
does, so every Spark type of the view (decimal, date, timestamp, int, double, string) goes
through the Arrow round trip into the table created from the Spark schema. Expected tables
come from applying the same Z-set to a Python multiset.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.table import Table
from pyspark.sql import SparkSession

from lakehouse.duckdb_client import attach_catalog, connect
from lakehouse.sources.manifest_cache import ManifestCache
from lakehouse.spark.arrow import to_arrow
from sinks.frontier import FRONTIER_KEY, REFRESHED_AT_KEY, decode_frontier
from sinks.iceberg import IcebergSink
from sinks.iceberg_snapshot import DataFileWriter, commit_snapshot
from sinks.refresh_state import REFRESH_STATE_KEY, RefreshStates, SourceTable
from tests.spark_frames import spark_frame

pytestmark = pytest.mark.spark

SCHEMA = "k bigint, name string, amount decimal(12,2), day date, at timestamp, n int, x double"
Row = tuple[object, ...]


def _row(k: int | None, name: str | None = "r", n: int = 1) -> Row:
    stamp = dt.datetime(2024, 1, 1, 12, tzinfo=dt.UTC) + dt.timedelta(hours=k or 0)
    day = dt.date(2024, 1, 1) + dt.timedelta(days=k or 0)
    return (k, name, Decimal(f"{(k or 0) % 1000}.25"), day, stamp, n, (k or 0) / 4)


def _arrow(spark: SparkSession, rows: Sequence[Row],
           weights: Sequence[int] | None = None) -> pa.Table:
    """Rows (plus ``_weight`` when given) made by Spark and collected as a refresh does."""
    if weights is None:
        return to_arrow(spark_frame(spark, list(rows), SCHEMA))
    data = [(*row, w) for row, w in zip(rows, weights, strict=True)]
    return to_arrow(spark_frame(spark, data, f"{SCHEMA}, _weight bigint"))


def _expected(before: Counter[Row], delta: Sequence[tuple[Row, int]],
              key: bool) -> Counter[Row]:
    after = Counter(before)
    if key:
        keys = {row[0] for row, _ in delta}
        after = Counter({row: c for row, c in after.items() if row[0] not in keys})
    for row, weight in delta:
        after[row] += weight if (weight > 0 or not key) else 0
    return +after


def _spark_rows(spark: SparkSession, identifier: str) -> Counter[Row]:
    frame = to_arrow(spark.table(f"lakehouse.{identifier}"))
    return Counter(tuple(r.values()) for r in frame.to_pylist())


def _pyiceberg_rows(catalog: RestCatalog, identifier: str) -> Counter[Row]:
    rows = catalog.load_table(identifier).scan().to_arrow().to_pylist()
    return Counter(tuple(r.values()) for r in rows)


PLANNER = ManifestCache()
"""Kept across refreshes, as the pipeline keeps it: commits plan the files they replace
from the manifest entries earlier refreshes read (other tests plan with pyiceberg)."""


def _sink(spark: SparkSession, catalog: RestCatalog, identifier: str,
          states: RefreshStates | None = None) -> IcebergSink:
    return IcebergSink(spark, catalog, "lakehouse", identifier, refresh_states=states,
                       planner=PLANNER)


def _apply(sink: IcebergSink, spark: SparkSession, delta: Sequence[tuple[Row, int]],
           key: Sequence[str] | None, frontier: dict[str, int]) -> None:
    assert sink.frontier() is not None
    rows, weights = zip(*delta, strict=True)
    sink.apply(_arrow(spark, rows, weights), key, frontier)


def _assert_reads(spark: SparkSession, catalog: RestCatalog, identifier: str,
                  expected: Counter[Row]) -> None:
    assert _pyiceberg_rows(catalog, identifier) == expected
    assert _spark_rows(spark, identifier) == expected


def _load(spark: SparkSession, catalog: RestCatalog, identifier: str,
          rows: Sequence[Row]) -> IcebergSink:
    sink = _sink(spark, catalog, identifier)
    assert sink.frontier() is None
    sink.ensure_table(spark_frame(spark, [], SCHEMA).schema)
    sink.replace(_arrow(spark, rows), {"s": 1})
    return sink


def test_keyed_delta_updates_deletes_and_inserts_null_keys_included(
    spark: SparkSession, rest_catalog: RestCatalog, catalog_namespace: str,
) -> None:
    identifier = f"{catalog_namespace}.keyed"
    initial = [_row(k) for k in range(20)]
    _load(spark, rest_catalog, identifier, initial)
    table = Counter(initial)
    _assert_reads(spark, rest_catalog, identifier, table)
    delta = [(_row(1), -1), (_row(1, "new"), 1), (_row(2), -1), (_row(100), 1),
             (_row(None, "null key"), 1), (_row(555), -1)]
    _apply(_sink(spark, rest_catalog, identifier), spark, delta, ["k"], {"s": 2})
    table = _expected(table, delta, key=True)
    _assert_reads(spark, rest_catalog, identifier, table)
    assert (None, "null key") == _only(table, None)[:2]
    delta = [(_row(None, "null key"), -1), (_row(None, "null again"), 1), (_row(3), -1)]
    _apply(_sink(spark, rest_catalog, identifier), spark, delta, ["k"], {"s": 3})
    table = _expected(table, delta, key=True)
    _assert_reads(spark, rest_catalog, identifier, table)
    assert _only(table, None)[1] == "null again"
    assert _sink(spark, rest_catalog, identifier).frontier() == {"s": 3}


def _only(table: Counter[Row], key: object) -> Row:
    (row,) = [row for row in table if row[0] == key]
    return row


def test_multiset_delta_removes_exactly_the_deleted_copies(
    spark: SparkSession, rest_catalog: RestCatalog, catalog_namespace: str,
) -> None:
    identifier = f"{catalog_namespace}.multiset"
    nulls = (None, None, None, None, None, None, None)
    initial = [_row(1)] * 3 + [_row(2)] + [nulls] * 2 + [_row(k) for k in range(10, 30)]
    _load(spark, rest_catalog, identifier, initial)
    table = Counter(initial)
    delta = [(_row(1), -1), (nulls, -1), (_row(3), 2), (_row(10), -1)]
    _apply(_sink(spark, rest_catalog, identifier), spark, delta, None, {"s": 2})
    table = _expected(table, delta, key=False)
    assert table[_row(1)] == 2 and table[nulls] == 1 and table[_row(3)] == 2
    _assert_reads(spark, rest_catalog, identifier, table)
    delta = [(_row(1), -2), (_row(3), -1), (_row(2), 1)]
    _apply(_sink(spark, rest_catalog, identifier), spark, delta, None, {"s": 3})
    table = _expected(table, delta, key=False)
    _assert_reads(spark, rest_catalog, identifier, table)


def test_one_commit_per_refresh_rewrites_only_the_files_that_lose_rows(
    spark: SparkSession, rest_catalog: RestCatalog, catalog_namespace: str,
) -> None:
    identifier = f"{catalog_namespace}.files"
    sink = _load(spark, rest_catalog, identifier, [_row(k) for k in range(0, 100)])
    for start in (1000, 2000):  # new keys: appends without reading any file
        _apply(sink, spark, [(_row(k), 1) for k in range(start, start + 100)], ["k"], {"s": 2})
    before = rest_catalog.load_table(identifier)
    files_before = _data_files(before)
    assert len(files_before) == 3
    _apply(sink, spark, [(_row(1500 + 5), 1), (_row(1005), -1), (_row(1005, "x"), 1)],
           ["k"], {"s": 3})
    after = rest_catalog.load_table(identifier)
    assert len(after.metadata.metadata_log) == len(before.metadata.metadata_log) + 1  # 1 commit
    assert len(after.metadata.snapshots) == len(before.metadata.snapshots) + 1
    kept = files_before & _data_files(after)
    assert len(kept) == 2  # the 0..99 and 2000..2099 files untouched
    assert all("/data/" in path for path in kept)
    rows = _pyiceberg_rows(rest_catalog, identifier)
    assert sum(rows.values()) == 301 and _only(rows, 1005)[1] == "x"


def _data_files(table: Table) -> set[str]:
    return {task.file.file_path for task in table.scan().plan_files()}


def test_summary_and_properties_carry_frontier_and_refresh_state(
    spark: SparkSession, rest_catalog: RestCatalog, catalog_namespace: str, tmp_path: Path,
) -> None:
    source = rest_catalog.create_table(f"{catalog_namespace}.src", pa.schema([("a", pa.int64())]))
    source.append(pa.table({"a": pa.array([1], pa.int64())}))
    snapshot_id = source.metadata.current_snapshot_id
    assert snapshot_id is not None
    states = RefreshStates({"src": SourceTable(iceberg=f"{catalog_namespace}.src"),
                            "lake": SourceTable(delta=str(tmp_path / "d"))}, rest_catalog)
    identifier = f"{catalog_namespace}.fresh"
    _load(spark, rest_catalog, identifier, [_row(1)])
    sink = _sink(spark, rest_catalog, identifier, states)
    _apply(sink, spark, [(_row(2), 1)], ["k"], {"src": snapshot_id, "lake": 7})
    table = rest_catalog.load_table(identifier)
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    summary = snapshot.summary.additional_properties
    assert decode_frontier(summary[FRONTIER_KEY]) == {"src": snapshot_id, "lake": 7}
    state = json.loads(summary[REFRESH_STATE_KEY])
    assert state["view-version-id"] == 1
    assert state["refresh-start-timestamp-ms"] <= int(summary[REFRESHED_AT_KEY])
    assert state["source-states"] == [{
        "type": "table", "namespace": [catalog_namespace], "name": "src",
        "uuid": str(source.metadata.table_uuid), "snapshot-id": snapshot_id}]
    for name in (FRONTIER_KEY, REFRESHED_AT_KEY, REFRESH_STATE_KEY):
        assert table.properties[name] == summary[name]  # set in the same commit


def test_empty_delta_commits_a_snapshot_that_advances_the_frontier(
    spark: SparkSession, rest_catalog: RestCatalog, catalog_namespace: str,
) -> None:
    identifier = f"{catalog_namespace}.empty"
    sink = _load(spark, rest_catalog, identifier, [_row(1)])
    assert sink.frontier() == {"s": 1}
    sink.apply(_arrow(spark, [], []), ["k"], {"s": 2})
    assert _sink(spark, rest_catalog, identifier).frontier() == {"s": 2}
    assert _pyiceberg_rows(rest_catalog, identifier) == Counter([_row(1)])


def test_files_written_for_one_commit_are_removed_by_a_later_one(
    rest_catalog: RestCatalog, catalog_namespace: str,
) -> None:
    rows = pa.table({"k": pa.array([1, 2, 3], pa.int64())})
    table = rest_catalog.create_table(f"{catalog_namespace}.files", rows.schema)
    first = DataFileWriter(table).write(rows)
    commit_snapshot(table, [], first, {})
    commit_snapshot(table, [], DataFileWriter(table).write(rows.slice(0, 1)), {})
    properties = dict(table.properties)
    commit_snapshot(table, first, [], {})  # the files as written, not as read back
    assert sorted(table.scan().to_arrow()["k"].to_pylist()) == [1]
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    assert snapshot.summary["deleted-data-files"] == str(len(first))
    assert rest_catalog.load_table(f"{catalog_namespace}.files").properties == properties


def test_table_is_created_from_the_spark_schema_and_duckdb_reads_the_result(
    spark: SparkSession, rest_catalog: RestCatalog, catalog_namespace: str, catalog_server,
) -> None:
    identifier = f"{catalog_namespace}.typed"
    _load(spark, rest_catalog, identifier, [_row(k) for k in range(5)])
    types = {f.name: str(f.field_type) for f in rest_catalog.load_table(identifier).schema().fields}
    assert types == {"k": "long", "name": "string", "amount": "decimal(12, 2)", "day": "date",
                     "at": "timestamptz", "n": "int", "x": "double"}
    delta = [(_row(0), -1), (_row(0, "zero"), 1)]
    _apply(_sink(spark, rest_catalog, identifier), spark, delta, ["k"], {"s": 2})
    duck = connect()
    try:
        attach_catalog(duck, catalog_server.uri, "lake")
        rows = duck.execute(
            f"SELECT k, name, amount, day, n, x FROM lake.{catalog_namespace}.typed").fetchall()
    finally:
        duck.close()
    expected = [_row(0, "zero"), *map(_row, range(1, 5))]
    assert sorted(rows) == sorted((*r[:4], *r[5:]) for r in expected)


def test_multiset_copies_spread_over_files_are_deleted_once(
    spark: SparkSession, rest_catalog: RestCatalog, catalog_namespace: str,
) -> None:
    identifier = f"{catalog_namespace}.spread"
    sink = _load(spark, rest_catalog, identifier, [_row(1), _row(1), _row(2)])
    for _ in range(2):  # two more files, each with two copies of _row(1)
        _apply(sink, spark, [(_row(1), 2)], None, {"s": 2})
    assert len(_data_files(rest_catalog.load_table(identifier))) == 3
    _apply(sink, spark, [(_row(1), -3), (_row(2), -1)], None, {"s": 3})
    _assert_reads(spark, rest_catalog, identifier, Counter({_row(1): 3}))


def test_dataframe_deltas_take_the_arrow_path_up_to_arrow_max_rows(
    spark: SparkSession, rest_catalog: RestCatalog, catalog_namespace: str,
) -> None:
    identifier = f"{catalog_namespace}.routed"
    _load(spark, rest_catalog, identifier, [_row(k) for k in range(10)])
    table = Counter(_row(k) for k in range(10))
    for max_rows, commits in ((3, 1), (2, 3)):  # Arrow: 1 commit; Spark: branch, MERGE, publish
        delta = [(_row(max_rows), -1), (_row(max_rows, "new"), 1), (_row(50 + max_rows), 1)]
        frame = spark_frame(spark, [(*r, w) for r, w in delta], f"{SCHEMA}, _weight bigint")
        before = len(rest_catalog.load_table(identifier).metadata.metadata_log)
        sink = IcebergSink(spark, rest_catalog, "lakehouse", identifier, arrow_max_rows=max_rows)
        assert sink.frontier() is not None
        sink.apply(frame, ["k"], {"s": max_rows})
        after = rest_catalog.load_table(identifier)
        assert len(after.metadata.metadata_log) == before + commits
        table = _expected(table, delta, key=True)
        _assert_reads(spark, rest_catalog, identifier, table)


def test_small_refreshes_keep_the_data_files_and_manifest_list_from_growing(
    spark: SparkSession, rest_catalog: RestCatalog, catalog_namespace: str,
) -> None:
    """Each refresh replaces the file it touches by one file (remaining rows and inserts) and
    drops the manifests of earlier overwrites that hold no live file; the view's change feed
    (Spark's changelog over every snapshot) still adds up to the change of its content."""
    identifier = f"{catalog_namespace}.long_lived"
    initial = [_row(k) for k in range(20)]
    schema = _arrow(spark, initial[:1], [1]).schema  # the view's columns, then _weight
    _load(spark, rest_catalog, identifier, initial)
    first = rest_catalog.load_table(identifier).metadata.current_snapshot_id
    table = Counter(initial)
    for round_ in range(12):
        keys = [round_ % 20, (round_ * 7 + 3) % 20]
        delta = [(_only(table, k), -1) for k in keys] + [(_row(k, f"v{round_}"), 1) for k in keys]
        rows = [dict(zip(schema.names, (*row, weight), strict=True)) for row, weight in delta]
        sink = _sink(spark, rest_catalog, identifier)
        assert sink.frontier() == {"s": round_ + 1}
        sink.apply(pa.Table.from_pylist(rows, schema), ["k", "n"], {"s": round_ + 2})
        table = _expected(table, delta, key=True)
    current = rest_catalog.load_table(identifier)
    snapshot = current.current_snapshot()
    assert snapshot is not None and len(current.metadata.snapshots) == 13
    manifests = snapshot.manifests(current.io)
    assert all(m.has_added_files() or m.has_existing_files()
               or m.added_snapshot_id == snapshot.snapshot_id for m in manifests)
    assert len(manifests) <= 2 and len(_data_files(current)) == 1
    _assert_reads(spark, rest_catalog, identifier, table)
    spark.sql(f"CALL lakehouse.system.create_changelog_view(table => '{identifier}', "
              f"options => map('start-snapshot-id', '{first}', 'end-snapshot-id', "
              f"'{snapshot.snapshot_id}'), changelog_view => 'long_lived_changes')")
    changes = to_arrow(spark.sql("SELECT * FROM long_lived_changes")).to_pylist()
    moved = {kind: Counter(tuple(r[c] for c in schema.names[:-1]) for r in changes
                           if r["_change_type"] == kind) for kind in ("INSERT", "DELETE")}
    assert moved["INSERT"] - moved["DELETE"] == table - Counter(initial)
    assert moved["DELETE"] - moved["INSERT"] == Counter(initial) - table


def test_remaining_rows_past_the_gather_limit_go_to_several_files(
    spark: SparkSession, rest_catalog: RestCatalog, catalog_namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    identifier = f"{catalog_namespace}.gathered"
    sink = _load(spark, rest_catalog, identifier, [_row(k) for k in range(10)])
    table = Counter(_row(k) for k in range(10))
    for start in (100, 200):  # two more files
        delta = [(_row(k), 1) for k in range(start, start + 3)]
        _apply(sink, spark, delta, ["k"], {"s": 2})
        table = _expected(table, delta, key=True)
    monkeypatch.setattr("sinks.iceberg_rewrite.GATHER_BYTES", 1)  # write every part at once
    delta = [(_row(k), -1) for k in (1, 101, 201)] + [(_row(k, "new"), 1) for k in (1, 101)]
    _apply(_sink(spark, rest_catalog, identifier), spark, delta, ["k"], {"s": 3})
    table = _expected(table, delta, key=True)
    assert len(_data_files(rest_catalog.load_table(identifier))) == 4  # 3 rests + the inserts
    _assert_reads(spark, rest_catalog, identifier, table)
    monkeypatch.undo()
    delta = [(_row(1, "new"), -1), (_row(0), -1), (_row(300), 1)]  # the inserts' file, the first
    _apply(_sink(spark, rest_catalog, identifier), spark, delta, ["k"], {"s": 4})
    table = _expected(table, delta, key=True)
    assert len(_data_files(rest_catalog.load_table(identifier))) == 3  # 2 files -> 1
    _assert_reads(spark, rest_catalog, identifier, table)
