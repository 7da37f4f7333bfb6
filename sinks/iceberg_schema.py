"""The view table's schema: from Spark or Arrow to Iceberg, and Arrow rows conformed to it.

Every column is optional (nullable), as when Spark creates the table with ``CREATE TABLE``:
a view column that has no NULL today may have one after the next refresh. Types map as
Iceberg's Spark integration maps them (``timestamp`` -> ``timestamptz``, ``timestamp_ntz``
-> ``timestamp``, ``tinyint``/``smallint`` -> ``int``; pyiceberg's ``pyarrow_to_schema``).
"""

from __future__ import annotations

import pyarrow as pa
from pyiceberg.schema import Schema
from pyspark.sql.types import StructType

from sinks.errors import SinkError


def arrow_schema(schema: StructType | pa.Schema) -> pa.Schema:
    """The Arrow schema a view table is created from: ``schema`` with every field nullable.

    Args:
        schema: The view's columns, as Spark reports them or as Arrow.
    """
    if isinstance(schema, StructType):
        from pyspark.sql.pandas.types import to_arrow_schema

        schema = to_arrow_schema(schema)
    return pa.schema([field.with_nullable(True) for field in schema])


def conformed(rows: pa.Table, schema: Schema, table: str) -> pa.Table:
    """``rows`` with the table's columns, in its order and of its Arrow types.

    Spark's Arrow (``DataFrame.toArrow``) names the session time zone on timestamps, uses
    narrower integers than Iceberg, and may order columns differently: casting to the
    table's own Arrow schema makes any of them writable.

    Args:
        rows: Rows with exactly the table's columns, by name.
        schema: The Iceberg table's current schema.
        table: The table's identifier, for errors.

    Raises:
        SinkError: A column is missing from either side, or cannot be cast.
    """
    target = schema.as_arrow()
    if sorted(target.names) != sorted(rows.column_names):
        raise SinkError(f"the rows' columns {rows.column_names} are not the table's "
                        f"{target.names}", table=table)
    try:
        return rows.select(target.names).cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as error:
        raise SinkError(f"the delta does not fit the table's schema: {error}",
                        table=table) from error
