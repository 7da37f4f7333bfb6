"""Where tables, views and their files may live: inside the warehouse, each in its own place.

A client could otherwise make the catalog write metadata anywhere the server may write
(``set-location`` to ``file:///etc``), read files it should not, sign or purge files of
other tables. The rules, all answered with 400 ``BadRequestException`` (the spec's 400 covers
"request validation failure", while its 403 is about the caller's permissions):

- every location a request names or causes is inside the warehouse (or one of the extra
  roots of ``CatalogSettings.allowed_locations``), has no control character and fits the
  catalog's ``VARCHAR(1000)`` location columns;
- a table's or view's location lies strictly below a root, and neither inside nor around
  the location of another table, view or generic table (:func:`check_no_overlap`);
- the files of a table (metadata files, manifest lists, manifests, data and delete files,
  statistics) lie inside the table's own prefixes: its location and its write path
  properties, which themselves lie inside the location (:func:`table_roots`,
  :func:`check_inside`).

Locations are compared as the FileIO reads them: local paths after resolving ``..`` and
symbolic links (both as written and percent-decoded, since ``file:`` URIs reach pyarrow
undecoded); object-store keys literally, where a ``.`` or ``..`` segment is never inside
anything.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from urllib.parse import urlparse

from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import SetLocationUpdate, SetPropertiesUpdate

from catalog_api.core.config import CatalogSettings, is_local_location, local_path
from catalog_api.errors import BadRequestError

#: Table properties that hold locations the table writes to (``write.folder-storage.path``
#: and ``write.object-storage.path`` are older names of ``write.data.path``).
LOCATION_PROPERTIES = (
    "write.data.path",
    "write.metadata.path",
    "write.object-storage.path",
    "write.folder-storage.path",
)
#: Longest location stored in the catalog database (``VARCHAR(1000)`` columns).
MAX_LOCATION_CHARS = 1000
#: Longest table or view location: its metadata files' names (about 70 characters) must fit.
MAX_TABLE_LOCATION_CHARS = 900
#: Longest name of one folder of a local location (the file systems' ``NAME_MAX``).
MAX_FOLDER_NAME_BYTES = 255

_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3", "": "file"}

#: One reading of a location: scheme, bucket or host, path segments.
Parts = tuple[str, str, tuple[str, ...]]


def _local_views(location: str) -> list[Parts] | None:
    """The readings of a local location; None for a relative one (``~`` included).

    The FileIO would resolve a relative path against the server's working directory.
    """
    paths = [local_path(location)]
    if urlparse(location).scheme == "file":  # pyarrow opens the path as written
        paths.append(Path(urlparse(location).path))
    if not all(path.is_absolute() for path in paths):
        return None
    return [("file", "", path.resolve().parts) for path in paths]


def _views(location: str) -> list[Parts] | None:
    """The readings of a location; None when it cannot be inside anything."""
    if _path_problem(location) is not None:
        return None
    if is_local_location(location):
        return _local_views(location)
    parsed = urlparse(location)
    segments = parsed.path.removeprefix("/").split("/")
    if segments and not segments[-1]:
        segments.pop()
    if any(segment in (".", "..") for segment in segments):
        return None
    return [(_SCHEME_ALIASES.get(parsed.scheme, parsed.scheme), parsed.netloc, tuple(segments))]


def _below(view: Parts, root: Parts) -> bool:
    return view[:2] == root[:2] and view[2][: len(root[2])] == root[2]


def _within_any(views: list[Parts] | None, roots: Iterable[list[Parts] | None]) -> bool:
    """Whether every reading of a location is below some reading of one of ``roots``."""
    if views is None:
        return False
    return any(
        root is not None and all(any(_below(view, r) for r in root) for view in views)
        for root in roots
    )


def is_within(location: str, root: str) -> bool:
    """Tell whether ``location`` is ``root`` or below it, as the FileIO would read both.

    Local paths and ``file:`` URIs compare equal once resolved; ``s3a``/``s3n`` count as
    ``s3``; an object-store location with a ``.`` or ``..`` segment is within nothing.

    Args:
        location: A path or URI.
        root: A path or URI.
    """
    return _within_any(_views(location), [_views(root)])


def _path_problem(path: str) -> str | None:
    if not path:
        return "is empty"
    if any(unicodedata.category(char) in ("Cc", "Cs") for char in path):
        return "must not contain control characters (such as NUL)"
    parsed = urlparse(path)
    if parsed.scheme == "file" and parsed.netloc:
        return "must not name a host (use file:///path)"
    return None


def _location_problem(location: str) -> str | None:
    if len(location) > MAX_LOCATION_CHARS:
        return f"must be at most {MAX_LOCATION_CHARS} characters long"
    return _path_problem(location)


def check_location(settings: CatalogSettings, location: str, what: str = "location") -> str:
    """Refuse a location outside the warehouse and the allowed roots, or malformed.

    Args:
        settings: Service settings (``warehouse``, ``allowed_locations``).
        location: The location a request names.
        what: What the location is, for the error message.

    Returns:
        The location, unchanged.

    Raises:
        BadRequestError: If the location is malformed or lies outside every allowed root.
    """
    problem = _location_problem(location)
    if problem is not None:
        raise BadRequestError(f"{what} {location!r} {problem}")
    if not any(is_within(location, root) for root in roots_of(settings)):
        raise BadRequestError(f"{what} {location} is outside the warehouse {settings.warehouse}")
    return location


def roots_of(settings: CatalogSettings) -> tuple[str, ...]:
    """The warehouse and the extra roots of ``allowed_locations``."""
    return (settings.warehouse, *settings.allowed_locations)


def check_table_location(
    settings: CatalogSettings, location: str, what: str = "Table location"
) -> str:
    """Refuse a table, view or generic-table location that is not strictly inside a root.

    Raises:
        BadRequestError: If the location is outside the warehouse, is a root itself (it
            would hold every table), is too long for its metadata files' names or (local)
            has a folder name longer than file systems allow.
    """
    check_location(settings, location, what)
    if is_local_location(location) and any(
        len(name.encode("utf-8")) > MAX_FOLDER_NAME_BYTES for name in location.split("/")
    ):
        raise BadRequestError(f"{what}: folder names must be at most {MAX_FOLDER_NAME_BYTES} "
                              "bytes long")
    if len(location) > MAX_TABLE_LOCATION_CHARS:
        raise BadRequestError(
            f"{what} must be at most {MAX_TABLE_LOCATION_CHARS} characters long"
        )
    if any(is_within(root, location) for root in roots_of(settings)):
        raise BadRequestError(f"{what} {location} must be below the warehouse, not the warehouse")
    return location


def check_properties(
    settings: CatalogSettings, properties: Mapping[str, str], location: str | None = None
) -> None:
    """Check the location-valued table properties (``write.data.path``, ...).

    Args:
        settings: Service settings (the warehouse and allowed roots).
        properties: Table properties.
        location: The table's location, once known: each write path must lie inside it, so
            that a table never writes into, nor claims the files of, another table.

    Raises:
        BadRequestError: If one of them points outside the allowed roots, or outside the
            table's location.
    """
    for key in LOCATION_PROPERTIES:
        if properties.get(key):
            check_location(settings, properties[key], f"Property {key}")
            if location is not None:
                check_inside((location,), [properties[key]], f"Property {key}")


def check_updates(settings: CatalogSettings, updates: Iterable[object]) -> None:
    """Check the locations that table or view updates set (``set-location``, properties).

    Raises:
        BadRequestError: If an update points outside the allowed roots.
    """
    for update in updates:
        if isinstance(update, SetLocationUpdate):
            check_table_location(settings, update.location, "Location")
        elif isinstance(update, SetPropertiesUpdate):
            check_properties(settings, update.updates)


def table_roots(location: str, properties: Mapping[str, str]) -> tuple[str, ...]:
    """The prefixes a table's files may live under: its location and its write paths.

    Args:
        location: The table's location.
        properties: The table's properties.
    """
    paths = (properties.get(key) for key in LOCATION_PROPERTIES)
    return (location, *(path for path in paths if path))


def outside(paths: Iterable[str], roots: Sequence[str]) -> list[str]:
    """The paths under none of ``roots``, and the malformed ones (control characters).

    Args:
        paths: Files, e.g. the data files of a manifest.
        roots: Prefixes, e.g. a table's from :func:`table_roots`.
    """
    root_views = [_views(root) for root in roots]
    return [path for path in paths if not _within_any(_views(path), root_views)]


def check_inside(roots: Sequence[str], paths: Iterable[str], what: str) -> None:
    """Refuse files that lie outside a table's own prefixes.

    Args:
        roots: The table's prefixes, from :func:`table_roots`.
        paths: The files.
        what: What the files are, for the message (``Data file``, ``Manifest list``).

    Raises:
        BadRequestError: If a path is under none of ``roots``.
    """
    for path in outside(paths, roots)[:1]:
        raise BadRequestError(f"{what} {path!r} is outside the table's location {roots[0]}")


def check_table_metadata(
    settings: CatalogSettings, metadata: TableMetadata, metadata_location: str
) -> None:
    """Check every location a table metadata file names, before it is registered.

    The location and write paths must be inside the warehouse; the metadata file itself,
    the manifest lists of its snapshots, the files of its metadata log and its statistics
    files inside the table's own prefixes.

    Raises:
        BadRequestError: If a location breaks a rule.
    """
    check_table_location(settings, metadata.location)
    check_properties(settings, metadata.properties, metadata.location)
    roots = table_roots(metadata.location, metadata.properties)
    check_inside(roots, [metadata_location], "Metadata file")
    check_inside(roots, (snap.manifest_list for snap in metadata.snapshots), "Manifest list")
    check_inside(roots, (entry.metadata_file for entry in metadata.metadata_log),
                 "Metadata log file")
    check_inside(roots, statistics_paths(metadata), "Statistics file")


def statistics_paths(metadata: TableMetadata) -> list[str]:
    """The statistics and partition statistics files a table's metadata names."""
    return [s.statistics_path for s in (*metadata.statistics, *metadata.partition_statistics)]


def check_no_overlap(location: str, others: Iterable[str], what: str = "Location") -> None:
    """Refuse a location that is, contains or lies inside the location of another entity.

    Args:
        location: The location of the table, view or generic table being placed.
        others: The locations of every other table, view and generic table.
        what: What the location is, for the message.

    Raises:
        BadRequestError: If one of ``others`` overlaps ``location``; the message does not
            name the other entity (the caller may not be allowed to know it).
    """
    views = _views(location)
    for other in others:
        other_views = _views(other)
        if _within_any(views, [other_views]) or _within_any(other_views, [views]):
            raise BadRequestError(
                f"{what} {location} overlaps the location of another table, view or "
                "generic table"
            )


def confined(paths: Iterable[str], inside: str, excluded: Sequence[str]) -> list[str]:
    """The paths that lie inside ``inside`` and inside none of ``excluded``.

    Args:
        paths: Files, e.g. those a purge would delete.
        inside: The location they must be under.
        excluded: Locations they must not be under.
    """
    inside_views = [_views(inside)]
    excluded_views = [_views(location) for location in excluded]
    kept = []
    for path in paths:
        views = _views(path)
        if _within_any(views, inside_views) and not _within_any(views, excluded_views):
            kept.append(path)
    return kept


def unreadable_reason(exc: BaseException, expected: str) -> str:
    """Why a file a client named cannot be used, without quoting the file's content.

    Args:
        exc: What reading or parsing the file raised.
        expected: What the file should have been, e.g. ``table metadata``.

    Returns:
        ``no such file``, the system's reason (``Is a directory``), or ``not <expected>``.
    """
    if isinstance(exc, FileNotFoundError):
        return "no such file"
    if isinstance(exc, OSError):
        return exc.strerror or "not readable"
    return f"not {expected}"
