"""Authentication and roles of the catalog, against the real server on loopback.

Every route but the public ones answers 401 without a valid token; principals get reader,
writer or admin roles per namespace (inherited below it); the token endpoint locks out
guessed secrets; an external OIDC issuer's tokens are checked against its JWKS, served here
by a real HTTP server on loopback.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import jwt
import pyarrow as pa
import pytest
from argon2 import PasswordHasher
from cryptography.hazmat.primitives.asymmetric import rsa
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import ForbiddenError, OAuthError

from catalog_api import CatalogSettings, RunningServer, create_app, serve_in_thread
from catalog_api.security import (
    AuthSettings,
    AuthSetupError,
    ClientSettings,
    GrantSettings,
    OidcSettings,
)
from catalog_api.security.authenticator import MAX_CONCURRENT_SECRET_CHECKS
from catalog_api.security.middleware import PUBLIC_ROUTES
from catalog_api.security.settings import LockoutSettings
from catalog_api.security.tokens import ISSUER
from tests.conftest_catalog import SecureCatalogHandle, secure_settings

TOKENS = "/v1/oauth/tokens"
CLIENT_CREDENTIALS = {"grant_type": "client_credentials", "scope": "catalog"}


def _error(response: httpx.Response, code: int, error_type: str) -> str:
    assert response.status_code == code, response.text
    error = response.json()["error"]
    assert error["code"] == code and error["type"] == error_type
    return str(error["message"])


def _concrete(path: str) -> str:
    """An OpenAPI path with every ``{parameter}`` filled in."""
    return re.sub(r"\{[^}]+\}", "x", path)


def _routes(uri: str) -> list[tuple[str, str]]:
    paths = httpx.get(f"{uri}/openapi.json").json()["paths"]
    return [(method.upper(), path) for path, item in paths.items() for method in item
            if method in ("get", "post", "put", "delete", "head")]


# ------------------------------------------------------------------------ authentication


def test_every_route_but_the_public_ones_needs_a_token(
    secure_catalog_server: SecureCatalogHandle,
) -> None:
    base = secure_catalog_server.server.base_url
    routes = [route for route in _routes(secure_catalog_server.uri) if route not in PUBLIC_ROUTES]
    assert len(routes) > 30
    prefixed = [(method, path.replace("/v1/", "/v1/lakehouse/", 1)) for method, path in routes]
    checked = 0
    for method, path in routes + prefixed:
        for headers in ({}, {"Authorization": "Bearer garbage"}, {"Authorization": "Basic eDp5"}):
            response = httpx.request(method, f"{base}{_concrete(path)}", headers=headers)
            assert response.status_code == 401, (method, path, response.text)
            assert response.headers["WWW-Authenticate"].startswith("Bearer")
            if method != "HEAD":
                _error(response, 401, "NotAuthorizedException")
            checked += 1
    assert checked > 180


def test_public_routes_answer_without_a_token(secure_catalog_server: SecureCatalogHandle) -> None:
    uri = secure_catalog_server.uri
    assert httpx.get(f"{uri}/v1/config").status_code == 200
    assert httpx.get(f"{secure_catalog_server.server.base_url}/healthz").status_code == 200
    assert httpx.get(f"{uri}/openapi.json").status_code == 200


def test_clients_get_tokens_and_use_them(secure_catalog_server: SecureCatalogHandle) -> None:
    handle = secure_catalog_server
    catalog = RestCatalog("admin", uri=handle.uri, credential=handle.credential("admin"))
    namespace = f"auth_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(namespace)
    assert (namespace,) in catalog.list_namespaces()
    with pytest.raises(OAuthError, match="invalid_client"):
        RestCatalog("bad", uri=handle.uri, credential="admin:wrong-secret")
    basic = httpx.post(f"{handle.uri}{TOKENS}", data={"grant_type": "client_credentials"},
                       auth=("reader", handle.secrets["reader"]))
    assert basic.status_code == 200 and basic.json()["expires_in"] == 3600
    unknown = httpx.post(f"{handle.uri}{TOKENS}", data={
        **CLIENT_CREDENTIALS, "client_id": "nobody", "client_secret": "x"})
    assert unknown.status_code == 401 and unknown.json()["error"] == "invalid_client"


def test_a_token_is_exchanged_for_a_fresh_one(secure_catalog_server: SecureCatalogHandle) -> None:
    url = f"{secure_catalog_server.uri}{TOKENS}"
    exchange = "urn:ietf:params:oauth:grant-type:token-exchange"
    token = secure_catalog_server.token("writer")
    fresh = httpx.post(url, data={"grant_type": exchange, "subject_token": token})
    assert fresh.status_code == 200
    claims = jwt.decode(fresh.json()["access_token"], options={"verify_signature": False})
    assert claims["sub"] == "writer" and claims["iss"] == ISSUER
    bad = httpx.post(url, data={"grant_type": exchange, "subject_token": "garbage"})
    assert bad.status_code == 401 and bad.json()["error"] == "invalid_grant"
    other = httpx.post(url, data={"grant_type": "password", "username": "u"})
    assert other.status_code == 400 and other.json()["error"] == "unsupported_grant_type"


@pytest.fixture
def keyed_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A secure server whose token key the test knows (``LAKEHOUSE_TEST_TOKEN_KEY``)."""
    key = uuid.uuid4().hex + uuid.uuid4().hex
    monkeypatch.setenv("LAKEHOUSE_TEST_TOKEN_KEY", key)
    settings, secrets = secure_settings(tmp_path, {"admin": ("admin", None)})
    auth = settings.auth.model_copy(update={"token_key_env": "LAKEHOUSE_TEST_TOKEN_KEY"})
    running = serve_in_thread(settings.model_copy(update={"auth": auth}))
    yield running, key
    running.stop()


def _token(key: str, **claims: Any) -> str:
    now = int(time.time())
    base = {"iss": ISSUER, "aud": "lakehouse", "sub": "admin", "iat": now, "exp": now + 60}
    return jwt.encode({**base, **claims}, key, algorithm="HS256")


def test_expired_forged_and_misdirected_tokens_are_refused(keyed_server: Any) -> None:
    running, key = keyed_server
    url = f"{running.uri}/v1/namespaces"

    def status(token: str) -> httpx.Response:
        return httpx.get(url, headers={"Authorization": f"Bearer {token}"})

    assert status(_token(key)).status_code == 200
    expired = _error(status(_token(key, exp=int(time.time()) - 3600)), 401,
                     "NotAuthorizedException")
    assert "expired" in expired
    assert status(_token("another-key-" + key)).status_code == 401
    assert status(_token(key, aud="another-catalog")).status_code == 401
    assert status(_token(key, iss="someone-else")).status_code == 401
    unsigned = jwt.encode({"iss": ISSUER, "sub": "admin"}, None, algorithm="none")
    assert status(unsigned).status_code == 401


def test_a_principal_without_grants_sees_nothing(keyed_server: Any) -> None:
    running, key = keyed_server
    headers = {"Authorization": f"Bearer {_token(key, sub='stranger')}"}
    admin = {"Authorization": f"Bearer {_token(key)}"}
    assert httpx.post(f"{running.uri}/v1/namespaces", json={"namespace": ["ns"]},
                      headers=admin).status_code == 200
    assert httpx.get(f"{running.uri}/v1/namespaces", headers=headers).json()["namespaces"] == []
    _error(httpx.get(f"{running.uri}/v1/namespaces/ns", headers=headers), 403,
           "ForbiddenException")


# ------------------------------------------------------------------------------- lockout


def test_wrong_secrets_lock_the_client_out(tmp_path: Path) -> None:
    settings, secrets = secure_settings(tmp_path, {"admin": ("admin", None)})
    auth = settings.auth.model_copy(
        update={"lockout": LockoutSettings(max_failures=3, window_s=30)})
    running = serve_in_thread(settings.model_copy(update={"auth": auth}))
    url = f"{running.uri}{TOKENS}"
    try:
        wrong = {**CLIENT_CREDENTIALS, "client_id": "admin", "client_secret": "guess"}
        assert [httpx.post(url, data=wrong).status_code for _ in range(3)] == [401] * 3
        locked = httpx.post(url, data={**wrong, "client_secret": secrets["admin"]})
        assert locked.status_code == 429 and locked.json()["error"] == "invalid_client"
        assert 1 <= int(locked.headers["Retry-After"]) <= 30
    finally:
        running.stop()


def test_secrets_are_never_logged(
    secure_catalog_server: SecureCatalogHandle, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"{secure_catalog_server.uri}{TOKENS}"
    secret = secure_catalog_server.secrets["writer"]
    with caplog.at_level(logging.DEBUG):
        httpx.post(url, data={**CLIENT_CREDENTIALS, "client_id": "writer",
                              "client_secret": secret})
        httpx.post(url, data={**CLIENT_CREDENTIALS, "client_id": "writer",
                              "client_secret": secret + "-typo"})
        httpx.post(url, content=b"\xff\xfe" + secret.encode())
    assert caplog.records, "the server logged nothing at DEBUG: the check would be empty"
    assert secret not in caplog.text


# ------------------------------------------------------------------------------ settings


def test_secrets_from_the_environment_and_argon2_hashes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAKEHOUSE_TEST_SECRET", "from-env")
    clients = {"env": ClientSettings(secret_env="LAKEHOUSE_TEST_SECRET"),
               "hashed": ClientSettings(secret_hash=PasswordHasher().hash("from-hash"))}
    grants = {name: [GrantSettings(role="reader")] for name in clients}  # type: ignore[arg-type]
    (tmp_path / "wh").mkdir()
    settings = CatalogSettings(warehouse=str(tmp_path / "wh"),
                               database_url=f"sqlite:///{tmp_path / 'c.db'}",
                               auth=AuthSettings(enabled=True, clients=clients, grants=grants))
    running = serve_in_thread(settings)
    try:
        for credential in ("env:from-env", "hashed:from-hash"):
            RestCatalog("c", uri=running.uri, credential=credential).list_namespaces()
        with pytest.raises(OAuthError):
            RestCatalog("c", uri=running.uri, credential="hashed:$argon2id")
    finally:
        running.stop()


def test_an_unreadable_secret_names_its_client(tmp_path: Path) -> None:
    auth = AuthSettings(enabled=True, clients={
        "pipeline": ClientSettings(secret_env="LAKEHOUSE_TEST_UNSET_SECRET")})
    settings = CatalogSettings(warehouse=str(tmp_path), database_url="sqlite://", auth=auth)
    with pytest.raises(AuthSetupError, match="auth.clients.pipeline: environment variable"):
        create_app(settings)


def test_auth_without_any_client_or_issuer_is_refused() -> None:
    with pytest.raises(ValueError, match="no clients and no oidc issuer"):
        AuthSettings(enabled=True)
    with pytest.raises(ValueError, match="exactly one of"):
        ClientSettings(secret_env="A", secret_file=Path("b"))
    with pytest.raises(ValueError, match="unknown role"):
        GrantSettings(role="owner")  # type: ignore[arg-type]


# --------------------------------------------------------------------------------- roles


@pytest.fixture(scope="module")
def seeded_table(secure_catalog_server: SecureCatalogHandle) -> tuple[str, str]:
    """A namespace with a table holding one row, created by the admin."""
    handle = secure_catalog_server
    admin = RestCatalog("admin", uri=handle.uri, credential=handle.credential("admin"))
    namespace = f"roles_{uuid.uuid4().hex[:8]}"
    admin.create_namespace(namespace)
    table = admin.create_table(f"{namespace}.t", pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": pa.array([1], pa.int64())}))
    return namespace, "t"


def _write_requests(namespace: str, table: str) -> list[tuple[str, str, Any]]:
    """Every create, commit, drop, purge, rename and register call, on existing names."""
    ns_path = f"/v1/namespaces/{namespace}"
    table_path = f"{ns_path}/tables/{table}"
    ident = {"namespace": [namespace], "name": table}
    moved = {"namespace": [namespace], "name": f"{table}_moved"}
    return [
        ("POST", "/v1/namespaces", {"namespace": [f"{namespace}_new"]}),
        ("DELETE", ns_path, None),
        ("POST", f"{ns_path}/properties", {"updates": {"k": "v"}}),
        ("POST", f"{ns_path}/tables", {"name": "new", "schema": {
            "type": "struct", "schema-id": 0, "fields": []}}),
        ("POST", table_path, {"requirements": [], "updates": []}),
        ("DELETE", table_path, None),
        ("DELETE", f"{table_path}?purgeRequested=true", None),
        ("POST", "/v1/tables/rename", {"source": ident, "destination": moved}),
        ("POST", f"{ns_path}/register", {"name": "r", "metadata-location": "file:///x.json"}),
        ("POST", "/v1/transactions/commit", {"table-changes": [
            {"identifier": ident, "requirements": [], "updates": []}]}),
        ("POST", f"{ns_path}/views", {"name": "v", "schema": {
            "type": "struct", "schema-id": 0, "fields": []}, "view-version": {}}),
        ("POST", f"{ns_path}/views/v", {"requirements": [], "updates": []}),
        ("DELETE", f"{ns_path}/views/v", None),
        ("POST", "/v1/views/rename", {"source": ident, "destination": moved}),
        ("POST", f"{ns_path}/register-view", {"name": "r", "metadata-location": "file:///x"}),
        ("POST", f"/polaris{ns_path}/generic-tables", {"name": "g", "format": "delta"}),
        ("DELETE", f"/polaris{ns_path}/generic-tables/g", None),
    ]


def test_a_reader_reads_and_is_refused_every_change(
    secure_catalog_server: SecureCatalogHandle, seeded_table: tuple[str, str]
) -> None:
    handle = secure_catalog_server
    namespace, table = seeded_table
    reader = RestCatalog("reader", uri=handle.uri, credential=handle.credential("reader"))
    assert (namespace,) in reader.list_namespaces()
    assert (namespace, table) in reader.list_tables(namespace)
    assert reader.load_table(f"{namespace}.{table}").scan().to_arrow().num_rows == 1
    headers = handle.headers("reader")
    plan = httpx.post(f"{handle.uri}/v1/namespaces/{namespace}/tables/{table}/plan",
                      json={}, headers=headers)
    assert plan.status_code == 200 and plan.json()["status"] == "completed"
    for method, path, body in _write_requests(namespace, table):
        response = httpx.request(method, f"{handle.uri}{path}", json=body, headers=headers)
        message = _error(response, 403, "ForbiddenException")
        assert "'reader'" in message and "role" in message, (method, path, message)
    assert reader.load_table(f"{namespace}.{table}").scan().to_arrow().num_rows == 1


def test_a_writer_commits_but_neither_purges_nor_creates_namespaces(
    secure_catalog_server: SecureCatalogHandle, seeded_table: tuple[str, str]
) -> None:
    handle = secure_catalog_server
    namespace, _ = seeded_table
    writer = RestCatalog("writer", uri=handle.uri, credential=handle.credential("writer"))
    table = writer.create_table(f"{namespace}.w_{uuid.uuid4().hex[:6]}",
                                pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": pa.array([7], pa.int64())}))
    assert table.scan().to_arrow().num_rows == 1
    with pytest.raises(ForbiddenError, match="admin role"):
        writer.purge_table(table.name())
    with pytest.raises(ForbiddenError, match="admin role"):
        writer.create_namespace(f"{namespace}_child")
    writer.drop_table(table.name())


def test_grants_are_inherited_by_child_namespaces(tmp_path: Path) -> None:
    principals = {"admin": ("admin", None), "sales": ("reader", "sales"),
                  "eu": ("writer", "sales.eu")}
    settings, secrets = secure_settings(tmp_path, principals)
    running = serve_in_thread(settings)

    def client(name: str) -> RestCatalog:
        return RestCatalog(name, uri=running.uri, credential=f"{name}:{secrets[name]}")

    try:
        admin = client("admin")
        for namespace in ("sales", "sales.eu", "sales.us", "hr"):
            admin.create_namespace(namespace)
        admin.create_table("sales.us.orders", pa.schema([("id", pa.int64())]))
        sales, eu = client("sales"), client("eu")
        assert sales.list_namespaces() == [("sales",)]
        assert eu.list_namespaces() == [("sales",)]  # an ancestor of its grant is listed
        assert eu.list_namespaces("sales") == [("sales", "eu")]
        assert sales.load_table("sales.us.orders").name() == ("sales", "us", "orders")
        with pytest.raises(ForbiddenError):
            sales.create_table("sales.us.more", pa.schema([("id", pa.int64())]))
        eu.create_table("sales.eu.orders", pa.schema([("id", pa.int64())]))
        for forbidden in (lambda: eu.load_table("sales.us.orders"),
                          lambda: eu.load_namespace_properties("hr"),
                          lambda: sales.list_tables("hr")):
            with pytest.raises(ForbiddenError):
                forbidden()
    finally:
        running.stop()


# ---------------------------------------------------------------------------------- OIDC


class _Issuer:
    """An OpenID Connect issuer on loopback: discovery document and JWKS, one RSA key."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        jwks = json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]})
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path.endswith("/.well-known/openid-configuration"):
                    body = json.dumps({"issuer": issuer.url, "jwks_uri": f"{issuer.url}/jwks"})
                elif self.path.endswith("/jwks"):
                    body = jwks
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/realms/lake"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def token(self, subject: str, key: Any = None, **claims: Any) -> str:
        now = int(time.time())
        payload = {"iss": self.url, "aud": "lakehouse-catalog", "sub": subject,
                   "iat": now, "exp": now + 300, **claims}
        return jwt.encode(payload, key or self.key, algorithm="RS256", headers={"kid": "k1"})


def _oidc_catalog(tmp_path: Path, issuer: _Issuer, grants: dict[str, str],
                  **auth: Any) -> RunningServer:
    """A catalog accepting ``issuer``'s tokens; ``grants``: principal -> catalog-wide role."""
    (tmp_path / "wh").mkdir()
    settings = AuthSettings(
        enabled=True, oidc=OidcSettings(issuer=issuer.url, audience="lakehouse-catalog",
                                        **auth.pop("oidc", {})),
        grants={name: [GrantSettings(role=role)]  # type: ignore[arg-type]
                for name, role in grants.items()}, **auth)
    return serve_in_thread(CatalogSettings(warehouse=str(tmp_path / "wh"), auth=settings,
                                           database_url=f"sqlite:///{tmp_path / 'c.db'}"))


def test_tokens_of_an_external_oidc_issuer_are_checked_against_its_jwks(
    tmp_path: Path,
) -> None:
    issuer = _Issuer()
    running = _oidc_catalog(tmp_path, issuer, {"analyst": "reader", "ops": "admin"})
    try:
        ops = RestCatalog("ops", uri=running.uri, token=issuer.token("ops"))
        ops.create_namespace("lake")
        analyst = RestCatalog("analyst", uri=running.uri, token=issuer.token("analyst"))
        assert analyst.list_namespaces() == [("lake",)]
        with pytest.raises(ForbiddenError):
            analyst.create_namespace("mine")
        url = f"{running.uri}/v1/namespaces"
        other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        for bad in (issuer.token("ops", key=other_key), issuer.token("ops", aud="other"),
                    issuer.token("ops", exp=int(time.time()) - 600)):
            code = httpx.get(url, headers={"Authorization": f"Bearer {bad}"}).status_code
            assert code == 401
    finally:
        running.stop()
        issuer.http.shutdown()


def test_an_idempotency_key_is_not_replayed_to_another_principal(
    secure_catalog_server: SecureCatalogHandle, seeded_table: tuple[str, str]
) -> None:
    handle = secure_catalog_server
    namespace, _ = seeded_table
    url = f"{handle.uri}/v1/namespaces/{namespace}/properties"
    body = {"updates": {"owner": "ops"}}
    key = {"Idempotency-Key": str(uuid.uuid4())}
    first = httpx.post(url, json=body, headers={**handle.headers("admin"), **key})
    assert first.status_code == 200
    replay = httpx.post(url, json=body, headers={**handle.headers("admin"), **key})
    assert replay.status_code == 200 and replay.json() == first.json()
    other = httpx.post(url, json=body, headers={**handle.headers("reader"), **key})
    assert other.status_code == 422, other.text


# ------------------------------------------------------------ found in review (issue 17)


def test_concurrent_guesses_do_not_race_past_the_lockout_nor_lock_out_other_addresses(
    tmp_path: Path,
) -> None:
    settings, secrets = secure_settings(tmp_path, {"admin": ("admin", None)})
    auth = settings.auth.model_copy(
        update={"lockout": LockoutSettings(max_failures=3, window_s=30)})
    running = serve_in_thread(settings.model_copy(update={"auth": auth}), host="0.0.0.0")
    wrong = {**CLIENT_CREDENTIALS, "client_id": "admin", "client_secret": "guess"}
    try:
        url = f"http://127.0.0.1:{running.port}/iceberg{TOKENS}"
        with ThreadPoolExecutor(12) as pool:
            codes = list(pool.map(lambda _: httpx.post(url, data=wrong).status_code, range(24)))
        # the checks in flight at once may each see the count below the limit
        most = 3 + MAX_CONCURRENT_SECRET_CHECKS - 1
        assert codes.count(401) <= most and codes.count(429) >= 24 - most, codes
        elsewhere = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"))
        with elsewhere:
            answer = elsewhere.post(f"http://127.0.0.2:{running.port}/iceberg{TOKENS}",
                                    data={**wrong, "client_secret": secrets["admin"]})
        assert answer.status_code == 200, answer.text
    finally:
        running.stop()


def test_token_exchange_ends_with_the_session_and_the_client(keyed_server: Any) -> None:
    running, key = keyed_server
    url = f"{running.uri}{TOKENS}"
    exchange = "urn:ietf:params:oauth:grant-type:token-exchange"
    long_ago = int(time.time()) - 13 * 3600
    stale = httpx.post(url, data={"grant_type": exchange,
                                  "subject_token": _token(key, auth_time=long_ago)})
    assert stale.status_code == 401 and "session has ended" in stale.json()["error_description"]
    removed = httpx.post(url, data={"grant_type": exchange,
                                    "subject_token": _token(key, sub="former-client")})
    assert removed.status_code == 401 and removed.json()["error"] == "invalid_grant"
    fresh = httpx.post(url, data={"grant_type": exchange, "subject_token": _token(key)})
    claims = jwt.decode(fresh.json()["access_token"], options={"verify_signature": False})
    assert claims["auth_time"] <= int(time.time())


def test_example_secrets_and_keys_are_refused(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKEHOUSE_TEST_SECRET", "change-me-pipeline")
    monkeypatch.setenv("LAKEHOUSE_TEST_KEY", "change-me-token-key-of-at-least-32-characters")
    clients = {"p": ClientSettings(secret_env="LAKEHOUSE_TEST_SECRET")}
    for auth, key in ((AuthSettings(enabled=True, clients=clients), "auth.clients.p"),
                      (AuthSettings(enabled=True, clients={"q": ClientSettings(
                          secret_hash=PasswordHasher().hash("x"))},
                          token_key_env="LAKEHOUSE_TEST_KEY"), "auth.token_key")):
        settings = CatalogSettings(warehouse=str(tmp_path), database_url="sqlite://", auth=auth)
        with pytest.raises(AuthSetupError, match=f"{key}: .*placeholder"):
            create_app(settings)
    with pytest.raises(ValueError, match="not an Argon2 hash"):
        ClientSettings(secret_hash="$argon2id$nonsense")
    with pytest.raises(ValueError, match="non-blank"):
        GrantSettings(role="reader", namespace="")  # type: ignore[arg-type]


def test_external_subjects_cannot_pose_as_clients_nor_use_unverified_emails(
    tmp_path: Path,
) -> None:
    issuer = _Issuer()
    running = _oidc_catalog(
        tmp_path, issuer, {"pipeline": "admin", "ana@example.com": "reader"},
        oidc={"principal_claim": "email"},
        clients={"pipeline": ClientSettings(secret_hash=PasswordHasher().hash("s"))})
    url = f"{running.uri}/v1/namespaces"

    def answer(**claims: Any) -> httpx.Response:
        token = issuer.token("subject-id", **claims)
        return httpx.get(url, headers={"Authorization": f"Bearer {token}"})

    try:
        assert answer(email="ana@example.com", email_verified=True).status_code == 200
        assert "not verified" in _error(answer(email="ana@example.com"), 401,
                                        "NotAuthorizedException")
        posing = answer(email="pipeline", email_verified=True)
        assert "name of a client" in _error(posing, 401, "NotAuthorizedException")
    finally:
        running.stop()
        issuer.http.shutdown()
    with pytest.raises(ValueError, match="audience"):
        OidcSettings(issuer=issuer.url)  # type: ignore[call-arg]
