"""Core spec operations of the catalog (config, pagination, tables, metrics, idempotency,
OAuth, error codes) against a real uvicorn server, with httpx and pyiceberg's RestCatalog."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog

from catalog_api import CatalogSettings, RunningServer, serve_in_thread
from catalog_api.api.routes.generic_tables import ADVERTISED_ENDPOINTS as POLARIS_ENDPOINTS
from catalog_api.spec_endpoints import ADVERTISABLE
from tests.conftest_catalog import CatalogServerHandle

ARROW_SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])
SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}

ServerFactory = Callable[..., RunningServer]
_PARAM = re.compile(r"\{[^}]+\}")


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator[ServerFactory]:
    """Start servers with custom settings (own SQLite file and warehouse); stop them after."""
    started: list[RunningServer] = []

    def start(**extra: Any) -> RunningServer:
        root = tmp_path / f"s{len(started)}"
        settings = CatalogSettings(
            warehouse=str(root / "wh"), database_url=f"sqlite:///{root}.db", **extra
        )
        (root / "wh").mkdir(parents=True)
        started.append(serve_in_thread(settings))
        return started[-1]

    yield start
    for server in started:
        server.stop()


def _assert_error(response: httpx.Response, code: int, error_type: str) -> dict[str, Any]:
    assert response.status_code == code, response.text
    error = response.json()["error"]
    assert error["code"] == code and error["type"] == error_type
    assert error["message"] and "Traceback" not in response.text
    return error


def _ns_url(server: CatalogServerHandle, namespace: str) -> str:
    return f"{server.uri}/v1/namespaces/{namespace}"


def _create(server: CatalogServerHandle | RunningServer, ns: str, name: str, **kw: Any) -> Any:
    body = {"name": name, "schema": SCHEMA, **kw}
    return httpx.post(f"{server.uri}/v1/namespaces/{ns}/tables", json=body)


# ------------------------------------------------------------------------------- config


def test_config_defaults_overrides_endpoints_lifetime(catalog_server: CatalogServerHandle) -> None:
    body = httpx.get(f"{catalog_server.uri}/v1/config").json()
    assert body["defaults"] == {}
    assert body["overrides"]["namespace-separator"] == "%1F"
    assert body["idempotency-key-lifetime"] == "PT30M"
    openapi = httpx.get(f"{catalog_server.uri}/openapi.json").json()["paths"]
    # Path parameters compared by position: the spec's {plan-id} is {plan_id} in Python.
    served = {(_PARAM.sub("{}", path), m.upper()) for path, ops in openapi.items() for m in ops}
    advertised = set(body["endpoints"])
    assert len(advertised) == len(body["endpoints"])
    spec = {op.endpoint for op in ADVERTISABLE}
    assert set(POLARIS_ENDPOINTS) <= advertised  # Polaris generic tables, as Polaris lists them
    assert advertised - set(POLARIS_ENDPOINTS) <= spec  # else only spec operations
    for op in ADVERTISABLE:
        path = _PARAM.sub("{}", "/iceberg" + op.path.replace("/{prefix}", ""))
        assert (op.endpoint in advertised) == ((path, op.method) in served), op.endpoint
    assert "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics" not in advertised


def test_config_settings_are_sent(make_server: ServerFactory) -> None:
    server = make_server(
        config_defaults={"clients": "4"},
        config_overrides={"rest-page-size": "2"},
        idempotency_key_lifetime="PT2H",
    )
    body = httpx.get(f"{server.uri}/v1/config", params={"warehouse": "anything"}).json()
    assert body["defaults"] == {"clients": "4"}
    assert body["overrides"]["rest-page-size"] == "2"
    assert body["idempotency-key-lifetime"] == "PT2H"


# ---------------------------------------------------------------------------- pagination


def _pages(url: str, key: str, size: int | None, **params: str) -> list[list[Any]]:
    pages: list[list[Any]] = []
    token = ""
    while token is not None:
        query = {**params, "pageToken": token, **({"pageSize": str(size)} if size else {})}
        body = httpx.get(url, params=query).json()
        assert "next-page-token" in body
        pages.append(body[key])
        token = body["next-page-token"]
        assert len(pages) < 50
    return pages


def test_list_tables_paginates(catalog_server: CatalogServerHandle, catalog_namespace: str) -> None:
    names = [f"t{i:02d}" for i in range(7)]
    for name in reversed(names):
        assert _create(catalog_server, catalog_namespace, name).status_code == 200
    url = f"{_ns_url(catalog_server, catalog_namespace)}/tables"
    unpaged = httpx.get(url).json()
    assert unpaged["next-page-token"] is None and len(unpaged["identifiers"]) == 7
    pages = _pages(url, "identifiers", 3)
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [e["name"] for p in pages for e in p] == names
    assert all(e["namespace"] == [catalog_namespace] for p in pages for e in p)
    # an exact multiple: no trailing empty page
    assert [len(p) for p in _pages(url, "identifiers", 7)] == [7]


def test_pagination_survives_concurrent_changes(
    catalog_server: CatalogServerHandle, catalog_namespace: str
) -> None:
    for name in ("a", "c", "e"):
        _create(catalog_server, catalog_namespace, name)
    url = f"{_ns_url(catalog_server, catalog_namespace)}/tables"
    first = httpx.get(url, params={"pageToken": "", "pageSize": "2"}).json()
    assert [e["name"] for e in first["identifiers"]] == ["a", "c"]
    _create(catalog_server, catalog_namespace, "b")  # sorts before the cursor: not repeated
    _create(catalog_server, catalog_namespace, "d")
    rest = httpx.get(url, params={"pageToken": first["next-page-token"], "pageSize": "5"}).json()
    assert [e["name"] for e in rest["identifiers"]] == ["d", "e"]
    assert rest["next-page-token"] is None


def test_list_namespaces_paginates_under_parent(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog
) -> None:
    root = f"ns_{uuid.uuid4().hex[:8]}"
    rest_catalog.create_namespace(root)
    children = [(root, f"c{i}") for i in range(5)]
    for child in children:
        rest_catalog.create_namespace(child)
    rest_catalog.create_namespace((root, "c0", "deep"))
    url = f"{catalog_server.uri}/v1/namespaces"
    pages = _pages(url, "namespaces", 2, parent=root)
    assert [len(p) for p in pages] == [2, 2, 1]
    assert [tuple(ns) for p in pages for ns in p] == children
    deep = httpx.get(url, params={"parent": f"{root}\x1fc0"}).json()
    assert deep == {"namespaces": [[root, "c0", "deep"]], "next-page-token": None}
    paged = RestCatalog("paged", uri=catalog_server.uri, **{"rest-page-size": "2"})
    assert paged.list_namespaces(root) == children
    _assert_error(httpx.get(url, params={"parent": f"{root}\x1fnope"}), 404,
                  "NoSuchNamespaceException")


def test_page_size_defaults_and_cap(make_server: ServerFactory) -> None:
    server = make_server(default_page_size=2, max_page_size=3)
    for i in range(5):
        httpx.post(f"{server.uri}/v1/namespaces", json={"namespace": [f"n{i}"]})
    url = f"{server.uri}/v1/namespaces"
    assert [len(p) for p in _pages(url, "namespaces", None)] == [2, 2, 1]
    assert [len(p) for p in _pages(url, "namespaces", 100)] == [3, 2]
    assert len(httpx.get(url).json()["namespaces"]) == 5


@pytest.mark.parametrize("params", [{"pageToken": "%%%"}, {"pageToken": "", "pageSize": "0"}])
def test_bad_page_parameters_are_400(
    catalog_server: CatalogServerHandle, params: dict[str, str]
) -> None:
    response = httpx.get(f"{catalog_server.uri}/v1/namespaces", params=params)
    _assert_error(response, 400, "BadRequestException")


def test_custom_namespace_separator(make_server: ServerFactory) -> None:
    server = make_server(namespace_separator="%7C")
    client = RestCatalog("sep", uri=server.uri)
    client.create_namespace(("a", "b", "c"))
    client.create_table(("a", "b", "c", "t"), ARROW_SCHEMA)
    assert client.list_namespaces(("a", "b")) == [("a", "b", "c")]
    assert client.list_tables(("a", "b", "c")) == [("a", "b", "c", "t")]
    # 0x1F keeps working next to the advertised separator
    url = f"{server.uri}/v1/namespaces"
    assert httpx.get(url, params={"parent": "a\x1fb"}).json()["namespaces"] == [["a", "b", "c"]]
    assert httpx.get(f"{url}/a%7Cb%1Fc/tables/t").status_code == 200


# ---------------------------------------------------------------------------- error codes


# --------------------------------------------------------------------------------- tables


def _table_url(server: CatalogServerHandle, ns: str, name: str) -> str:
    return f"{_ns_url(server, ns)}/tables/{name}"


def test_staged_create_then_assert_create_commit(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    staged = _create(catalog_server, catalog_namespace, "st", **{"stage-create": True})
    assert staged.status_code == 200 and "ETag" not in staged.headers
    metadata = staged.json()["metadata"]
    assert not rest_catalog.table_exists(f"{catalog_namespace}.st")
    assert httpx.head(_table_url(catalog_server, catalog_namespace, "st")).status_code == 404
    body = {
        "requirements": [{"type": "assert-create"}],
        "updates": [
            {"action": "assign-uuid", "uuid": metadata["table-uuid"]},
            {"action": "upgrade-format-version", "format-version": 2},
            {"action": "add-schema", "schema": SCHEMA, "last-column-id": 1},
            {"action": "set-current-schema", "schema-id": -1},
            {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}},
            {"action": "set-default-spec", "spec-id": -1},
            {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
            {"action": "set-default-sort-order", "sort-order-id": -1},
            {"action": "set-location", "location": metadata["location"]},
            {"action": "set-properties", "updates": {"created-by": "staged"}},
        ],
    }
    url = _table_url(catalog_server, catalog_namespace, "st")
    committed = httpx.post(url, json=body)
    assert committed.status_code == 200, committed.text
    assert committed.headers["ETag"]
    table = rest_catalog.load_table(f"{catalog_namespace}.st")
    assert str(table.metadata.table_uuid) == metadata["table-uuid"]
    assert table.properties["created-by"] == "staged"
    _assert_error(httpx.post(url, json=body), 409, "CommitFailedException")


def test_etag_and_if_none_match(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    created = _create(catalog_server, catalog_namespace, "t")
    url = _table_url(catalog_server, catalog_namespace, "t")
    loaded = httpx.get(url)
    etag = loaded.headers["ETag"]
    assert created.headers["ETag"] == etag
    assert httpx.get(url, params={"snapshots": "refs"}).headers["ETag"] != etag

    not_modified = httpx.get(url, headers={"If-None-Match": etag})
    assert not_modified.status_code == 304 and not_modified.content == b""
    assert not_modified.headers["ETag"] == etag
    assert httpx.get(url, headers={"If-None-Match": f'"other", W/{etag}'}).status_code == 304
    assert httpx.get(url, headers={"If-None-Match": '"other"'}).status_code == 200

    body = {"updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
    committed = httpx.post(url, json=body)
    assert committed.headers["ETag"] not in (None, etag)
    reloaded = httpx.get(url, headers={"If-None-Match": etag})
    assert reloaded.status_code == 200 and reloaded.json()["metadata"]["properties"]["k"] == "v"
    assert reloaded.headers["ETag"] == committed.headers["ETag"]
    missing = httpx.get(_table_url(catalog_server, catalog_namespace, "nope"),
                        headers={"If-None-Match": etag})
    _assert_error(missing, 404, "NoSuchTableException")


def _files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


def test_drop_keeps_files_and_purge_deletes_them(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    rows = pa.table({"id": [1, 2], "name": ["a", "b"]}, schema=ARROW_SCHEMA)
    for name in ("kept", "purged"):
        table = rest_catalog.create_table(f"{catalog_namespace}.{name}", ARROW_SCHEMA)
        table.append(rows)
        table.append(rows)
    folder = catalog_server.warehouse / catalog_namespace
    kept_before = _files(folder / "kept")
    assert any(p.suffix == ".parquet" for p in kept_before)

    assert httpx.delete(_table_url(catalog_server, catalog_namespace, "kept")).status_code == 204
    assert _files(folder / "kept") == kept_before
    url = _table_url(catalog_server, catalog_namespace, "purged")
    assert httpx.delete(url, params={"purgeRequested": "true"}).status_code == 204
    assert not (folder / "purged").exists()
    assert not rest_catalog.table_exists(f"{catalog_namespace}.purged")
    _assert_error(httpx.delete(url), 404, "NoSuchTableException")


def test_head_rename_register(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    _create(catalog_server, catalog_namespace, "a")
    url_a = _table_url(catalog_server, catalog_namespace, "a")
    head = httpx.head(url_a)
    assert head.status_code == 204 and head.content == b""
    rest_catalog.create_namespace(f"{catalog_namespace}_other")
    rename = {
        "source": {"namespace": [catalog_namespace], "name": "a"},
        "destination": {"namespace": [f"{catalog_namespace}_other"], "name": "b"},
    }
    assert httpx.post(f"{catalog_server.uri}/v1/tables/rename", json=rename).status_code == 204
    assert httpx.head(url_a).status_code == 404
    moved = httpx.get(_table_url(catalog_server, f"{catalog_namespace}_other", "b"))
    _assert_error(httpx.post(f"{catalog_server.uri}/v1/tables/rename", json=rename), 404,
                  "NoSuchTableException")
    rename["destination"]["namespace"] = ["no_such_ns"]
    rename["source"] = {"namespace": [f"{catalog_namespace}_other"], "name": "b"}
    _assert_error(httpx.post(f"{catalog_server.uri}/v1/tables/rename", json=rename), 404,
                  "NoSuchNamespaceException")

    # two tables may not share a location: "b" is dropped (its files stay) before "r" takes it
    httpx.delete(_table_url(catalog_server, f"{catalog_namespace}_other", "b")).raise_for_status()
    register = {"name": "r", "metadata-location": moved.json()["metadata-location"]}
    registered = httpx.post(f"{_ns_url(catalog_server, catalog_namespace)}/register", json=register)
    assert registered.status_code == 200 and registered.headers["ETag"]
    assert registered.json()["metadata"]["table-uuid"] == moved.json()["metadata"]["table-uuid"]
    again = httpx.post(f"{_ns_url(catalog_server, catalog_namespace)}/register", json=register)
    _assert_error(again, 409, "AlreadyExistsException")


def test_locations_outside_warehouse_are_400(
    catalog_server: CatalogServerHandle, catalog_namespace: str, tmp_path: Path
) -> None:
    outside = (tmp_path / "elsewhere").as_uri()
    sneaky = f"{catalog_server.warehouse.as_uri()}/../escaped"
    for location in (outside, sneaky, "s3://bucket/t"):
        response = _create(catalog_server, catalog_namespace, "t", location=location)
        assert "outside the warehouse" in _assert_error(response, 400, "BadRequestException")[
            "message"]
    props = {"write.data.path": outside}
    _assert_error(_create(catalog_server, catalog_namespace, "t", properties=props), 400,
                  "BadRequestException")
    inside = f"{catalog_server.warehouse.as_uri()}/custom/place"
    assert _create(catalog_server, catalog_namespace, "t", location=inside).status_code == 200
    url = _table_url(catalog_server, catalog_namespace, "t")
    moved = {"updates": [{"action": "set-location", "location": outside}]}
    _assert_error(httpx.post(url, json=moved), 400, "BadRequestException")
    assert httpx.get(url).json()["metadata"]["location"] == inside
    register = {"name": "r", "metadata-location": f"{outside}/v1.metadata.json"}
    _assert_error(httpx.post(f"{_ns_url(catalog_server, catalog_namespace)}/register",
                             json=register), 400, "BadRequestException")
    namespace = {"namespace": [f"{catalog_namespace}_loc"], "properties": {"location": outside}}
    _assert_error(httpx.post(f"{catalog_server.uri}/v1/namespaces", json=namespace), 400,
                  "BadRequestException")


# -------------------------------------------------------------------------------- metrics

SCAN_REPORT = {
    "report-type": "scan-report",
    "table-name": "lakehouse.ns.t",
    "snapshot-id": 7,
    "filter": True,
    "schema-id": 0,
    "projected-field-ids": [1],
    "projected-field-names": ["id"],
    "metrics": {
        "total-planning-duration": {"count": 1, "time-unit": "nanoseconds",
                                    "total-duration": 2644235116},
        "result-data-files": {"unit": "count", "value": 1},
    },
    "metadata": {"engine": "spark"},
}
COMMIT_REPORT = {
    "report-type": "commit-report",
    "table-name": "lakehouse.ns.t",
    "snapshot-id": 8,
    "sequence-number": 2,
    "operation": "append",
    "metrics": {"added-records": {"unit": "count", "value": 5}},
}


def test_metrics_reports_are_stored_and_listed(
    catalog_server: CatalogServerHandle, catalog_namespace: str
) -> None:
    _create(catalog_server, catalog_namespace, "t")
    _create(catalog_server, catalog_namespace, "other")
    url = f"{_table_url(catalog_server, catalog_namespace, 't')}/metrics"
    for report in (SCAN_REPORT, COMMIT_REPORT, SCAN_REPORT):
        assert httpx.post(url, json=report).status_code == 204
    other = f"{_table_url(catalog_server, catalog_namespace, 'other')}/metrics"
    assert httpx.post(other, json=COMMIT_REPORT).status_code == 204

    listed = httpx.get(url).json()
    assert listed["next-page-token"] is None
    assert [r["report-type"] for r in listed["reports"]] == [
        "scan-report", "commit-report", "scan-report"]
    assert listed["reports"][0]["report"] == SCAN_REPORT
    assert listed["reports"][1]["report"] == COMMIT_REPORT
    assert listed["reports"][0]["received-at"].endswith("+00:00")
    ids = [r["id"] for r in listed["reports"]]
    assert ids == sorted(ids)

    pages = _pages(url, "reports", 2)
    assert [[r["id"] for r in p] for p in pages] == [ids[:2], ids[2:]]
    scans = httpx.get(url, params={"report-type": "scan-report"}).json()["reports"]
    assert [r["id"] for r in scans] == [ids[0], ids[2]]
    assert len(httpx.get(other).json()["reports"]) == 1


def test_metrics_errors(catalog_server: CatalogServerHandle, catalog_namespace: str) -> None:
    _create(catalog_server, catalog_namespace, "t")
    url = f"{_table_url(catalog_server, catalog_namespace, 't')}/metrics"
    incomplete = {k: v for k, v in SCAN_REPORT.items() if k != "projected-field-ids"}
    _assert_error(httpx.post(url, json=incomplete), 400, "BadRequestException")
    unknown = {**COMMIT_REPORT, "report-type": "weird-report"}
    _assert_error(httpx.post(url, json=unknown), 400, "BadRequestException")
    missing = f"{_table_url(catalog_server, catalog_namespace, 'nope')}/metrics"
    _assert_error(httpx.post(missing, json=COMMIT_REPORT), 404, "NoSuchTableException")
    _assert_error(httpx.get(missing), 404, "NoSuchTableException")
    assert httpx.get(url).json()["reports"] == []


def test_metrics_extension_is_documented_as_extension(
    catalog_server: CatalogServerHandle,
) -> None:
    paths = httpx.get(f"{catalog_server.uri}/openapi.json").json()["paths"]
    operation = paths["/iceberg/v1/namespaces/{namespace}/tables/{table}/metrics"]["get"]
    assert operation["operationId"] == "lakehouseListMetricsReports"
    assert all("extension" in tag.lower() for tag in operation["tags"])
    endpoints = httpx.get(f"{catalog_server.uri}/v1/config").json()["endpoints"]
    assert "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics" in endpoints
    assert not any(e.startswith("GET ") and e.endswith("/metrics") for e in endpoints)


# ---------------------------------------------------------------------------- idempotency


def _key() -> str:
    return str(uuid.uuid4())


def test_idempotent_create_table_replays(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    url = f"{_ns_url(catalog_server, catalog_namespace)}/tables"
    body = {"name": "t", "schema": SCHEMA}
    key = _key()
    first = httpx.post(url, json=body, headers={"Idempotency-Key": key})
    assert first.status_code == 200, first.text
    retry = httpx.post(url, json=body, headers={"Idempotency-Key": key})
    assert retry.status_code == 200 and retry.content == first.content
    assert retry.headers["ETag"] == first.headers["ETag"]
    assert retry.headers["content-type"] == "application/json"
    assert retry.headers["Idempotency-Replayed"] == "true"
    assert rest_catalog.list_tables(catalog_namespace) == [(catalog_namespace, "t")]
    other = httpx.post(url, json=body, headers={"Idempotency-Key": _key()})
    _assert_error(other, 409, "AlreadyExistsException")
    without = httpx.post(url, json=body)
    _assert_error(without, 409, "AlreadyExistsException")


def test_idempotent_4xx_is_replayed_and_key_reuse_is_422(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    url = _ns_url(catalog_server, catalog_namespace)
    key = _key()
    _create(catalog_server, catalog_namespace, "t")
    not_empty = httpx.delete(url, headers={"Idempotency-Key": key})
    _assert_error(not_empty, 409, "NamespaceNotEmptyException")
    rest_catalog.drop_table(f"{catalog_namespace}.t")
    replayed = httpx.delete(url, headers={"Idempotency-Key": key})
    assert replayed.status_code == 409 and replayed.content == not_empty.content
    assert rest_catalog.namespace_exists(catalog_namespace)
    assert httpx.delete(url, headers={"Idempotency-Key": _key()}).status_code == 204

    key = _key()
    create = f"{catalog_server.uri}/v1/namespaces"
    ns = f"{catalog_namespace}_b"
    assert httpx.post(create, json={"namespace": [ns]}, headers={"Idempotency-Key": key}
                      ).status_code == 200
    reused = httpx.post(create, json={"namespace": [f"{ns}x"]}, headers={"Idempotency-Key": key})
    _assert_error(reused, 422, "UnprocessableEntityException")
    _assert_error(httpx.post(create, json={"namespace": ["n"]},
                             headers={"Idempotency-Key": "not-a-uuid"}),
                  400, "BadRequestException")


def test_idempotency_never_stores_5xx(
    catalog_server: CatalogServerHandle, catalog_namespace: str
) -> None:
    created = _create(catalog_server, catalog_namespace, "t")
    metadata_file = Path(created.json()["metadata-location"].removeprefix("file://"))
    saved = metadata_file.read_bytes()
    metadata_file.unlink()  # the table now fails to load: 500
    url = _table_url(catalog_server, catalog_namespace, "t")
    body = {"updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
    key = _key()
    _assert_error(httpx.post(url, json=body, headers={"Idempotency-Key": key}), 500,
                  "InternalServerError")
    metadata_file.write_bytes(saved)
    retried = httpx.post(url, json=body, headers={"Idempotency-Key": key})
    assert retried.status_code == 200, retried.text
    assert "Idempotency-Replayed" not in retried.headers
    assert retried.json()["metadata"]["properties"]["k"] == "v"


def test_idempotency_keys_expire(make_server: ServerFactory) -> None:
    server = make_server(idempotency_key_lifetime="PT1S")
    assert httpx.get(f"{server.uri}/v1/config").json()["idempotency-key-lifetime"] == "PT1S"
    url = f"{server.uri}/v1/namespaces"
    key = _key()
    assert httpx.post(url, json={"namespace": ["n"]}, headers={"Idempotency-Key": key}
                      ).status_code == 200
    replay = httpx.post(url, json={"namespace": ["n"]}, headers={"Idempotency-Key": key})
    assert replay.status_code == 200
    time.sleep(1.2)
    expired = httpx.post(url, json={"namespace": ["n"]}, headers={"Idempotency-Key": key})
    _assert_error(expired, 409, "AlreadyExistsException")


def test_concurrent_retries_run_once(
    catalog_server: CatalogServerHandle, catalog_namespace: str
) -> None:
    url = _table_url(catalog_server, catalog_namespace, "t")
    _create(catalog_server, catalog_namespace, "t")
    key = _key()
    body = {"requirements": [{"type": "assert-current-schema-id", "current-schema-id": 0}],
            "updates": [{"action": "set-properties", "updates": {"run": "once"}}]}

    def post(_: int) -> httpx.Response:
        return httpx.post(url, json=body, headers={"Idempotency-Key": key}, timeout=30)

    with ThreadPoolExecutor(max_workers=6) as pool:
        responses = list(pool.map(post, range(6)))
    assert {r.status_code for r in responses} == {200}
    assert len({r.content for r in responses}) == 1
    history = httpx.get(url).json()["metadata"]["metadata-log"]
    assert len(history) == 1  # one commit after the create


# ---------------------------------------------------------------------------------- OAuth


def test_pyiceberg_with_credential_gets_a_token(
    catalog_server: CatalogServerHandle, catalog_namespace: str
) -> None:
    catalog = RestCatalog("oauth", uri=catalog_server.uri, credential="any-id:any-secret")
    assert (catalog_namespace,) in catalog.list_namespaces()
    token = httpx.post(f"{catalog_server.uri}/v1/oauth/tokens", data={
        "grant_type": "client_credentials", "client_id": "x", "client_secret": "y",
        "scope": "catalog"})
    assert token.status_code == 200
    body = token.json()
    assert body["token_type"] == "bearer" and len(body["access_token"]) >= 32
    assert body["expires_in"] == 3600 and body["scope"] == "catalog"


def test_token_endpoint_is_deprecated_in_openapi(catalog_server: CatalogServerHandle) -> None:
    paths = httpx.get(f"{catalog_server.uri}/openapi.json").json()["paths"]
    operation = paths["/iceberg/v1/oauth/tokens"]["post"]
    assert operation["deprecated"] is True and operation["operationId"] == "getToken"
    assert "application/x-www-form-urlencoded" in operation["requestBody"]["content"]
    endpoints = httpx.get(f"{catalog_server.uri}/v1/config").json()["endpoints"]
    assert not any("oauth" in endpoint for endpoint in endpoints)


# ------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "change",
    [
        {"updates": [{"action": "no-such-update"}]},
        {"requirements": [{"type": "no-such-requirement"}]},
        {"updates": [{"action": "set-properties"}]},  # a known update missing its field
    ],
    ids=["unknown-update", "unknown-requirement", "incomplete-update"],
)
def test_unknown_update_or_requirement_is_400(
    catalog_server: CatalogServerHandle, catalog_namespace: str, change: dict[str, Any]
) -> None:
    _create(catalog_server, catalog_namespace, "t")
    url = _table_url(catalog_server, catalog_namespace, "t")
    before = httpx.get(url).json()["metadata-location"]
    _assert_error(httpx.post(url, json=change), 400, "BadRequestException")
    tx = {"table-changes": [{"identifier": {"namespace": [catalog_namespace], "name": "t"},
                             **change}]}
    response = httpx.post(f"{catalog_server.uri}/v1/transactions/commit", json=tx)
    _assert_error(response, 400, "BadRequestException")
    assert httpx.get(url).json()["metadata-location"] == before


def test_not_found_errors_carry_the_right_type(
    catalog_server: CatalogServerHandle, catalog_namespace: str
) -> None:
    missing_ns = _ns_url(catalog_server, "no_such_ns")
    no_ns = "NoSuchNamespaceException"
    no_table = "NoSuchTableException"
    _assert_error(httpx.get(missing_ns), 404, no_ns)
    _assert_error(httpx.delete(missing_ns), 404, no_ns)
    _assert_error(httpx.get(f"{missing_ns}/tables"), 404, no_ns)
    _assert_error(httpx.post(f"{missing_ns}/properties", json={"updates": {"a": "b"}}), 404, no_ns)
    _assert_error(_create(catalog_server, "no_such_ns", "t"), 404, no_ns)
    _assert_error(httpx.post(f"{missing_ns}/register", json={
        "name": "t", "metadata-location": f"{catalog_server.warehouse.as_uri()}/x.json"}),
        404, no_ns)
    missing_table = _table_url(catalog_server, catalog_namespace, "nope")
    _assert_error(httpx.get(missing_table), 404, no_table)
    _assert_error(httpx.delete(missing_table, params={"purgeRequested": "true"}), 404, no_table)
    _assert_error(httpx.post(missing_table, json={"updates": []}), 404, no_table)
    _assert_error(httpx.get(_table_url(catalog_server, "no_such_ns", "t")), 404, no_table)
    head = httpx.head(missing_ns)
    assert head.status_code == 404 and head.content == b""
    _assert_error(httpx.get(f"{catalog_server.uri}/v1/no-such-route"), 404, "NotFoundException")


def test_conflicts_are_409(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    namespaces = f"{catalog_server.uri}/v1/namespaces"
    _assert_error(httpx.post(namespaces, json={"namespace": [catalog_namespace]}), 409,
                  "AlreadyExistsException")
    _create(catalog_server, catalog_namespace, "a")
    _create(catalog_server, catalog_namespace, "b")
    _assert_error(_create(catalog_server, catalog_namespace, "a"), 409, "AlreadyExistsException")
    _assert_error(httpx.delete(_ns_url(catalog_server, catalog_namespace)), 409,
                  "NamespaceNotEmptyException")
    rename = {"source": {"namespace": [catalog_namespace], "name": "a"},
              "destination": {"namespace": [catalog_namespace], "name": "b"}}
    _assert_error(httpx.post(f"{catalog_server.uri}/v1/tables/rename", json=rename), 409,
                  "AlreadyExistsException")
    stale = {"requirements": [{"type": "assert-table-uuid", "uuid": str(uuid.uuid4())}],
             "updates": []}
    _assert_error(httpx.post(_table_url(catalog_server, catalog_namespace, "a"), json=stale), 409,
                  "CommitFailedException")


@pytest.mark.parametrize(
    "body",
    [
        {"namespace": ["a.b"]},
        {"namespace": ["a", ""]},
        {"namespace": []},
        {"namespace": ["a\x1fb"]},
        {"namespace": "not-a-list"},
    ],
    ids=["dot", "empty-part", "empty", "separator", "not-a-list"],
)
def test_bad_namespace_identifiers_are_400(
    catalog_server: CatalogServerHandle, body: dict[str, Any]
) -> None:
    response = httpx.post(f"{catalog_server.uri}/v1/namespaces", json=body)
    _assert_error(response, 400, "BadRequestException")


def test_bad_table_identifiers_are_400(
    catalog_server: CatalogServerHandle, catalog_namespace: str
) -> None:
    _assert_error(_create(catalog_server, catalog_namespace, ""), 400, "BadRequestException")
    no_schema = httpx.post(f"{_ns_url(catalog_server, catalog_namespace)}/tables",
                           json={"name": "t"})
    _assert_error(no_schema, 400, "BadRequestException")
    rename = {"source": {"namespace": [catalog_namespace], "name": "t"},
              "destination": {"namespace": [catalog_namespace]}}
    _assert_error(httpx.post(f"{catalog_server.uri}/v1/tables/rename", json=rename), 400,
                  "BadRequestException")


def test_oversized_bodies_are_413(make_server: ServerFactory) -> None:
    server = make_server(max_body_bytes=2048)
    url = f"{server.uri}/v1/namespaces"
    big = {"namespace": ["n"], "properties": {"k": "x" * 4096}}
    _assert_error(httpx.post(url, json=big), 413, "PayloadTooLargeException")

    def chunks() -> Iterator[bytes]:
        yield b'{"namespace": ["n"], "properties": {"k": "'
        for _ in range(8):
            yield b"x" * 512
        yield b'"}}'

    chunked = httpx.post(url, content=chunks(), headers={"content-type": "application/json"})
    _assert_error(chunked, 413, "PayloadTooLargeException")
    assert httpx.get(url).json()["namespaces"] == []
