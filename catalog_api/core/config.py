"""Settings of the catalog service."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

from pydantic import BaseModel, Field, field_validator

DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024


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
    """

    warehouse: str
    database_url: str
    catalog_name: str = "lakehouse"
    io_properties: dict[str, str] = Field(default_factory=dict)
    table_config: dict[str, str] = Field(default_factory=dict)
    max_body_bytes: int = Field(default=DEFAULT_MAX_BODY_BYTES, gt=0)

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
