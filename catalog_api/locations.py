"""Where tables may live: every table location must be inside the warehouse.

A client could otherwise make the catalog write metadata anywhere the server may write
(``set-location`` to ``file:///etc``) or register metadata it should not read. Requests that
name a location outside the warehouse (or the extra roots of
``CatalogSettings.allowed_locations``) get 400 ``BadRequestException``: the spec's 400 covers
"request validation failure", while its 403 is about the caller's permissions, which this
catalog does not model.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import urlparse

from pyiceberg.table.update import SetLocationUpdate, SetPropertiesUpdate, TableUpdate

from catalog_api.core.config import CatalogSettings, is_local_location, local_path
from catalog_api.errors import BadRequestError

#: Table properties that hold locations the table writes to.
LOCATION_PROPERTIES = ("write.data.path", "write.metadata.path", "write.object-storage.path")

_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3", "": "file"}


def _parts(location: str) -> tuple[str, str, tuple[str, ...]]:
    if is_local_location(location):
        path = Path(local_path(location)).expanduser().resolve()
        return "file", "", path.parts
    parsed = urlparse(location)
    scheme = _SCHEME_ALIASES.get(parsed.scheme, parsed.scheme)
    normalized = posixpath.normpath("/" + parsed.path.lstrip("/"))
    return scheme, parsed.netloc, tuple(p for p in normalized.split("/") if p)


def is_within(location: str, root: str) -> bool:
    """Tell whether ``location`` is ``root`` or below it, after normalization.

    ``..`` segments are resolved, local paths and ``file:`` URIs compare equal, and
    ``s3a``/``s3n`` count as ``s3``.

    Args:
        location: A path or URI.
        root: A path or URI.
    """
    scheme, netloc, parts = _parts(location)
    root_scheme, root_netloc, root_parts = _parts(root)
    return (scheme, netloc) == (root_scheme, root_netloc) and parts[: len(root_parts)] == root_parts


def check_location(settings: CatalogSettings, location: str, what: str = "location") -> str:
    """Refuse a location outside the warehouse and the allowed roots.

    Args:
        settings: Service settings (``warehouse``, ``allowed_locations``).
        location: The location a request names.
        what: What the location is, for the error message.

    Returns:
        The location, unchanged.

    Raises:
        BadRequestError: If the location lies outside every allowed root.
    """
    roots = (settings.warehouse, *settings.allowed_locations)
    if not any(is_within(location, root) for root in roots):
        raise BadRequestError(f"{what} {location} is outside the warehouse {settings.warehouse}")
    return location


def check_properties(settings: CatalogSettings, properties: Mapping[str, str]) -> None:
    """Check the location-valued table properties (``write.data.path``, ...).

    Raises:
        BadRequestError: If one of them points outside the allowed roots.
    """
    for key in LOCATION_PROPERTIES:
        if properties.get(key):
            check_location(settings, properties[key], f"Property {key}")


def check_updates(settings: CatalogSettings, updates: Iterable[TableUpdate]) -> None:
    """Check the locations that table updates set (``set-location``, location properties).

    Raises:
        BadRequestError: If an update points outside the allowed roots.
    """
    for update in updates:
        if isinstance(update, SetLocationUpdate):
            check_location(settings, update.location, "Table location")
        elif isinstance(update, SetPropertiesUpdate):
            check_properties(settings, update.updates)
