"""Reach the configured REST catalog, starting the embedded one when nothing serves it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import RESTError
from requests.exceptions import ConnectionError as RequestConnectionError
from requests.exceptions import RequestException, Timeout

from lakehouse.config import Config
from lakehouse.errors import CatalogUnavailableError


def connect_catalog(uri: str) -> RestCatalog:
    """A pyiceberg client of the REST catalog at ``uri`` (its ``/v1/config`` is read now).

    Raises:
        CatalogUnavailableError: Nothing answers there, or not as an Iceberg REST catalog.
    """
    try:
        return RestCatalog("lakehouse", uri=uri)
    except RequestConnectionError:
        raise CatalogUnavailableError(uri, "cannot connect") from None
    except Timeout:
        raise CatalogUnavailableError(uri, "timed out") from None
    except (RequestException, RESTError, ValueError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise CatalogUnavailableError(uri, reason[:80]) from None


def catalog_answers(uri: str) -> bool:
    """Whether a REST catalog answers ``GET {uri}/v1/config``."""
    try:
        return httpx.get(f"{uri}/v1/config", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


DELTA_COPY_SUFFIX = "_delta"
"""A view's Delta copy is the generic table ``<namespace>.<table>_delta`` (names are shared
by Iceberg tables and generic tables, so the copy cannot reuse the view's name)."""


def register_delta_copy(catalog_uri: str, view: str, location: str) -> None:
    """List a view's Delta copy in the catalog as a Polaris generic table (format delta).

    An existing entry is kept. Raises ``httpx.HTTPStatusError`` on any other refusal.
    """
    namespace, table = view.rsplit(".", 1)
    body = {"name": f"{table}{DELTA_COPY_SUFFIX}", "format": "delta", "base-location": location,
            "doc": f"Delta copy of the maintained view {view}",
            "properties": {"lakehouse.view": view}}
    response = httpx.post(
        f"{catalog_uri}/polaris/v1/namespaces/{namespace}/generic-tables", json=body, timeout=10.0)
    if response.status_code != 409:
        response.raise_for_status()


@contextmanager
def open_catalog(config: Config) -> Iterator[Catalog]:
    """A pyiceberg client of the configured catalog.

    When the catalog is embedded and no process serves it, one is started on a free
    loopback port for the duration of the block.
    """
    if catalog_answers(config.catalog_uri) or not config.catalog.embedded:
        yield connect_catalog(config.catalog_uri)
        return
    from lakehouse.runtime import start_catalog

    server = start_catalog(config, port=0)
    try:
        yield connect_catalog(server.uri)
    finally:
        server.stop()
