"""Confinement, name validation and no-5xx of the catalog (issue 17, "A secure catalog").

Every location a client sends or causes stays inside the warehouse (and inside the table's
own prefix where the spec allows); no two tables or views share a location; names are
validated with a 400 that names the broken rule; errors echo no file content; bad input
never gets a 5xx. Each test is one escape or leak found against ``lakehouse serve``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import BadRequestError

from catalog_api import CatalogSettings, RunningServer, serve_in_thread
from catalog_api.core.config import S3Settings, local_path
from catalog_api.errors import ForbiddenError
from catalog_api.models import RemoteSignBody
from catalog_api.signing import RemoteSigner
from tests.conftest_catalog import CatalogServerHandle
from tests.moto_process import moto_process

ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
SCHEMA = {"type": "struct", "schema-id": 0,
          "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
BUCKET, OTHER_BUCKET, REGION = "lake", "other", "us-east-1"

#: One client for the module: building an ``httpx.Client`` costs ~60 ms (TLS context).
HTTP = httpx.Client(timeout=60)


@pytest.fixture(scope="module", autouse=True)
def _close_http() -> Iterator[None]:
    yield
    HTTP.close()


def _assert_error(response: httpx.Response, code: int = 400,
                  error_type: str = "BadRequestException") -> str:
    assert response.status_code == code, response.text
    error = response.json()["error"]
    assert (error["code"], error["type"]) == (code, error_type)
    assert error["message"] and "Traceback" not in response.text
    return str(error["message"])


def _ns_url(server: CatalogServerHandle | RunningServer, namespace: str) -> str:
    return f"{server.uri}/v1/namespaces/{namespace}"


def _create_table(server: CatalogServerHandle | RunningServer, namespace: str, name: str,
                  **fields: Any) -> httpx.Response:
    body = {"name": name, "schema": SCHEMA, **fields}
    return HTTP.post(f"{_ns_url(server, namespace)}/tables", json=body)


def _view_body(name: str, namespace: str, **fields: Any) -> dict[str, Any]:
    version = {"version-id": 1, "timestamp-ms": 1_700_000_000_000, "schema-id": 0,
               "summary": {"engine-name": "spark"}, "default-namespace": [namespace],
               "representations": [{"type": "sql", "sql": "SELECT 1", "dialect": "spark"}]}
    return {"name": name, "schema": SCHEMA, "view-version": version, **fields}


def _create_view(server: CatalogServerHandle, namespace: str, name: str,
                 **fields: Any) -> httpx.Response:
    return HTTP.post(f"{_ns_url(server, namespace)}/views",
                     json=_view_body(name, namespace, **fields))


def _files_under(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file()] if folder.exists() else []


# ------------------------------------------------------------------------ purge and commits


def test_commit_of_a_data_file_outside_is_refused_and_purge_spares_it(
    rest_catalog: RestCatalog, catalog_namespace: str, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.parquet"
    pq.write_table(ROWS, victim)
    table = rest_catalog.create_table(f"{catalog_namespace}.t", ROWS.schema)
    refused = False
    try:
        table.add_files([str(victim)])
    except BadRequestError:
        refused = True
    rest_catalog.purge_table(f"{catalog_namespace}.t")
    assert victim.exists(), "purge deleted a file outside the warehouse"
    assert refused, "a commit added a data file outside the warehouse"


def test_purge_deletes_only_files_inside_the_table(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str,
    tmp_path: Path,
) -> None:
    # A table written by another catalog references files outside its own location; the
    # catalog registers it (its metadata is inside the warehouse) and then purges it.
    other = rest_catalog.create_table(f"{catalog_namespace}.other", ROWS.schema)
    other.append(ROWS)
    planted = local_path(other.location()) / "data" / "planted.parquet"
    outside = tmp_path / "outside.parquet"
    for path in (planted, outside):
        pq.write_table(ROWS, path)
    legacy_warehouse = catalog_server.warehouse / f"legacy_{uuid.uuid4().hex[:8]}"
    legacy = SqlCatalog("legacy", uri=f"sqlite:///{tmp_path / 'legacy.db'}",
                        warehouse=legacy_warehouse.as_uri())
    legacy.create_namespace("db")
    legacy_table = legacy.create_table("db.t", ROWS.schema)
    legacy_table.add_files([str(outside), planted.as_uri()])
    legacy_table.append(ROWS)
    own_files = _files_under(local_path(legacy_table.location()) / "data")
    assert own_files

    rest_catalog.register_table(f"{catalog_namespace}.legacy", legacy_table.metadata_location)
    rest_catalog.purge_table(f"{catalog_namespace}.legacy")
    assert outside.exists(), "purge deleted a file outside the warehouse"
    assert planted.exists(), "purge deleted a file of another table"
    assert not any(path.exists() for path in own_files)
    assert len(rest_catalog.load_table(f"{catalog_namespace}.other").scan().to_arrow()) == 3


def test_commit_paths_must_stay_inside_the_table(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str,
    tmp_path: Path,
) -> None:
    ns = catalog_namespace
    first = rest_catalog.create_table(f"{ns}.first", ROWS.schema)
    first.append(ROWS)
    second = rest_catalog.create_table(f"{ns}.second", ROWS.schema)
    in_first = local_path(first.location()) / "data" / "extra.parquet"
    pq.write_table(ROWS, in_first)
    with pytest.raises(BadRequestError, match="outside"):
        second.add_files([in_first.as_uri()])  # inside the warehouse, but another table's
    snapshot = {"snapshot-id": 77, "sequence-number": 1, "timestamp-ms": 1_700_000_000_000,
                "manifest-list": (tmp_path / "snap-77.avro").as_uri(),
                "summary": {"operation": "append"}, "schema-id": 0}
    commit = {"updates": [{"action": "add-snapshot", "snapshot": snapshot}]}
    message = _assert_error(HTTP.post(f"{_ns_url(catalog_server, ns)}/tables/second",
                                      json=commit))
    assert "manifest list" in message.lower()
    assert len(rest_catalog.load_table(f"{ns}.second").scan().to_arrow()) == 0


# ------------------------------------------------------------------------------ leaks


def test_register_errors_do_not_echo_file_content(
    catalog_server: CatalogServerHandle, catalog_namespace: str, tmp_path: Path
) -> None:
    secret = f"secret-{uuid.uuid4().hex}"
    outside = tmp_path / "secret.metadata.json"
    inside = catalog_server.warehouse / catalog_namespace / "x" / "metadata" / "0.metadata.json"
    inside.parent.mkdir(parents=True)
    for path in (outside, inside):
        path.write_text(f"root:x:0:0:{secret}\n")
    for endpoint in ("register-view", "register"):
        for location in (outside.as_uri(), str(outside), inside.as_uri()):
            body = {"name": "leak", "metadata-location": location}
            response = HTTP.post(f"{_ns_url(catalog_server, catalog_namespace)}/{endpoint}",
                                 json=body)
            _assert_error(response)
            assert secret not in response.text and "root:x" not in response.text


def test_unreadable_view_metadata_is_not_echoed(
    catalog_server: CatalogServerHandle, catalog_namespace: str
) -> None:
    created = _create_view(catalog_server, catalog_namespace, "v")
    assert created.status_code == 200, created.text
    secret = f"secret-{uuid.uuid4().hex}"
    local_path(created.json()["metadata-location"]).write_text(secret)
    for response in (
        HTTP.get(f"{_ns_url(catalog_server, catalog_namespace)}/views/v"),
        HTTP.post(f"{_ns_url(catalog_server, catalog_namespace)}/views/v",
                  json={"updates": [{"action": "set-properties", "updates": {"a": "1"}}]}),
    ):
        assert secret not in response.text and "Traceback" not in response.text


# --------------------------------------------------------------------------------- views


def test_view_location_outside_is_refused(
    catalog_server: CatalogServerHandle, catalog_namespace: str, tmp_path: Path
) -> None:
    outside = tmp_path / "view_home"
    message = _assert_error(_create_view(catalog_server, catalog_namespace, "v",
                                         location=outside.as_uri()))
    assert "outside the warehouse" in message
    assert not outside.exists()
    assert _create_view(catalog_server, catalog_namespace, "v").status_code == 200
    moved = {"updates": [{"action": "set-location", "location": outside.as_uri()}]}
    url = f"{_ns_url(catalog_server, catalog_namespace)}/views/v"
    assert "outside the warehouse" in _assert_error(HTTP.post(url, json=moved))
    assert not outside.exists()
    sneaky = {"updates": [{"action": "set-location",
                           "location": f"{catalog_server.warehouse.as_uri()}/../escaped_v"}]}
    _assert_error(HTTP.post(url, json=sneaky))
    assert not (catalog_server.warehouse.parent / "escaped_v").exists()


# ------------------------------------------------------------------------ registered files


def _forge(catalog_server: CatalogServerHandle, namespace: str, metadata: dict[str, Any],
           name: str) -> str:
    path = catalog_server.warehouse / namespace / name / "metadata" / "00009-forged.metadata.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(metadata))
    return path.as_uri()


def test_registered_metadata_pointing_outside_is_refused(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str,
    tmp_path: Path,
) -> None:
    ns = catalog_namespace
    table = rest_catalog.create_table(f"{ns}.src", ROWS.schema)
    original = json.loads(local_path(table.metadata_location).read_text())
    table.append(ROWS)
    appended = json.loads(local_path(table.metadata_location).read_text())
    outside = tmp_path / "elsewhere"
    home = f"{catalog_server.warehouse.as_uri()}/{ns}"
    forgeries = {
        "location": {**original, "location": outside.as_uri()},
        "write_path": {**original, "location": f"{home}/write_path",
                       "properties": {"write.metadata.path": outside.as_uri()}},
        "log": {**original, "location": f"{home}/log", "metadata-log": [
            {"timestamp-ms": 1, "metadata-file": (outside / "m.json").as_uri()}]},
        "snapshot": {**appended, "location": f"{home}/snapshot"},  # manifest list: src's
    }
    url = f"{_ns_url(catalog_server, ns)}/register"
    for name, metadata in forgeries.items():
        location = _forge(catalog_server, ns, metadata, name)
        registered = HTTP.post(url, json={"name": name, "metadata-location": location})
        if registered.status_code == 200:  # today's code: every later commit writes outside
            HTTP.post(f"{_ns_url(catalog_server, ns)}/tables/{name}", json={
                "updates": [{"action": "set-properties", "updates": {"x": name}}]})
        assert not outside.exists(), f"{name}: the catalog wrote outside the warehouse"
        _assert_error(registered)


def test_registered_view_metadata_pointing_outside_is_refused(
    catalog_server: CatalogServerHandle, catalog_namespace: str, tmp_path: Path
) -> None:
    created = _create_view(catalog_server, catalog_namespace, "src")
    assert created.status_code == 200, created.text
    outside = tmp_path / "view_elsewhere"
    forged = {**created.json()["metadata"], "location": outside.as_uri()}
    location = _forge(catalog_server, catalog_namespace, forged, "forged_view")
    url = f"{_ns_url(catalog_server, catalog_namespace)}/register-view"
    registered = HTTP.post(url, json={"name": "forged", "metadata-location": location})
    if registered.status_code == 200:
        HTTP.post(f"{_ns_url(catalog_server, catalog_namespace)}/views/forged", json={
            "updates": [{"action": "set-properties", "updates": {"x": "1"}}]})
    assert not outside.exists(), "the catalog wrote view metadata outside the warehouse"
    _assert_error(registered)
    escaped = HTTP.post(url, json={"name": "forged", "metadata-location": (
        tmp_path / "v.metadata.json").as_uri()})
    assert "outside the warehouse" in _assert_error(escaped)


# ----------------------------------------------------------------------- shared locations


def test_no_two_tables_or_views_share_a_location(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    ns = catalog_namespace
    home = f"{catalog_server.warehouse.as_uri()}/{ns}/shared/home"
    assert _create_table(catalog_server, ns, "owner", location=home).status_code == 200
    rest_catalog.load_table(f"{ns}.owner").append(ROWS)
    for location in (home, f"{home}/", f"{home}/inner", home.rsplit("/", 1)[0]):
        _assert_error(_create_table(catalog_server, ns, "intruder", location=location))
        _assert_error(_create_view(catalog_server, ns, "intruder_v", location=location))
    owner_metadata = rest_catalog.load_table(f"{ns}.owner").metadata_location
    registered = HTTP.post(f"{_ns_url(catalog_server, ns)}/register",
                           json={"name": "twin", "metadata-location": owner_metadata})
    if registered.status_code == 200:  # today's code: purging the twin destroys the owner
        rest_catalog.purge_table(f"{ns}.twin")
    assert len(rest_catalog.load_table(f"{ns}.owner").scan().to_arrow()) == 3
    _assert_error(registered)
    assert _create_table(catalog_server, ns, "mover").status_code == 200
    moved = {"updates": [{"action": "set-location", "location": f"{home}/sub"}]}
    _assert_error(HTTP.post(f"{_ns_url(catalog_server, ns)}/tables/mover", json=moved))
    assert _create_view(catalog_server, ns, "view_mover").status_code == 200
    _assert_error(HTTP.post(f"{_ns_url(catalog_server, ns)}/views/view_mover", json=moved))
    generic = {"name": "g", "format": "delta", "base-location": f"{home}/delta"}
    _assert_error(HTTP.post(f"{catalog_server.uri}/polaris/v1/namespaces/{ns}/generic-tables",
                            json=generic))
    # register over itself (overwrite) is not a conflict with itself
    again = HTTP.post(f"{_ns_url(catalog_server, ns)}/register", json={
        "name": "owner", "metadata-location": owner_metadata, "overwrite": True})
    assert again.status_code == 200, again.text


def test_generic_table_base_location_outside_is_refused(
    catalog_server: CatalogServerHandle, catalog_namespace: str, tmp_path: Path
) -> None:
    url = f"{catalog_server.uri}/polaris/v1/namespaces/{catalog_namespace}/generic-tables"
    for location in (tmp_path.as_uri(), f"{catalog_server.warehouse.as_uri()}/../g",
                     "s3://bucket/g"):
        body = {"name": "g", "format": "delta", "base-location": location}
        assert "outside the warehouse" in _assert_error(HTTP.post(url, json=body))


# ---------------------------------------------------------------------------------- names


@pytest.mark.parametrize(("name", "rule"), [
    (".", "'.'"), ("..", "'..'"), ("a/b", "'/'"), ("a\\b", "'\\'"),
    ("a\x00b", "control"), ("a\x1fb", "control"), ("a\nb", "control"), ("", "empty"),
])
def test_bad_names_are_400_with_the_rule(
    catalog_server: CatalogServerHandle, catalog_namespace: str, name: str, rule: str
) -> None:
    ns = catalog_namespace
    generic_url = f"{catalog_server.uri}/polaris/v1/namespaces/{ns}/generic-tables"
    for response in (
        _create_table(catalog_server, ns, name),
        _create_view(catalog_server, ns, name),
        HTTP.post(generic_url, json={"name": name, "format": "delta"}),
        HTTP.post(f"{_ns_url(catalog_server, ns)}/register",
                  json={"name": name, "metadata-location": "file:///nowhere.json"}),
        HTTP.post(f"{catalog_server.uri}/v1/namespaces", json={"namespace": [ns, name]}),
    ):
        assert rule in _assert_error(response)
    assert not (catalog_server.warehouse / ns / "a").exists()


def test_name_lengths_fit_the_catalog_columns(
    catalog_server: CatalogServerHandle, catalog_namespace: str
) -> None:
    ns = catalog_namespace
    assert _create_table(catalog_server, ns, "t" * 255).status_code == 200
    for name in ("t" * 256, "é" * 128):
        assert "255" in _assert_error(_create_table(catalog_server, ns, name))
        assert "255" in _assert_error(_create_view(catalog_server, ns, name))
    long_namespace = {"namespace": ["a" * 200, "b" * 60]}  # joined: 261 characters
    assert "255" in _assert_error(HTTP.post(f"{catalog_server.uri}/v1/namespaces",
                                            json=long_namespace))
    _assert_error(HTTP.get(_ns_url(catalog_server, "n" * 10_000)), 404,
                  "NoSuchNamespaceException")


def test_long_namespace_is_400_on_postgres(
    postgres_catalog_server: CatalogServerHandle,
) -> None:
    server = postgres_catalog_server
    base = f"{server.uri}/v1/namespaces"
    assert "255" in _assert_error(HTTP.post(base, json={"namespace": ["n" * 10_000]}))
    assert "255" in _assert_error(HTTP.post(base, json={"namespace": ["a" * 200, "b" * 60]}))
    _assert_error(HTTP.get(f"{base}/{'n' * 10_000}"), 404, "NoSuchNamespaceException")
    ns = f"ns_{uuid.uuid4().hex[:8]}"
    assert HTTP.post(base, json={"namespace": [ns]}).status_code == 200
    assert "255" in _assert_error(_create_table(server, ns, "t" * 300))
    assert "255" in _assert_error(_create_view(server, ns, "v" * 300))
    generic = {"name": "g" * 300, "format": "delta"}
    _assert_error(HTTP.post(f"{server.uri}/polaris/v1/namespaces/{ns}/generic-tables",
                            json=generic))
    long_key = HTTP.post(base, json={"namespace": [f"{ns}_p"], "properties": {"k" * 300: "v"}})
    _assert_error(long_key)
    nul = HTTP.post(base, json={"namespace": [f"{ns}_q"], "properties": {"k": "a\x00b"}})
    _assert_error(nul)


# ------------------------------------------------------------------------------- no 5xx


def test_bad_bodies_are_400_not_500(
    catalog_server: CatalogServerHandle, catalog_namespace: str
) -> None:
    ns = catalog_namespace
    _assert_error(_create_table(catalog_server, ns, "props", properties=["a", "b"]))
    _assert_error(_create_view(catalog_server, ns, "props_v", properties=["a"]))
    order = {"order-id": 1, "fields": [{"source-id": 99, "transform": "identity",
                                        "direction": "asc", "null-order": "nulls-first"}]}
    assert "99" in _assert_error(_create_table(catalog_server, ns, "order", **{
        "write-order": order}))
    spec = {"spec-id": 0, "fields": [{"source-id": 99, "field-id": 1000, "name": "p",
                                      "transform": "identity"}]}
    _assert_error(_create_table(catalog_server, ns, "spec", **{"partition-spec": spec}))
    nul = f"{catalog_server.warehouse.as_uri()}/{ns}/x\x00/metadata/0.metadata.json"
    for endpoint in ("register", "register-view"):
        body = {"name": "nul", "metadata-location": nul}
        _assert_error(HTTP.post(f"{_ns_url(catalog_server, ns)}/{endpoint}", json=body))
    _assert_error(_create_table(catalog_server, ns, "nul", location=nul.rsplit("/", 2)[0]))
    too_long = f"{catalog_server.warehouse.as_uri()}/{ns}/{'x' * 300}"
    _assert_error(_create_table(catalog_server, ns, "long_segment", location=too_long))
    _assert_error(_create_view(catalog_server, ns, "long_segment", location=too_long))
    for name in ("z" * 300, "incomplete"):  # a create transaction: bad name, no schema
        change = {"identifier": {"namespace": [ns], "name": name},
                  "requirements": [{"type": "assert-create"}], "updates": []}
        _assert_error(HTTP.post(f"{catalog_server.uri}/v1/transactions/commit",
                                json={"table-changes": [change]}))


# ------------------------------------------------------------------------------- signing


@pytest.fixture(scope="module")
def moto_s3() -> Iterator[str]:
    """A moto S3 server (own process) with the buckets ``lake`` and ``other``."""
    with moto_process() as endpoint:
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name=REGION,
                          aws_access_key_id="k", aws_secret_access_key="s")
        for bucket in (BUCKET, OTHER_BUCKET):
            s3.create_bucket(Bucket=bucket)
        yield endpoint


@pytest.fixture(scope="module")
def s3_catalog(moto_s3: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """The catalog on ``s3://lake/wh``, signing its clients' requests."""
    root = tmp_path_factory.mktemp("confined_s3")
    settings = CatalogSettings(
        warehouse=f"s3://{BUCKET}/wh", database_url=f"sqlite:///{root / 'catalog.db'}",
        s3=S3Settings(endpoint=moto_s3, region=REGION, access_key_id="k",
                      secret_access_key="s", vend_credentials=False))
    running = serve_in_thread(settings, host="127.0.0.1", port=0)
    try:
        yield running
    finally:
        running.stop()


def test_signing_stays_in_the_warehouse_bucket(moto_s3: str, s3_catalog: RunningServer) -> None:
    ns = f"ns_{uuid.uuid4().hex[:8]}"
    assert HTTP.post(f"{s3_catalog.uri}/v1/namespaces", json={"namespace": [ns]}
                     ).status_code == 200
    created = _create_table(s3_catalog, ns, "t")
    assert created.status_code == 200, created.text
    forged = {**created.json()["metadata"], "location": f"s3://{OTHER_BUCKET}/t"}
    key = f"wh/{ns}/forged/metadata/00000-forged.metadata.json"
    s3 = boto3.client("s3", endpoint_url=moto_s3, region_name=REGION,
                      aws_access_key_id="k", aws_secret_access_key="s")
    s3.put_object(Bucket=BUCKET, Key=key, Body=json.dumps(forged).encode())
    registered = HTTP.post(f"{_ns_url(s3_catalog, ns)}/register", json={
        "name": "forged", "metadata-location": f"s3://{BUCKET}/{key}"})
    if registered.status_code == 200:
        sign = {"region": REGION, "method": "GET", "headers": {},
                "uri": f"{moto_s3}/{OTHER_BUCKET}/t/data/x.parquet"}
        signed = HTTP.post(f"{_ns_url(s3_catalog, ns)}/tables/forged/sign", json=sign)
        assert signed.status_code == 403, "signed a request for another bucket"
    _assert_error(registered)


@pytest.mark.parametrize("uri", [
    "https://other.s3.amazonaws.com/lake/wh/ns/t/data/x.parquet",  # path style, other bucket
    "https://lake.sts.amazonaws.com/wh/ns/t/data/x.parquet",  # not S3
])
def test_signing_on_aws_refuses_other_buckets(uri: str) -> None:
    settings = CatalogSettings(warehouse=f"s3://{BUCKET}/wh", database_url="sqlite://",
                               s3=S3Settings(access_key_id="k", secret_access_key="s"))
    signer = RemoteSigner(settings)
    request = RemoteSignBody(region=REGION, uri=uri, method="GET", headers={})
    with pytest.raises(ForbiddenError):
        signer.sign(f"s3://{BUCKET}/wh/ns/t", request)
    for allowed in ("https://lake.s3.amazonaws.com/wh/ns/t/x",
                    "https://s3.us-east-1.amazonaws.com/lake/wh/ns/t/x"):
        ok = RemoteSignBody(region=REGION, uri=allowed, method="GET", headers={})
        assert signer.sign(f"s3://{BUCKET}/wh/ns/t", ok)["headers"]
    with pytest.raises(ForbiddenError):  # a table outside the warehouse gets nothing signed
        signer.sign(f"s3://{OTHER_BUCKET}/t", RemoteSignBody(
            region=REGION, uri="https://other.s3.amazonaws.com/t/x", method="GET", headers={}))


# ------------------------------------------------------------ found in review (issue 17)


def test_write_paths_stay_inside_the_table_own_location(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog, catalog_namespace: str
) -> None:
    other = rest_catalog.create_table(f"{catalog_namespace}.a", ROWS.schema)
    into_other = {"write.data.path": f"{other.location()}/data",
                  "write.metadata.path": f"{other.location()}/metadata"}
    for key, path in into_other.items():
        message = _assert_error(_create_table(catalog_server, catalog_namespace, "b",
                                              properties={key: path}))
        assert key in message and "outside the table's location" in message
    rest_catalog.create_table(f"{catalog_namespace}.b", ROWS.schema)
    change = {"updates": [{"action": "set-properties", "updates": into_other}]}
    message = _assert_error(HTTP.post(f"{_ns_url(catalog_server, catalog_namespace)}/tables/b",
                                      json=change))
    assert "outside the table's location" in message
    inside = {"write.data.path": f"{rest_catalog.load_table(f'{catalog_namespace}.b').location()}"
                                 "/data-files"}
    ok = HTTP.post(f"{_ns_url(catalog_server, catalog_namespace)}/tables/b",
                   json={"updates": [{"action": "set-properties", "updates": inside}]})
    assert ok.status_code == 200, ok.text


@pytest.mark.parametrize("location", ["~/warehouse/x/t", "warehouse/x/t", "file:x/t"])
def test_relative_and_home_locations_are_refused(
    catalog_server: CatalogServerHandle, catalog_namespace: str, location: str
) -> None:
    _assert_error(_create_table(catalog_server, catalog_namespace, "rel", location=location))


@pytest.mark.parametrize(("headers", "query"), [
    ({"x-amz-copy-source": ["lake/outside/secret.txt"]}, ""),  # a copy from elsewhere
    ({"X-Amz-Copy-Source": ["/other/wh/ns/t/x"]}, ""),  # another bucket
    ({"x-amz-acl": ["public-read"]}, ""),  # making an object public
    ({"x-amz-grant-read": ["uri=http://acs.amazonaws.com/groups/global/AllUsers"]}, ""),
    ({}, "?acl"),  # a sub-resource beyond the data
    ({}, "?tagging"),
])
def test_signing_refuses_copies_from_outside_and_access_changes(
    headers: dict[str, list[str]], query: str
) -> None:
    settings = CatalogSettings(warehouse=f"s3://{BUCKET}/wh", database_url="sqlite://",
                               s3=S3Settings(access_key_id="k", secret_access_key="s"))
    signer = RemoteSigner(settings)
    uri = f"https://lake.s3.amazonaws.com/wh/ns/t/data/x{query}"
    with pytest.raises(ForbiddenError):
        signer.sign(f"s3://{BUCKET}/wh/ns/t", RemoteSignBody(
            region=REGION, uri=uri, method="PUT", headers=headers))
    copy_inside = {"x-amz-copy-source": ["lake/wh/ns/t/data/y?versionId=1"]}
    assert signer.sign(f"s3://{BUCKET}/wh/ns/t", RemoteSignBody(
        region=REGION, uri="https://lake.s3.amazonaws.com/wh/ns/t/data/x?x-id=CopyObject",
        method="PUT", headers=copy_inside))["headers"]
