"""Collect Spark DataFrames to the driver as Arrow tables."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame


def collect_arrow(frame: DataFrame, max_rows: int | None = None) -> pa.Table | None:
    """``frame``'s rows as an Arrow table of Spark's types, or None past ``max_rows`` rows.

    Uses ``DataFrame.toArrow`` (Spark 4) or Spark 3.5's Arrow collector, never pandas,
    whose nullable integers would turn into floats. With ``max_rows``, at most
    ``max_rows + 1`` rows are collected (``LIMIT``), so a large frame costs bounded memory.

    Args:
        frame: Any DataFrame; cache it first if it is also used elsewhere.
        max_rows: Largest number of rows wanted, or None for all (the result is then
            never None).
    """
    limited = frame if max_rows is None else frame.limit(max_rows + 1)
    collect = getattr(limited, "toArrow", None)
    if collect is not None:
        rows = collect()
    else:
        batches = limited._collect_as_arrow()  # noqa: SLF001  (Spark 3.5's Arrow collector)
        if batches:
            rows = pa.Table.from_batches(batches)
        else:
            from pyspark.sql.pandas.types import to_arrow_schema

            rows = to_arrow_schema(frame.schema).empty_table()
    return None if max_rows is not None and rows.num_rows > max_rows else rows


def to_arrow(frame: DataFrame) -> pa.Table:
    """All of ``frame``'s rows as an Arrow table of Spark's types (see :func:`collect_arrow`)."""
    rows = collect_arrow(frame)
    assert rows is not None
    return rows
