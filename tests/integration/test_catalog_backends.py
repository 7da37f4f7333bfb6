"""Key catalog flows and concurrent commits on each store backend: SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from threading import Barrier

import httpx
import pyarrow as pa
import pytest
import sqlalchemy
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import NamespaceNotEmptyError, NoSuchTableError
from pyiceberg.table import CommitTableRequest, TableIdentifier
from pyiceberg.table.update import AssertRefSnapshotId
from pyiceberg.types import DoubleType
from sqlalchemy import text

from catalog_api import serve_in_thread
from tests.conftest_catalog import CatalogServerHandle

ARROW_SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("writer", pa.string())])
WRITERS = 8


#: One client for the module: building an ``httpx.Client`` costs ~60 ms (TLS context).
HTTP = httpx.Client(timeout=60)


@pytest.fixture(scope="module", autouse=True)
def _close_http() -> Iterator[None]:
    yield
    HTTP.close()


def _rows(ids: list[int]) -> pa.Table:
    return pa.table({"id": ids, "writer": [f"w{i}" for i in ids]}, schema=ARROW_SCHEMA)


@pytest.fixture
def catalog(backend_catalog_server: CatalogServerHandle) -> RestCatalog:
    return RestCatalog("backend", uri=backend_catalog_server.uri)


@pytest.fixture
def namespace(catalog: RestCatalog) -> str:
    name = f"ns_{uuid.uuid4().hex[:10]}"
    catalog.create_namespace(name)
    return name


def test_store_writes_to_the_backend_database(
    backend_catalog_server: CatalogServerHandle, namespace: str, request: pytest.FixtureRequest
) -> None:
    engine = sqlalchemy.create_engine(backend_catalog_server.database_url)
    try:
        with engine.connect() as conn:
            stmt = text("SELECT namespace FROM iceberg_namespace_properties WHERE namespace = :n")
            rows = conn.execute(stmt, {"n": namespace}).all()
    finally:
        engine.dispose()
    assert rows and rows[0][0] == namespace
    backend = request.node.callspec.params["backend_catalog_server"]
    assert engine.dialect.name == {"sqlite": "sqlite", "postgres": "postgresql"}[backend]


def test_namespaces(catalog: RestCatalog, namespace: str) -> None:
    catalog.create_namespace((namespace, "child"), {"owner": "tests"})
    assert catalog.list_namespaces(namespace) == [(namespace, "child")]
    assert catalog.load_namespace_properties((namespace, "child"))["owner"] == "tests"
    summary = catalog.update_namespace_properties(
        (namespace, "child"), removals={"owner"}, updates={"k": "v"}
    )
    assert summary.removed == ["owner"] and summary.updated == ["k"]
    with pytest.raises(NamespaceNotEmptyError):
        catalog.drop_namespace(namespace)
    catalog.drop_namespace((namespace, "child"))
    catalog.drop_namespace(namespace)
    assert not catalog.namespace_exists(namespace)


def test_table_create_commit_load(catalog: RestCatalog, namespace: str) -> None:
    ident = f"{namespace}.events"
    table = catalog.create_table(ident, ARROW_SCHEMA)
    table.append(_rows([1, 2]))
    with catalog.load_table(ident).update_schema() as update:
        update.add_column("score", DoubleType())
    loaded = catalog.load_table(ident)
    loaded.append(_rows([3]).append_column("score", pa.array([0.5])))
    result = catalog.load_table(ident).scan().to_arrow()
    assert sorted(result["id"].to_pylist()) == [1, 2, 3]
    assert result["score"].null_count == 2

    catalog.rename_table(ident, f"{namespace}.renamed")
    with pytest.raises(NoSuchTableError):
        catalog.load_table(ident)
    assert len(catalog.load_table(f"{namespace}.renamed").snapshots()) == 2
    catalog.drop_table(f"{namespace}.renamed")
    assert catalog.list_tables(namespace) == []


def test_staged_create_and_multi_table_transaction(
    backend_catalog_server: CatalogServerHandle, catalog: RestCatalog, namespace: str
) -> None:
    with catalog.create_table_transaction(f"{namespace}.staged", ARROW_SCHEMA) as tx:
        tx.append(_rows([7]))
    assert catalog.load_table(f"{namespace}.staged").scan().to_arrow()["id"].to_pylist() == [7]

    table = catalog.create_table(f"{namespace}.other", ARROW_SCHEMA)
    body = {
        "table-changes": [
            {
                "identifier": {"namespace": [namespace], "name": "other"},
                "requirements": [
                    {"type": "assert-table-uuid", "uuid": str(table.metadata.table_uuid)}
                ],
                "updates": [{"action": "set-properties", "updates": {"k": "v"}}],
            },
            {
                "identifier": {"namespace": [namespace], "name": "staged"},
                "requirements": [{"type": "assert-table-uuid", "uuid": str(uuid.uuid4())}],
                "updates": [{"action": "set-properties", "updates": {"k": "v"}}],
            },
        ]
    }
    response = HTTP.post(f"{backend_catalog_server.uri}/v1/transactions/commit", json=body)
    assert response.status_code == 409, response.text
    assert "k" not in catalog.load_table(f"{namespace}.other").properties


# --------------------------------------------------------------------------- concurrency


def _attempt(
    uri: str, namespace: str, writer: int, start: Barrier
) -> tuple[int, int | None, httpx.Response]:
    """Stage one append with pyiceberg, then send its commit over HTTP when all are ready."""
    table = RestCatalog(f"writer{writer}", uri=uri).load_table(f"{namespace}.t")
    tx = table.transaction()
    tx.append(_rows([writer]))
    asserted = [r.snapshot_id for r in tx._requirements if isinstance(r, AssertRefSnapshotId)]
    request = CommitTableRequest(
        identifier=TableIdentifier(namespace=[namespace], name="t"),
        requirements=tx._requirements,
        updates=tx._updates,
    )
    start.wait(timeout=60)
    response = HTTP.post(
        f"{uri}/v1/namespaces/{namespace}/tables/t",
        content=request.model_dump_json(),
        headers={"Content-Type": "application/json"},
        timeout=60,
    )
    return writer, asserted[0] if asserted else None, response


@pytest.fixture
def two_servers(backend_catalog_server: CatalogServerHandle) -> Iterator[tuple[str, str]]:
    """The session's server and a second one on the same database (no shared in-process lock)."""
    second = serve_in_thread(backend_catalog_server.settings, host="127.0.0.1", port=0)
    try:
        yield backend_catalog_server.uri, second.uri
    finally:
        second.stop()


def test_concurrent_appends_one_winner_per_round_none_lost(
    two_servers: tuple[str, str], catalog: RestCatalog, namespace: str
) -> None:
    # Writers alternate between two servers, so only the database's compare-and-swap
    # (UPDATE ... WHERE metadata_location = <base>) can keep them apart.
    catalog.create_table(f"{namespace}.t", ARROW_SCHEMA).append(_rows([-1]))
    pending = set(range(WRITERS))
    while pending:
        current = catalog.load_table(f"{namespace}.t").metadata.current_snapshot_id
        start = Barrier(len(pending))

        def attempt(writer: int, start: Barrier = start) -> tuple[int, int | None, httpx.Response]:
            return _attempt(two_servers[writer % 2], namespace, writer, start)

        with ThreadPoolExecutor(max_workers=len(pending)) as pool:
            results = list(pool.map(attempt, sorted(pending)))
        assert {asserted for _, asserted, _ in results} == {current}
        winners = [writer for writer, _, response in results if response.status_code == 200]
        assert len(winners) == 1, [r.text for _, _, r in results]
        for writer, _, response in results:
            if writer not in winners:
                assert response.status_code == 409, response.text
                assert response.json()["error"]["type"] == "CommitFailedException"
        pending.remove(winners[0])

    table = catalog.load_table(f"{namespace}.t")
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == [-1, *range(WRITERS)]
    snapshots = table.snapshots()
    assert len(snapshots) == WRITERS + 1
    for parent, child in zip(snapshots, snapshots[1:], strict=False):
        assert child.parent_snapshot_id == parent.snapshot_id
