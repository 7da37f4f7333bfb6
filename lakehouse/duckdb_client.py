"""DuckDB as a reader of the view snapshots: REST catalog ATTACH and ``delta_scan``.

The iceberg, avro, httpfs and delta extensions load offline from their PyPI
packages (``duckdb-extension-*``), never from DuckDB's extension repository.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from urllib.parse import urlparse

import boto3
import duckdb

from catalog_api.core.config import S3Settings
from lakehouse.errors import LakehouseError

EXTENSIONS = ("httpfs", "avro", "iceberg", "delta")


def extension_path(name: str) -> Path:
    """The extension file shipped by the ``duckdb-extension-<name>`` package.

    Raises:
        LakehouseError: The package is not installed.
    """
    try:
        package = importlib.import_module(f"duckdb_extension_{name}")
    except ImportError:
        raise LakehouseError(
            f"DuckDB extension {name!r} missing: pip install duckdb-extension-{name}=="
            f"{duckdb.__version__}") from None
    folder = Path(package.__path__[0]) / "extensions" / f"v{duckdb.__version__}"
    return folder / f"{name}.duckdb_extension"


def connect() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the lakehouse extensions loaded."""
    connection = duckdb.connect()
    for name in EXTENSIONS:
        connection.load_extension(str(extension_path(name)))
    return connection


def attach_catalog(connection: duckdb.DuckDBPyConnection, uri: str, alias: str = "lake",
                   credential: str | None = None) -> None:
    """Attach the Iceberg REST catalog at ``uri`` (``http://host:port/iceberg``) as ``alias``.

    Args:
        connection: The DuckDB connection.
        uri: The catalog's base URI.
        alias: The name of the attached catalog.
        credential: ``client_id:secret`` for the catalog's OAuth2 token endpoint; None for
            an open catalog. It goes into a temporary DuckDB secret named after ``alias``.
    """
    if credential is None:
        connection.execute(f"ATTACH 'warehouse' AS {alias} "
                           f"(TYPE iceberg, ENDPOINT '{uri}', AUTHORIZATION_TYPE 'none')")
        return
    client_id, _, secret = credential.partition(":")
    connection.execute(
        f"CREATE OR REPLACE TEMPORARY SECRET {alias}_catalog (TYPE iceberg, CLIENT_ID ?, "
        f"CLIENT_SECRET ?, OAUTH2_SERVER_URI ?)", [client_id, secret, f"{uri}/v1/oauth/tokens"])
    connection.execute(f"ATTACH 'warehouse' AS {alias} "
                       f"(TYPE iceberg, ENDPOINT '{uri}', SECRET {alias}_catalog)")


def add_s3_secret(connection: duckdb.DuckDBPyConnection, s3: S3Settings,
                  name: str = "lake_s3") -> None:
    """Let ``connection`` read the S3 storage (``delta_scan``, Iceberg data files).

    A temporary DuckDB secret with the storage's endpoint, region and URL style, and the
    credentials of the standard AWS chain as boto3 resolves them (environment variables,
    ``AWS_PROFILE``, an instance role): DuckDB's own ``credential_chain`` provider needs
    its ``aws`` extension. The credentials go in as query parameters, never into SQL text.

    Args:
        connection: The DuckDB connection (httpfs loaded).
        s3: The storage, as :func:`lakehouse.storage.storage_s3` resolves it.
        name: The secret's name.
    """
    options: dict[str, object] = {"REGION": s3.region,
                                  "URL_STYLE": "path" if s3.path_style else "vhost"}
    if s3.endpoint:
        endpoint = urlparse(s3.endpoint)
        options["ENDPOINT"] = endpoint.netloc
        options["USE_SSL"] = endpoint.scheme != "http"
    credentials = boto3.session.Session().get_credentials()
    if credentials is not None:
        frozen = credentials.get_frozen_credentials()
        options["KEY_ID"], options["SECRET"] = frozen.access_key, frozen.secret_key
        if frozen.token:
            options["SESSION_TOKEN"] = frozen.token
    fields = ", ".join(f"{key} ?" for key in options)
    connection.execute(f"CREATE OR REPLACE TEMPORARY SECRET {name} (TYPE s3, {fields})",
                       list(options.values()))
