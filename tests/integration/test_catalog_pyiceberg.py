"""The catalog service against pyiceberg's RestCatalog and raw HTTP: real server, real SQLite.

The namespace and table lifecycles also run against the secure catalog, with the admin's
credential; there pyiceberg also works with a bearer token, and gets 401 without either.
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
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
    UnauthorizedError,
)
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField

from tests.conftest_catalog import CatalogServerHandle, SecureCatalogHandle

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


def _secure_catalog(handle: SecureCatalogHandle, **auth: str) -> RestCatalog:
    """pyiceberg on the secure catalog; ``auth``: ``credential`` or ``token``."""
    return RestCatalog("secure", uri=handle.uri,
                       **{"oauth2-server-uri": f"{handle.uri}/v1/oauth/tokens", **auth})


@pytest.fixture(params=["open", "secure"])
def any_catalog(request: pytest.FixtureRequest) -> RestCatalog:
    """pyiceberg on the open test catalog, or on the secure one with the admin's credential."""
    if request.param == "open":
        catalog: RestCatalog = request.getfixturevalue("rest_catalog")
        return catalog
    handle: SecureCatalogHandle = request.getfixturevalue("secure_catalog_server")
    return _secure_catalog(handle, credential=handle.credential("admin"))


@pytest.fixture
def any_namespace(any_catalog: RestCatalog) -> str:
    """A fresh, empty namespace of ``any_catalog``."""
    name = f"ns_{uuid.uuid4().hex[:10]}"
    any_catalog.create_namespace(name)
    return name


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


def test_namespace_lifecycle(any_catalog: RestCatalog) -> None:
    root = f"ns_{uuid.uuid4().hex[:8]}"
    any_catalog.create_namespace(root, {"owner": "tests"})
    any_catalog.create_namespace((root, "child"))
    assert (root,) in any_catalog.list_namespaces()
    assert any_catalog.list_namespaces(root) == [(root, "child")]
    assert any_catalog.load_namespace_properties(root)["owner"] == "tests"
    assert any_catalog.namespace_exists((root, "child"))
    assert not any_catalog.namespace_exists((root, "missing"))

    summary = any_catalog.update_namespace_properties(
        root, removals={"owner", "gone"}, updates={"k": "v"}
    )
    assert summary.removed == ["owner"] and summary.updated == ["k"] and summary.missing == ["gone"]
    assert "owner" not in any_catalog.load_namespace_properties(root)

    with pytest.raises(NamespaceAlreadyExistsError):
        any_catalog.create_namespace(root)
    with pytest.raises(NamespaceNotEmptyError):
        any_catalog.drop_namespace(root)
    any_catalog.drop_namespace((root, "child"))
    any_catalog.drop_namespace(root)
    assert not any_catalog.namespace_exists(root)


def test_missing_namespace_errors(any_catalog: RestCatalog) -> None:
    with pytest.raises(NoSuchNamespaceError):
        any_catalog.load_namespace_properties("no_such_namespace")
    with pytest.raises(NoSuchNamespaceError):
        any_catalog.list_tables("no_such_namespace")
    with pytest.raises(NoSuchNamespaceError):
        any_catalog.drop_namespace("no_such_namespace")
    with pytest.raises(NoSuchNamespaceError):
        any_catalog.create_table("no_such_namespace.t", ARROW_SCHEMA)


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


def test_table_lifecycle(any_catalog: RestCatalog, any_namespace: str) -> None:
    ident = f"{any_namespace}.events"
    table = any_catalog.create_table(ident, ARROW_SCHEMA, properties={"format-version": "2"})
    assert table.metadata.format_version == 2
    assert table.location().endswith(f"/{any_namespace}/events")
    assert any_catalog.list_tables(any_namespace) == [(any_namespace, "events")]
    assert any_catalog.table_exists(ident)

    table.append(_rows([1, 2, 3]))
    loaded = any_catalog.load_table(ident)
    assert sorted(loaded.scan().to_arrow()["id"].to_pylist()) == [1, 2, 3]

    with loaded.update_schema() as update:
        update.add_column("score", DoubleType())
    loaded = any_catalog.load_table(ident)
    assert loaded.schema().find_field("score").field_type == DoubleType()
    scored = _rows([4]).append_column("score", pa.array([0.5]))
    loaded.append(scored)
    result = any_catalog.load_table(ident).scan().to_arrow()
    assert result.num_rows == 4 and result["score"].null_count == 3

    loaded.overwrite(_rows([10, 11]).append_column("score", pa.array([1.0, 2.0])))
    loaded.delete("id == 10")
    result = any_catalog.load_table(ident).scan().to_arrow()
    assert result["id"].to_pylist() == [11]
    assert len(any_catalog.load_table(ident).snapshots()) >= 4

    renamed = f"{any_namespace}.events_v2"
    any_catalog.rename_table(ident, renamed)
    assert not any_catalog.table_exists(ident)
    assert any_catalog.load_table(renamed).scan().to_arrow()["id"].to_pylist() == [11]
    any_catalog.drop_table(renamed)
    assert any_catalog.list_tables(any_namespace) == []


def test_table_errors(any_catalog: RestCatalog, any_namespace: str) -> None:
    with pytest.raises(NoSuchTableError):
        any_catalog.load_table(f"{any_namespace}.missing")
    assert not any_catalog.table_exists(f"{any_namespace}.missing")
    with pytest.raises(NoSuchTableError):
        any_catalog.drop_table(f"{any_namespace}.missing")
    any_catalog.create_table(f"{any_namespace}.t", ARROW_SCHEMA)
    with pytest.raises(TableAlreadyExistsError):
        any_catalog.create_table(f"{any_namespace}.t", ARROW_SCHEMA)
    any_catalog.create_table(f"{any_namespace}.u", ARROW_SCHEMA)
    with pytest.raises(TableAlreadyExistsError):
        any_catalog.rename_table(f"{any_namespace}.t", f"{any_namespace}.u")
    with pytest.raises(NoSuchTableError):
        any_catalog.rename_table(f"{any_namespace}.missing", f"{any_namespace}.v")


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


# ------------------------------------------------------------------------ authentication


def test_a_bearer_token_is_enough(secure_catalog_server: SecureCatalogHandle) -> None:
    handle = secure_catalog_server
    admin = _secure_catalog(handle, credential=handle.credential("admin"))
    namespace = f"ns_{uuid.uuid4().hex[:10]}"
    admin.create_namespace(namespace)
    admin.create_table(f"{namespace}.t", ARROW_SCHEMA).append(_rows([1, 2]))
    reader = _secure_catalog(handle, token=handle.token("reader"))
    assert (namespace,) in reader.list_namespaces()
    assert reader.list_tables(namespace) == [(namespace, "t")]
    assert sorted(reader.load_table(f"{namespace}.t").scan().to_arrow()["id"].to_pylist()) == [1, 2]


def test_without_credentials_every_call_gets_401(
    secure_catalog_server: SecureCatalogHandle,
) -> None:
    anonymous = _secure_catalog(secure_catalog_server)  # GET /v1/config needs no token
    # pyiceberg 0.12 without credential or token sends `Authorization: Bearer None`.
    refused = r"^NotAuthorizedException: (Authentication required|Invalid token: not a JSON)"
    for call in (anonymous.list_namespaces, lambda: anonymous.list_tables("any"),
                 lambda: anonymous.load_table("any.t"),
                 lambda: anonymous.create_namespace("mine")):
        with pytest.raises(UnauthorizedError, match=refused):
            call()


def test_expiring_a_snapshot_leaves_its_childs_parent_id(
    any_catalog: RestCatalog, any_namespace: str
) -> None:
    """A snapshot never changes: its parent id still names the expired one (as Java keeps it)."""
    table = any_catalog.create_table(f"{any_namespace}.expiring", schema=ARROW_SCHEMA)
    for value in range(3):
        table.append(pa.table({"id": [value], "name": ["x"]}, schema=ARROW_SCHEMA))
    first, second, third = (s.snapshot_id for s in table.snapshots())
    table.maintenance.expire_snapshots().by_id(first).commit()
    reloaded = any_catalog.load_table(f"{any_namespace}.expiring")
    assert [s.snapshot_id for s in reloaded.snapshots()] == [second, third]
    kept = reloaded.metadata.snapshot_by_id(second)
    assert kept is not None and kept.parent_snapshot_id == first
    assert sorted(reloaded.scan().to_arrow()["id"].to_pylist()) == [0, 1, 2]
