"""Spark DataFrames of test rows that Spark scans without Python workers.

``spark.createDataFrame(rows)`` makes a Python RDD: every job scanning it runs Python tasks,
and pyspark's worker calls ``importlib.invalidate_caches()`` for each task, which re-reads
the directory of every zip on the workers' ``PYTHONPATH`` (the spark-core jar among them).
In the differential tests that took the Python workers about half of the machine's CPU
(py-spy, 2 cores). These frames are built on the JVM from Arrow batches, as
``createDataFrame(pandas)`` does under Arrow, so that their scans are JVM tasks only; unlike
the pandas route, ``None`` and NaN stay apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.serializers import ArrowStreamSerializer
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

__all__ = ["arrow_frame", "spark_frame"]


def spark_frame(spark: SparkSession, rows: Iterable[Sequence[object]],
                schema: str | StructType) -> DataFrame:
    """The rows (tuples in the schema's column order) as a DataFrame of that schema.

    Args:
        spark: The session.
        rows: The rows; values as ``createDataFrame`` takes them (Decimal, date, None...).
        schema: A DDL string (``"k bigint, x double"``) or a StructType.
    """
    struct = _struct(spark, schema)
    arrow_schema = to_arrow_schema(struct)
    columns = list(zip(*rows, strict=True)) or [() for _ in arrow_schema]
    table = pa.Table.from_arrays(
        [pa.array(list(values), field.type) for values, field in zip(columns, arrow_schema,
                                                                     strict=True)],
        schema=arrow_schema)
    return _on_jvm(spark, table, struct)


def arrow_frame(spark: SparkSession, table: pa.Table, schema: str | StructType) -> DataFrame:
    """An Arrow table as a DataFrame of ``schema`` (columns by position, cast to its types)."""
    struct = _struct(spark, schema)
    arrow_schema = to_arrow_schema(struct)
    return _on_jvm(spark, table.rename_columns(arrow_schema.names).cast(arrow_schema), struct)


def _struct(spark: SparkSession, schema: str | StructType) -> StructType:
    if isinstance(schema, StructType):
        return schema
    return spark.createDataFrame([], schema).schema  # parses the DDL; runs no job


def _on_jvm(spark: SparkSession, table: pa.Table, struct: StructType) -> DataFrame:
    batches = table.to_batches() or [pa.RecordBatch.from_pylist([], schema=table.schema)]
    context = spark.sparkContext
    jvm = context._jvm
    assert jvm is not None
    rows = context._serialize_to_jvm(
        batches, ArrowStreamSerializer(),
        lambda path: jvm.PythonSQLUtils.readArrowStreamFromFile(path),
        lambda: jvm.ArrowIteratorServer())
    frame = jvm.PythonSQLUtils.toDataFrame(rows, struct.json(), spark._jsparkSession)
    return DataFrame(frame, spark)
