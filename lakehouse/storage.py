"""The warehouse's storage as each library of the pipeline reaches it.

Where an ``s3://`` warehouse (or Delta source) lives is set in one place, ``catalog.s3``
(:class:`catalog_api.core.config.S3Settings`: ``endpoint``, ``region``,
``path_style_access``), completed from the standard AWS environment: ``AWS_ENDPOINT_URL_S3``
or ``AWS_ENDPOINT_URL`` when no endpoint is set, ``AWS_REGION`` or ``AWS_DEFAULT_REGION``
when no region is. :func:`storage_s3` resolves it once; the functions below translate it
for pyiceberg's FileIO, delta-rs and pyarrow (Spark's in :mod:`lakehouse.spark.session`,
DuckDB's in :mod:`lakehouse.duckdb_client`).

Credentials are not part of it: every library takes them from the standard AWS chain
itself (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``,
``AWS_PROFILE``, an instance or container role), so no secret passes through here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import pyarrow.fs as pafs

from catalog_api.core.config import S3Settings
from lakehouse.config import Config, DeltaSource

__all__ = [
    "Folder",
    "delta_storage_options",
    "is_s3",
    "pyiceberg_properties",
    "s3_filesystem",
    "storage_s3",
    "warehouse_folder",
]

S3_SCHEMES = ("s3", "s3a")
ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
REGION_VARIABLES = ("AWS_REGION", "AWS_DEFAULT_REGION")


def is_s3(location: str) -> bool:
    """Whether ``location`` (a path or URI) is on S3 (``s3://``, ``s3a://``)."""
    return urlparse(location).scheme in S3_SCHEMES


def _first_set(variables: tuple[str, ...]) -> str | None:
    return next((os.environ[v] for v in variables if os.environ.get(v)), None)


def storage_s3(config: Config) -> S3Settings | None:
    """The S3 storage of the config, completed from the environment; None when unused.

    ``catalog.s3`` when set, else settings that only say where the storage is (no
    credential vending nor request signing by the catalog service, as without
    ``catalog.s3``). Its endpoint defaults to ``AWS_ENDPOINT_URL_S3`` or
    ``AWS_ENDPOINT_URL``, its region (unless set in the file) to ``AWS_REGION`` or
    ``AWS_DEFAULT_REGION``; ``path_style_access`` is made explicit.

    Args:
        config: The validated configuration.

    Returns:
        The settings, or None when neither the warehouse nor a Delta source is on S3.
    """
    delta_on_s3 = any(isinstance(s, DeltaSource) and is_s3(s.delta)
                      for s in config.sources.values())
    if not is_s3(config.warehouse) and not delta_on_s3:
        return None
    s3 = config.catalog.s3 or S3Settings(vend_credentials=False, remote_signing=False)
    update: dict[str, object] = {"endpoint": s3.endpoint or _first_set(ENDPOINT_VARIABLES)}
    if "region" not in s3.model_fields_set:
        update["region"] = _first_set(REGION_VARIABLES) or s3.region
    resolved = s3.model_copy(update=update)
    return resolved.model_copy(update={"path_style_access": resolved.path_style})


def uses_http(s3: S3Settings) -> bool:
    """Whether the endpoint is plain ``http://`` (no TLS), as local test servers are."""
    return (s3.endpoint or "").startswith("http://")


def pyiceberg_properties(s3: S3Settings) -> dict[str, str]:
    """The pyiceberg FileIO properties (its pyarrow S3 file system) for the storage."""
    properties = {"s3.region": s3.region}
    if s3.endpoint:
        properties["s3.endpoint"] = s3.endpoint
        if not s3.path_style:  # with an endpoint, pyarrow addresses buckets in the path
            properties["s3.force-virtual-addressing"] = "true"
    return properties


def delta_storage_options(s3: S3Settings) -> dict[str, str]:
    """delta-rs ``storage_options`` for the storage (credentials: delta-rs's AWS chain)."""
    options = {"AWS_REGION": s3.region,
               "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": str(not s3.path_style).lower()}
    if s3.endpoint:
        options["AWS_ENDPOINT_URL"] = s3.endpoint
    if uses_http(s3):
        options["AWS_ALLOW_HTTP"] = "true"
    return options


def delta_options(config: Config, uri: str) -> dict[str, str] | None:
    """delta-rs ``storage_options`` for the Delta table at ``uri``; None off S3."""
    s3 = storage_s3(config) if is_s3(uri) else None
    return delta_storage_options(s3) if s3 is not None else None


def s3_filesystem(s3: S3Settings) -> pafs.S3FileSystem:
    """A pyarrow file system on the storage (credentials: the AWS SDK's default chain)."""
    return pafs.S3FileSystem(region=s3.region, endpoint_override=s3.endpoint,
                             force_virtual_addressing=bool(s3.endpoint) and not s3.path_style)


@dataclass(frozen=True)
class Folder:
    """A folder of the warehouse: where pyarrow writes in it, and how Spark names it.

    Attributes:
        filesystem: The pyarrow file system the folder is on.
        path: The folder's path in ``filesystem`` (``bucket/prefix`` on S3).
        uri: The folder as Spark reads it (a local path, or ``s3://bucket/prefix``).
    """

    filesystem: pafs.FileSystem
    path: str
    uri: str

    @classmethod
    def local(cls, path: Path) -> Folder:
        """The local folder ``path`` (made absolute)."""
        absolute = str(path.expanduser().resolve())
        return cls(pafs.LocalFileSystem(), absolute, absolute)

    def child(self, name: str) -> Folder:
        """The folder (or file) ``name`` inside this one."""
        return Folder(self.filesystem, f"{self.path}/{name}", f"{self.uri}/{name}")


def warehouse_folder(config: Config, *names: str) -> Folder:
    """The folder ``<warehouse>/<names...>`` (it need not exist).

    Args:
        config: The validated configuration.
        names: Path components under the warehouse.

    Returns:
        The folder, on the local file system, on S3 (:func:`storage_s3`), or on whatever
        pyarrow resolves another URI scheme to.
    """
    root: Folder
    s3 = storage_s3(config) if is_s3(config.warehouse) else None
    if config.warehouse_is_local:
        root = Folder.local(config.warehouse_path)
    elif s3 is not None:
        parsed = urlparse(config.warehouse)
        path = f"{parsed.netloc}{parsed.path}".rstrip("/")
        root = Folder(s3_filesystem(s3), path, f"{parsed.scheme}://{path}")
    else:
        filesystem, path = pafs.FileSystem.from_uri(config.warehouse)
        root = Folder(filesystem, path.rstrip("/"), config.warehouse.rstrip("/"))
    for name in names:
        root = root.child(name)
    return root
