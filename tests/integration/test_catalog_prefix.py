"""The spec's ``/v1/{prefix}/...`` routes: a client naming the warehouse ``lakehouse`` (the
catalog's name) gets ``overrides.prefix`` from ``GET /v1/config`` and every later request
goes to ``/iceberg/v1/lakehouse/...``; clients naming no or another warehouse keep the
unprefixed routes. Real clients: pyiceberg ``RestCatalog`` (its requests are recorded on its
own HTTP session) and DuckDB's iceberg extension; unknown prefixes get the error model.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import NoSuchTableError

from catalog_api.prefix import UNPREFIXED_SEGMENTS
from catalog_api.spec_endpoints import SPEC_OPERATIONS
from lakehouse.duckdb_client import connect
from tests.conftest_catalog import CatalogServerHandle

WAREHOUSE = "lakehouse"  # CatalogSettings.catalog_name's default
PREFIXED = f"/iceberg/v1/{WAREHOUSE}/"
ARROW_SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])


def _recording_catalog(uri: str) -> tuple[RestCatalog, list[str]]:
    catalog = RestCatalog("prefixed", uri=uri, warehouse=WAREHOUSE)
    paths: list[str] = []

    def record(response: Any, *args: Any, **kwargs: Any) -> None:
        paths.append(f"{response.request.method} {response.request.path_url}")

    catalog._session.hooks["response"].append(record)
    return catalog, paths


def test_config_advertises_the_prefix_only_for_the_catalogs_name(
    catalog_server: CatalogServerHandle,
) -> None:
    url = f"{catalog_server.uri}/v1/config"
    assert httpx.get(url, params={"warehouse": WAREHOUSE}).json()["overrides"]["prefix"] == (
        WAREHOUSE
    )
    uri = catalog_server.warehouse.as_uri()
    for params in ({}, {"warehouse": "warehouse"}, {"warehouse": uri}):  # DuckDB's, Spark's
        assert "prefix" not in httpx.get(url, params=params).json()["overrides"], params


def test_pyiceberg_create_load_append_list_through_prefixed_routes(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog
) -> None:
    catalog, paths = _recording_catalog(catalog_server.uri)
    assert catalog.properties["prefix"] == WAREHOUSE
    namespace = f"ns_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(namespace, {"owner": "prefixed"})
    table = catalog.create_table(f"{namespace}.events", ARROW_SCHEMA)
    table.append(pa.table({"id": [1, 2], "name": ["a", "b"]}, schema=ARROW_SCHEMA))
    loaded = catalog.load_table(f"{namespace}.events")
    loaded.append(pa.table({"id": [3], "name": ["c"]}, schema=ARROW_SCHEMA))
    ids = catalog.load_table(f"{namespace}.events").scan().to_arrow()["id"].to_pylist()
    assert sorted(ids) == [1, 2, 3]
    assert catalog.list_tables(namespace) == [(namespace, "events")]
    assert (namespace,) in catalog.list_namespaces()
    assert catalog.load_namespace_properties(namespace)["owner"] == "prefixed"
    assert catalog.table_exists(f"{namespace}.events")
    catalog.rename_table(f"{namespace}.events", f"{namespace}.renamed")
    with pytest.raises(NoSuchTableError):
        catalog.load_table(f"{namespace}.events")
    # the unprefixed client sees the same catalog
    unprefixed = rest_catalog.load_table(f"{namespace}.renamed").metadata_location
    assert unprefixed == catalog.load_table(f"{namespace}.renamed").metadata_location
    catalog.drop_table(f"{namespace}.renamed")
    catalog.drop_namespace(namespace)
    assert not rest_catalog.namespace_exists(namespace)

    catalog_calls = [p for p in paths if "/v1/config" not in p]
    assert len(catalog_calls) >= 15
    assert all(p.split(" ", 1)[1].startswith(PREFIXED) for p in catalog_calls), catalog_calls
    methods = {p.split(" ", 1)[0] for p in catalog_calls}
    assert {"GET", "POST", "HEAD", "DELETE"} <= methods


def test_etags_and_idempotency_are_the_same_under_the_prefix(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    rest_catalog.create_table(f"{catalog_namespace}.t", ARROW_SCHEMA)
    path = f"namespaces/{catalog_namespace}/tables/t"
    plain = httpx.get(f"{catalog_server.uri}/v1/{path}")
    prefixed = httpx.get(f"{catalog_server.uri}/v1/{WAREHOUSE}/{path}")
    assert prefixed.status_code == 200 and prefixed.content == plain.content
    assert prefixed.headers["ETag"] == plain.headers["ETag"]
    tagged = httpx.get(f"{catalog_server.uri}/v1/{WAREHOUSE}/{path}",
                       headers={"If-None-Match": plain.headers["ETag"]})
    assert tagged.status_code == 304
    key = {"Idempotency-Key": str(uuid.uuid4())}
    body = {"namespace": [f"{catalog_namespace}_idem"]}
    first = httpx.post(f"{catalog_server.uri}/v1/{WAREHOUSE}/namespaces", json=body, headers=key)
    again = httpx.post(f"{catalog_server.uri}/v1/{WAREHOUSE}/namespaces", json=body, headers=key)
    assert first.status_code == again.status_code == 200 and first.json() == again.json()


def test_unknown_prefixes_are_404_no_such_warehouse(catalog_server: CatalogServerHandle) -> None:
    base = f"{catalog_server.uri}/v1/other"
    for method, path in (("GET", "/namespaces"), ("POST", "/namespaces"),
                         ("GET", "/namespaces/a/tables/t"), ("POST", "/tables/rename"),
                         ("POST", "/transactions/commit"), ("GET", "/namespaces/a/views")):
        response = httpx.request(method, base + path, json={})
        assert response.status_code == 404, (method, path)
        error = response.json()["error"]
        assert error["type"] == "NoSuchWarehouseException" and error["code"] == 404
        assert "'other'" in error["message"]
    assert httpx.head(f"{base}/namespaces/a/tables/t").status_code == 404
    polaris = catalog_server.uri + "/polaris/v1"
    assert httpx.get(f"{polaris}/other/namespaces/a/generic-tables").status_code == 404
    listed = httpx.get(f"{polaris}/{WAREHOUSE}/namespaces/nope/generic-tables")
    assert listed.json()["error"]["type"] == "NoSuchNamespaceException"  # routed, not 404'd
    # not a prefixed path at all: the plain 404 of an unknown route
    assert httpx.get(f"{base}/anything").json()["error"]["type"] == "NotFoundException"


def test_duckdb_attached_by_the_catalogs_name_uses_the_prefix(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    table = rest_catalog.create_table(f"{catalog_namespace}.t", ARROW_SCHEMA)
    table.append(pa.table({"id": [1, 2], "name": ["a", "b"]}, schema=ARROW_SCHEMA))
    duck = connect()
    try:
        duck.execute("CALL enable_logging('HTTP')")  # DuckDB's own log of its HTTP requests
        duck.execute(f"ATTACH '{WAREHOUSE}' AS p (TYPE iceberg, ENDPOINT '{catalog_server.uri}', "
                     "AUTHORIZATION_TYPE 'none')")
        rows = duck.execute(f"SELECT id, name FROM p.{catalog_namespace}.t ORDER BY id").fetchall()
        assert rows == [(1, "a"), (2, "b")]
        logged = duck.execute("SELECT message FROM duckdb_logs WHERE type = 'HTTP'").fetchall()
    finally:
        duck.close()
    urls = [m for (m,) in logged if "/iceberg/v1/" in m and "/v1/config" not in m]
    assert urls and all(f"{PREFIXED}namespaces/{catalog_namespace}/" in m for m in urls), urls


def test_every_spec_path_starts_with_a_reserved_segment() -> None:
    for operation in SPEC_OPERATIONS:
        first = operation.path.removeprefix("/v1/").removeprefix("{prefix}/").split("/")[0]
        assert first in UNPREFIXED_SEGMENTS, operation.path
