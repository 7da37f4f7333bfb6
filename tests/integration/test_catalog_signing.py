"""S3 remote signing (``signRequest``) against a moto S3 that checks every signature.

moto runs in its own process; once the warehouse bucket and the catalog's IAM user exist,
``/moto-api/reset-auth`` makes it authenticate every request (it recomputes each SigV4
signature with the user's secret and refuses a mismatch). The catalog holds the user's keys;
the client holds none: it asks the catalog to sign a PUT and a GET, sends them with httpx and
reads back what it wrote.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import httpx
import pyarrow as pa
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from pyiceberg.catalog.rest import RestCatalog

from catalog_api import CatalogSettings, RunningServer, serve_in_thread
from catalog_api.core.config import S3Settings
from catalog_api.signing import wants_remote_signing
from tests.conftest_catalog import (
    SECURE_PRINCIPALS,
    CatalogServerHandle,
    fetch_token,
    on_s3,
    secure_settings,
)
from tests.moto_process import moto_process

BUCKET, REGION = "lake", "us-east-1"
SCHEMA = {"type": "struct", "schema-id": 0,
          "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
SIGNING = {"X-Iceberg-Access-Delegation": "remote-signing"}
ALLOW_S3 = {"Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}


@pytest.fixture(scope="module")
def moto_with_auth() -> Iterator[tuple[str, str, str]]:
    """A moto server (own process) enforcing SigV4; yields endpoint, access key, secret."""
    with moto_process() as endpoint:
        setup = {"endpoint_url": endpoint, "region_name": REGION,
                 "aws_access_key_id": "setup", "aws_secret_access_key": "setup"}
        iam = boto3.client("iam", **setup)
        iam.create_user(UserName="catalog")
        iam.put_user_policy(UserName="catalog", PolicyName="s3",
                            PolicyDocument=json.dumps(ALLOW_S3))
        key = iam.create_access_key(UserName="catalog")["AccessKey"]
        boto3.client("s3", **setup).create_bucket(Bucket=BUCKET)
        httpx.post(f"{endpoint}/moto-api/reset-auth", content=b"0").raise_for_status()
        yield endpoint, key["AccessKeyId"], key["SecretAccessKey"]


@pytest.fixture(scope="module")
def signing_catalog(moto_with_auth: tuple[str, str, str], tmp_path_factory: Any) -> Iterator[
    RunningServer
]:
    """The catalog on ``s3://lake/wh`` with the IAM user's keys, signing for its clients."""
    endpoint, key, secret = moto_with_auth
    root = tmp_path_factory.mktemp("signing")
    settings = CatalogSettings(
        warehouse=f"s3://{BUCKET}/wh", database_url=f"sqlite:///{root / 'catalog.db'}",
        s3=S3Settings(endpoint=endpoint, region=REGION, access_key_id=key,
                      secret_access_key=secret, vend_credentials=False))
    running = serve_in_thread(settings)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def table_url(signing_catalog: RunningServer) -> str:
    namespace = f"ns_{uuid.uuid4().hex[:8]}"
    base = f"{signing_catalog.uri}/v1/namespaces"
    httpx.post(base, json={"namespace": [namespace]}).raise_for_status()
    httpx.post(f"{base}/{namespace}/tables", json={"name": "t", "schema": SCHEMA}
               ).raise_for_status()
    return f"{base}/{namespace}/tables/t"


def _sign(table_url: str, method: str, uri: str, **extra: Any) -> httpx.Response:
    body = {"region": REGION, "uri": uri, "method": method, "headers": {}, **extra}
    return httpx.post(f"{table_url}/sign", json=body)


def _headers(signed: httpx.Response) -> dict[str, str]:
    assert signed.status_code == 200, signed.text
    assert signed.headers["Cache-Control"] == "no-cache"
    return {name: ", ".join(values) for name, values in signed.json()["headers"].items()}


def test_load_table_offers_remote_signing(signing_catalog: RunningServer, table_url: str) -> None:
    answer = httpx.get(table_url, headers=SIGNING)
    config = answer.json()["config"]
    namespace = table_url.split("/namespaces/")[1].split("/")[0]
    assert config["s3.remote-signing-enabled"] == "true"
    assert config["signer.endpoint"] == config["s3.signer.endpoint"] == (
        f"v1/namespaces/{namespace}/tables/t/sign")
    assert config["s3.endpoint"] == signing_catalog.settings.s3.endpoint  # type: ignore[union-attr]
    assert not any("access-key" in k or "secret" in k for k in config)  # the client gets no keys
    assert not answer.json().get("storage-credentials")
    plain = httpx.get(table_url)  # no delegation asked: no signer config, and cacheable
    assert "s3.remote-signing-enabled" not in plain.json()["config"]
    assert httpx.get(table_url, headers={"If-None-Match": plain.headers["ETag"]}).status_code == 304
    assert httpx.get(table_url, headers={**SIGNING, "If-None-Match": plain.headers["ETag"]}
                     ).status_code == 200


def test_signed_put_and_get_are_accepted_by_s3(
    moto_with_auth: tuple[str, str, str], table_url: str
) -> None:
    endpoint, access_key, _ = moto_with_auth
    location = httpx.get(table_url).json()["metadata"]["location"]
    key = f"{location.removeprefix(f's3://{BUCKET}/')}/data/signed-{uuid.uuid4().hex[:6]}.txt"
    uri = f"{endpoint}/{BUCKET}/{key}"
    # S3 checks signatures: the user's key id signed with a wrong secret is refused
    guessed = AWSRequest(method="PUT", url=uri, data=b"hello")
    S3SigV4Auth(Credentials(access_key, "guessed-secret"), "s3", REGION).add_auth(guessed)
    refused = httpx.put(uri, headers=dict(guessed.headers.items()), content=b"hello")
    assert refused.status_code == 403 and b"SignatureDoesNotMatch" in refused.content

    put = _headers(_sign(table_url, "PUT", uri, headers={"Content-Type": ["text/plain"]}))
    assert put["X-Amz-Content-SHA256"] == "UNSIGNED-PAYLOAD" and "Signature=" in put[
        "Authorization"]
    assert httpx.put(uri, headers=put, content=b"hello").status_code == 200
    got = httpx.get(uri, headers=_headers(_sign(table_url, "GET", uri)))
    assert got.status_code == 200 and got.content == b"hello"

    # a signature is for one request: the same headers on another key are refused by S3
    forged = httpx.get(f"{uri}.other", headers=_headers(_sign(table_url, "GET", uri)))
    assert forged.status_code == 403 and b"SignatureDoesNotMatch" in forged.content

    listing_uri = f"{endpoint}/{BUCKET}?list-type=2&prefix={key.rsplit('/', 1)[0]}/"
    listing = httpx.get(listing_uri, headers=_headers(_sign(table_url, "GET", listing_uri)))
    assert listing.status_code == 200 and key.encode() in listing.content

    delete = f"<Delete><Object><Key>{key}</Key></Object></Delete>"
    md5 = base64.b64encode(hashlib.md5(delete.encode()).digest()).decode()
    delete_uri = f"{endpoint}/{BUCKET}?delete"
    signed = _sign(table_url, "POST", delete_uri, headers={"Content-MD5": [md5]}, body=delete)
    assert httpx.post(delete_uri, headers=_headers(signed), content=delete).status_code == 200
    assert httpx.get(uri, headers=_headers(_sign(table_url, "GET", uri))).status_code == 404


def test_requests_outside_the_table_are_not_signed(
    moto_with_auth: tuple[str, str, str], table_url: str
) -> None:
    endpoint = moto_with_auth[0]
    location = httpx.get(table_url).json()["metadata"]["location"]
    path = location.removeprefix(f"s3://{BUCKET}/")
    outside = [
        ("GET", f"{endpoint}/{BUCKET}/wh/other_ns/t/data/x"),  # another table
        ("GET", f"{endpoint}/{BUCKET}/{path}/../../other_ns/x"),  # dot segments
        ("PUT", f"{endpoint}/other-bucket/{path}/x"),  # another bucket
        ("GET", f"http://example.com/{BUCKET}/{path}/x"),  # another host
        ("GET", f"{endpoint}/{BUCKET}?list-type=2"),  # the whole bucket
        ("GET", f"{endpoint}/{BUCKET}?list-type=2&prefix={path}"),  # also lists t2...
        ("DELETE", f"{endpoint}/{BUCKET}"),  # DeleteBucket
    ]
    for method, uri in outside:
        refused = _sign(table_url, method, uri)
        assert refused.status_code == 403, (method, uri)
        assert refused.json()["error"]["type"] == "ForbiddenException"
    delete = "<Delete><Object><Key>wh/elsewhere/x</Key></Object></Delete>"
    assert _sign(table_url, "POST", f"{endpoint}/{BUCKET}?delete", body=delete).status_code == 403
    gcs = _sign(table_url, "GET", f"{endpoint}/{BUCKET}/{path}/x", provider="gcs")
    assert gcs.status_code == 400


def test_sign_errors_on_unknown_tables_and_local_warehouses(
    table_url: str, catalog_server: CatalogServerHandle, rest_catalog: RestCatalog,
    catalog_namespace: str,
) -> None:
    missing = _sign(table_url.rsplit("/", 1)[0] + "/nope", "GET", "http://x/lake/k")
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "NoSuchTableException"
    rest_catalog.create_table(f"{catalog_namespace}.t", pa.schema([("id", pa.int64())]))
    local = _sign(f"{catalog_server.uri}/v1/namespaces/{catalog_namespace}/tables/t", "GET",
                  "http://x/lake/k")
    assert local.status_code == 400 and local.json()["error"]["type"] == "BadRequestException"
    invalid = httpx.post(f"{table_url}/sign", json={"uri": "http://x", "method": "FETCH"})
    assert invalid.status_code == 400


def test_delegation_header_parsing() -> None:
    assert wants_remote_signing("vended-credentials, Remote-Signing")
    assert not wants_remote_signing("vended-credentials") and not wants_remote_signing(None)


def test_a_reader_gets_reads_signed_and_writes_refused(
    moto_with_auth: tuple[str, str, str], tmp_path_factory: Any
) -> None:
    endpoint, key, secret = moto_with_auth
    settings, secrets = secure_settings(tmp_path_factory.mktemp("secure-signing"),
                                        SECURE_PRINCIPALS)
    s3 = S3Settings(endpoint=endpoint, region=REGION, access_key_id=key,
                    secret_access_key=secret, vend_credentials=False)
    running = serve_in_thread(on_s3(settings, f"s3://{BUCKET}/secure", s3))
    try:
        def bearer(client: str) -> dict[str, str]:
            return {"Authorization": f"Bearer {fetch_token(running.uri, client, secrets[client])}"}

        base = f"{running.uri}/v1/namespaces"
        httpx.post(base, json={"namespace": ["s"]}, headers=bearer("admin")).raise_for_status()
        created = httpx.post(f"{base}/s/tables", json={"name": "t", "schema": SCHEMA},
                             headers=bearer("admin"))
        location = created.json()["metadata"]["location"].removeprefix(f"s3://{BUCKET}/")
        uri = f"{endpoint}/{BUCKET}/{location}/data/by-writer.txt"

        def sign(client: str, method: str) -> httpx.Response:
            body = {"region": REGION, "uri": uri, "method": method, "headers": {}}
            return httpx.post(f"{base}/s/tables/t/sign", json=body, headers=bearer(client))

        assert httpx.put(uri, headers=_headers(sign("writer", "PUT")),
                         content=b"x").status_code == 200
        got = httpx.get(uri, headers=_headers(sign("reader", "GET")))
        assert got.status_code == 200 and got.content == b"x"
        for method in ("PUT", "DELETE", "POST"):
            refused = sign("reader", method)
            assert refused.status_code == 403, method
            assert "writer role" in refused.json()["error"]["message"]
        assert httpx.post(f"{base}/s/tables/t/sign", json={
            "region": REGION, "uri": uri, "method": "GET", "headers": {}}).status_code == 401
    finally:
        running.stop()
