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

import pytest
from pyiceberg.catalog.rest import RestCatalog

from catalog_api import CatalogSettings, RunningServer, serve_in_thread


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
