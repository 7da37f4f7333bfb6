"""Iceberg views through the catalog: pyiceberg RestCatalog and raw HTTP, SQLite and PostgreSQL."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from threading import Barrier
from typing import Any

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import (
    NamespaceNotEmptyError,
    NoSuchTableError,
    NoSuchViewError,
    TableAlreadyExistsError,
)
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType
from pyiceberg.view.metadata import SQLViewRepresentation, ViewRepresentation, ViewVersion

from catalog_api.core.config import local_path
from tests.conftest_catalog import CatalogServerHandle

SCHEMA = {
    "type": "struct",
    "schema-id": 7,
    "fields": [{"id": 1, "name": "carrier", "type": "string", "required": False}],
}
SCHEMA_2 = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "carrier", "type": "string", "required": False},
        {"id": 2, "name": "delay", "type": "long", "required": False},
    ],
}


#: One client for the module: building an ``httpx.Client`` costs ~60 ms (TLS context).
HTTP = httpx.Client(timeout=60)


@pytest.fixture(scope="module", autouse=True)
def _close_http() -> Iterator[None]:
    yield
    HTTP.close()


def _version(
    sql: str, namespace: str, schema_id: int = 0, dialect: str = "spark"
) -> dict[str, Any]:
    return {
        "version-id": 1,
        "timestamp-ms": 1_700_000_000_000,
        "schema-id": schema_id,
        "summary": {"engine-name": dialect},
        "representations": [{"type": "sql", "sql": sql, "dialect": dialect}],
        "default-namespace": [namespace],
    }


def _create_body(name: str, namespace: str, sql: str = "SELECT carrier FROM f") -> dict[str, Any]:
    return {
        "name": name,
        "schema": SCHEMA,
        "view-version": _version(sql, namespace, schema_id=7),
        "properties": {"comment": "test view"},
    }


def _assert_error(response: httpx.Response, code: int, error_type: str) -> None:
    assert response.status_code == code, response.text
    error = response.json()["error"]
    assert (error["code"], error["type"]) == (code, error_type)
    assert error["message"] and "Traceback" not in response.text


def _views_url(server: CatalogServerHandle, namespace: str) -> str:
    return f"{server.uri}/v1/namespaces/{namespace}/views"


def _new_namespace(server: CatalogServerHandle) -> str:
    name = f"ns_{uuid.uuid4().hex[:10]}"
    response = HTTP.post(f"{server.uri}/v1/namespaces", json={"namespace": [name]})
    assert response.status_code == 200, response.text
    return name


def _create(server: CatalogServerHandle, namespace: str, name: str, **kw: Any) -> dict[str, Any]:
    response = HTTP.post(_views_url(server, namespace), json=_create_body(name, namespace, **kw))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _commit(
    server: CatalogServerHandle, namespace: str, name: str, body: dict[str, Any]
) -> httpx.Response:
    return HTTP.post(f"{_views_url(server, namespace)}/{name}", json=body, timeout=30)


# --------------------------------------------------------------------- pyiceberg client


def test_view_lifecycle_with_pyiceberg(backend_catalog_server: CatalogServerHandle) -> None:
    server = backend_catalog_server
    catalog = RestCatalog("views", uri=server.uri)
    namespace = _new_namespace(server)
    schema = Schema(NestedField(1, "carrier", StringType(), required=False))
    sql = "SELECT carrier, count(*) FROM flights GROUP BY carrier"
    version = ViewVersion(
        schema_id=3,
        representations=[
            ViewRepresentation(SQLViewRepresentation(type="sql", sql=sql, dialect="spark"))
        ],
        default_namespace=[namespace],
    )
    created = catalog.create_view(f"{namespace}.by_carrier", schema, version, properties={"a": "1"})
    assert created.current_version().version_id == 1
    assert created.current_version().schema_id == 0 and created.schema().schema_id == 0
    assert created.properties == {"a": "1"}
    assert created.location().endswith(f"/{namespace}/by_carrier")

    assert catalog.list_views(namespace) == [(namespace, "by_carrier")]
    assert catalog.list_tables(namespace) == []
    assert catalog.view_exists(f"{namespace}.by_carrier")
    assert not catalog.view_exists(f"{namespace}.other")
    loaded = catalog.load_view(f"{namespace}.by_carrier")
    assert loaded.sql_for("SPARK") is not None and loaded.sql_for("spark").sql == sql
    assert loaded.uuid() == created.uuid()

    with pytest.raises(NoSuchViewError):
        catalog.load_view(f"{namespace}.other")
    catalog.drop_view(f"{namespace}.by_carrier")
    assert catalog.list_views(namespace) == []
    with pytest.raises(NoSuchViewError):
        catalog.drop_view(f"{namespace}.by_carrier")


def test_metadata_is_a_json_file_in_the_warehouse(catalog_server: CatalogServerHandle) -> None:
    namespace = _new_namespace(catalog_server)
    created = _create(catalog_server, namespace, "v")
    location = created["metadata-location"]
    assert location.startswith(catalog_server.warehouse.as_uri())
    assert location.endswith(".metadata.json") and "/metadata/00000-" in location
    on_disk = json.loads(local_path(location).read_text())
    assert on_disk == created["metadata"]
    assert on_disk["format-version"] == 1 and on_disk["current-version-id"] == 1
    assert on_disk["version-log"] == [{"timestamp-ms": 1_700_000_000_000, "version-id": 1}]


# ------------------------------------------------------------------------------ listing


def test_list_views_pagination(catalog_server: CatalogServerHandle) -> None:
    namespace = _new_namespace(catalog_server)
    names = [f"v{i}" for i in range(5)]
    for name in reversed(names):
        _create(catalog_server, namespace, name)
    url = _views_url(catalog_server, namespace)

    everything = HTTP.get(url, params={"pageSize": 2}).json()
    assert [e["name"] for e in everything["identifiers"]] == names
    assert everything.get("next-page-token") is None

    seen, token, pages = [], "", 0
    while token is not None:
        page = HTTP.get(url, params={"pageToken": token, "pageSize": 2}).json()
        assert len(page["identifiers"]) <= 2
        seen += [e["name"] for e in page["identifiers"]]
        token, pages = page.get("next-page-token"), pages + 1
    assert seen == names and pages == 3

    _assert_error(HTTP.get(url, params={"pageToken": "garbage!"}), 400, "BadRequestException")
    _assert_error(
        HTTP.get(url, params={"pageToken": "", "pageSize": 0}), 400, "BadRequestException"
    )
    paged_client = RestCatalog("paged", uri=catalog_server.uri, **{"rest-page-size": "2"})
    assert paged_client.list_views(namespace) == [(namespace, n) for n in names]
    _assert_error(
        HTTP.get(_views_url(catalog_server, "missing_ns")), 404, "NoSuchNamespaceException"
    )


# ---------------------------------------------------------------------------- replacing


def test_replace_view_applies_every_update(catalog_server: CatalogServerHandle) -> None:
    namespace = _new_namespace(catalog_server)
    created = _create(catalog_server, namespace, "v")
    view_uuid = created["metadata"]["view-uuid"]
    new_sql = "SELECT carrier, avg(delay) FROM f GROUP BY carrier"
    body = {
        "identifier": {"namespace": [namespace], "name": "v"},
        "requirements": [{"type": "assert-view-uuid", "uuid": view_uuid}],
        "updates": [
            {"action": "assign-uuid", "uuid": view_uuid},
            {"action": "upgrade-format-version", "format-version": 1},
            {"action": "add-schema", "schema": SCHEMA_2, "last-column-id": 2},
            {"action": "add-view-version", "view-version": _version(new_sql, namespace, -1)},
            {"action": "set-current-view-version", "view-version-id": -1},
            {"action": "set-location", "location": f"{catalog_server.warehouse.as_uri()}/moved"},
            {"action": "set-properties", "updates": {"owner": "ops", "k": "v"}},
            {"action": "remove-properties", "removals": ["comment", "absent"]},
        ],
    }
    response = _commit(catalog_server, namespace, "v", body)
    assert response.status_code == 200, response.text
    result = response.json()
    metadata = result["metadata"]
    assert result["metadata-location"] != created["metadata-location"]
    assert "/moved/metadata/00001-" in result["metadata-location"]
    assert [s["schema-id"] for s in metadata["schemas"]] == [0, 1]
    assert [v["version-id"] for v in metadata["versions"]] == [1, 2]
    assert metadata["versions"][1]["schema-id"] == 1
    assert metadata["current-version-id"] == 2
    assert [e["version-id"] for e in metadata["version-log"]] == [1, 2]
    assert metadata["properties"] == {"owner": "ops", "k": "v"}
    assert metadata["location"].endswith("/moved") and metadata["view-uuid"] == view_uuid

    loaded = RestCatalog("c", uri=catalog_server.uri).load_view(f"{namespace}.v")
    assert loaded.sql_for("spark").sql == new_sql
    assert [f.name for f in loaded.schema().fields] == ["carrier", "delay"]
    # Back to version 1, then re-adding its definition reuses id 1 instead of creating 3.
    back = {"updates": [{"action": "set-current-view-version", "view-version-id": 1}]}
    assert (
        _commit(catalog_server, namespace, "v", back).json()["metadata"]["current-version-id"] == 1
    )
    again = {
        "updates": [
            {"action": "add-view-version", "view-version": _version(new_sql, namespace, 1)},
            {"action": "set-current-view-version", "view-version-id": -1},
        ]
    }
    final = _commit(catalog_server, namespace, "v", again).json()["metadata"]
    assert final["current-version-id"] == 2 and len(final["versions"]) == 2
    assert [e["version-id"] for e in final["version-log"]] == [1, 2, 1, 2]


def test_history_keeps_newest_versions(catalog_server: CatalogServerHandle) -> None:
    namespace = _new_namespace(catalog_server)
    _create(catalog_server, namespace, "v")
    props = {
        "updates": [{"action": "set-properties", "updates": {"version.history.num-entries": "2"}}]
    }
    assert _commit(catalog_server, namespace, "v", props).status_code == 200
    for i in range(3):
        body = {
            "updates": [
                {"action": "add-view-version", "view-version": _version(f"SELECT {i}", namespace)},
                {"action": "set-current-view-version", "view-version-id": -1},
            ]
        }
        assert _commit(catalog_server, namespace, "v", body).status_code == 200
    metadata = HTTP.get(f"{_views_url(catalog_server, namespace)}/v").json()["metadata"]
    assert [v["version-id"] for v in metadata["versions"]] == [3, 4]
    assert metadata["current-version-id"] == 4
    assert {e["version-id"] for e in metadata["version-log"]} <= {3, 4}


def test_wrong_view_uuid_is_409_and_changes_nothing(catalog_server: CatalogServerHandle) -> None:
    namespace = _new_namespace(catalog_server)
    created = _create(catalog_server, namespace, "v")
    body = {
        "requirements": [{"type": "assert-view-uuid", "uuid": str(uuid.uuid4())}],
        "updates": [{"action": "set-properties", "updates": {"k": "v"}}],
    }
    _assert_error(_commit(catalog_server, namespace, "v", body), 409, "CommitFailedException")
    loaded = HTTP.get(f"{_views_url(catalog_server, namespace)}/v").json()
    assert loaded["metadata-location"] == created["metadata-location"]
    assert "k" not in loaded["metadata"]["properties"]


@pytest.mark.parametrize(
    "updates",
    [
        [{"action": "frobnicate-view"}],
        [{"action": "add-spec", "spec": {"spec-id": 1, "fields": []}}],
        [{"action": "set-current-view-version", "view-version-id": 99}],
        [{"action": "set-current-view-version", "view-version-id": -1}],
        [{"action": "add-view-version", "view-version": _version("SELECT 1", "x", -1)}],
        [{"action": "add-view-version", "view-version": _version("SELECT 1", "x", 42)}],
        [{"action": "upgrade-format-version", "format-version": 2}],
        [{"action": "assign-uuid", "uuid": "00000000-0000-0000-0000-000000000001"}],
    ],
    ids=[
        "unknown-action",
        "table-only-update",
        "unknown-version",
        "no-version-added",
        "no-schema-added",
        "unknown-schema",
        "format-version-2",
        "reassign-uuid",
    ],
)
def test_invalid_view_updates_are_400(
    catalog_server: CatalogServerHandle, updates: list[dict[str, Any]]
) -> None:
    namespace = _new_namespace(catalog_server)
    created = _create(catalog_server, namespace, "v")
    response = _commit(catalog_server, namespace, "v", {"updates": updates})
    _assert_error(response, 400, "BadRequestException")
    loaded = HTTP.get(f"{_views_url(catalog_server, namespace)}/v").json()
    assert loaded["metadata-location"] == created["metadata-location"]


def test_commit_errors(catalog_server: CatalogServerHandle) -> None:
    namespace = _new_namespace(catalog_server)
    _create(catalog_server, namespace, "v")
    unknown_requirement = {"requirements": [{"type": "assert-nothing"}], "updates": []}
    _assert_error(
        _commit(catalog_server, namespace, "v", unknown_requirement), 400, "BadRequestException"
    )
    _assert_error(_commit(catalog_server, namespace, "v", {}), 400, "BadRequestException")
    empty = {"updates": []}
    _assert_error(_commit(catalog_server, namespace, "missing", empty), 404, "NoSuchViewException")


def test_view_mutations_honour_idempotency_key(catalog_server: CatalogServerHandle) -> None:
    namespace = _new_namespace(catalog_server)
    _create(catalog_server, namespace, "v")
    key = {"Idempotency-Key": str(uuid.uuid4())}
    body = {"updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
    url = f"{_views_url(catalog_server, namespace)}/v"
    first = HTTP.post(url, json=body, headers=key)
    assert first.status_code == 200, first.text
    retry = HTTP.post(url, json=body, headers=key)
    assert retry.content == first.content and retry.headers["Idempotency-Replayed"] == "true"
    versions = [p.name for p in (catalog_server.warehouse / namespace / "v" / "metadata").iterdir()]
    assert len(versions) == 2  # the retry wrote no third metadata file
    drop_key = {"Idempotency-Key": str(uuid.uuid4())}
    assert HTTP.delete(url, headers=drop_key).status_code == 204
    again = HTTP.delete(url, headers=drop_key)
    assert again.status_code == 204 and again.headers["Idempotency-Replayed"] == "true"
    _assert_error(HTTP.delete(url), 404, "NoSuchViewException")


# ----------------------------------------------------------------- rename, register, drop


def test_rename_view(catalog_server: CatalogServerHandle, rest_catalog: RestCatalog) -> None:
    namespace, other = _new_namespace(catalog_server), _new_namespace(catalog_server)
    created = _create(catalog_server, namespace, "v")
    _create(catalog_server, namespace, "taken")
    rest_catalog.create_table(f"{namespace}.table", Schema(NestedField(1, "x", LongType())))
    url = f"{catalog_server.uri}/v1/views/rename"

    def rename(src: tuple[str, str], dst: tuple[str, str]) -> httpx.Response:
        return HTTP.post(
            url,
            json={
                "source": {"namespace": [src[0]], "name": src[1]},
                "destination": {"namespace": [dst[0]], "name": dst[1]},
            },
        )

    assert rename((namespace, "v"), (namespace, "w")).status_code == 204
    assert rename((namespace, "w"), (other, "moved")).status_code == 204
    assert rest_catalog.list_views(namespace) == [(namespace, "taken")]
    moved = rest_catalog.load_view(f"{other}.moved")
    assert str(moved.uuid()) == created["metadata"]["view-uuid"]
    _assert_error(rename((namespace, "v"), (namespace, "x")), 404, "NoSuchViewException")
    _assert_error(rename((other, "moved"), ("no_such_ns", "x")), 404, "NoSuchNamespaceException")
    _assert_error(rename((other, "moved"), (namespace, "taken")), 409, "AlreadyExistsException")
    _assert_error(rename((other, "moved"), (namespace, "table")), 409, "AlreadyExistsException")
    assert rest_catalog.view_exists(f"{other}.moved")


def test_register_view(catalog_server: CatalogServerHandle, rest_catalog: RestCatalog) -> None:
    namespace = _new_namespace(catalog_server)
    created = _create(catalog_server, namespace, "v")
    rest_catalog.drop_view(f"{namespace}.v")
    registered = rest_catalog.register_view(f"{namespace}.again", created["metadata-location"])
    assert str(registered.uuid()) == created["metadata"]["view-uuid"]
    assert rest_catalog.load_view(f"{namespace}.again").metadata.model_dump() == (
        registered.metadata.model_dump()
    )
    url = f"{catalog_server.uri}/v1/namespaces/{namespace}/register-view"
    body = {"name": "again", "metadata-location": created["metadata-location"]}
    _assert_error(HTTP.post(url, json=body), 409, "AlreadyExistsException")
    missing = {"name": "x", "metadata-location": f"{catalog_server.warehouse.as_uri()}/nope.json"}
    _assert_error(HTTP.post(url, json=missing), 400, "BadRequestException")
    bad_ns = f"{catalog_server.uri}/v1/namespaces/no_such_ns/register-view"
    _assert_error(HTTP.post(bad_ns, json=body), 404, "NoSuchNamespaceException")


def test_views_and_tables_share_names(backend_catalog_server: CatalogServerHandle) -> None:
    server = backend_catalog_server
    catalog = RestCatalog("names", uri=server.uri)
    namespace = _new_namespace(server)
    catalog.create_table(f"{namespace}.t", pa.schema([pa.field("x", pa.int64())]))
    _assert_error(
        HTTP.post(_views_url(server, namespace), json=_create_body("t", namespace)),
        409,
        "AlreadyExistsException",
    )
    _create(server, namespace, "v")
    with pytest.raises(TableAlreadyExistsError):
        catalog.create_table(f"{namespace}.v", pa.schema([pa.field("x", pa.int64())]))
    with pytest.raises(TableAlreadyExistsError):
        catalog.rename_table(f"{namespace}.t", f"{namespace}.v")
    with pytest.raises(NoSuchTableError):
        catalog.load_table(f"{namespace}.v")
    with pytest.raises(NoSuchViewError):
        catalog.load_view(f"{namespace}.t")
    assert catalog.list_tables(namespace) == [(namespace, "t")]
    assert catalog.list_views(namespace) == [(namespace, "v")]
    assert not catalog.table_exists(f"{namespace}.v") and not catalog.view_exists(f"{namespace}.t")


def test_namespace_holding_a_view_is_not_empty(catalog_server: CatalogServerHandle) -> None:
    catalog = RestCatalog("ns", uri=catalog_server.uri)
    namespace = _new_namespace(catalog_server)
    _create(catalog_server, namespace, "v")
    with pytest.raises(NamespaceNotEmptyError):
        catalog.drop_namespace(namespace)
    catalog.drop_view(f"{namespace}.v")
    catalog.drop_namespace(namespace)
    assert not catalog.namespace_exists(namespace)


def test_view_exists_and_missing_namespace(catalog_server: CatalogServerHandle) -> None:
    namespace = _new_namespace(catalog_server)
    _create(catalog_server, namespace, "v")
    assert HTTP.head(f"{_views_url(catalog_server, namespace)}/v").status_code == 204
    assert HTTP.head(f"{_views_url(catalog_server, namespace)}/w").status_code == 404
    response = HTTP.post(_views_url(catalog_server, "no_such_ns"), json=_create_body("v", "x"))
    _assert_error(response, 404, "NoSuchNamespaceException")
    duplicate = HTTP.post(_views_url(catalog_server, namespace), json=_create_body("v", namespace))
    _assert_error(duplicate, 409, "AlreadyExistsException")
    two_dialects = _create_body("w", namespace)
    two_dialects["view-version"]["representations"] *= 2
    _assert_error(
        HTTP.post(_views_url(catalog_server, namespace), json=two_dialects),
        400,
        "BadRequestException",
    )


# --------------------------------------------------------------------------- concurrency


def test_concurrent_view_commits_lose_nothing(backend_catalog_server: CatalogServerHandle) -> None:
    server = backend_catalog_server
    namespace = _new_namespace(server)
    _create(server, namespace, "v")
    writers = 8
    start = Barrier(writers)

    def add_version(i: int) -> list[int]:
        body = {
            "updates": [
                {"action": "add-view-version", "view-version": _version(f"SELECT {i}", namespace)},
                {"action": "set-current-view-version", "view-version-id": -1},
            ]
        }
        start.wait()
        codes = []
        while not codes or codes[-1] != 200:
            response = _commit(server, namespace, "v", body)
            if response.status_code != 200:
                _assert_error(response, 409, "CommitFailedException")
            codes.append(response.status_code)
        return codes

    with ThreadPoolExecutor(max_workers=writers) as pool:
        attempts = list(pool.map(add_version, range(writers)))
    assert all(codes[-1] == 200 for codes in attempts)
    metadata = HTTP.get(f"{_views_url(server, namespace)}/v").json()["metadata"]
    sqls = {v["representations"][0]["sql"] for v in metadata["versions"]}
    assert {f"SELECT {i}" for i in range(writers)} <= sqls
    assert len(metadata["versions"]) == writers + 1
    assert len(metadata["version-log"]) == writers + 1
