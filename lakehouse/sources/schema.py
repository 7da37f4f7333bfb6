"""A source's columns at a version, read from table metadata (no Spark job, no data read).

Iceberg table spec, "Schemas and Data Types" and "Snapshots": every snapshot names the
schema it was written with (``schema-id``), columns are identified by field id, so a
rename keeps the id and a drop-and-re-add gets a new one. Delta protocol, "Schema
Serialization Format" and "Column Mapping": a version's schema is in its metadata
action; with column mapping a column keeps its ``delta.columnMapping.id`` across renames.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.schema import Field, PrimitiveType
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata

DELTA_COLUMN_ID = "delta.columnMapping.id"
"""Field metadata key of a Delta column's id under column mapping."""


@dataclass(frozen=True)
class SourceColumn:
    """One top-level column of a source.

    Attributes:
        name: The column's name.
        type: The type in the source's own terms: Iceberg (``long``, ``decimal(9, 2)``,
            ``struct<...>``) or Delta (``long``, ``integer``, a JSON struct).
        spark_type: The type as Spark SQL names it (``bigint``), for compiling views.
        field_id: Iceberg field id, or Delta column mapping id; None when the source
            has none (Delta without column mapping).
    """

    name: str
    type: str
    spark_type: str
    field_id: int | None


@dataclass(frozen=True)
class SourceSchema:
    """The top-level columns of a source at one version, in table order."""

    columns: tuple[SourceColumn, ...]

    def column(self, name: str) -> SourceColumn | None:
        """The column called ``name``, or None."""
        return next((c for c in self.columns if c.name == name), None)

    def column_by_id(self, field_id: int) -> SourceColumn | None:
        """The column with field id ``field_id``, or None."""
        return next((c for c in self.columns if c.field_id == field_id), None)

    def spark_types(self) -> dict[str, str]:
        """Column name -> Spark SQL type, the shape ``ivm.compile_view`` takes."""
        return {c.name: c.spark_type for c in self.columns}


def iceberg_schema(metadata: TableMetadata, version: int | None) -> SourceSchema | None:
    """The schema snapshot ``version`` was written with; the table's current one for None.

    Args:
        metadata: The table's metadata (pyiceberg, loaded through the catalog).
        version: A snapshot id, or None for the table's current schema.

    Returns:
        The schema, or None when the snapshot is gone (expired) or names no schema.
    """
    if version is None:
        return _from_iceberg(metadata.schema())
    snapshot = metadata.snapshot_by_id(version)
    if snapshot is None or snapshot.schema_id is None:
        return None
    schema = metadata.schema_by_id(snapshot.schema_id)
    return _from_iceberg(schema) if schema is not None else None


def delta_schema(table: DeltaTable) -> SourceSchema:
    """The schema of a Delta table as loaded (at the version it was opened at)."""
    arrow = pa.schema(table.schema().to_arrow())
    return SourceSchema(tuple(
        SourceColumn(field.name, _delta_type(field), _spark_type(arrow.field(field.name).type),
                     _delta_column_id(field))
        for field in table.schema().fields))


def _from_iceberg(schema: Schema) -> SourceSchema:
    arrow = schema_to_pyarrow(schema, include_field_ids=False)
    return SourceSchema(tuple(
        SourceColumn(field.name, str(field.field_type), _spark_type(arrow.field(field.name).type),
                     field.field_id)
        for field in schema.fields))


def _spark_type(arrow_type: pa.DataType) -> str:
    """Spark's name for an Arrow type, as PySpark's ``from_arrow_type`` maps it.

    Timestamps without zone are ``timestamp_ntz``; the large and view variants of strings,
    binaries and lists (which PySpark does not map) are named as the plain ones. Written out
    rather than asked of PySpark, whose mapping imports ``distutils`` (through setuptools,
    0.2-0.5 s at each process's first view compile); ``tests/unit/test_schema_guard.py``
    checks it against PySpark's.

    Raises:
        TypeError: Spark has no type for it (unsigned integers, times, fixed-size binaries).
    """
    if pa.types.is_dictionary(arrow_type):
        return _spark_type(arrow_type.value_type)
    for is_kind, name in _SPARK_NAMES:
        if is_kind(arrow_type):
            return name
    if pa.types.is_decimal(arrow_type):
        return f"decimal({arrow_type.precision},{arrow_type.scale})"
    if pa.types.is_timestamp(arrow_type):
        return "timestamp_ntz" if arrow_type.tz is None else "timestamp"
    if (pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type)
            or pa.types.is_list_view(arrow_type) or pa.types.is_large_list_view(arrow_type)):
        return f"array<{_spark_type(arrow_type.value_type)}>"
    if pa.types.is_map(arrow_type):
        return f"map<{_spark_type(arrow_type.key_type)},{_spark_type(arrow_type.item_type)}>"
    if pa.types.is_struct(arrow_type):
        fields = (arrow_type.field(i) for i in range(arrow_type.num_fields))
        return f"struct<{','.join(f'{f.name}:{_spark_type(f.type)}' for f in fields)}>"
    raise TypeError(f"Spark has no type for Arrow type {arrow_type}")


_SPARK_NAMES: tuple[tuple[Callable[[pa.DataType], bool], str], ...] = (
    (pa.types.is_boolean, "boolean"), (pa.types.is_int8, "tinyint"),
    (pa.types.is_int16, "smallint"), (pa.types.is_int32, "int"), (pa.types.is_int64, "bigint"),
    (pa.types.is_float32, "float"), (pa.types.is_float64, "double"),
    (pa.types.is_string, "string"), (pa.types.is_large_string, "string"),
    (pa.types.is_string_view, "string"), (pa.types.is_binary, "binary"),
    (pa.types.is_large_binary, "binary"), (pa.types.is_binary_view, "binary"),
    (pa.types.is_date32, "date"), (pa.types.is_duration, "interval day to second"),
    (pa.types.is_null, "void"),
)
"""Spark's names of the Arrow types without parameters (PySpark's ``from_arrow_type``)."""


def _delta_type(field: Field) -> str:
    kind = field.type
    return kind.type if isinstance(kind, PrimitiveType) else kind.to_json()


def _delta_column_id(field: Field) -> int | None:
    value = (field.metadata or {}).get(DELTA_COLUMN_ID)
    return int(value) if value is not None else None
