"""Z-sets: rows plus an int64 ``_weight`` column, as Spark DataFrames or Arrow tables.

A Z-set maps rows to integer weights: +1 is an insert, -1 a delete, and an update
is a -1 of the old row plus a +1 of the new one (Budiu et al., "DBSP: Automatic
Incremental View Maintenance for Rich Query Languages", VLDB 2023).
"""

from __future__ import annotations

from typing import overload

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

WEIGHT = "_weight"
"""Name of the weight column (int64) of every Z-set DataFrame."""


def data_columns(zset: DataFrame) -> list[str]:
    """Return the columns of ``zset`` other than the weight column, in order."""
    return [c for c in zset.columns if c != WEIGHT]


def with_weight(rows: DataFrame, weight: int = 1) -> DataFrame:
    """Turn a plain DataFrame into a Z-set where every row has ``weight``.

    Args:
        rows: Any DataFrame without a ``_weight`` column.
        weight: The weight given to every row (+1 insert, -1 delete).

    Returns:
        ``rows`` columns plus ``_weight`` (int64).
    """
    return rows.withColumn(WEIGHT, F.lit(weight).cast("bigint"))


@overload
def consolidate(zset: DataFrame) -> DataFrame: ...


@overload
def consolidate(zset: pa.Table) -> pa.Table: ...


def consolidate(zset: DataFrame | pa.Table) -> DataFrame | pa.Table:
    """Merge equal rows by summing their weights and drop rows whose weight is zero.

    Rows are equal as Spark groups them (NULL equals NULL, -0.0 equals 0.0, NaN equals
    NaN) on either engine: a DataFrame is grouped by Spark, an Arrow table by
    :func:`ivm.arrow_diff.consolidate` (DuckDB in process).

    Args:
        zset: Data columns plus ``_weight`` (int64), as a DataFrame or an Arrow table.

    Returns:
        The consolidated Z-set, held as given: same columns, each distinct row once,
        non-zero weights.
    """
    if isinstance(zset, pa.Table):
        from ivm.arrow_diff import consolidate as consolidate_arrow
        return consolidate_arrow(zset)
    columns = data_columns(zset)
    summed = zset.groupBy(*columns).agg(F.sum(WEIGHT).cast("bigint").alias(WEIGHT))
    return summed.where(F.col(WEIGHT) != 0).select(*columns, WEIGHT)


def expand(zset: DataFrame) -> DataFrame:
    """Return the multiset a Z-set with positive weights stands for.

    Every row is repeated ``_weight`` times; rows with weight <= 0 are dropped.

    Args:
        zset: DataFrame with data columns plus ``_weight`` (int64).

    Returns:
        The data columns only, with duplicates.
    """
    columns = data_columns(zset)
    positive = zset.where(F.col(WEIGHT) > 0)
    repeated = positive.withColumn("__copy", F.explode(F.sequence(F.lit(1), F.col(WEIGHT))))
    return repeated.select(*columns)
