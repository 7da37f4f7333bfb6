"""Regressions found by the schemathesis run (test_catalog_schemathesis.py): each was a 500.

Every request here is the minimal form of one the fuzzer sent; the answer must be the spec's
4xx ``IcebergErrorResponse``, never an internal server error.
"""

from __future__ import annotations

from urllib.parse import quote

import httpx
import pytest

BLANK_PARTS = ("\t", "\x1c", "  ")  # pyiceberg refuses parts that strip() to ""


def _error(response: httpx.Response, code: int) -> dict:
    assert response.status_code == code, response.text
    body = response.json()["error"]
    assert body["code"] == code
    return body


def test_namespace_properties_must_be_strings(catalog_server, catalog_namespace) -> None:
    base = f"{catalog_server.uri}/v1/namespaces"
    created = httpx.post(base, json={"namespace": ["fz_props"], "properties": {"a": {}}})
    assert _error(created, 400)["type"] == "BadRequestException"
    assert httpx.head(f"{base}/fz_props").status_code == 404  # nothing half written
    updated = httpx.post(f"{base}/{catalog_namespace}/properties", json={"updates": {"a": [1]}})
    assert _error(updated, 400)["type"] == "BadRequestException"
    ok = httpx.post(base, json={"namespace": ["fz_props"], "properties": {"a": "1"}})
    assert ok.status_code == 200 and ok.json()["properties"] == {"a": "1"}


@pytest.mark.parametrize("blank", BLANK_PARTS)
@pytest.mark.parametrize("path", ["tables/t", "views/v"])  # tableExists, viewExists
def test_head_with_blank_namespace_part_is_not_found(catalog_server, blank, path) -> None:
    response = httpx.head(f"{catalog_server.uri}/v1/namespaces/{quote(blank)}/{path}")
    assert response.status_code == 404


@pytest.mark.parametrize("blank", BLANK_PARTS)
def test_fetch_plan_with_blank_namespace_part_is_not_found(catalog_server, blank) -> None:
    url = f"{catalog_server.uri}/v1/namespaces/{quote(blank)}/tables/t/plan/p1"
    assert _error(httpx.get(url), 404)["type"] == "NoSuchTableException"


@pytest.mark.parametrize("blank", BLANK_PARTS)
def test_create_namespace_with_blank_part_is_bad_request(catalog_server, blank) -> None:
    response = httpx.post(f"{catalog_server.uri}/v1/namespaces", json={"namespace": [blank]})
    assert _error(response, 400)["type"] == "BadRequestException"


def _schema_with_default(default: object, field_type: object) -> dict:
    field = {"id": 1, "name": "x", "type": field_type, "required": False,
             "initial-default": default}
    return {"type": "struct", "schema-id": 0, "fields": [field]}


def test_undeserializable_field_default_is_bad_request(catalog_server, catalog_namespace) -> None:
    # pyiceberg raises TypeError deserializing a struct default, which pydantic lets through.
    schema = _schema_with_default(False, {"type": "struct", "fields": []})
    base = f"{catalog_server.uri}/v1/namespaces/{catalog_namespace}"
    table = httpx.post(f"{base}/tables", json={"name": "t_default", "schema": schema})
    assert _error(table, 400)["type"] == "BadRequestException"
    view_version = {
        "version-id": 1, "timestamp-ms": 0, "schema-id": 0, "summary": {},
        "representations": [{"type": "sql", "sql": "SELECT 1", "dialect": "spark"}],
        "default-namespace": [catalog_namespace],
    }
    view = httpx.post(
        f"{base}/views", json={"name": "v_default", "schema": schema, "view-version": view_version}
    )
    assert _error(view, 400)["type"] == "BadRequestException"
    commit = httpx.post(
        f"{base}/views/v_default",
        json={"updates": [{"action": "add-schema", "schema": schema}]},
    )
    assert _error(commit, 400)["type"] == "BadRequestException"


def _view_version(namespace: str) -> dict:
    return {
        "version-id": 1, "timestamp-ms": 0, "schema-id": 0, "summary": {},
        "representations": [{"type": "sql", "sql": "SELECT 1", "dialect": "spark"}],
        "default-namespace": [namespace],
    }


@pytest.mark.parametrize("name", ["a\x00b", "\x00"])
def test_nul_in_a_name_is_bad_request(catalog_server, catalog_namespace, name) -> None:
    # The name becomes a folder of the default location: no file system takes a NUL.
    base = f"{catalog_server.uri}/v1/namespaces"
    namespace = httpx.post(base, json={"namespace": [name]})
    assert _error(namespace, 400)["type"] == "BadRequestException"
    schema = {"type": "struct", "schema-id": 0, "fields": []}
    table = httpx.post(f"{base}/{catalog_namespace}/tables", json={"name": name, "schema": schema})
    assert _error(table, 400)["type"] == "BadRequestException"
    view = httpx.post(
        f"{base}/{catalog_namespace}/views",
        json={"name": name, "schema": schema, "view-version": _view_version(catalog_namespace)},
    )
    assert _error(view, 400)["type"] == "BadRequestException"
    assert httpx.get(f"{base}/{catalog_namespace}/tables").json()["identifiers"] == []
    assert httpx.get(f"{base}/{catalog_namespace}/views").json()["identifiers"] == []


def test_list_type_without_an_element_type_is_bad_request(catalog_server,
                                                          catalog_namespace) -> None:
    # pyiceberg raises KeyError('element_type') for a list whose element is not a type.
    field_type = {"type": "list", "element-id": 2, "element": "", "element-required": True}
    schema = {"type": "struct", "schema-id": 0,
              "fields": [{"id": 1, "name": "x", "type": field_type, "required": False}]}
    base = f"{catalog_server.uri}/v1/namespaces/{catalog_namespace}"
    table = httpx.post(f"{base}/tables", json={"name": "t_element", "schema": schema})
    assert _error(table, 400)["type"] == "BadRequestException"
    assert httpx.head(f"{base}/tables/t_element").status_code == 404  # nothing half written


def _list_of(element: object, element_id: int) -> dict:
    return {"type": "list", "element-id": element_id, "element": element,
            "element-required": False}


EMPTY_STRUCT = {"type": "struct", "fields": []}


@pytest.mark.parametrize("field_type", [
    _list_of(EMPTY_STRUCT, 2),
    _list_of(_list_of(EMPTY_STRUCT, 3), 2),
    {"type": "map", "key-id": 2, "key": "string", "value-id": 3,
     "value": _list_of(EMPTY_STRUCT, 4), "value-required": False},
], ids=["list", "list-of-list", "map-of-list"])
def test_list_of_an_empty_struct_is_bad_request(catalog_server, catalog_namespace,
                                                field_type) -> None:
    # pyiceberg's ListType(element=StructType()) raises KeyError('element_type') (an empty
    # struct is falsy) when new_table_metadata assigns fresh ids: found with auth on.
    schema = {"type": "struct", "schema-id": 0,
              "fields": [{"id": 1, "name": "x", "type": field_type, "required": False}]}
    base = f"{catalog_server.uri}/v1/namespaces/{catalog_namespace}"
    table = httpx.post(f"{base}/tables", json={"name": "t_empty", "schema": schema})
    assert _error(table, 400)["type"] == "BadRequestException"
    assert httpx.head(f"{base}/tables/t_empty").status_code == 404  # nothing half written
    plain = {"type": "struct", "schema-id": 0,
             "fields": [{"id": 1, "name": "x", "type": "int", "required": False}]}
    assert httpx.post(f"{base}/tables", json={"name": "t_ok", "schema": plain}).status_code == 200
    added = httpx.post(f"{base}/tables/t_ok", json={
        "updates": [{"action": "add-schema", "schema": {**schema, "schema-id": 1}}]})
    assert _error(added, 400)["type"] == "BadRequestException"  # the same rule for commits


def test_empty_struct_outside_a_list_is_accepted(catalog_server, catalog_namespace) -> None:
    fields = [{"id": 1, "name": "s", "type": EMPTY_STRUCT, "required": False},
              {"id": 2, "name": "m", "type": {"type": "map", "key-id": 3, "key": "string",
                                              "value-id": 4, "value": EMPTY_STRUCT,
                                              "value-required": False}, "required": False}]
    schema = {"type": "struct", "schema-id": 0, "fields": fields}
    base = f"{catalog_server.uri}/v1/namespaces/{catalog_namespace}"
    created = httpx.post(f"{base}/tables", json={"name": "t_structs", "schema": schema})
    assert created.status_code == 200, created.text


@pytest.mark.parametrize("updates", [False, True, ["a"], "a=1"], ids=repr)
def test_set_properties_that_are_not_an_object_is_bad_request(catalog_server, catalog_namespace,
                                                              updates) -> None:
    # pyiceberg's SetPropertiesUpdate validator calls .items() on ``updates``: AttributeError
    # (found with 400 examples per operation, on a view commit).
    base = f"{catalog_server.uri}/v1/namespaces/{catalog_namespace}"
    schema = {"type": "struct", "schema-id": 0,
              "fields": [{"id": 1, "name": "x", "type": "int", "required": False}]}
    assert httpx.post(f"{base}/tables", json={"name": "t_props", "schema": schema}
                      ).status_code == 200
    assert httpx.post(f"{base}/views", json={"name": "v_props", "schema": schema,
                                             "view-version": _view_version(catalog_namespace)}
                      ).status_code == 200
    bad = {"updates": [{"action": "set-properties", "updates": updates}]}
    for path in ("tables/t_props", "views/v_props"):
        assert _error(httpx.post(f"{base}/{path}", json=bad), 400)["type"] == \
            "BadRequestException", path
        loaded = httpx.get(f"{base}/{path}").json()["metadata"]
        assert "a" not in loaded.get("properties", {}), path  # nothing half written
