"""Credential vending on an S3 warehouse: a real moto server (S3 + STS) on loopback.

The catalog writes metadata with its own keys; a pyiceberg client holding no S3 keys at
all asks for ``vended-credentials``, then creates, appends and reads through the keys the
catalog obtained from STS AssumeRole.
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import httpx
import pyarrow as pa
import pytest
from moto.server import ThreadedMotoServer
from moto.sts.models import sts_backends
from pyiceberg.catalog.rest import RestCatalog

from catalog_api import CatalogSettings, RunningServer, serve_in_thread
from catalog_api.core.config import S3Settings
from catalog_api.credentials import session_policy, wants_vended_credentials
from lakehouse.rest_catalog import ConditionalRestCatalog
from tests.conftest_catalog import (
    SECURE_PRINCIPALS,
    CatalogServerHandle,
    fetch_token,
    on_s3,
    secure_settings,
)

BUCKET = "lake"
REGION = "us-east-1"
SERVER_KEY, SERVER_SECRET = "catalogkey", "catalogsecret"
ROLE_ARN = "arn:aws:iam::123456789012:role/iceberg-client"
ARROW_SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])
DELEGATION = {"X-Iceberg-Access-Delegation": "vended-credentials"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    """A moto server (S3 and STS) on 127.0.0.1 with the warehouse bucket."""
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=SERVER_KEY,
        aws_secret_access_key=SERVER_SECRET,
    )
    s3.create_bucket(Bucket=BUCKET)
    try:
        yield endpoint
    finally:
        server.stop()


@pytest.fixture(scope="module")
def s3_catalog(
    moto_endpoint: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    """A catalog server whose warehouse is ``s3://lake/wh`` on moto, vending via AssumeRole."""
    root = tmp_path_factory.mktemp("s3catalog")
    settings = CatalogSettings(
        warehouse=f"s3://{BUCKET}/wh",
        database_url=f"sqlite:///{root / 'catalog.db'}",
        s3=S3Settings(
            endpoint=moto_endpoint,
            region=REGION,
            access_key_id=SERVER_KEY,
            secret_access_key=SERVER_SECRET,
            sts_endpoint=moto_endpoint,
            role_arn=ROLE_ARN,
            credentials_lifetime_s=900,
        ),
    )
    running = serve_in_thread(settings)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def no_ambient_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Remove every AWS credential source a client could fall back to (and the IMDS)."""
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")


def test_vended_credentials_create_append_read(
    s3_catalog: RunningServer, moto_endpoint: str, no_ambient_aws: None
) -> None:
    client = RestCatalog(
        "vended", uri=s3_catalog.uri, **{"header.X-Iceberg-Access-Delegation": "vended-credentials"}
    )
    namespace = f"ns_{uuid.uuid4().hex[:8]}"
    client.create_namespace(namespace)
    table = client.create_table(f"{namespace}.events", schema=ARROW_SCHEMA)
    assert table.location() == f"s3://{BUCKET}/wh/{namespace}/events"
    io_props = table.io.properties
    # credentials came from STS (moto issues ASIA... session keys), not the server's own
    assert io_props["s3.access-key-id"].startswith("ASIA")
    assert io_props["s3.access-key-id"] != SERVER_KEY
    assert io_props["s3.session-token"]
    assert io_props["s3.endpoint"] == moto_endpoint
    rows = pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]}, schema=ARROW_SCHEMA)
    table.append(rows)
    table.append(rows)
    reloaded = client.load_table(f"{namespace}.events")
    assert reloaded.scan().to_arrow().num_rows == 6
    assert sorted(reloaded.scan().to_arrow()["id"].to_pylist()) == [1, 1, 2, 2, 3, 3]
    # the objects are really on S3 (moto), under the table's location
    s3 = boto3.client(
        "s3",
        endpoint_url=moto_endpoint,
        region_name=REGION,
        aws_access_key_id=SERVER_KEY,
        aws_secret_access_key=SERVER_SECRET,
    )
    keys = [
        obj["Key"]
        for obj in s3.list_objects_v2(Bucket=BUCKET, Prefix=f"wh/{namespace}/events/")["Contents"]
    ]
    assert any(key.endswith(".parquet") for key in keys)
    assert any(key.endswith(".metadata.json") for key in keys)


def test_the_pipelines_client_reloads_vended_credentials_every_time(
    s3_catalog: RunningServer, no_ambient_aws: None
) -> None:
    """The conditional client remembers no answer carrying credentials: each load asks anew."""
    client = ConditionalRestCatalog(
        "vended", uri=s3_catalog.uri, **{"header.X-Iceberg-Access-Delegation": "vended-credentials"}
    )
    statuses: list[int] = []
    client._session.hooks["response"].append(  # noqa: SLF001 - requests' public hook
        lambda response, *args, **kwargs: statuses.append(response.status_code)
    )
    namespace = f"ns_{uuid.uuid4().hex[:8]}"
    client.create_namespace(namespace)
    client.create_table(f"{namespace}.t", schema=ARROW_SCHEMA)
    del statuses[:]
    loads = [client.load_table(f"{namespace}.t") for _ in range(2)]
    assert statuses == [200, 200]
    assert all(t.io.properties["s3.access-key-id"].startswith("ASIA") for t in loads)


def test_load_table_answer_shape(s3_catalog: RunningServer) -> None:
    client = RestCatalog("shape", uri=s3_catalog.uri)
    namespace = f"ns_{uuid.uuid4().hex[:8]}"
    client.create_namespace(namespace)
    client.create_table(f"{namespace}.t", schema=ARROW_SCHEMA)
    url = f"{s3_catalog.uri}/v1/namespaces/{namespace}/tables/t"
    vended = httpx.get(url, headers=DELEGATION).json()
    (credential,) = vended["storage-credentials"]
    assert credential["prefix"] == f"s3://{BUCKET}/wh/{namespace}/t"
    config = credential["config"]
    assert set(config) == {
        "s3.access-key-id",
        "s3.secret-access-key",
        "s3.session-token",
        "s3.session-token-expires-at-ms",
    }
    assert int(config["s3.session-token-expires-at-ms"]) > 0
    assert vended["config"]["s3.endpoint"] == s3_catalog.settings.s3.endpoint  # type: ignore[union-attr]
    assert vended["config"]["client.region"] == REGION
    # no delegation header: no credentials
    plain_response = httpx.get(url)
    plain = plain_response.json()
    assert "storage-credentials" not in plain or plain["storage-credentials"] == []
    # If-None-Match: 304 for a plain load, but fresh credentials whenever they are asked for
    etag = {"If-None-Match": plain_response.headers["ETag"]}
    assert httpx.get(url, headers=etag).status_code == 304
    revalidated = httpx.get(url, headers={**etag, **DELEGATION})
    assert revalidated.status_code == 200 and revalidated.json()["storage-credentials"]
    # loadCredentials
    loaded = httpx.get(f"{url}/credentials")
    assert loaded.status_code == 200
    (again,) = loaded.json()["storage-credentials"]
    assert again["prefix"] == credential["prefix"]
    assert again["config"]["s3.access-key-id"].startswith("ASIA")
    missing = httpx.get(f"{s3_catalog.uri}/v1/namespaces/{namespace}/tables/nope/credentials")
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "NoSuchTableException"


def test_plan_answer_carries_credentials(s3_catalog: RunningServer) -> None:
    client = RestCatalog("plan", uri=s3_catalog.uri)
    namespace = f"ns_{uuid.uuid4().hex[:8]}"
    client.create_namespace(namespace)
    table = client.create_table(f"{namespace}.t", schema=ARROW_SCHEMA)
    table.append(pa.table({"id": [1], "name": ["a"]}, schema=ARROW_SCHEMA))
    url = f"{s3_catalog.uri}/v1/namespaces/{namespace}/tables/t/plan"
    answer = httpx.post(url, json={}, headers=DELEGATION).json()
    assert answer["status"] == "completed"
    (task,) = answer["file-scan-tasks"]
    (credential,) = answer["storage-credentials"]
    assert task["data-file"]["file-path"].startswith(credential["prefix"])
    assert "storage-credentials" not in httpx.post(url, json={}).json()


def test_local_warehouse_vends_nothing(
    catalog_server: CatalogServerHandle, rest_catalog: RestCatalog
) -> None:
    namespace = f"ns_{uuid.uuid4().hex[:8]}"
    rest_catalog.create_namespace(namespace)
    rest_catalog.create_table(f"{namespace}.t", schema=ARROW_SCHEMA)
    url = f"{catalog_server.uri}/v1/namespaces/{namespace}/tables/t"
    body = httpx.get(url, headers=DELEGATION).json()
    assert body.get("storage-credentials", []) == []
    assert httpx.get(f"{url}/credentials").json() == {"storage-credentials": []}


def test_delegation_header_parsing() -> None:
    assert wants_vended_credentials("vended-credentials")
    assert wants_vended_credentials("remote-signing, Vended-Credentials")
    assert not wants_vended_credentials("remote-signing")
    assert not wants_vended_credentials(None)


def test_session_policy_is_scoped_to_the_table() -> None:
    policy = json.loads(session_policy("s3://lake/wh/ns/t"))
    objects, listing = policy["Statement"]
    assert objects["Resource"] == ["arn:aws:s3:::lake/wh/ns/t/*"]
    assert listing["Resource"] == ["arn:aws:s3:::lake"]
    assert listing["Condition"]["StringLike"]["s3:prefix"] == ["wh/ns/t", "wh/ns/t/*"]


# --------------------------------------------------------------- scoped to the caller's role


@pytest.fixture(scope="module")
def secure_s3_catalog(
    moto_endpoint: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RunningServer, dict[str, str]]]:
    """The S3 catalog with auth on (clients ``admin``, ``writer``, ``reader``) and vending."""
    root = tmp_path_factory.mktemp("secure-s3")
    settings, secrets = secure_settings(root, SECURE_PRINCIPALS)
    s3 = S3Settings(endpoint=moto_endpoint, region=REGION, access_key_id=SERVER_KEY,
                    secret_access_key=SERVER_SECRET, sts_endpoint=moto_endpoint,
                    role_arn=ROLE_ARN, credentials_lifetime_s=900)
    running = serve_in_thread(on_s3(settings, f"s3://{BUCKET}/secure", s3))
    try:
        yield running, secrets
    finally:
        running.stop()


def _session_policy(access_key_id: str) -> dict[str, Any]:
    """The session policy STS (the in-process moto) was given for these credentials."""
    for account in sts_backends.values():
        for backend in account.values():
            role = backend.get_assumed_role_from_access_key(access_key_id)
            if role is not None:
                return dict(json.loads(role.policy))
    raise AssertionError(f"no assumed role holds {access_key_id}")


def test_vended_credentials_only_read_unless_the_caller_may_write(
    secure_s3_catalog: tuple[RunningServer, dict[str, str]],
) -> None:
    running, secrets = secure_s3_catalog
    admin = RestCatalog("a", uri=running.uri, credential=f"admin:{secrets['admin']}")
    namespace = f"vend_{uuid.uuid4().hex[:6]}"
    admin.create_namespace(namespace)
    admin.create_table(f"{namespace}.t", schema=ARROW_SCHEMA)
    actions = {}
    for client in ("reader", "writer"):
        token = f"Bearer {fetch_token(running.uri, client, secrets[client])}"
        url = f"{running.uri}/v1/namespaces/{namespace}/tables/t"
        loaded = httpx.get(url, headers={**DELEGATION, "Authorization": token}).json()
        (credential,) = loaded["storage-credentials"]
        listed = httpx.get(f"{url}/credentials", headers={"Authorization": token}).json()
        assert listed["storage-credentials"][0]["config"]["s3.access-key-id"] == (
            credential["config"]["s3.access-key-id"])
        policy = _session_policy(credential["config"]["s3.access-key-id"])
        objects = policy["Statement"][0]
        assert objects["Resource"] == [f"arn:aws:s3:::{BUCKET}/secure/{namespace}/t/*"]
        actions[client] = set(objects["Action"])
    assert actions["reader"] == {"s3:GetObject"}
    assert actions["writer"] >= {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}


def test_without_a_role_credentials_come_from_a_federation_token(
    moto_endpoint: str, tmp_path: Any, no_ambient_aws: None,
) -> None:
    settings = CatalogSettings(
        warehouse=f"s3://{BUCKET}/federated", database_url=f"sqlite:///{tmp_path / 'c.db'}",
        s3=S3Settings(endpoint=moto_endpoint, region=REGION, access_key_id=SERVER_KEY,
                      secret_access_key=SERVER_SECRET, sts_endpoint=moto_endpoint))
    running = serve_in_thread(settings)
    try:
        catalog = RestCatalog("c", uri=running.uri, **{"header.X-Iceberg-Access-Delegation":
                                                       "vended-credentials"})
        catalog.create_namespace("fed")
        table = catalog.create_table("fed.t", schema=ARROW_SCHEMA)
        table.append(pa.table({"id": [1], "name": ["a"]}, schema=ARROW_SCHEMA))
        assert catalog.load_table("fed.t").scan().to_arrow().num_rows == 1
        loaded = httpx.get(f"{running.uri}/v1/namespaces/fed/tables/t", headers=DELEGATION)
        config = loaded.json()["storage-credentials"][0]["config"]
        assert config["s3.session-token"] and config["s3.access-key-id"] != SERVER_KEY
    finally:
        running.stop()
