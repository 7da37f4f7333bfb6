"""The catalog app on loopback, one server per test, with a real SQLite file and warehouse."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from catalog_api import CatalogError, CatalogSettings, serve_in_thread
from catalog_api.deps import split_namespace
from catalog_api.errors import BadRequestError


def _settings(tmp_path: Path, **extra: object) -> CatalogSettings:
    return CatalogSettings(
        warehouse=str(tmp_path / "wh"), database_url=f"sqlite:///{tmp_path / 'c.db'}", **extra
    )


@pytest.fixture
def client(tmp_path: Path) -> Iterator[httpx.Client]:
    server = serve_in_thread(_settings(tmp_path, max_body_bytes=4096))
    try:
        with httpx.Client(base_url=server.base_url) as http:
            yield http
    finally:
        server.stop()


SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}


def test_settings_turn_paths_into_file_uris(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    assert settings.warehouse == (tmp_path / "wh").resolve().as_uri()
    assert settings.warehouse_is_local
    s3 = CatalogSettings(warehouse="s3://bucket/wh/", database_url="sqlite://")
    assert s3.warehouse == "s3://bucket/wh" and not s3.warehouse_is_local


def test_split_namespace() -> None:
    assert split_namespace("") == ()
    assert split_namespace("a\x1fb") == ("a", "b")


def test_errors_are_catalog_errors() -> None:
    assert issubclass(BadRequestError, CatalogError)
    assert BadRequestError.code == 400 and BadRequestError.error_type == "BadRequestException"


def test_health_and_docs(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/iceberg/docs").status_code == 200


def test_create_table_without_location_key(client: httpx.Client, tmp_path: Path) -> None:
    assert client.post("/iceberg/v1/namespaces", json={"namespace": ["a", "b"]}).status_code == 200
    response = client.post(
        "/iceberg/v1/namespaces/a%1Fb/tables", json={"name": "t", "schema": SCHEMA}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["metadata"]["location"] == (tmp_path / "wh" / "a" / "b" / "t").resolve().as_uri()
    assert body["metadata-location"].endswith(".metadata.json")
    listed = client.get("/iceberg/v1/namespaces", params={"parent": "a"}).json()
    assert listed["namespaces"] == [["a", "b"]]


def test_namespace_with_dot_is_rejected(client: httpx.Client) -> None:
    response = client.post("/iceberg/v1/namespaces", json={"namespace": ["a.b"]})
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "BadRequestException"


def test_overlapping_property_update_is_422(client: httpx.Client) -> None:
    client.post("/iceberg/v1/namespaces", json={"namespace": ["n"]})
    body = {"removals": ["k"], "updates": {"k": "v"}}
    response = client.post("/iceberg/v1/namespaces/n/properties", json=body)
    assert response.status_code == 422
    assert response.json()["error"]["type"] == "UnprocessableEntityException"


def test_body_too_large_is_413(client: httpx.Client) -> None:
    body = {"namespace": ["n"], "properties": {"k": "x" * 10_000}}
    response = client.post("/iceberg/v1/namespaces", json=body)
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "PayloadTooLargeException"


def test_unexpected_failure_is_500_without_traceback(client: httpx.Client, tmp_path: Path) -> None:
    client.post("/iceberg/v1/namespaces", json={"namespace": ["n"]})
    created = client.post("/iceberg/v1/namespaces/n/tables", json={"name": "t", "schema": SCHEMA})
    metadata_file = Path(created.json()["metadata-location"].removeprefix("file://"))
    metadata_file.unlink()  # the catalog row now points at a file that is gone
    response = client.get("/iceberg/v1/namespaces/n/tables/t")
    assert response.status_code == 500
    error = response.json()["error"]
    assert error == {"message": error["message"], "type": "InternalServerError", "code": 500}
    assert "Traceback" not in response.text and str(tmp_path) not in response.text


def test_register_unreadable_metadata_is_400(client: httpx.Client, tmp_path: Path) -> None:
    client.post("/iceberg/v1/namespaces", json={"namespace": ["n"]})
    body = {"name": "t", "metadata-location": (tmp_path / "nope.metadata.json").as_uri()}
    response = client.post("/iceberg/v1/namespaces/n/register", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "BadRequestException"
