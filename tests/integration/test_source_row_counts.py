"""Sources count their rows from metadata, and the count is the real one.

After every kind of commit (Spark and pyiceberg appends, copy-on-write and merge-on-read
deletes, updates, MERGE, compaction; delta-rs appends, deletes, updates, merges, predicate
overwrites, compaction), ``row_count`` at each version must equal the rows a full read of
that version returns. With Iceberg equality deletes it is an upper bound.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from pyiceberg.catalog.rest import RestCatalog
from pyspark.sql import SparkSession

from lakehouse.sources.delta import DeltaSourceReader
from lakehouse.sources.iceberg import IcebergSourceReader
from lakehouse.sources.row_counts import manifest_row_count
from tests.integration.test_change_feeds import _commit_equality_delete

pytestmark = pytest.mark.spark


def _iceberg(spark: SparkSession, rest_catalog: RestCatalog, namespace: str, name: str,
             mode: str) -> tuple[str, IcebergSourceReader]:
    table = f"lakehouse.{namespace}.{name}"
    modes = ", ".join(f"'write.{op}.mode' = '{mode}'" for op in ("delete", "update", "merge"))
    spark.sql(f"CREATE TABLE {table} (id BIGINT, v STRING) USING iceberg "
              f"TBLPROPERTIES ('format-version' = '2', {modes})")
    return table, IcebergSourceReader(spark, rest_catalog, "lakehouse", name, f"{namespace}.{name}")


def _real_rows(spark: SparkSession, table: str, version: int) -> int:
    return spark.read.option("snapshot-id", str(version)).table(table).count()


def _values(first: int, count: int) -> str:
    return ", ".join(f"({i}, 'v{i}')" for i in range(first, first + count))


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_iceberg_row_count_is_exact_after_every_commit(
    spark: SparkSession, rest_catalog: RestCatalog, catalog_namespace: str, mode: str,
) -> None:
    table, reader = _iceberg(spark, rest_catalog, catalog_namespace, "counted", mode)
    statements = [
        f"INSERT INTO {table} VALUES {_values(0, 20)}",
        f"INSERT INTO {table} VALUES {_values(100, 10)}",
        f"DELETE FROM {table} WHERE id IN (1, 2, 3, 101)",
        f"DELETE FROM {table} WHERE id IN (4, 5)",  # a file that has deletes already
        f"UPDATE {table} SET v = 'updated' WHERE id >= 15",
        f"MERGE INTO {table} t USING (SELECT id, 'merged' AS v FROM VALUES (6), (7), (500) "
        "AS s(id)) s ON t.id = s.id WHEN MATCHED AND s.id = 6 THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *",
        # under merge-on-read, leaves a position delete file whose data file it rewrote
        # (the summary's total-position-deletes still counts it)
        f"CALL lakehouse.system.rewrite_data_files(table => '{catalog_namespace}.counted', "
        "options => map('rewrite-all', 'true'))",
        f"DELETE FROM {table} WHERE id < 1000",
    ]
    versions = []
    for statement in statements:
        spark.sql(statement)
        version = reader.current_version()
        assert version is not None and version not in versions, statement
        versions.append(version)
    pyiceberg_table = rest_catalog.load_table(reader.identifier)
    pyiceberg_table.append(pa.table({"id": pa.array([1, 2, 3], pa.int64()),
                                     "v": pa.array(["a", "b", "c"])}))
    pyiceberg_table.delete("id = 2")  # pyiceberg deletes copy-on-write
    versions += [s.snapshot_id for s in pyiceberg_table.refresh().snapshots()[-2:]]

    metadata = reader._table().metadata
    position_deletes = []
    for version in versions:  # every version, also the old ones
        real = _real_rows(spark, table, version)
        assert reader.row_count(version) == real, (mode, version)
        snapshot = metadata.snapshot_by_id(version)
        assert snapshot is not None and snapshot.summary is not None
        assert manifest_row_count(pyiceberg_table, snapshot) == real  # the summary-less way
        position_deletes.append(int(snapshot.summary["total-position-deletes"] or 0))
    assert [reader.row_count(v) for v in versions[-3:]] == [0, 3, 2]
    # merge-on-read commits kept deleted rows in their data files, copy-on-write ones did not
    assert (max(position_deletes) > 0) is (mode == "merge-on-read")


def test_iceberg_row_count_with_equality_deletes_is_an_upper_bound(
    spark: SparkSession, rest_catalog: RestCatalog, catalog_namespace: str,
) -> None:
    table, reader = _iceberg(spark, rest_catalog, catalog_namespace, "equality", "merge-on-read")
    spark.sql(f"INSERT INTO {table} VALUES {_values(1, 8)}, (1, 'again')")
    _commit_equality_delete(rest_catalog.load_table(reader.identifier), [1, 6, 99])
    version = reader.current_version()
    assert version is not None
    assert _real_rows(spark, table, version) == 9 - 3  # id 1 twice, id 6; id 99 is absent
    assert reader.row_count(version) == 9  # 3 equality delete rows remove 0 to many rows each


def _delta_rows(ids: list[int], value: str = "v") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([value] * len(ids))})


def test_delta_row_count_is_exact_after_adds_and_removes(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "delta")
    write_deltalake(path, _delta_rows(list(range(20))))
    write_deltalake(path, _delta_rows(list(range(100, 110))), mode="append")
    DeltaTable(path).delete("id IN (1, 2, 3, 101)")
    DeltaTable(path).update(predicate="id >= 15", updates={"v": "'updated'"})
    (DeltaTable(path).merge(_delta_rows([6, 7, 500], "merged"), "t.id = s.id",
                            source_alias="s", target_alias="t")
     .when_matched_delete("s.id = 6").when_matched_update_all().when_not_matched_insert_all()
     .execute())
    write_deltalake(path, _delta_rows([100, 101, 102, 103]), mode="overwrite",
                    predicate="id >= 100 AND id < 200")
    write_deltalake(path, _delta_rows([600]), mode="append")
    write_deltalake(path, _delta_rows([601]), mode="append")
    DeltaTable(path).optimize.compact()  # three files into one
    DeltaTable(path).delete("id < 1000")
    reader = DeltaSourceReader(spark, "d", path)
    newest = reader.current_version()
    assert newest == 9
    counts = [reader.row_count(v) for v in range(newest + 1)]
    assert counts == [DeltaTable(path, version=v).to_pyarrow_table().num_rows
                      for v in range(newest + 1)]
    assert counts == [20, 30, 26, 26, 26, 21, 22, 23, 23, 0]


def test_delta_row_count_reads_footers_of_files_without_statistics(spark, tmp_path: Path) -> None:
    """An add action without ``stats`` (allowed by the Delta protocol; older writers) is
    counted from its Parquet footer."""
    path = tmp_path / "delta"
    write_deltalake(str(path), _delta_rows(list(range(10))))
    pq.write_table(_delta_rows(list(range(5))), path / "no-stats.parquet")
    now_ms = int(time.time() * 1000)
    add = {"path": "no-stats.parquet", "partitionValues": {}, "dataChange": True,
           "size": os.path.getsize(path / "no-stats.parquet"), "modificationTime": now_ms}
    (path / "_delta_log" / f"{1:020d}.json").write_text(
        json.dumps({"commitInfo": {"timestamp": now_ms, "operation": "WRITE"}}) + "\n"
        + json.dumps({"add": add}) + "\n")
    reader = DeltaSourceReader(spark, "d", str(path))
    assert pa.table(DeltaTable(str(path)).get_add_actions())["num_records"].null_count == 1
    assert [reader.row_count(0), reader.row_count(1)] == [10, 15]
