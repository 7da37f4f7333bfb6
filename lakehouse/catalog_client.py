"""Reach the configured catalog: its REST service, or the embedded one in this process."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import requests
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import ForbiddenError, OAuthError, RESTError, UnauthorizedError
from requests.adapters import HTTPAdapter
from requests.exceptions import ConnectionError as RequestConnectionError
from requests.exceptions import RequestException, Timeout
from urllib3.util.retry import Retry

from catalog_api import CatalogSettings
from lakehouse.config import Config
from lakehouse.errors import CatalogAccessError, CatalogUnavailableError, ConfigError
from lakehouse.rest_catalog import ConditionalRestCatalog
from lakehouse.storage import pyiceberg_properties, storage_s3
from lakehouse.storage_probe import prepare_warehouse

if TYPE_CHECKING:
    from catalog_api.in_process import InProcessCatalog
    from catalog_api.security import AuthSetupError

TOKEN_PATH = "/v1/oauth/tokens"
"""The catalog's OAuth2 token endpoint, relative to its base URI."""
READ_RETRIES = 3
"""Times a catalog read is sent again after a refused or reset connection."""
NO_ACCESS_DELEGATION = "header.X-Iceberg-Access-Delegation"
"""pyiceberg's property for that header; empty, the client asks for no vended credentials."""


def oauth_properties(uri: str, credential: str | None) -> dict[str, str]:
    """The client properties that authenticate with ``credential`` (none without one).

    The same keys serve pyiceberg and Iceberg's Java client (Spark): ``credential``
    (``client_id:secret``), ``oauth2-server-uri`` and ``scope``.
    """
    if credential is None:
        return {}
    return {"credential": credential, "oauth2-server-uri": f"{uri}{TOKEN_PATH}",
            "scope": "catalog"}


def request_token(uri: str, credential: str) -> str:
    """A bearer token for ``credential`` (``client_id:secret``) from the catalog at ``uri``.

    Raises:
        CatalogUnavailableError: The token endpoint does not answer.
        CatalogAccessError: It refuses the client.
    """
    client_id, _, secret = credential.partition(":")
    try:
        response = requests.post(f"{uri}{TOKEN_PATH}", timeout=10.0, data={
            "grant_type": "client_credentials", "client_id": client_id,
            "client_secret": secret, "scope": "catalog"})
    except RequestException as error:
        raise CatalogUnavailableError(uri, f"token request failed: {type(error).__name__}"
                                      ) from None
    if response.status_code != 200:
        raise CatalogAccessError(uri, client_id, f"no token (HTTP {response.status_code})")
    token: str = response.json()["access_token"]
    return token


def connect_catalog(uri: str, credential: str | None = None,
                    properties: Mapping[str, str] | None = None) -> RestCatalog:
    """A pyiceberg client of the REST catalog at ``uri``, its access checked now.

    Its ``/v1/config`` is read, a token fetched with ``credential``, and the namespaces
    listed, so that a refused principal fails here rather than in the middle of a tick.

    Args:
        uri: The catalog's base URI.
        credential: ``client_id:secret`` of the pipeline's principal; None for an open catalog.
        properties: More client properties, such as the storage's
            (:func:`storage_properties`).

    Raises:
        CatalogUnavailableError: Nothing answers there, or not as an Iceberg REST catalog.
        CatalogAccessError: The catalog refuses the credential, or anonymous access.
    """
    client_id = credential.partition(":")[0] if credential else None
    try:
        catalog = ConditionalRestCatalog("lakehouse", uri=uri,
                                         **oauth_properties(uri, credential),
                                         **(properties or {}))
        _retry_reads(catalog)
        catalog.list_namespaces()
        return catalog
    except (OAuthError, UnauthorizedError, ForbiddenError) as error:
        raise CatalogAccessError(uri, client_id, _first_line(error)) from None
    except RequestConnectionError:
        raise CatalogUnavailableError(uri, "cannot connect") from None
    except Timeout:
        raise CatalogUnavailableError(uri, "timed out") from None
    except (RequestException, RESTError, ValueError) as error:
        raise CatalogUnavailableError(uri, _first_line(error)[:80]) from None


def _retry_reads(catalog: RestCatalog) -> None:
    """Retry the client's idempotent requests (GET, HEAD) on a refused or reset connection.

    A pooled connection the server closed as the client reused it fails with a reset;
    a read is safe to send again (urllib3's ``Retry``). Commits (POST) are not retried
    here: a commit that may have landed is decided by its requirements, not re-sent.
    pyiceberg has no setting for it, so the adapter is mounted on its session.
    """
    retry = Retry(total=READ_RETRIES, connect=READ_RETRIES, read=READ_RETRIES, status=0,
                  other=0, allowed_methods=frozenset({"GET", "HEAD"}), backoff_factor=0.1,
                  raise_on_status=False)
    adapter = HTTPAdapter(max_retries=retry)
    session = catalog._session  # noqa: SLF001 - no public hook
    session.mount("http://", adapter)
    session.mount("https://", adapter)


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def catalog_answers(uri: str) -> bool:
    """Whether a REST catalog answers ``GET {uri}/v1/config``."""
    try:
        return requests.get(f"{uri}/v1/config", timeout=2.0).status_code == 200
    except RequestException:
        return False


def catalog_settings(config: Config) -> CatalogSettings:
    """The settings of the catalog this configuration serves (embedded, or ``serve``).

    Its S3 storage is the pipeline's (:func:`lakehouse.storage.storage_s3`): the same
    endpoint, region and path-style access.
    """
    return CatalogSettings(warehouse=config.warehouse_uri, database_url=config.database_url,
                           auth=config.catalog.auth,
                           s3=storage_s3(config) or config.catalog.s3)


def storage_properties(config: Config) -> dict[str, str]:
    """The pyiceberg client properties for the pipeline's own access to the storage.

    On S3, the FileIO's endpoint, region and addressing style, and no
    ``X-Iceberg-Access-Delegation`` request: the pipeline reads and writes with its own
    AWS credentials (the standard chain), not with credentials the catalog vends.
    """
    s3 = storage_s3(config)
    if s3 is None:
        return {}
    return {**pyiceberg_properties(s3), NO_ACCESS_DELEGATION: ""}


def auth_config_error(error: AuthSetupError) -> ConfigError:
    """The configuration error for an unusable ``catalog.auth`` (an unreadable secret)."""
    return ConfigError(error.reason, key=f"catalog.{error.key}")


def pipeline_credential(config: Config) -> str | None:
    """``client_id:secret`` of the pipeline's principal (``catalog.credential``), if set.

    Raises:
        ConfigError: The secret's variable is unset or its file unreadable.
    """
    return config.catalog.credential.credential() if config.catalog.credential else None


DELTA_COPY_SUFFIX = "_delta"
"""A view's Delta copy is the generic table ``<namespace>.<table>_delta`` (names are shared
by Iceberg tables and generic tables, so the copy cannot reuse the view's name)."""


def register_delta_copy(catalog: Catalog, view: str, location: str,
                        credential: str | None = None) -> None:
    """List a view's Delta copy in the catalog as a Polaris generic table (format delta).

    Through the REST catalog's Polaris route, or straight into the store when the catalog
    runs in this process (:func:`in_process_catalog`). An existing entry is kept.

    Raises:
        requests.HTTPError: The REST catalog refuses the entry for another reason.
        pyiceberg.exceptions.RESTError: The in-process catalog refuses it.
        CatalogAccessError: The REST catalog refuses ``credential`` a token.
        CatalogUnavailableError: Its token endpoint does not answer.
    """
    namespace, table = view.rsplit(".", 1)
    body: dict[str, str | dict[str, str]] = {
        "name": f"{table}{DELTA_COPY_SUFFIX}", "format": "delta", "base-location": location,
        "doc": f"Delta copy of the maintained view {view}",
        "properties": {"lakehouse.view": view}}
    if not isinstance(catalog, RestCatalog):
        from catalog_api.generic_table_models import CreateGenericTableRequest
        from catalog_api.in_process import InProcessCatalog

        if isinstance(catalog, InProcessCatalog):
            catalog.register_generic_table(tuple(namespace.split(".")),
                                           CreateGenericTableRequest.model_validate(body))
            return
    uri = catalog.properties["uri"]
    headers = {}
    if credential is not None:
        headers["Authorization"] = f"Bearer {request_token(uri, credential)}"
    response = requests.post(f"{uri}/polaris/v1/namespaces/{namespace}/generic-tables",
                             json=body, headers=headers, timeout=10.0)
    if response.status_code != 409:
        response.raise_for_status()


def embedded_unserved(config: Config) -> bool:
    """Whether the catalog is the embedded one and no process serves it now."""
    return config.catalog.embedded and not catalog_answers(config.catalog_uri)


CatalogMode = Literal["remote", "serve", "in_process"]
"""How a process reaches the catalog (:func:`catalog_mode`)."""


def catalog_mode(config: Config, serve: bool = False) -> CatalogMode:
    """How this process reaches the catalog (one probe of ``catalog.uri``).

    ``remote``: a service answers (or the catalog is not embedded). Else the embedded
    catalog is this process's: ``serve`` it (asked, or ``catalog.auth`` on: the in-process
    catalog checks no credential or role, the service checks the pipeline's as any
    client's), or run it ``in_process``.
    """
    if not embedded_unserved(config):
        return "remote"
    return "serve" if serve or config.catalog.auth.enabled else "in_process"


def in_process_catalog(config: Config) -> InProcessCatalog:
    """The embedded catalog, run in this process: its store and rules, no service.

    For a process that needs the embedded catalog while nothing serves it, instead of
    starting the web service for itself (:mod:`catalog_api.in_process`). The caller has
    checked the warehouse (:func:`lakehouse.storage_probe.prepare_warehouse`).
    """
    from catalog_api.in_process import InProcessCatalog

    return InProcessCatalog(catalog_settings(config), storage_properties(config))


@contextmanager
def open_catalog(config: Config) -> Iterator[Catalog]:
    """A pyiceberg client of the configured catalog, for the duration of the block.

    When the catalog is embedded and no process serves it, the catalog runs in this
    process (:func:`in_process_catalog`). An object store warehouse is checked first
    (:func:`lakehouse.storage_probe.prepare_warehouse`).

    Raises:
        lakehouse.errors.StorageError: The warehouse's storage cannot be used.
        CatalogUnavailableError: The catalog does not answer.
        CatalogAccessError: It refuses the pipeline's credential.
    """
    mode = catalog_mode(config)
    if mode == "in_process":
        prepare_warehouse(config)
        catalog = in_process_catalog(config)
        try:
            yield catalog
        finally:
            catalog.close()
        return
    if mode == "serve":  # auth on: served for the block, credentials checked
        from lakehouse.runtime import start_catalog

        server = start_catalog(config, port=0)
        try:
            yield connect_catalog(server.uri, pipeline_credential(config),
                                  storage_properties(config))
        finally:
            server.stop()
        return
    if not config.warehouse_is_local:  # the caller reads Delta tables there
        prepare_warehouse(config)
    yield connect_catalog(config.catalog_uri, pipeline_credential(config),
                          storage_properties(config))


def read_catalog(config: Config) -> Catalog:
    """A client that reads the configured catalog without starting it.

    When the catalog is served (or not embedded), its REST client
    (:func:`connect_catalog`). When it is embedded and no process serves it, pyiceberg's
    ``SqlCatalog`` over the embedded catalog's own database (the store the service keeps
    its tables in, :class:`catalog_api.store.CatalogStore`): commands that only read
    metadata, such as ``lakehouse explain``, then bind no port and start no web app.
    A SQLite database is opened read-only (the service's checks are not on this path);
    the caller must not write through another database's client either.

    Raises:
        CatalogUnavailableError: The catalog is served elsewhere and does not answer, or
            the embedded catalog's database does not exist yet.
        CatalogAccessError: The served catalog refuses the pipeline's credential.
    """
    if not embedded_unserved(config):
        return connect_catalog(config.catalog_uri, pipeline_credential(config),
                               storage_properties(config))
    database = config.database_url
    if database.startswith("sqlite:///"):  # opened read-only: nothing can write through it
        path = database.removeprefix("sqlite:///")
        if not Path(path).exists():
            raise CatalogUnavailableError(database, "the embedded catalog has no database yet")
        database = f"sqlite:///file:{path}?mode=ro&uri=true"
    from pyiceberg.catalog.sql import SqlCatalog

    settings = catalog_settings(config)
    properties = {**settings.io_properties, **storage_properties(config), "uri": database,
                  "warehouse": config.warehouse_uri, "init_catalog_tables": "false"}
    return SqlCatalog(settings.catalog_name, **properties)
