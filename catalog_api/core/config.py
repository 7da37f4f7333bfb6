"""Settings of the catalog service."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

from pydantic import BaseModel, Field, field_validator, model_validator

from catalog_api.core import API_PREFIX
from catalog_api.security.settings import AuthSettings

__all__ = [
    "API_PREFIX",
    "CatalogSettings",
    "PlanningSettings",
    "S3Settings",
    "is_local_location",
    "local_path",
]

DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
DEFAULT_TABLE_BODY_CACHE_BYTES = 64 * 1024 * 1024
DEFAULT_IDEMPOTENCY_KEY_LIFETIME = timedelta(minutes=30)
#: The spec's default namespace separator, URL-encoded (the unit separator byte 0x1F).
DEFAULT_NAMESPACE_SEPARATOR = "%1F"


class PlanningSettings(BaseModel):
    """Server-side scan planning (``POST .../tables/{table}/plan``).

    Attributes:
        max_files_per_response: Most file scan tasks sent in one response; a larger plan is
            split into ``plan-tasks`` of this many files each, fetched with ``.../tasks``.
        async_min_data_files: Plans of snapshots with at least this many data files (per the
            snapshot summary's ``total-data-files``) run in a background thread: the answer
            is ``submitted`` and clients poll ``GET .../plan/{plan-id}``.
        result_ttl_s: Seconds a plan's results and plan tasks are kept for fetching.
        workers: Background planning threads.
    """

    max_files_per_response: int = Field(default=1000, gt=0)
    async_min_data_files: int = Field(default=100_000, gt=0)
    result_ttl_s: float = Field(default=3600.0, gt=0)
    workers: int = Field(default=2, gt=0)


class S3Settings(BaseModel):
    """Object storage of an ``s3://`` warehouse, and credential vending for it.

    Attributes:
        endpoint: S3 endpoint URL (e.g. ``http://127.0.0.1:9000``); AWS's when unset.
        region: Region of the bucket and of STS.
        path_style_access: Address buckets in the path (``http://host/bucket/key``) rather
            than in the host name; None: path-style exactly when ``endpoint`` is set (MinIO,
            moto and most S3-compatible stores need it, AWS does not).
        access_key_id: The catalog server's own access key (it writes metadata files).
        secret_access_key: Secret of ``access_key_id``.
        session_token: Session token of the server's own credentials, if temporary.
        sts_endpoint: STS endpoint URL used for vending; AWS's regional one when unset.
        role_arn: Role assumed (STS AssumeRole) to vend credentials; without it STS
            GetFederationToken vends them. Either way a session policy scopes them to one
            table's location, and to reading unless the caller may write the table.
        credentials_lifetime_s: Lifetime of vended credentials (STS allows 900-43200 s).
        vend_credentials: Answer ``X-Iceberg-Access-Delegation: vended-credentials``.
        remote_signing: Answer ``X-Iceberg-Access-Delegation: remote-signing`` and sign
            clients' S3 requests (``signRequest``) inside their table's location with the
            server's own credentials.
    """

    endpoint: str | None = None
    region: str = "us-east-1"
    path_style_access: bool | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None
    sts_endpoint: str | None = None
    role_arn: str | None = None
    credentials_lifetime_s: int = Field(default=3600, ge=900, le=43200)
    vend_credentials: bool = True
    remote_signing: bool = True

    @property
    def path_style(self) -> bool:
        """Whether requests address the bucket in the path (see ``path_style_access``)."""
        if self.path_style_access is not None:
            return self.path_style_access
        return self.endpoint is not None

    def file_io_properties(self) -> dict[str, str]:
        """The server's own pyiceberg FileIO properties for this storage."""
        properties = {
            "s3.endpoint": self.endpoint,
            "s3.region": self.region,
            "s3.access-key-id": self.access_key_id,
            "s3.secret-access-key": self.secret_access_key,
            "s3.session-token": self.session_token,
            # pyarrow addresses buckets in the path exactly when an endpoint is set
            "s3.force-virtual-addressing": "true" if self.endpoint and not self.path_style
            else None,
        }
        return {key: value for key, value in properties.items() if value}


class CatalogSettings(BaseModel):
    """Configuration of one catalog service instance.

    Attributes:
        warehouse: Root of the table locations: a local folder path or a URI
            (``file://``, ``s3://``). A plain path is turned into an absolute ``file://`` URI.
        database_url: SQLAlchemy URL of the catalog database, e.g.
            ``sqlite:////tmp/catalog.db`` or ``postgresql+psycopg2://user:pw@host/db``.
        catalog_name: Name stored in the ``catalog_name`` column of the catalog tables.
        io_properties: FileIO properties the server uses to read and write metadata files
            (e.g. ``s3.endpoint``, ``s3.access-key-id``).
        table_config: Properties returned to clients in the ``config`` of every
            load-table response (e.g. an ``s3.endpoint`` clients must use).
        max_body_bytes: Largest accepted request body; larger requests get 413.
        config_defaults: Extra ``defaults`` sent by ``GET /v1/config``.
        config_overrides: Extra ``overrides`` sent by ``GET /v1/config`` (``warehouse`` and
            ``namespace-separator`` are always sent).
        namespace_separator: URL-encoded separator of namespace parts in paths and in the
            ``parent`` query parameter, advertised as the ``namespace-separator`` override.
            ``%1F`` (0x1F) is always accepted too, as the spec requires.
        idempotency_key_lifetime: How long an ``Idempotency-Key`` is remembered; advertised
            as ``idempotency-key-lifetime`` (ISO-8601 duration, e.g. ``PT30M``).
        default_page_size: Page size of paginated lists when the client sends a
            ``pageToken`` but no ``pageSize``.
        max_page_size: Largest page a paginated list returns, whatever ``pageSize`` asks.
        auth: Authentication (OAuth2 clients, tokens, an external OIDC issuer) and roles
            per namespace; off by default (every caller is an anonymous admin).
        allowed_locations: Roots besides ``warehouse`` where table locations and registered
            metadata files may live; anything else is refused with 400.
        planning: Server-side scan planning limits.
        s3: S3 storage and credential vending; its keys fill ``io_properties`` gaps.
        table_body_cache_bytes: Bound of the LRU of serialized ``loadTable`` bodies (keyed
            by metadata file and ``snapshots`` mode; metadata files are immutable); 0 turns
            the cache off.
    """

    warehouse: str
    database_url: str
    catalog_name: str = "lakehouse"
    io_properties: dict[str, str] = Field(default_factory=dict)
    table_config: dict[str, str] = Field(default_factory=dict)
    max_body_bytes: int = Field(default=DEFAULT_MAX_BODY_BYTES, gt=0)
    config_defaults: dict[str, str] = Field(default_factory=dict)
    config_overrides: dict[str, str] = Field(default_factory=dict)
    namespace_separator: str = DEFAULT_NAMESPACE_SEPARATOR
    idempotency_key_lifetime: timedelta = Field(
        default=DEFAULT_IDEMPOTENCY_KEY_LIFETIME, gt=timedelta(0)
    )
    default_page_size: int = Field(default=100, gt=0)
    max_page_size: int = Field(default=1000, gt=0)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    allowed_locations: list[str] = Field(default_factory=list)
    planning: PlanningSettings = Field(default_factory=PlanningSettings)
    s3: S3Settings | None = None
    table_body_cache_bytes: int = Field(default=DEFAULT_TABLE_BODY_CACHE_BYTES, ge=0)

    @field_validator("warehouse")
    @classmethod
    def _normalize_warehouse(cls, value: str) -> str:
        """Turn a local folder path into an absolute ``file://`` URI without trailing slash."""
        value = value.strip()
        if not value:
            raise ValueError("warehouse must not be empty")
        if "://" not in value:
            value = Path(value).expanduser().resolve().as_uri()
        return value.rstrip("/")

    @field_validator("namespace_separator")
    @classmethod
    def _check_separator(cls, value: str) -> str:
        """Refuse an empty separator and ``.`` (namespace parts may not contain dots)."""
        decoded = unquote(value)
        if not decoded or "." in decoded or "/" in decoded:
            raise ValueError("namespace_separator must be non-empty, without '.' or '/'")
        return value

    @property
    def decoded_namespace_separator(self) -> str:
        """The namespace separator as it appears in a decoded URL path or query."""
        return unquote(self.namespace_separator)

    @model_validator(mode="after")
    def _s3_io_properties(self) -> CatalogSettings:
        """Let ``s3`` settings provide the FileIO properties that ``io_properties`` lacks."""
        if self.s3 is not None:
            self.io_properties = {**self.s3.file_io_properties(), **self.io_properties}
        return self

    @property
    def warehouse_is_local(self) -> bool:
        """Whether the warehouse lives on the local file system."""
        return is_local_location(self.warehouse)


def is_local_location(location: str) -> bool:
    """Tell whether a location is on the local file system.

    Args:
        location: A path or URI.

    Returns:
        True for plain paths and ``file:`` URIs.
    """
    return urlparse(location).scheme in ("", "file")


def local_path(location: str) -> Path:
    """Convert a local location (path or ``file:`` URI) into a path.

    Args:
        location: A plain path or a ``file:`` URI.

    Returns:
        The local file system path.

    Raises:
        ValueError: If the location is not local.
    """
    parsed = urlparse(location)
    if parsed.scheme == "":
        return Path(location)
    if parsed.scheme != "file":
        raise ValueError(f"Not a local location: {location}")
    return Path(url2pathname(parsed.path))
