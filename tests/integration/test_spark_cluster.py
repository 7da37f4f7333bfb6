"""Spark on a standalone cluster (a master and two workers, own JVMs) with the warehouse on S3.

The cluster (``tests/conftest_spark_cluster.py``) runs each worker in its own mount namespace
where the driver's temporary folders are hidden: the executors read and write only through
S3 (moto). Iceberg goes through the REST catalog and S3FileIO, Delta through S3A.

The functions run on the executors are defined inside the tests, so that cloudpickle ships
them by value (the executors cannot import this module).
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from tests.conftest_spark_cluster import S3Handle, SparkClusterHandle

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

ROWS = 1000


def _keys(s3: S3Handle, prefix: str) -> list[str]:
    """The object keys under ``prefix`` in the bucket."""
    pages = s3.client().get_paginator("list_objects_v2").paginate(Bucket=s3.bucket, Prefix=prefix)
    return [item["Key"] for page in pages for item in page.get("Contents", [])]


def test_the_tasks_of_a_job_run_on_both_workers(spark_cluster: SparkClusterHandle,
                                                 cluster_spark: SparkSession) -> None:
    assert {w["host"] for w in spark_cluster.alive_workers()} == {"127.0.0.2", "127.0.0.3"}

    def where(_: int) -> str:
        time.sleep(0.2)  # both executors get tasks, not one that is quicker
        return os.getcwd()

    folders = cluster_spark.sparkContext.parallelize(range(8), 8).map(where).collect()
    # an executor runs in <worker folder>/work/<application>/<executor id>
    assert {Path(folder).parents[2] for folder in folders} == {
        worker.folder for worker in spark_cluster.workers}
    assert len(set(folders)) == 2
    executors = cluster_spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
    hosts = sorted(str(executor.host()) for executor in executors)
    assert hosts == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]  # the driver and two executors


def test_iceberg_table_on_s3_through_the_rest_catalog(cluster_spark: SparkSession,
                                                      cluster_s3: S3Handle) -> None:
    spark, ns = cluster_spark, f"cluster_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE NAMESPACE {ns}")
    spark.sql(f"CREATE TABLE {ns}.t (k BIGINT, v STRING) USING iceberg TBLPROPERTIES ("
              "'format-version'='2', 'write.delete.mode'='merge-on-read')")
    spark.range(ROWS).selectExpr("id AS k", "CAST(id AS STRING) AS v").writeTo(f"{ns}.t").append()
    spark.range(ROWS - 10, ROWS + 10).selectExpr("id AS k", "'new' AS v"
                                                 ).createOrReplaceTempView("changes")
    spark.sql(f"MERGE INTO {ns}.t t USING changes c ON t.k = c.k "
              "WHEN MATCHED THEN UPDATE SET v = c.v WHEN NOT MATCHED THEN INSERT *")
    spark.sql(f"DELETE FROM {ns}.t WHERE k < 100")

    row = spark.sql(f"SELECT count(*) AS n, sum(k) AS total, count_if(v = 'new') AS new "
                    f"FROM {ns}.t").first()
    assert row is not None
    assert (row.n, row.total, row.new) == (
        ROWS + 10 - 100, sum(range(100, ROWS + 10)), 20)
    operations = [r.operation for r in spark.sql(
        f"SELECT operation FROM {ns}.t.snapshots ORDER BY committed_at").collect()]
    assert operations[0] == "append" and len(operations) == 3
    files = [r.file_path for r in spark.sql(
        f"SELECT file_path FROM {ns}.t.all_files").collect()]
    assert files and all(f.startswith(f"s3://{cluster_s3.bucket}/wh/") for f in files)
    keys = _keys(cluster_s3, f"wh/{ns}/t/")
    assert any("/data/" in key for key in keys) and any(
        key.endswith(".metadata.json") for key in keys)


def test_delta_table_on_s3a(cluster_spark: SparkSession, cluster_s3: S3Handle) -> None:
    spark, prefix = cluster_spark, f"delta/{uuid.uuid4().hex[:8]}"
    path = f"s3a://{cluster_s3.bucket}/{prefix}"
    spark.range(ROWS).selectExpr("id AS k", "id % 7 AS n").write.format("delta").save(path)
    table = DeltaTable.forPath(spark, path)
    table.delete("n = 0")
    updates = spark.range(ROWS - 10, ROWS + 10).selectExpr("id AS k", "100 AS n")
    table.alias("t").merge(updates.alias("u"), "t.k = u.k").whenMatchedUpdateAll(
        ).whenNotMatchedInsertAll().execute()

    expected = {k: k % 7 for k in range(ROWS) if k % 7} | {k: 100 for k in range(ROWS - 10,
                                                                                  ROWS + 10)}
    rows = spark.read.format("delta").load(path).collect()
    assert {r.k: r.n for r in rows} == expected and len(rows) == len(expected)
    assert [r.operation for r in table.history().orderBy("version").collect()] == [
        "WRITE", "DELETE", "MERGE"]
    keys = _keys(cluster_s3, f"{prefix}/")
    assert f"{prefix}/_delta_log/00000000000000000002.json" in keys
    assert any(key.endswith(".parquet") and "_delta_log" not in key for key in keys)


def test_executors_cannot_read_driver_local_files(cluster_spark: SparkSession,
                                                  cluster_s3: S3Handle, tmp_path: Path) -> None:
    local = tmp_path / "rows.csv"
    local.write_text("1\n2\n3\n")
    path, through_proc = str(local), f"/proc/{os.getpid()}/root{local}"
    assert os.path.exists(through_proc)

    def visible(_: int) -> tuple[bool, bool, bool]:
        return os.path.exists(path), os.path.exists(through_proc), os.path.isdir(os.getcwd())

    seen = cluster_spark.sparkContext.parallelize(range(4), 4).map(visible).collect()
    assert seen == [(False, False, True)] * 4  # not the driver's file; their own folder, yes

    with pytest.raises(Py4JJavaError) as failure:
        cluster_spark.read.schema("k INT").csv(local.as_uri()).collect()
    assert "FileNotFoundException" in str(failure.value)
    assert "executor" in str(failure.value)  # the task failed there, not on the driver

    key = f"isolation/{uuid.uuid4().hex[:8]}/rows.csv"
    cluster_s3.client().put_object(Bucket=cluster_s3.bucket, Key=key, Body=local.read_bytes())
    rows = cluster_spark.read.schema("k INT").csv(f"s3a://{cluster_s3.bucket}/{key}").collect()
    assert sorted(r.k for r in rows) == [1, 2, 3]
