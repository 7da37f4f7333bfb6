"""DuckDB's iceberg extension (1.5.5) against the catalog, checked through pyiceberg.

DuckDB ATTACHes the test server as an Iceberg REST catalog (``lakehouse.duckdb_client``: the
extensions load offline from their PyPI packages). It lists and reads a table pyiceberg wrote
(appends, a delete, time travel), and writes over REST: CREATE TABLE, INSERT, DELETE,
UPDATE (through ``POST /v1/transactions/commit``) and CTAS (a staged create). pyiceberg reads
every write back.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import duckdb
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog

from lakehouse.duckdb_client import attach_catalog, connect

ALIAS = "lake"


@pytest.fixture(scope="module")
def namespace(catalog_server) -> str:
    name = f"duck_{uuid.uuid4().hex[:8]}"
    RestCatalog("setup", uri=catalog_server.uri).create_namespace(name)
    return name


@pytest.fixture(scope="module")
def duck(catalog_server, namespace) -> Iterator[duckdb.DuckDBPyConnection]:
    connection = connect()
    attach_catalog(connection, catalog_server.uri, ALIAS)
    yield connection
    connection.close()


def _read(rest_catalog: RestCatalog, identifier: str) -> list[tuple]:
    rows = rest_catalog.load_table(identifier).scan().to_arrow().to_pylist()
    return sorted(tuple(row.values()) for row in rows)


def _duck_rows(duck: duckdb.DuckDBPyConnection, sql: str) -> list[tuple]:
    return sorted(duck.execute(sql).fetchall())


def test_lists_and_reads_a_table_pyiceberg_wrote(duck, namespace, rest_catalog) -> None:
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": pa.array(["a", "b", "c"])})
    table = rest_catalog.create_table(f"{namespace}.from_py", data.schema)
    table.append(data)
    table.append(pa.table({"id": pa.array([4], pa.int64()), "v": pa.array(["d"])}))
    tables = duck.execute(
        "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = ?", [ALIAS]
    ).fetchall()
    assert (namespace, "from_py") in tables
    rows = _duck_rows(duck, f"SELECT id, v FROM {ALIAS}.{namespace}.from_py")
    assert rows == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]
    table.delete("id = 2")
    duck.execute("DETACH lake")  # a new attachment sees the new snapshot
    attach_catalog(duck, rest_catalog.properties["uri"], ALIAS)
    rows = _duck_rows(duck, f"SELECT id, v FROM {ALIAS}.{namespace}.from_py")
    assert rows == [(1, "a"), (3, "c"), (4, "d")]
    first = table.snapshots()[0].snapshot_id
    travel = f"SELECT id FROM {ALIAS}.{namespace}.from_py AT (VERSION => {first})"
    assert _duck_rows(duck, travel) == [(1,), (2,), (3,)]


def test_create_insert_delete_update(duck, namespace, rest_catalog) -> None:
    name = f"{ALIAS}.{namespace}.from_duck"
    duck.execute(f"CREATE TABLE {name} (id BIGINT, v VARCHAR)")
    created = rest_catalog.load_table(f"{namespace}.from_duck")
    assert [f.name for f in created.schema().fields] == ["id", "v"]
    duck.execute(f"INSERT INTO {name} VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    assert _read(rest_catalog, f"{namespace}.from_duck") == [(1, "a"), (2, "b"), (3, "c")]
    duck.execute(f"DELETE FROM {name} WHERE id = 1")
    assert _read(rest_catalog, f"{namespace}.from_duck") == [(2, "b"), (3, "c")]
    duck.execute(f"UPDATE {name} SET v = 'bb' WHERE id = 2")
    assert _read(rest_catalog, f"{namespace}.from_duck") == [(2, "bb"), (3, "c")]
    assert len(rest_catalog.load_table(f"{namespace}.from_duck").snapshots()) == 3


def test_ctas(duck, namespace, rest_catalog) -> None:
    duck.execute(
        f"CREATE TABLE {ALIAS}.{namespace}.squares AS "
        "SELECT i AS n, i * i AS sq FROM range(5) t(i)"
    )
    assert _read(rest_catalog, f"{namespace}.squares") == [(i, i * i) for i in range(5)]
    duck.execute(f"INSERT INTO {ALIAS}.{namespace}.squares VALUES (10, 100)")
    assert _read(rest_catalog, f"{namespace}.squares")[-1] == (10, 100)


def test_transaction_writes_two_tables_in_one_commit(duck, namespace, rest_catalog) -> None:
    for table in ("left_t", "right_t"):
        duck.execute(f"CREATE TABLE {ALIAS}.{namespace}.{table} (id INTEGER)")
    duck.execute("BEGIN")
    duck.execute(f"INSERT INTO {ALIAS}.{namespace}.left_t VALUES (1)")
    duck.execute(f"INSERT INTO {ALIAS}.{namespace}.right_t VALUES (2)")
    assert rest_catalog.load_table(f"{namespace}.left_t").current_snapshot() is None
    duck.execute("COMMIT")
    assert _read(rest_catalog, f"{namespace}.left_t") == [(1,)]
    assert _read(rest_catalog, f"{namespace}.right_t") == [(2,)]
