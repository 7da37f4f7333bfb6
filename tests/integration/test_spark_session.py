"""A real Spark session on the Maven-resolved jars: hadoop catalog, then the REST catalog."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from lakehouse.spark.session import build_spark_session
from sinks.iceberg_commit import run_with_commit_properties

pytest_plugins = ["tests.conftest_catalog"]
pytestmark = pytest.mark.spark

HADOOP = "hcat"
REST = "lake"
MODES = ("copy-on-write", "merge-on-read")


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    warehouse = tmp_path_factory.mktemp("hadoop-warehouse")
    started = time.monotonic()
    session = build_spark_session(
        app_name="test-spark-session",
        catalog_name=HADOOP,
        catalog_uri="",
        warehouse=str(warehouse),
        catalog_type="hadoop",
    )
    print(f"session start {time.monotonic() - started:.1f} s")
    session.sql(f"CREATE NAMESPACE IF NOT EXISTS {HADOOP}.db")
    yield session  # not stopped: later modules of the run may reuse the JVM


def _table(catalog: str, namespace: str = "db") -> str:
    return f"{catalog}.{namespace}.t_{uuid.uuid4().hex[:8]}"


def _create(spark, table: str, mode: str = "copy-on-write") -> None:
    modes = ", ".join(f"'write.{op}.mode' = '{mode}'" for op in ("delete", "update", "merge"))
    spark.sql(
        f"CREATE TABLE {table} (id BIGINT, v STRING) USING iceberg "
        f"TBLPROPERTIES ('format-version' = '2', {modes})"
    )


def _rows(spark, sql: str) -> list[tuple]:
    return [tuple(row) for row in spark.sql(sql).collect()]


def _snapshots(spark, table: str, key: str) -> list[tuple]:
    return _rows(
        spark,
        f"SELECT snapshot_id, operation, summary['{key}'] FROM {table}.snapshots "
        "ORDER BY committed_at, snapshot_id",
    )


def _dml_round_trip(spark, table: str) -> None:
    """CREATE/INSERT/DELETE/UPDATE/MERGE, time travel and the changelog view on ``table``."""
    catalog, identifier = table.split(".", 1)
    _create(spark, table)
    spark.sql(f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    spark.sql(f"DELETE FROM {table} WHERE id = 1")
    spark.sql(f"UPDATE {table} SET v = 'bb' WHERE id = 2")
    spark.sql(
        f"MERGE INTO {table} t USING (SELECT 3 AS id, 'cc' AS v UNION ALL SELECT 4, 'd') s "
        "ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    assert _rows(spark, f"SELECT * FROM {table} ORDER BY id") == [(2, "bb"), (3, "cc"), (4, "d")]
    snapshots = [s[0] for s in _snapshots(spark, table, "x")]
    assert len(snapshots) == 4
    first = f"SELECT * FROM {table} VERSION AS OF {snapshots[0]} ORDER BY id"
    assert _rows(spark, first) == [(1, "a"), (2, "b"), (3, "c")]
    view = f"changes_{uuid.uuid4().hex[:8]}"
    spark.sql(
        f"CALL {catalog}.system.create_changelog_view(table => '{identifier}', options => "
        f"map('start-snapshot-id', '{snapshots[0]}', 'end-snapshot-id', '{snapshots[-1]}'), "
        f"changelog_view => '{view}')"
    )
    changes = _rows(
        spark,
        f"SELECT id, v, _change_type, _change_ordinal FROM {view} "
        "ORDER BY _change_ordinal, id, _change_type",
    )
    assert changes == [
        (1, "a", "DELETE", 0),
        (2, "b", "DELETE", 1),
        (2, "bb", "INSERT", 1),
        (3, "c", "DELETE", 2),
        (3, "cc", "INSERT", 2),
        (4, "d", "INSERT", 2),
    ]


def test_hadoop_catalog_dml_time_travel_and_changelog(spark) -> None:
    _dml_round_trip(spark, _table(HADOOP))


@pytest.mark.parametrize("mode", MODES)
def test_merge_commit_carries_properties(spark, mode: str) -> None:
    table = _table(HADOOP)
    _create(spark, table, mode)
    spark.sql(f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b')")
    frontier = json.dumps({"orders": 42})
    result = run_with_commit_properties(
        spark,
        {"lakehouse.frontier": frontier},
        lambda: spark.sql(
            f"MERGE INTO {table} t USING (SELECT 2 AS id, 'B' AS v "
            "UNION ALL SELECT 3, 'c') s ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
        ),
    )
    assert result is not None
    run_with_commit_properties(
        spark,
        {"snapshot-property.lakehouse.frontier": "deleted"},
        lambda: spark.sql(f"DELETE FROM {table} WHERE id = 1"),
    )
    spark.sql(f"INSERT INTO {table} VALUES (9, 'z')")  # the properties do not leak
    summaries = [(s[1], s[2]) for s in _snapshots(spark, table, "lakehouse.frontier")]
    assert summaries == [
        ("append", None),
        ("overwrite", frontier),
        ("delete", "deleted"),
        ("append", None),
    ]


def test_commit_properties_from_another_thread_and_errors(spark) -> None:
    table = _table(HADOOP)
    _create(spark, table)
    worker = threading.Thread(
        target=run_with_commit_properties,
        args=(spark, {"k": "thread"}, lambda: spark.sql(f"INSERT INTO {table} VALUES (1, 'a')")),
    )
    worker.start()
    worker.join()
    with pytest.raises(ZeroDivisionError):
        run_with_commit_properties(spark, {"k": "never"}, lambda: 1 // 0)
    with pytest.raises(Exception, match="UNRESOLVED_COLUMN"):
        run_with_commit_properties(
            spark,
            {"k": "never"},
            lambda: spark.sql(
                f"MERGE INTO {table} t USING (SELECT 1 AS id) s ON t.nope = s.id "
                "WHEN MATCHED THEN DELETE"
            ),
        )
    assert [(s[1], s[2]) for s in _snapshots(spark, table, "k")] == [("append", "thread")]


def test_empty_append_makes_a_snapshot_with_its_properties(spark) -> None:
    table = _table(HADOOP)
    _create(spark, table)
    empty = spark.createDataFrame([], "id BIGINT, v STRING")
    empty.writeTo(table).option("snapshot-property.k", "empty").append()
    assert [(s[1], s[2]) for s in _snapshots(spark, table, "k")] == [("append", "empty")]


def test_rest_catalog_through_the_runtime_jar(spark, catalog_server, rest_catalog) -> None:
    session = build_spark_session(
        app_name="test-spark-session",
        catalog_name=REST,
        catalog_uri=catalog_server.uri,
        warehouse=catalog_server.settings.warehouse,
    )
    assert session is spark  # same JVM: the REST catalog is added to the running session
    namespace = f"ns_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE NAMESPACE {REST}.{namespace}")
    table = _table(REST, namespace)
    _dml_round_trip(spark, table)
    run_with_commit_properties(
        spark,
        {"lakehouse.frontier": '{"s":7}'},
        lambda: spark.sql(
            f"MERGE INTO {table} t USING (SELECT 5 AS id, 'e' AS v) s ON t.id = s.id "
            "WHEN NOT MATCHED THEN INSERT *"
        ),
    )
    summary = rest_catalog.load_table(table.split(".", 1)[1]).current_snapshot().summary
    assert summary["lakehouse.frontier"] == '{"s":7}'
    assert Path(catalog_server.warehouse).exists()
    # Spark posts scan and commit reports; the catalog validates and stores them.
    name = table.split(".")[-1]
    reports = httpx.get(
        f"{catalog_server.uri}/v1/namespaces/{namespace}/tables/{name}/metrics"
    ).json()["reports"]
    assert {"scan-report", "commit-report"} <= {r["report-type"] for r in reports}


NICENESS_PROBE = """
import json, os, pathlib, sys
from lakehouse.spark.session import build_spark_session

before = os.getpriority(os.PRIO_PROCESS, 0)
spark = build_spark_session(app_name="niceness", catalog_name="h", catalog_uri="",
                            warehouse=sys.argv[1], catalog_type="hadoop", niceness=7)
assert spark.range(1000).selectExpr("sum(id)").first()[0] == 499500  # executor threads
jvm = spark.sparkContext._gateway.proc.pid
threads = [int(p.read_text().rpartition(")")[2].split()[16])
           for p in pathlib.Path(f"/proc/{jvm}/task").glob("*/stat")]
print(json.dumps({"before": before, "after": os.getpriority(os.PRIO_PROCESS, 0),
                  "jvm_threads": threads}))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="a thread's nice value is its own on Linux")
def test_a_local_jvm_runs_below_the_callers_cpu_priority(tmp_path: Path) -> None:
    """Every thread of the JVM runs at the caller's nice value plus ``niceness``; the
    calling thread's own is unchanged (a process of its own: the JVM starts once)."""
    probe = subprocess.run([sys.executable, "-c", NICENESS_PROBE, str(tmp_path)],
                           capture_output=True, text=True, timeout=300, check=True)
    seen = json.loads(probe.stdout.strip().splitlines()[-1])
    assert seen["after"] == seen["before"]
    assert len(seen["jvm_threads"]) > 10
    assert set(seen["jvm_threads"]) == {min(19, seen["before"] + 7)}
