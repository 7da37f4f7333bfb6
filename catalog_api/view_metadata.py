"""View metadata: build it, apply ``ViewUpdate``s to it, read and write its JSON files.

Follows the Iceberg view spec (format version 1) and the rules of Iceberg Java's
``ViewMetadata.Builder``: schema and version ids are reused for identical content and
otherwise the highest id + 1; ``-1`` in ``add-view-version``/``set-current-view-version`` means
"the last one added by this commit"; a change of the current version appends a ``version-log``
entry; only the newest ``version.history.num-entries`` versions (default 10) are kept.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from pyiceberg.io import load_file_io
from pyiceberg.schema import Schema
from pyiceberg.serializers import Compressor
from pyiceberg.table.update import (
    AddSchemaUpdate,
    AssignUUIDUpdate,
    RemovePropertiesUpdate,
    SetLocationUpdate,
    SetPropertiesUpdate,
    UpgradeFormatVersionUpdate,
)
from pyiceberg.typedef import Properties
from pyiceberg.view.metadata import ViewHistoryEntry, ViewMetadata, ViewVersion

from catalog_api.errors import BadRequestError
from catalog_api.locations import unreadable_reason
from catalog_api.view_models import AddViewVersionUpdate, SetCurrentViewVersionUpdate, ViewUpdate

VIEW_FORMAT_VERSION = 1
HISTORY_SIZE_PROPERTY = "version.history.num-entries"
DEFAULT_HISTORY_SIZE = 10
_FILE_VERSION = re.compile(r"^(\d+)-")


def new_view_metadata(
    location: str, schema: Schema, version: ViewVersion, properties: Properties
) -> ViewMetadata:
    """Build the metadata of a new view: schema 0, version 1 current.

    Args:
        location: The view's base location.
        schema: The view's schema (its id is replaced by 0).
        version: The first version (its ``version-id`` and ``schema-id`` are replaced).
        properties: View properties.

    Returns:
        Format-version 1 metadata with a fresh UUID.

    Raises:
        BadRequestError: If the version has two representations of one dialect.
    """
    _check_dialects(version)
    first = version.model_copy(update={"version_id": 1, "schema_id": 0})
    return ViewMetadata.model_validate(
        {
            "view-uuid": str(uuid.uuid4()),
            "format-version": VIEW_FORMAT_VERSION,
            "location": location.rstrip("/"),
            "schemas": [schema.model_copy(update={"schema_id": 0})],
            "current-version-id": 1,
            "versions": [first],
            "version-log": [_history_entry(first)],
            "properties": dict(properties),
        }
    )


def _history_entry(version: ViewVersion) -> ViewHistoryEntry:
    return ViewHistoryEntry.model_validate(
        {"timestamp-ms": version.timestamp_ms, "version-id": version.version_id}
    )


@dataclass
class _Builder:
    """Mutable state while a commit's updates are applied in order."""

    metadata: ViewMetadata
    last_schema_id: int | None = None
    last_version_id: int | None = None
    added_versions: set[int] = field(default_factory=set)

    def replace(self, **changes: object) -> None:
        self.metadata = self.metadata.model_copy(update=changes)


def _check_dialects(version: ViewVersion) -> None:
    dialects = [rep.root.dialect.lower() for rep in version.representations]
    if len(dialects) != len(set(dialects)):
        raise BadRequestError(f"View version has several representations of a dialect: {dialects}")


def _add_schema(builder: _Builder, schema: Schema) -> None:
    new_id = 0
    for known in builder.metadata.schemas:
        if known == schema:
            builder.last_schema_id = known.schema_id
            return
        new_id = max(new_id, known.schema_id + 1)
    schemas = [*builder.metadata.schemas, schema.model_copy(update={"schema_id": new_id})]
    builder.replace(schemas=schemas)
    builder.last_schema_id = new_id


def _same_version(one: ViewVersion, two: ViewVersion) -> bool:
    keys = {"version_id", "timestamp_ms", "summary"}
    return one.model_dump(exclude=keys) == two.model_dump(exclude=keys)


def _add_version(builder: _Builder, version: ViewVersion) -> None:
    _check_dialects(version)
    schema_id = version.schema_id
    if schema_id == -1:
        if builder.last_schema_id is None:
            raise BadRequestError("Cannot use schema-id -1: no schema was added in this commit")
        schema_id = builder.last_schema_id
    if schema_id not in {schema.schema_id for schema in builder.metadata.schemas}:
        raise BadRequestError(f"View version refers to unknown schema {schema_id}")
    version = version.model_copy(update={"schema_id": schema_id})
    new_id = 1
    for known in builder.metadata.versions:
        if _same_version(known, version):
            builder.last_version_id = known.version_id
            return
        new_id = max(new_id, known.version_id + 1)
    version = version.model_copy(update={"version_id": new_id})
    builder.replace(versions=[*builder.metadata.versions, version])
    builder.last_version_id = new_id
    builder.added_versions.add(new_id)


def _set_current_version(builder: _Builder, version_id: int) -> None:
    if version_id == -1:
        if builder.last_version_id is None:
            raise BadRequestError("Cannot set version -1: no version was added in this commit")
        version_id = builder.last_version_id
    version = next((v for v in builder.metadata.versions if v.version_id == version_id), None)
    if version is None:
        raise BadRequestError(f"Cannot set current version to unknown version {version_id}")
    if version_id == builder.metadata.current_version_id:
        return
    builder.replace(
        current_version_id=version_id,
        version_log=[*builder.metadata.version_log, _history_entry(version)],
    )


def _check_uuid(builder: _Builder, update: AssignUUIDUpdate) -> None:
    if str(update.uuid) != builder.metadata.view_uuid:
        raise BadRequestError(f"Cannot reassign the view UUID {builder.metadata.view_uuid}")


def _upgrade(builder: _Builder, update: UpgradeFormatVersionUpdate) -> None:
    if update.format_version != VIEW_FORMAT_VERSION:
        raise BadRequestError(
            f"Unsupported view format version {update.format_version}: "
            f"only {VIEW_FORMAT_VERSION} exists"
        )


def _apply_one(builder: _Builder, update: ViewUpdate) -> None:
    properties = builder.metadata.properties
    if isinstance(update, AssignUUIDUpdate):
        _check_uuid(builder, update)
    elif isinstance(update, UpgradeFormatVersionUpdate):
        _upgrade(builder, update)
    elif isinstance(update, AddSchemaUpdate):
        _add_schema(builder, update.schema_)
    elif isinstance(update, SetLocationUpdate):
        builder.replace(location=update.location.rstrip("/"))
    elif isinstance(update, SetPropertiesUpdate):
        builder.replace(properties={**properties, **update.updates})
    elif isinstance(update, RemovePropertiesUpdate):
        removed = set(update.removals)
        builder.replace(properties={k: v for k, v in properties.items() if k not in removed})
    elif isinstance(update, AddViewVersionUpdate):
        _add_version(builder, update.view_version)
    elif isinstance(update, SetCurrentViewVersionUpdate):
        _set_current_version(builder, update.view_version_id)


def _history_size(metadata: ViewMetadata) -> int:
    raw = metadata.properties.get(HISTORY_SIZE_PROPERTY, str(DEFAULT_HISTORY_SIZE))
    if not raw.isdigit() or int(raw) < 1:
        raise BadRequestError(f"{HISTORY_SIZE_PROPERTY} must be a positive integer, got {raw!r}")
    return int(raw)


def _expire_versions(builder: _Builder) -> None:
    metadata = builder.metadata
    keep_count = max(
        _history_size(metadata), len(builder.added_versions | {metadata.current_version_id})
    )
    if len(metadata.versions) <= keep_count:
        return
    newest = sorted(metadata.versions, key=lambda v: v.version_id, reverse=True)
    kept_ids = {v.version_id for v in newest[:keep_count]} | {metadata.current_version_id}
    builder.replace(
        versions=[v for v in metadata.versions if v.version_id in kept_ids],
        version_log=[e for e in metadata.version_log if e.version_id in kept_ids],
    )


def apply_view_updates(metadata: ViewMetadata, updates: Sequence[ViewUpdate]) -> ViewMetadata:
    """Apply a commit's updates, in order, to a view's metadata.

    Args:
        metadata: The current metadata.
        updates: The updates of one ``CommitViewRequest``.

    Returns:
        The new metadata (``metadata`` itself is not changed).

    Raises:
        BadRequestError: If an update is invalid for this view (unknown schema or version,
            ``-1`` with nothing added, a different UUID, an unknown format version).
    """
    builder = _Builder(metadata)
    for update in updates:
        _apply_one(builder, update)
    _expire_versions(builder)
    return builder.metadata


def new_metadata_location(location: str, previous: str | None) -> str:
    """Name the next metadata file: ``<location>/metadata/<NNNNN>-<uuid>.metadata.json``.

    Args:
        location: The view's base location.
        previous: The current metadata file, whose number is incremented (None: 0).

    Returns:
        The new file's location.
    """
    number = 0
    if previous:
        match = _FILE_VERSION.match(previous.rsplit("/", 1)[-1])
        number = int(match.group(1)) + 1 if match else 0
    return f"{location.rstrip('/')}/metadata/{number:05d}-{uuid.uuid4()}.metadata.json"


def write_view_metadata(metadata: ViewMetadata, location: str, io_properties: Properties) -> None:
    """Write a view metadata JSON file; it must not exist yet.

    Args:
        metadata: The metadata to write.
        location: The file's location (local path, ``file://`` or object-store URI).
        io_properties: FileIO properties (endpoints, credentials).

    Raises:
        FileExistsError: If the file exists.
        OSError: If the file cannot be written.
    """
    io = load_file_io(dict(io_properties), location)
    with io.new_output(location).create(overwrite=False) as stream:
        stream.write(metadata.model_dump_json().encode("utf-8"))


def read_view_metadata(
    location: str, io_properties: Properties, error: type[Exception] = BadRequestError
) -> ViewMetadata:
    """Read and validate a view metadata JSON file (gzip-compressed when named ``*.gz.*``).

    Args:
        location: The file's location.
        io_properties: FileIO properties (endpoints, credentials).
        error: Exception class raised when the file cannot be read.

    Returns:
        The parsed metadata.

    Raises:
        Exception: An instance of ``error`` if the file cannot be read or is not view
            metadata; its message never quotes the file.
    """
    try:
        io = load_file_io(dict(io_properties), location)
        compressor = Compressor.get_compressor(location)
        with io.new_input(location).open() as raw, compressor.stream_decompressor(raw) as stream:
            return ViewMetadata.model_validate_json(stream.read())
    except Exception as exc:  # any IO or parse failure; its text may quote the file
        reason = unreadable_reason(exc, "view metadata")
        raise error(f"Cannot read view metadata at {location}: {reason}") from exc
