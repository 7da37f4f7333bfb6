"""Polaris-shaped generic tables (Delta copies of views) over HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import NamespaceNotEmptyError, TableAlreadyExistsError

from tests.conftest_catalog import CatalogServerHandle

#: One client for the module: building an ``httpx.Client`` costs ~60 ms (TLS context).
HTTP = httpx.Client(timeout=60)


@pytest.fixture(scope="module", autouse=True)
def _close_http() -> Iterator[None]:
    yield
    HTTP.close()


def _assert_error(response: httpx.Response, code: int, error_type: str) -> None:
    assert response.status_code == code, response.text
    error = response.json()["error"]
    assert (error["code"], error["type"]) == (code, error_type)
    assert error["message"] and "Traceback" not in response.text


def _tables_url(server: CatalogServerHandle, namespace: str) -> str:
    return f"{server.uri}/polaris/v1/namespaces/{namespace}/generic-tables"


def _new_namespace(server: CatalogServerHandle) -> str:
    name = f"ns_{uuid.uuid4().hex[:10]}"
    assert HTTP.post(f"{server.uri}/v1/namespaces", json={"namespace": [name]}).status_code == 200
    return name


def _create(
    server: CatalogServerHandle, namespace: str, name: str, **fields: Any
) -> httpx.Response:
    body = {"name": name, "format": "delta", **fields}
    return HTTP.post(_tables_url(server, namespace), json=body)


def test_generic_table_lifecycle(backend_catalog_server: CatalogServerHandle) -> None:
    server = backend_catalog_server
    namespace = _new_namespace(server)
    location = f"{server.warehouse.as_uri()}/delta/{namespace}/by_carrier"
    created = _create(
        server,
        namespace,
        "by_carrier_delta",
        **{"base-location": location, "doc": "Delta copy", "properties": {"view": "by_carrier"}},
    )
    assert created.status_code == 200, created.text
    expected = {
        "name": "by_carrier_delta",
        "format": "delta",
        "base-location": location,
        "doc": "Delta copy",
        "properties": {"view": "by_carrier"},
    }
    assert created.json()["table"] == expected

    url = f"{_tables_url(server, namespace)}/by_carrier_delta"
    assert HTTP.get(url).json()["table"] == expected
    listed = HTTP.get(_tables_url(server, namespace)).json()
    assert listed["identifiers"] == [{"namespace": [namespace], "name": "by_carrier_delta"}]

    assert HTTP.delete(url).status_code == 204
    _assert_error(HTTP.get(url), 404, "NoSuchTableException")
    _assert_error(HTTP.delete(url), 404, "NoSuchTableException")
    assert HTTP.get(_tables_url(server, namespace)).json()["identifiers"] == []


def test_registered_delta_table_is_readable_from_its_location(
    catalog_server: CatalogServerHandle,
) -> None:
    namespace = _new_namespace(catalog_server)
    folder = catalog_server.warehouse / "delta" / namespace / "v"
    rows = pa.table({"carrier": ["AA", "UA"], "flights": [3, 5]})
    write_deltalake(str(folder), rows)
    created = _create(catalog_server, namespace, "v_delta", **{"base-location": folder.as_uri()})
    assert created.status_code == 200, created.text
    loaded = HTTP.get(f"{_tables_url(catalog_server, namespace)}/v_delta").json()["table"]
    assert loaded["format"] == "delta" and "doc" not in loaded and loaded["properties"] == {}
    table = DeltaTable(loaded["base-location"])
    assert table.to_pyarrow_table().sort_by("carrier").to_pydict() == rows.to_pydict()


def test_minimal_table_and_config(catalog_server: CatalogServerHandle) -> None:
    namespace = _new_namespace(catalog_server)
    response = _create(catalog_server, namespace, "bare")
    assert response.status_code == 200
    assert response.json()["table"] == {"name": "bare", "format": "delta", "properties": {}}
    endpoints = HTTP.get(f"{catalog_server.uri}/v1/config").json()["endpoints"]
    for expected in (
        "GET polaris/v1/{prefix}/namespaces/{namespace}/generic-tables",
        "POST polaris/v1/{prefix}/namespaces/{namespace}/generic-tables",
        "GET polaris/v1/{prefix}/namespaces/{namespace}/generic-tables/{generic-table}",
        "DELETE polaris/v1/{prefix}/namespaces/{namespace}/generic-tables/{generic-table}",
    ):
        assert expected in endpoints


@pytest.mark.parametrize(
    "body",
    [
        {"name": "t"},
        {"name": "", "format": "delta"},
        {"format": "delta"},
        {"name": "t", "format": ""},
    ],
    ids=["no-format", "empty-name", "no-name", "empty-format"],
)
def test_invalid_create_is_400(catalog_server: CatalogServerHandle, body: dict[str, Any]) -> None:
    namespace = _new_namespace(catalog_server)
    response = HTTP.post(_tables_url(catalog_server, namespace), json=body)
    _assert_error(response, 400, "BadRequestException")


def test_missing_namespace_is_404(catalog_server: CatalogServerHandle) -> None:
    _assert_error(_create(catalog_server, "no_such_ns", "t"), 404, "NoSuchNamespaceException")
    response = HTTP.get(_tables_url(catalog_server, "no_such_ns"))
    _assert_error(response, 404, "NoSuchNamespaceException")


def test_names_are_unique_across_tables_views_and_generic_tables(
    backend_catalog_server: CatalogServerHandle,
) -> None:
    server = backend_catalog_server
    catalog = RestCatalog("generic", uri=server.uri)
    namespace = _new_namespace(server)
    catalog.create_table(f"{namespace}.iceberg", pa.schema([pa.field("x", pa.int64())]))
    view = {
        "name": "view",
        "schema": {"type": "struct", "schema-id": 0, "fields": []},
        "view-version": {
            "version-id": 1,
            "timestamp-ms": 1,
            "schema-id": 0,
            "summary": {},
            "representations": [{"type": "sql", "sql": "SELECT 1", "dialect": "spark"}],
            "default-namespace": [namespace],
        },
        "properties": {},
    }
    assert HTTP.post(f"{server.uri}/v1/namespaces/{namespace}/views", json=view).status_code == 200
    assert _create(server, namespace, "delta").status_code == 200

    for taken in ("iceberg", "view", "delta"):
        _assert_error(_create(server, namespace, taken), 409, "AlreadyExistsException")
    with pytest.raises(TableAlreadyExistsError):
        catalog.create_table(f"{namespace}.delta", pa.schema([pa.field("x", pa.int64())]))
    view["name"] = "delta"
    response = HTTP.post(f"{server.uri}/v1/namespaces/{namespace}/views", json=view)
    _assert_error(response, 409, "AlreadyExistsException")
    assert catalog.list_tables(namespace) == [(namespace, "iceberg")]
    assert catalog.list_views(namespace) == [(namespace, "view")]
    _assert_error(
        HTTP.get(f"{_tables_url(server, namespace)}/iceberg"), 404, "NoSuchTableException"
    )


def test_pagination_and_namespace_not_empty(catalog_server: CatalogServerHandle) -> None:
    catalog = RestCatalog("generic", uri=catalog_server.uri)
    namespace = _new_namespace(catalog_server)
    for name in ("c", "a", "b"):
        assert _create(catalog_server, namespace, name).status_code == 200
    url = _tables_url(catalog_server, namespace)
    first = HTTP.get(url, params={"pageToken": "", "pageSize": 2}).json()
    assert [e["name"] for e in first["identifiers"]] == ["a", "b"]
    second = HTTP.get(url, params={"pageToken": first["next-page-token"], "pageSize": 2}).json()
    assert [e["name"] for e in second["identifiers"]] == ["c"]
    assert second.get("next-page-token") is None

    with pytest.raises(NamespaceNotEmptyError):
        catalog.drop_namespace(namespace)
    for name in ("a", "b", "c"):
        assert HTTP.delete(f"{url}/{name}").status_code == 204
    catalog.drop_namespace(namespace)
