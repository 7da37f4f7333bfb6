"""Hand Arrow tables to Spark through Parquet files in a scratch folder.

Arrow -> Parquet -> ``spark.read.parquet`` takes about 1.4 s for a million rows,
against 5-9 s for ``createDataFrame(pandas)`` (measured; DESIGN.md).
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import NullType, StructType

from lakehouse.storage import Folder


class ArrowBridge:
    """Write Arrow tables as Parquet in a scratch folder and read them with Spark.

    The folder is on the warehouse's storage (local or ``s3://``), so that executors on
    other machines read the files too. Each thread writes to a sub-folder of its own, so
    that ticks running at once on several threads clear only their own files. Files live
    until their thread calls :meth:`clear`; the DataFrames read them lazily, so clear only
    once every DataFrame the thread built from them has been consumed.

    Args:
        spark: The session that reads the files.
        scratch: The folder the files go to (a local path, or a folder of any file
            system); this bridge's own (:meth:`clear` and :meth:`remove` empty and delete
            it).
    """

    def __init__(self, spark: SparkSession, scratch: Folder | Path):
        self.spark = spark
        self.scratch = scratch if isinstance(scratch, Folder) else Folder.local(scratch)
        self._thread = _ThreadFolder()

    def _folder(self) -> Folder:
        """The calling thread's sub-folder of the scratch folder, created on first use."""
        state = self._thread
        if state.folder is None:
            state.folder = self.scratch.child(uuid.uuid4().hex)
            state.folder.filesystem.create_dir(state.folder.path, recursive=True)
        return state.folder

    def to_spark(self, table: pa.Table) -> DataFrame:
        """Return ``table`` as a Spark DataFrame (same columns; strings as string).

        The file's schema is given to the reader, which otherwise runs a Spark job to
        read it back from the file's footer.

        Raises:
            OSError: The scratch folder cannot be written.
        """
        file = self._folder().child(f"{uuid.uuid4().hex}.parquet")
        plain = plain_types(table)
        pq.write_table(plain, file.path, filesystem=file.filesystem)
        schema = _spark_schema(plain.schema)
        reader = self.spark.read if schema is None else self.spark.read.schema(schema)
        return reader.parquet(file.uri)

    def clear(self) -> None:
        """Delete every file the calling thread wrote through this bridge."""
        folder = self._thread.folder
        if folder is not None:
            folder.filesystem.delete_dir_contents(folder.path, missing_dir_ok=True)

    def remove(self) -> None:
        """Delete the scratch folder with every thread's files."""
        self._thread = _ThreadFolder()
        try:
            self.scratch.filesystem.delete_dir(self.scratch.path)
        except FileNotFoundError:
            pass


class _ThreadFolder(threading.local):
    """The calling thread's scratch sub-folder (None until it writes a file)."""

    folder: Folder | None = None


def _spark_schema(schema: pa.Schema) -> StructType | None:
    """The Spark schema of the Parquet file pyarrow writes for ``schema``.

    As Spark would infer it; None for Arrow types PySpark does not map (Spark then
    infers it).
    """
    try:
        spark_schema = from_arrow_schema(schema, prefer_timestamp_ntz=True)
    except TypeError:  # PySpark raises TypeError (UNSUPPORTED_DATA_TYPE...) for e.g. uint64
        return None
    if any(isinstance(f.dataType, NullType) for f in spark_schema.fields):
        return None  # an all-null column: as Spark reads it
    return spark_schema


def plain_types(table: pa.Table) -> pa.Table:
    """Cast view types (string_view, large_string) that Spark's Parquet reader lacks."""
    fields = []
    for field in table.schema:
        if pa.types.is_string_view(field.type) or pa.types.is_large_string(field.type):
            fields.append(field.with_type(pa.string()))
        elif pa.types.is_binary_view(field.type) or pa.types.is_large_binary(field.type):
            fields.append(field.with_type(pa.binary()))
        else:
            fields.append(field)
    return table.cast(pa.schema(fields))
