"""Spark's Java REST client (Iceberg 1.10 runtime) against the catalog, read back by pyiceberg.

The session ``spark`` fixture's catalog ``lakehouse`` is the test server. Every Spark statement
goes through Iceberg's ``RESTCatalog`` (HTTP to the server); every assertion reads the result
through pyiceberg's ``RestCatalog``, so both clients must agree on what the catalog holds.
``test_spark_session.py`` already covers copy-on-write DML and the changelog view over REST;
this module covers both write modes, both time-travel forms, schema evolution, staged
creates (CTAS), purge and views. Against the secure catalog, Spark authenticates with a
credential or a token, is refused without them (401), and as a reader may not write (403).
"""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from py4j.protocol import Py4JJavaError
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import NoSuchTableError

from tests.conftest_catalog import SecureCatalogHandle

pytestmark = pytest.mark.spark

CATALOG = "lakehouse"
MODES = ("copy-on-write", "merge-on-read")


@pytest.fixture(scope="module")
def namespace(spark, catalog_server) -> str:
    name = f"spark_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE NAMESPACE {CATALOG}.{name}")
    return name


def _rows(spark, sql: str) -> list[tuple]:
    return [tuple(row) for row in spark.sql(sql).collect()]


def _read(rest_catalog: RestCatalog, identifier: str) -> list[tuple]:
    """The table's rows through pyiceberg (applies position deletes of merge-on-read)."""
    arrow = rest_catalog.load_table(identifier).scan().to_arrow()
    return sorted(tuple(row.values()) for row in arrow.to_pylist())


def test_namespace_created_by_spark_is_seen_by_pyiceberg(namespace, rest_catalog) -> None:
    assert (namespace,) in rest_catalog.list_namespaces()
    assert rest_catalog.namespace_exists(namespace)


@pytest.mark.parametrize("mode", MODES)
def test_dml_in_both_write_modes(spark, namespace, rest_catalog, mode: str) -> None:
    name = f"{namespace}.dml_{mode.replace('-', '_')}"
    modes = ", ".join(f"'write.{op}.mode' = '{mode}'" for op in ("delete", "update", "merge"))
    spark.sql(
        f"CREATE TABLE {CATALOG}.{name} (id BIGINT, v STRING) USING iceberg "
        f"TBLPROPERTIES ('format-version' = '2', {modes})"
    )
    table = rest_catalog.load_table(name)
    assert table.metadata.format_version == 2
    assert table.properties["write.merge.mode"] == mode
    spark.sql(f"INSERT INTO {CATALOG}.{name} VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    assert _read(rest_catalog, name) == [(1, "a"), (2, "b"), (3, "c")]
    spark.sql(
        f"MERGE INTO {CATALOG}.{name} t USING (SELECT 3 AS id, 'cc' AS v UNION ALL "
        "SELECT 4, 'd') s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    assert _read(rest_catalog, name) == [(1, "a"), (2, "b"), (3, "cc"), (4, "d")]
    spark.sql(f"DELETE FROM {CATALOG}.{name} WHERE id = 1")
    assert _read(rest_catalog, name) == [(2, "b"), (3, "cc"), (4, "d")]
    spark.sql(f"UPDATE {CATALOG}.{name} SET v = 'bb' WHERE id = 2")
    assert _read(rest_catalog, name) == [(2, "bb"), (3, "cc"), (4, "d")]
    snapshots = rest_catalog.load_table(name).snapshots()
    assert len(snapshots) == 4 and snapshots[0].summary.operation.value == "append"
    delete_files = sum(
        int(s.summary.additional_properties.get("added-delete-files", 0)) for s in snapshots
    )
    assert (delete_files > 0) == (mode == "merge-on-read")


def test_time_travel_by_snapshot_id_and_timestamp(spark, namespace, rest_catalog) -> None:
    name = f"{namespace}.travel"
    spark.sql(f"CREATE TABLE {CATALOG}.{name} (id BIGINT) USING iceberg")
    spark.sql(f"INSERT INTO {CATALOG}.{name} VALUES (1)")
    first = rest_catalog.load_table(name).current_snapshot()
    assert first is not None
    time.sleep(0.01)  # the next commit gets a later timestamp
    spark.sql(f"INSERT INTO {CATALOG}.{name} VALUES (2)")
    assert _read(rest_catalog, name) == [(1,), (2,)]
    by_id = f"SELECT id FROM {CATALOG}.{name} VERSION AS OF {first.snapshot_id}"
    assert _rows(spark, by_id) == [(1,)]
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(first.timestamp_ms / 1000))
    millis = first.timestamp_ms % 1000
    by_time = f"SELECT id FROM {CATALOG}.{name} TIMESTAMP AS OF '{stamp}.{millis:03d}'"
    assert _rows(spark, by_time) == [(1,)]  # the session time zone is UTC
    scan = rest_catalog.load_table(name).scan(snapshot_id=first.snapshot_id).to_arrow()
    assert scan.column("id").to_pylist() == [1]


def test_alter_table_schema_and_properties(spark, namespace, rest_catalog) -> None:
    name = f"{namespace}.evolve"
    spark.sql(f"CREATE TABLE {CATALOG}.{name} (id BIGINT, v STRING) USING iceberg")
    spark.sql(f"INSERT INTO {CATALOG}.{name} VALUES (1, 'a')")
    spark.sql(f"ALTER TABLE {CATALOG}.{name} ADD COLUMN n INT")
    spark.sql(f"ALTER TABLE {CATALOG}.{name} RENAME COLUMN v TO label")
    spark.sql(f"ALTER TABLE {CATALOG}.{name} SET TBLPROPERTIES ('team' = 'spark', 'k' = 'v')")
    spark.sql(f"INSERT INTO {CATALOG}.{name} VALUES (2, 'b', 7)")
    table = rest_catalog.load_table(name)
    assert [f.name for f in table.schema().fields] == ["id", "label", "n"]
    assert len(table.schemas()) == 3  # created, add column, rename column
    assert table.properties["team"] == "spark" and table.properties["k"] == "v"
    assert _read(rest_catalog, name) == [(1, "a", None), (2, "b", 7)]


def test_ctas_is_a_staged_create(spark, namespace, rest_catalog) -> None:
    source = f"{namespace}.ctas_source"
    target = f"{namespace}.ctas_target"
    spark.sql(f"CREATE TABLE {CATALOG}.{source} (id BIGINT, v STRING) USING iceberg")
    spark.sql(f"INSERT INTO {CATALOG}.{source} VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    spark.sql(
        f"CREATE TABLE {CATALOG}.{target} USING iceberg TBLPROPERTIES ('format-version' = '2') "
        f"AS SELECT id, upper(v) AS v FROM {CATALOG}.{source} WHERE id > 1"
    )
    table = rest_catalog.load_table(target)
    assert _read(rest_catalog, target) == [(2, "B"), (3, "C")]
    assert len(table.snapshots()) == 1  # table and data appear in one commit
    spark.sql(
        f"REPLACE TABLE {CATALOG}.{target} USING iceberg AS SELECT id FROM {CATALOG}.{source}"
    )
    assert _read(rest_catalog, target) == [(1,), (2,), (3,)]


def test_drop_table_purge_deletes_files(spark, namespace, rest_catalog) -> None:
    name = f"{namespace}.purged"
    spark.sql(f"CREATE TABLE {CATALOG}.{name} (id BIGINT) USING iceberg")
    spark.sql(f"INSERT INTO {CATALOG}.{name} VALUES (1), (2)")
    location = Path(rest_catalog.load_table(name).location().removeprefix("file:"))
    assert any(location.rglob("*.parquet"))
    spark.sql(f"DROP TABLE {CATALOG}.{name} PURGE")
    with pytest.raises(NoSuchTableError):
        rest_catalog.load_table(name)
    assert not any(location.rglob("*.parquet"))
    assert not any(location.rglob("*.metadata.json"))


def test_create_view_through_the_rest_catalog(spark, namespace, rest_catalog) -> None:
    source = f"{namespace}.view_source"
    view = f"{namespace}.big_ids"
    spark.sql(f"CREATE TABLE {CATALOG}.{source} (id BIGINT, v STRING) USING iceberg")
    spark.sql(f"INSERT INTO {CATALOG}.{source} VALUES (1, 'a'), (5, 'e'), (9, 'i')")
    spark.sql(
        f"CREATE VIEW {CATALOG}.{view} AS SELECT id, v FROM {CATALOG}.{source} WHERE id > 2"
    )
    assert _rows(spark, f"SELECT * FROM {CATALOG}.{view} ORDER BY id") == [(5, "e"), (9, "i")]
    loaded = rest_catalog.load_view(view)
    version = loaded.metadata.versions[-1]
    sql = version.representations[0].root
    assert sql.dialect == "spark" and "WHERE id > 2" in sql.sql
    assert [f.name for f in loaded.metadata.schemas[-1].fields] == ["id", "v"]
    assert (namespace, "big_ids") in rest_catalog.list_views(namespace)
    spark.sql(f"DROP VIEW {CATALOG}.{view}")
    assert not rest_catalog.view_exists(view)


# --------------------------------------------------------------------- authentication
#
# The secure catalog (``secure_catalog_server``) requires a bearer token on every route but
# ``GET /v1/config``. Each test registers a Spark catalog of its own on the shared session at
# runtime (Spark instantiates a catalog once per name, at its first use): the Java client gets
# its token with a credential (OAuth2 client credentials) or is handed one.

SECURE_ROWS = [(1, "a"), (2, "b")]


def _secure_catalog(spark, handle: SecureCatalogHandle, name: str, **auth: str) -> str:
    """Register Spark catalog ``name`` on the secure server; ``auth``: credential or token."""
    prefix = f"spark.sql.catalog.{name}"
    conf = {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "rest",
        f"{prefix}.uri": handle.uri,
        f"{prefix}.oauth2-server-uri": f"{handle.uri}/v1/oauth/tokens",
        f"{prefix}.cache-enabled": "false",
        **{f"{prefix}.{key}": value for key, value in auth.items()},
    }
    for key, value in conf.items():
        spark.conf.set(key, value)
    return name


@pytest.fixture(scope="module")
def secure_namespace(secure_catalog_server: SecureCatalogHandle) -> str:
    """A namespace of the secure catalog whose table ``t`` pyiceberg (admin) wrote."""
    admin = _admin(secure_catalog_server)
    name = f"spark_auth_{uuid.uuid4().hex[:8]}"
    admin.create_namespace(name)
    rows = pa.table({"id": pa.array([r[0] for r in SECURE_ROWS], pa.int64()),
                     "v": [r[1] for r in SECURE_ROWS]})
    admin.create_table(f"{name}.t", rows.schema).append(rows)
    return name


def _admin(handle: SecureCatalogHandle) -> RestCatalog:
    return RestCatalog("admin", uri=handle.uri, credential=handle.credential("admin"),
                       **{"oauth2-server-uri": f"{handle.uri}/v1/oauth/tokens"})


def _reads_the_secure_table(spark, catalog: str, namespace: str) -> None:
    assert (namespace,) in _rows(spark, f"SHOW NAMESPACES IN {catalog}")
    assert (namespace, "t", False) in _rows(spark, f"SHOW TABLES IN {catalog}.{namespace}")
    assert sorted(_rows(spark, f"SELECT id, v FROM {catalog}.{namespace}.t")) == SECURE_ROWS


def test_spark_with_a_credential_reads_and_writes(
    spark, secure_catalog_server: SecureCatalogHandle, secure_namespace: str
) -> None:
    handle = secure_catalog_server
    catalog = _secure_catalog(spark, handle, "auth_writer",
                              credential=handle.credential("writer"))
    _reads_the_secure_table(spark, catalog, secure_namespace)
    name = f"{secure_namespace}.from_spark"
    spark.sql(f"CREATE TABLE {catalog}.{name} (id BIGINT, v STRING) USING iceberg")
    spark.sql(f"INSERT INTO {catalog}.{name} VALUES (3, 'c'), (4, 'd')")
    spark.sql(f"DELETE FROM {catalog}.{name} WHERE id = 3")
    assert _read(_admin(handle), name) == [(4, "d")]


def test_spark_with_a_token_reads(
    spark, secure_catalog_server: SecureCatalogHandle, secure_namespace: str
) -> None:
    handle = secure_catalog_server
    catalog = _secure_catalog(spark, handle, "auth_token", token=handle.token("reader"))
    _reads_the_secure_table(spark, catalog, secure_namespace)


def test_spark_as_a_reader_selects_but_may_not_insert(
    spark, secure_catalog_server: SecureCatalogHandle, secure_namespace: str
) -> None:
    handle = secure_catalog_server
    catalog = _secure_catalog(spark, handle, "auth_reader",
                              credential=handle.credential("reader"))
    _reads_the_secure_table(spark, catalog, secure_namespace)
    forbidden = ("org.apache.iceberg.exceptions.ForbiddenException: Forbidden: "
                 "Principal 'reader' may not commit table: it needs the writer role")
    with pytest.raises(Py4JJavaError, match=re.escape(forbidden)):
        spark.sql(f"INSERT INTO {catalog}.{secure_namespace}.t VALUES (9, 'z')")
    assert _read(_admin(handle), f"{secure_namespace}.t") == SECURE_ROWS


def test_spark_without_credentials_gets_401(
    spark, secure_catalog_server: SecureCatalogHandle, secure_namespace: str
) -> None:
    catalog = _secure_catalog(spark, secure_catalog_server, "auth_anonymous")
    unauthorized = ("org.apache.iceberg.exceptions.NotAuthorizedException: Not authorized: "
                    "Authentication required: send a bearer token")
    for sql in (f"SHOW NAMESPACES IN {catalog}", f"SELECT * FROM {catalog}.{secure_namespace}.t"):
        with pytest.raises(Py4JJavaError, match=re.escape(unauthorized)):
            spark.sql(sql).collect()
