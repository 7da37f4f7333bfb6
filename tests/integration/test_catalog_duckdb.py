"""DuckDB's iceberg extension (1.5.5) against the catalog, checked through pyiceberg.

DuckDB ATTACHes the test server as an Iceberg REST catalog (``lakehouse.duckdb_client``: the
extensions load offline from their PyPI packages). It lists and reads a table pyiceberg wrote
(appends, a delete, time travel), and writes over REST: CREATE TABLE, INSERT, DELETE,
UPDATE (through ``POST /v1/transactions/commit``) and CTAS (a staged create). pyiceberg reads
every write back.

Every test runs twice: on the open test catalog, and on the secure one, where DuckDB gets its
token with the ``writer`` client's credential (an iceberg secret). There a bearer token is
enough to read, and without credentials every read gets 401.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import duckdb
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog

from lakehouse.duckdb_client import attach_catalog, connect
from tests.conftest_catalog import SecureCatalogHandle

ALIAS = "lake"


@dataclass(frozen=True)
class Target:
    """The catalog a run of the module uses.

    Attributes:
        catalog: pyiceberg on it (the admin's credential on the secure one).
        attach: ATTACH it to a DuckDB connection as :data:`ALIAS`.
    """

    catalog: RestCatalog
    attach: Callable[[duckdb.DuckDBPyConnection], None]


def _attach(duck: duckdb.DuckDBPyConnection, alias: str, uri: str, secret: str) -> None:
    """ATTACH the catalog at ``uri`` as ``alias``, authenticated by the iceberg secret."""
    duck.execute(f"ATTACH 'warehouse' AS {alias} (TYPE iceberg, SECRET {secret}, "
                 f"ENDPOINT '{uri}')")


def _secure_target(handle: SecureCatalogHandle) -> Target:
    def attach(duck: duckdb.DuckDBPyConnection) -> None:
        # DuckDB fetches a token with the client credentials when it creates the secret.
        duck.execute(
            "CREATE OR REPLACE SECRET lake_writer (TYPE iceberg, CLIENT_ID 'writer', "
            f"CLIENT_SECRET '{handle.secrets['writer']}', "
            f"OAUTH2_SERVER_URI '{handle.uri}/v1/oauth/tokens')"
        )
        _attach(duck, ALIAS, handle.uri, "lake_writer")

    admin = RestCatalog("admin", uri=handle.uri, credential=handle.credential("admin"),
                        **{"oauth2-server-uri": f"{handle.uri}/v1/oauth/tokens"})
    return Target(admin, attach)


@pytest.fixture(scope="module", params=["open", "secure"])
def target(request: pytest.FixtureRequest) -> Target:
    if request.param == "secure":
        return _secure_target(request.getfixturevalue("secure_catalog_server"))
    uri = request.getfixturevalue("catalog_server").uri
    return Target(RestCatalog("setup", uri=uri),
                  lambda duck: attach_catalog(duck, uri, ALIAS))


@pytest.fixture(scope="module")
def rest_catalog(target: Target) -> RestCatalog:
    """pyiceberg on the module run's catalog (overrides the session's open one)."""
    return target.catalog


@pytest.fixture(scope="module")
def namespace(rest_catalog: RestCatalog) -> str:
    name = f"duck_{uuid.uuid4().hex[:8]}"
    rest_catalog.create_namespace(name)
    return name


@pytest.fixture(scope="module")
def duck(target: Target, namespace: str) -> Iterator[duckdb.DuckDBPyConnection]:
    connection = connect()
    target.attach(connection)
    yield connection
    connection.close()


def _read(rest_catalog: RestCatalog, identifier: str) -> list[tuple]:
    rows = rest_catalog.load_table(identifier).scan().to_arrow().to_pylist()
    return sorted(tuple(row.values()) for row in rows)


def _duck_rows(duck: duckdb.DuckDBPyConnection, sql: str) -> list[tuple]:
    return sorted(duck.execute(sql).fetchall())


def test_lists_and_reads_a_table_pyiceberg_wrote(duck, namespace, rest_catalog, target) -> None:
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
    target.attach(duck)
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


# ------------------------------------------------------------------------ authentication


@pytest.fixture(scope="module")
def secure_table(secure_catalog_server: SecureCatalogHandle) -> str:
    """A table of the secure catalog with rows (1, 'a') and (2, 'b'), written by pyiceberg."""
    handle = secure_catalog_server
    admin = _secure_target(handle).catalog
    namespace = f"duck_auth_{uuid.uuid4().hex[:8]}"
    admin.create_namespace(namespace)
    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "v": ["a", "b"]})
    admin.create_table(f"{namespace}.t", rows.schema).append(rows)
    return f"{namespace}.t"


def test_a_bearer_token_reads_and_a_reader_may_not_write(
    secure_catalog_server: SecureCatalogHandle, secure_table: str
) -> None:
    handle = secure_catalog_server
    duck = connect()
    duck.execute(f"CREATE SECRET lake_token (TYPE iceberg, TOKEN '{handle.token('reader')}')")
    _attach(duck, "by_token", handle.uri, "lake_token")
    assert _duck_rows(duck, f"SELECT id, v FROM by_token.{secure_table}") == [(1, "a"), (2, "b")]
    with pytest.raises(duckdb.TransactionException, match=r"\(Forbidden_403\)") as refused:
        duck.execute(f"INSERT INTO by_token.{secure_table} VALUES (3, 'c')")
    assert "Principal 'reader' may not commit transaction" in str(refused.value)
    duck.close()


def test_without_credentials_reads_get_401(
    secure_catalog_server: SecureCatalogHandle, secure_table: str
) -> None:
    duck = connect()
    duck.execute(f"ATTACH 'warehouse' AS anonymous (TYPE iceberg, "  # GET /v1/config is public
                 f"ENDPOINT '{secure_catalog_server.uri}', AUTHORIZATION_TYPE 'none')")
    unauthorized = ('returned response code Unauthorized_401 with message '
                    '"Authentication required: send a bearer token"')
    with pytest.raises(duckdb.HTTPException, match=re.escape(unauthorized)):
        duck.execute(f"SELECT * FROM anonymous.{secure_table}")
    duck.close()
