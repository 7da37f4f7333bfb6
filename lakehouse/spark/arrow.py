"""Collect Spark DataFrames as Arrow tables."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame


def to_arrow(frame: DataFrame) -> pa.Table:
    """Collect ``frame`` to the driver as an Arrow table, keeping Spark's types.

    Uses ``DataFrame.toArrow`` (Spark 4) or the Arrow collector of Spark 3.5, never
    pandas, whose nullable integers would turn into floats.
    """
    collect = getattr(frame, "toArrow", None)
    if collect is not None:
        return collect()
    batches = frame._collect_as_arrow()  # noqa: SLF001  (Spark 3.5's Arrow collector)
    if batches:
        return pa.Table.from_batches(batches)
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(frame.schema).empty_table()
