"""The catalog service against pyiceberg's RestCatalog and raw HTTP: real server, real SQLite."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField

from tests.conftest_catalog import CatalogServerHandle

SEP = "%1F"  # the namespace separator, URL-encoded

ARROW_SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])


def _rows(ids: list[int]) -> pa.Table:
    return pa.table({"id": ids, "name": [f"n{i}" for i in ids]}, schema=ARROW_SCHEMA)


def _table_url(server: CatalogServerHandle, namespace: str, table: str) -> str:
    return f"{server.uri}/v1/namespaces/{namespace}/tables/{table}"


def _assert_error(response: httpx.Response, code: int, error_type: str) -> dict[str, Any]:
    assert response.status_code == code, response.text
    error = response.json()["error"]
    assert error["code"] == code
    assert error["type"] == error_type
    assert isinstance(error["message"], str) and error["message"]
    assert "Traceback" not in response.text
    return error


# ----------------------------------------------------------------------------- service


def test_config_shape(catalog_server: CatalogServerHandle) -> None:
    response = httpx.get(f"{catalog_server.uri}/v1/config", params={"warehouse": "wh"})
    assert response.status_code == 200
    body = response.json()
    assert body["defaults"] == {}
    assert body["overrides"] == {
        "warehouse": catalog_server.warehouse.as_uri(),
        "namespace-separator": "%1F",
    }
    endpoints = set(body["endpoints"])
    for expected in (
        "GET /v1/{prefix}/namespaces",
        "HEAD /v1/{prefix}/namespaces/{namespace}",
        "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
        "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
        "POST /v1/{prefix}/tables/rename",
        "POST /v1/{prefix}/transactions/commit",
        "POST /v1/{prefix}/namespaces/{namespace}/register",
    ):
        assert expected in endpoints


def test_docs_openapi_and_health(catalog_server: CatalogServerHandle) -> None:
    assert httpx.get(f"{catalog_server.uri}/docs").status_code == 200
    openapi = httpx.get(f"{catalog_server.uri}/openapi.json")
    assert openapi.status_code == 200
    assert "/iceberg/v1/transactions/commit" in openapi.json()["paths"]
    assert httpx.get(f"{catalog_server.server.base_url}/healthz").status_code == 200


def test_unknown_route_gives_error_model(catalog_server: CatalogServerHandle) -> None:
    _assert_error(httpx.get(f"{catalog_server.uri}/v1/nothing-here"), 404, "NotFoundException")


# -------------------------------------------------------------------------- namespaces


def test_namespace_lifecycle(rest_catalog: RestCatalog) -> None:
    root = f"ns_{uuid.uuid4().hex[:8]}"
    rest_catalog.create_namespace(root, {"owner": "tests"})
    rest_catalog.create_namespace((root, "child"))
    assert (root,) in rest_catalog.list_namespaces()
    assert rest_catalog.list_namespaces(root) == [(root, "child")]
    assert rest_catalog.load_namespace_properties(root)["owner"] == "tests"
    assert rest_catalog.namespace_exists((root, "child"))
    assert not rest_catalog.namespace_exists((root, "missing"))

    summary = rest_catalog.update_namespace_properties(
        root, removals={"owner", "gone"}, updates={"k": "v"}
    )
    assert summary.removed == ["owner"] and summary.updated == ["k"] and summary.missing == ["gone"]
    assert "owner" not in rest_catalog.load_namespace_properties(root)

    with pytest.raises(NamespaceAlreadyExistsError):
        rest_catalog.create_namespace(root)
    with pytest.raises(NamespaceNotEmptyError):
        rest_catalog.drop_namespace(root)
    rest_catalog.drop_namespace((root, "child"))
    rest_catalog.drop_namespace(root)
    assert not rest_catalog.namespace_exists(root)


def test_missing_namespace_errors(rest_catalog: RestCatalog) -> None:
    with pytest.raises(NoSuchNamespaceError):
        rest_catalog.load_namespace_properties("no_such_namespace")
    with pytest.raises(NoSuchNamespaceError):
        rest_catalog.list_tables("no_such_namespace")
    with pytest.raises(NoSuchNamespaceError):
        rest_catalog.drop_namespace("no_such_namespace")
    with pytest.raises(NoSuchNamespaceError):
        rest_catalog.create_table("no_such_namespace.t", ARROW_SCHEMA)


def test_404_types_let_spark_fall_back(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    rest_catalog.create_table(f"{catalog_namespace}.t", ARROW_SCHEMA)
    # Spark asks for `ns.t.snapshots` as namespace `ns\x1ft`, table `snapshots` first.
    response = httpx.get(_table_url(catalog_server, f"{catalog_namespace}{SEP}t", "snapshots"))
    _assert_error(response, 404, "NoSuchTableException")
    response = httpx.get(f"{catalog_server.uri}/v1/namespaces/{catalog_namespace}{SEP}t")
    _assert_error(response, 404, "NoSuchNamespaceException")
    response = httpx.get(f"{catalog_server.uri}/v1/namespaces/{catalog_namespace}{SEP}t/tables")
    _assert_error(response, 404, "NoSuchNamespaceException")


# ------------------------------------------------------------------------------ tables


def test_table_lifecycle(rest_catalog: RestCatalog, catalog_namespace: str, tmp_path: Path) -> None:
    ident = f"{catalog_namespace}.events"
    table = rest_catalog.create_table(ident, ARROW_SCHEMA, properties={"format-version": "2"})
    assert table.metadata.format_version == 2
    assert table.location().endswith(f"/{catalog_namespace}/events")
    assert rest_catalog.list_tables(catalog_namespace) == [(catalog_namespace, "events")]
    assert rest_catalog.table_exists(ident)

    table.append(_rows([1, 2, 3]))
    loaded = rest_catalog.load_table(ident)
    assert sorted(loaded.scan().to_arrow()["id"].to_pylist()) == [1, 2, 3]

    with loaded.update_schema() as update:
        update.add_column("score", DoubleType())
    loaded = rest_catalog.load_table(ident)
    assert loaded.schema().find_field("score").field_type == DoubleType()
    scored = _rows([4]).append_column("score", pa.array([0.5]))
    loaded.append(scored)
    result = rest_catalog.load_table(ident).scan().to_arrow()
    assert result.num_rows == 4 and result["score"].null_count == 3

    loaded.overwrite(_rows([10, 11]).append_column("score", pa.array([1.0, 2.0])))
    loaded.delete("id == 10")
    result = rest_catalog.load_table(ident).scan().to_arrow()
    assert result["id"].to_pylist() == [11]
    assert len(rest_catalog.load_table(ident).snapshots()) >= 4

    renamed = f"{catalog_namespace}.events_v2"
    rest_catalog.rename_table(ident, renamed)
    assert not rest_catalog.table_exists(ident)
    assert rest_catalog.load_table(renamed).scan().to_arrow()["id"].to_pylist() == [11]
    rest_catalog.drop_table(renamed)
    assert rest_catalog.list_tables(catalog_namespace) == []


def test_table_errors(rest_catalog: RestCatalog, catalog_namespace: str) -> None:
    with pytest.raises(NoSuchTableError):
        rest_catalog.load_table(f"{catalog_namespace}.missing")
    assert not rest_catalog.table_exists(f"{catalog_namespace}.missing")
    with pytest.raises(NoSuchTableError):
        rest_catalog.drop_table(f"{catalog_namespace}.missing")
    rest_catalog.create_table(f"{catalog_namespace}.t", ARROW_SCHEMA)
    with pytest.raises(TableAlreadyExistsError):
        rest_catalog.create_table(f"{catalog_namespace}.t", ARROW_SCHEMA)
    rest_catalog.create_table(f"{catalog_namespace}.u", ARROW_SCHEMA)
    with pytest.raises(TableAlreadyExistsError):
        rest_catalog.rename_table(f"{catalog_namespace}.t", f"{catalog_namespace}.u")
    with pytest.raises(NoSuchTableError):
        rest_catalog.rename_table(f"{catalog_namespace}.missing", f"{catalog_namespace}.v")


def test_racing_schema_changes_get_commit_failed(
    rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    ident = f"{catalog_namespace}.race"
    rest_catalog.create_table(ident, ARROW_SCHEMA)
    first, second = rest_catalog.load_table(ident), rest_catalog.load_table(ident)
    with first.update_schema() as update:
        update.add_column("x", LongType())
    with pytest.raises(CommitFailedException):
        with second.update_schema() as update:
            update.add_column("y", LongType())
    assert rest_catalog.load_table(ident).schema().column_names == ["id", "name", "x"]


def test_racing_appends_both_land(rest_catalog: RestCatalog, catalog_namespace: str) -> None:
    # The stale writer's first commit gets 409; pyiceberg refreshes and retries the append.
    ident = f"{catalog_namespace}.race"
    rest_catalog.create_table(ident, ARROW_SCHEMA)
    first, second = rest_catalog.load_table(ident), rest_catalog.load_table(ident)
    first.append(_rows([1]))
    second.append(_rows([2]))
    table = rest_catalog.load_table(ident)
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == [1, 2]
    assert len(table.snapshots()) == 2


def test_stale_ref_requirement_is_409(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    table = rest_catalog.create_table(f"{catalog_namespace}.t", ARROW_SCHEMA)
    table.append(_rows([1]))
    before = rest_catalog.load_table(f"{catalog_namespace}.t").metadata_location
    body = {
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 12345}],
        "updates": [{"action": "set-properties", "updates": {"k": "v"}}],
    }
    response = httpx.post(_table_url(catalog_server, catalog_namespace, "t"), json=body)
    _assert_error(response, 409, "CommitFailedException")
    after = rest_catalog.load_table(f"{catalog_namespace}.t")
    assert after.metadata_location == before and "k" not in after.properties


def test_concurrent_commits_exactly_one_wins(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    rest_catalog.create_table(f"{catalog_namespace}.t", ARROW_SCHEMA)
    url = _table_url(catalog_server, catalog_namespace, "t")

    def evolve(i: int) -> int:
        schema = {
            "type": "struct",
            "schema-id": 1,
            "fields": [
                {"id": 1, "name": "id", "type": "long", "required": False},
                {"id": 2, "name": "name", "type": "string", "required": False},
                {"id": 3, "name": f"c{i}", "type": "long", "required": False},
            ],
        }
        body = {
            "requirements": [{"type": "assert-current-schema-id", "current-schema-id": 0}],
            "updates": [
                {"action": "add-schema", "schema": schema, "last-column-id": 3},
                {"action": "set-current-schema", "schema-id": -1},
            ],
        }
        return httpx.post(url, json=body, timeout=30).status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        codes = sorted(pool.map(evolve, range(8)))
    assert codes == [200] + [409] * 7
    assert len(rest_catalog.load_table(f"{catalog_namespace}.t").schema().fields) == 3


def test_commit_over_http_returns_new_metadata(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    table = rest_catalog.create_table(f"{catalog_namespace}.t", ARROW_SCHEMA)
    body = {
        "identifier": {"namespace": [catalog_namespace], "name": "t"},
        "requirements": [{"type": "assert-table-uuid", "uuid": str(table.metadata.table_uuid)}],
        "updates": [{"action": "set-properties", "updates": {"k": "v"}}],
    }
    response = httpx.post(_table_url(catalog_server, catalog_namespace, "t"), json=body)
    assert response.status_code == 200, response.text
    payload = response.json()
    assert payload["metadata"]["properties"]["k"] == "v"
    assert payload["metadata-location"] != table.metadata_location
    assert rest_catalog.load_table(f"{catalog_namespace}.t").properties["k"] == "v"


@pytest.mark.parametrize(
    "body",
    [
        {"updates": [{"action": "frobnicate-table"}]},
        {"requirements": [{"type": "assert-nothing"}], "updates": []},
        {"updates": [{"action": "set-current-schema", "schema-id": 99}]},
    ],
    ids=["unknown-update", "unknown-requirement", "invalid-update"],
)
def test_bad_commits_are_400(
    catalog_server: CatalogServerHandle,
    rest_catalog: RestCatalog,
    catalog_namespace: str,
    body: dict[str, Any],
) -> None:
    rest_catalog.create_table(f"{catalog_namespace}.t", ARROW_SCHEMA)
    response = httpx.post(_table_url(catalog_server, catalog_namespace, "t"), json=body)
    _assert_error(response, 400, "BadRequestException")


def test_malformed_json_is_400(catalog_server: CatalogServerHandle, catalog_namespace: str) -> None:
    response = httpx.post(
        f"{catalog_server.uri}/v1/namespaces/{catalog_namespace}/tables",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    _assert_error(response, 400, "BadRequestException")


def test_stage_create_then_commit(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    schema = Schema(NestedField(1, "id", LongType(), required=False))
    # DuckDB omits `location` (Spark sends null); DuckDB needs <location>/metadata/ to exist.
    body = {"name": "staged", "schema": schema.model_dump(by_alias=True), "stage-create": True}
    response = httpx.post(
        f"{catalog_server.uri}/v1/namespaces/{catalog_namespace}/tables", json=body
    )
    assert response.status_code == 200, response.text
    staged = response.json()
    assert "metadata-location" not in staged
    location = staged["metadata"]["location"]
    assert location == f"{catalog_server.warehouse.as_uri()}/{catalog_namespace}/staged"
    assert (catalog_server.warehouse / catalog_namespace / "staged" / "metadata").is_dir()
    assert not rest_catalog.table_exists(f"{catalog_namespace}.staged")

    with rest_catalog.create_table_transaction(f"{catalog_namespace}.ctas", ARROW_SCHEMA) as txn:
        txn.append(_rows([7, 8]))
    created = rest_catalog.load_table(f"{catalog_namespace}.ctas")
    assert sorted(created.scan().to_arrow()["id"].to_pylist()) == [7, 8]
    with pytest.raises(TableAlreadyExistsError):
        rest_catalog.create_table_transaction(f"{catalog_namespace}.ctas", ARROW_SCHEMA)


def test_assert_create_on_existing_table_is_409(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    rest_catalog.create_table(f"{catalog_namespace}.t", ARROW_SCHEMA)
    body = {"requirements": [{"type": "assert-create"}], "updates": []}
    response = httpx.post(_table_url(catalog_server, catalog_namespace, "t"), json=body)
    _assert_error(response, 409, "CommitFailedException")


def test_commit_to_missing_table_is_404(
    catalog_server: CatalogServerHandle, catalog_namespace: str
) -> None:
    body = {"updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
    response = httpx.post(_table_url(catalog_server, catalog_namespace, "nope"), json=body)
    _assert_error(response, 404, "NoSuchTableException")


def test_transaction_is_all_or_none(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    left = rest_catalog.create_table(f"{catalog_namespace}.left", ARROW_SCHEMA)
    rest_catalog.create_table(f"{catalog_namespace}.right", ARROW_SCHEMA)

    def change(name: str, requirement: dict[str, Any]) -> dict[str, Any]:
        return {
            "identifier": {"namespace": [catalog_namespace], "name": name},
            "requirements": [requirement],
            "updates": [{"action": "set-properties", "updates": {"tx": "1"}}],
        }

    good = {"type": "assert-table-uuid", "uuid": str(left.metadata.table_uuid)}
    stale = {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 42}
    url = f"{catalog_server.uri}/v1/transactions/commit"
    response = httpx.post(
        url, json={"table-changes": [change("left", good), change("right", stale)]}
    )
    _assert_error(response, 409, "CommitFailedException")
    assert "tx" not in rest_catalog.load_table(f"{catalog_namespace}.left").properties

    no_ref = {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None}
    response = httpx.post(
        url, json={"table-changes": [change("left", good), change("right", no_ref)]}
    )
    assert response.status_code == 204, response.text
    for name in ("left", "right"):
        assert rest_catalog.load_table(f"{catalog_namespace}.{name}").properties["tx"] == "1"


def test_register_metrics_and_purge(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    table = rest_catalog.create_table(f"{catalog_namespace}.src", ARROW_SCHEMA)
    table.append(_rows([1, 2]))
    metadata_location = rest_catalog.load_table(f"{catalog_namespace}.src").metadata_location
    rest_catalog.drop_table(f"{catalog_namespace}.src")

    registered = rest_catalog.register_table(f"{catalog_namespace}.again", metadata_location)
    assert sorted(registered.scan().to_arrow()["id"].to_pylist()) == [1, 2]
    with pytest.raises(TableAlreadyExistsError):
        rest_catalog.register_table(f"{catalog_namespace}.again", metadata_location)

    report = {
        "report-type": "commit-report", "table-name": "again", "snapshot-id": 1,
        "sequence-number": 1, "operation": "append", "metrics": {},
    }
    url = _table_url(catalog_server, catalog_namespace, "again") + "/metrics"
    assert httpx.post(url, json=report).status_code == 204

    table_dir = catalog_server.warehouse / catalog_namespace / "src"
    assert any((table_dir / "data").iterdir())
    rest_catalog.purge_table(f"{catalog_namespace}.again")
    assert not rest_catalog.table_exists(f"{catalog_namespace}.again")
    assert not any(p.is_file() for p in (table_dir / "data").rglob("*"))


def test_load_table_refs_only(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    table = rest_catalog.create_table(f"{catalog_namespace}.t", ARROW_SCHEMA)
    table.append(_rows([1]))
    table.append(_rows([2]))
    url = _table_url(catalog_server, catalog_namespace, "t")
    everything = httpx.get(url, params={"snapshots": "all"}).json()["metadata"]["snapshots"]
    referenced = httpx.get(url, params={"snapshots": "refs"}).json()["metadata"]["snapshots"]
    assert len(everything) == 2 and len(referenced) == 1
