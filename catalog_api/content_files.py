"""pyiceberg manifest ``DataFile`` -> the REST spec's ``ContentFile`` JSON models.

Implements components/schemas/ContentFile, DataFile, PositionDeleteFile and
EqualityDeleteFile of the REST spec (1.11.0) with pyiceberg's own client models
(``pyiceberg.catalog.rest.scan_planning``), so what the server sends is what pyiceberg
reads back. Values (partition tuples, bounds) use the spec's single-value JSON
serialization (``pyiceberg.conversions.to_json``: dates as ``YYYY-MM-DD``, binary as hex, ...).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from pyiceberg.catalog.rest.scan_planning import (
    CountMap,
    RESTDataFile,
    RESTEqualityDeleteFile,
    RESTPositionDeleteFile,
    ValueMap,
)
from pyiceberg.conversions import from_bytes, to_json
from pyiceberg.manifest import DataFile, DataFileContent
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.types import PrimitiveType

RESTContentFileModel = RESTDataFile | RESTPositionDeleteFile | RESTEqualityDeleteFile


def _json_value(field_type: Any, value: Any) -> Any:
    """One value in the spec's single-value JSON form (raw value if the type is not primitive)."""
    if value is None or not isinstance(field_type, PrimitiveType):
        return value
    try:
        return to_json(field_type, value)
    except (TypeError, ValueError):
        return value


def partition_values(data_file: DataFile, metadata: TableMetadata) -> list[Any]:
    """The file's partition tuple as JSON values, ordered like the fields of its spec.

    Args:
        data_file: A manifest data or delete file.
        metadata: The table's metadata (for the partition spec and schema).

    Returns:
        One JSON value per partition field; empty for unpartitioned files.
    """
    spec = metadata.specs().get(data_file.spec_id)
    partition = data_file.partition
    raw = [partition[pos] for pos in range(len(partition))] if partition is not None else []
    if spec is None or not spec.fields:
        return raw
    try:
        fields = spec.partition_type(metadata.schema()).fields
    except ValueError:  # a source column was dropped: send the values as stored
        return raw
    return [_json_value(field.field_type, value) for field, value in zip(fields, raw, strict=False)]


def _counts(counts: Mapping[int, int] | None, field_ids: Collection[int]) -> CountMap | None:
    kept = {key: value for key, value in (counts or {}).items() if key in field_ids}
    return CountMap(keys=list(kept), values=list(kept.values())) if kept else None


def _bounds(
    bounds: Mapping[int, bytes] | None, field_ids: Collection[int], schema: Schema
) -> ValueMap | None:
    keys: list[int] = []
    values: list[Any] = []
    for field_id, encoded in (bounds or {}).items():
        if field_id not in field_ids:
            continue
        field_type = schema.find_type(field_id)
        if not isinstance(field_type, PrimitiveType):
            continue
        keys.append(field_id)
        values.append(_json_value(field_type, from_bytes(field_type, encoded)))
    return ValueMap(keys=keys, values=values) if keys else None


def _common(data_file: DataFile, metadata: TableMetadata) -> dict[str, Any]:
    key_metadata = data_file.key_metadata
    return {
        "spec-id": data_file.spec_id,
        "partition": partition_values(data_file, metadata),
        "file-path": data_file.file_path,
        "file-format": data_file.file_format,
        "file-size-in-bytes": data_file.file_size_in_bytes,
        "record-count": data_file.record_count,
        "key-metadata": key_metadata.hex().upper() if key_metadata else None,
        "split-offsets": data_file.split_offsets,
        "sort-order-id": data_file.sort_order_id,
    }


def rest_data_file(
    data_file: DataFile, metadata: TableMetadata, stats_field_ids: Collection[int] = ()
) -> RESTDataFile:
    """A data file as the spec's ``DataFile`` JSON model.

    Args:
        data_file: A manifest entry's data file (content ``DATA``).
        metadata: The table's metadata.
        stats_field_ids: Field ids whose column stats are sent (the request's
            ``stats-fields``); no stats at all when empty.

    Returns:
        The REST model (serialize with ``model_dump_json()``).
    """
    schema = metadata.schema()
    ids = set(stats_field_ids)
    return RESTDataFile.model_validate(
        {
            **_common(data_file, metadata),
            "column-sizes": _counts(data_file.column_sizes, ids),
            "value-counts": _counts(data_file.value_counts, ids),
            "null-value-counts": _counts(data_file.null_value_counts, ids),
            "nan-value-counts": _counts(data_file.nan_value_counts, ids),
            "lower-bounds": _bounds(data_file.lower_bounds, ids, schema),
            "upper-bounds": _bounds(data_file.upper_bounds, ids, schema),
        }
    )


def rest_delete_file(
    delete_file: DataFile, metadata: TableMetadata
) -> RESTPositionDeleteFile | RESTEqualityDeleteFile:
    """A delete file as the spec's ``PositionDeleteFile`` or ``EqualityDeleteFile`` model.

    Args:
        delete_file: A manifest entry's delete file.
        metadata: The table's metadata.

    Returns:
        The REST model matching the file's content.

    Raises:
        ValueError: If the file is a data file.
    """
    common = _common(delete_file, metadata)
    if delete_file.content == DataFileContent.POSITION_DELETES:
        return RESTPositionDeleteFile.model_validate(common)
    if delete_file.content == DataFileContent.EQUALITY_DELETES:
        return RESTEqualityDeleteFile.model_validate(
            {**common, "equality-ids": delete_file.equality_ids}
        )
    raise ValueError(f"Not a delete file: {delete_file.file_path}")
