"""Pytest plugin with fixtures for the catalog service.

Loaded by ``tests/conftest.py`` (``pytest_plugins = ["tests.conftest_catalog"]``) or with
``-p tests.conftest_catalog``. The server is the real app under uvicorn on loopback, with a
real SQLite file and a ``file://`` warehouse in a temporary folder.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from pyiceberg.catalog.rest import RestCatalog

from catalog_api import CatalogSettings, RunningServer, serve_in_thread
from catalog_api.core.config import S3Settings
from catalog_api.security import AuthSettings, ClientSettings, GrantSettings
from catalog_api.security.settings import LockoutSettings


@dataclass(frozen=True)
class CatalogServerHandle:
    """What tests need to know about the running catalog server."""

    uri: str
    warehouse: Path
    database_url: str
    settings: CatalogSettings
    server: RunningServer


@contextmanager
def running_catalog(root: Path, database_url: str) -> Iterator[CatalogServerHandle]:
    """Run the catalog on 127.0.0.1 (free port) with a ``file://`` warehouse under ``root``."""
    warehouse = root / "warehouse"
    warehouse.mkdir()
    settings = CatalogSettings(warehouse=warehouse.as_uri(), database_url=database_url)
    running = serve_in_thread(settings, host="127.0.0.1", port=0)
    try:
        yield CatalogServerHandle(running.uri, warehouse, database_url, settings, running)
    finally:
        running.stop()


@pytest.fixture(scope="session")
def catalog_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CatalogServerHandle]:
    """Start the catalog on 127.0.0.1 (free port) for the whole session, on a SQLite file."""
    root = tmp_path_factory.mktemp("catalog")
    with running_catalog(root, f"sqlite:///{root / 'catalog.db'}") as handle:
        yield handle


@pytest.fixture
def rest_catalog(catalog_server: CatalogServerHandle) -> RestCatalog:
    """A pyiceberg ``RestCatalog`` pointed at the session's catalog server."""
    return RestCatalog("test", uri=catalog_server.uri)


@pytest.fixture
def catalog_namespace(rest_catalog: RestCatalog) -> str:
    """A fresh, empty namespace (unique name) in the session's catalog."""
    name = f"ns_{uuid.uuid4().hex[:10]}"
    rest_catalog.create_namespace(name)
    return name


# ------------------------------------------------------------------ with authentication

#: Principals of the secure catalog: client id -> (role, namespace of the grant or None).
SECURE_PRINCIPALS: dict[str, tuple[str, str | None]] = {
    "admin": ("admin", None),
    "writer": ("writer", None),
    "reader": ("reader", None),
}


@dataclass(frozen=True)
class SecureCatalogHandle:
    """A catalog with authentication on, its clients and their secrets.

    Attributes:
        uri: The catalog's base URI.
        warehouse: The warehouse folder.
        settings: The server's settings.
        server: The running server.
        secrets: Client id -> secret, for every client of ``SECURE_PRINCIPALS``.
    """

    uri: str
    warehouse: Path
    settings: CatalogSettings
    server: RunningServer
    secrets: dict[str, str]

    def credential(self, client: str) -> str:
        """``id:secret`` of a client, as pyiceberg, Spark and Trino take it."""
        return f"{client}:{self.secrets[client]}"

    def token(self, client: str) -> str:
        """A fresh bearer token of a client from the token endpoint."""
        return fetch_token(self.uri, client, self.secrets[client])

    def headers(self, client: str) -> dict[str, str]:
        """The ``Authorization`` header of a client."""
        return {"Authorization": f"Bearer {self.token(client)}"}


def fetch_token(uri: str, client: str, secret: str) -> str:
    """A bearer token from the catalog's token endpoint (client credentials)."""
    response = httpx.post(f"{uri}/v1/oauth/tokens", data={
        "grant_type": "client_credentials", "client_id": client, "client_secret": secret,
        "scope": "catalog"})
    response.raise_for_status()
    token: str = response.json()["access_token"]
    return token


def on_s3(settings: CatalogSettings, warehouse: str, s3: S3Settings) -> CatalogSettings:
    """``settings`` with an ``s3://`` warehouse and the server's storage settings."""
    return settings.model_copy(update={"warehouse": warehouse, "s3": s3,
                                       "io_properties": s3.file_io_properties()})


def secure_settings(root: Path, principals: dict[str, tuple[str, str | None]],
                    **extra: Any) -> tuple[CatalogSettings, dict[str, str]]:
    """Settings with auth on: one client per principal, its secret in a file under ``root``."""
    secrets_dir = root / "secrets"
    secrets_dir.mkdir(parents=True, exist_ok=True)
    secrets: dict[str, str] = {}
    for client in principals:
        secrets[client] = f"{client}-{uuid.uuid4().hex}"
        (secrets_dir / client).write_text(secrets[client])
    warehouse = root / "warehouse"
    warehouse.mkdir(parents=True, exist_ok=True)
    auth = AuthSettings(
        enabled=True,
        clients={c: ClientSettings(secret_file=secrets_dir / c) for c in principals},
        grants={c: [GrantSettings(role=role, namespace=ns)]  # type: ignore[arg-type]
                for c, (role, ns) in principals.items()},
    )
    settings = CatalogSettings(warehouse=warehouse.as_uri(),
                               database_url=f"sqlite:///{root / 'catalog.db'}", auth=auth, **extra)
    return settings, secrets


@pytest.fixture(scope="session")
def secure_catalog_server(tmp_path_factory: pytest.TempPathFactory
                          ) -> Iterator[SecureCatalogHandle]:
    """The catalog with authentication on (clients ``admin``, ``writer``, ``reader``)."""
    root = tmp_path_factory.mktemp("secure-catalog")
    settings, secrets = secure_settings(root, SECURE_PRINCIPALS)
    # Every test calls from 127.0.0.1: tests sending wrong secrets on purpose must not lock
    # the others out (the lockout has its own test, on its own server).
    lenient = settings.auth.model_copy(update={"lockout": LockoutSettings(max_failures=1000)})
    settings = settings.model_copy(update={"auth": lenient})
    running = serve_in_thread(settings, host="127.0.0.1", port=0)
    try:
        yield SecureCatalogHandle(running.uri, root / "warehouse", settings, running, secrets)
    finally:
        running.stop()
