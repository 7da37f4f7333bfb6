"""Turn a view delta (a Z-set) into the source rows of one MERGE statement.

A MERGE cannot insert several copies of a row, nor delete some copies of it, so
each changed row (or key) becomes a ``delete`` marker, which matches and deletes
every copy in the target, plus the rows to insert afterwards, flagged ``insert``,
which never match. The whole change then commits atomically in one MERGE.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ivm import WEIGHT, expand

OP = "__op"
"""Column of the merge source: ``delete`` (match and delete) or ``insert``."""


def keyed_merge_source(delta: DataFrame, key: Sequence[str]) -> DataFrame:
    """Merge source for a view with a unique key.

    Args:
        delta: Consolidated Z-set: the view's columns plus ``_weight``; per key at
            most one row with weight +1 (the new row) and one with -1 (the old).
        key: The key columns.

    Returns:
        The view's columns plus ``__op`` (string).
    """
    columns = [c for c in delta.columns if c != WEIGHT]
    markers = delta.select(*key).distinct()
    markers = markers.select(*[
        (F.col(c) if c in key else F.lit(None).cast(delta.schema[c].dataType)).alias(c)
        for c in columns
    ])
    inserts = delta.where(F.col(WEIGHT) > 0).select(*columns)
    return markers.withColumn(OP, F.lit("delete")).unionByName(
        inserts.withColumn(OP, F.lit("insert"))
    )


def multiset_merge_source(delta: DataFrame, current: DataFrame) -> DataFrame:
    """Merge source for a view whose rows are kept with multiplicities.

    Rows with a positive net weight are inserted that many times. A row with a
    negative net weight w is deleted (every copy) and re-inserted c + w times, where
    c is its number of copies in ``current``.

    Args:
        delta: Consolidated Z-set: the view's columns plus ``_weight``.
        current: The target table's rows now (the view's columns).

    Returns:
        The view's columns plus ``__op`` (string).
    """
    columns = [c for c in delta.columns if c != WEIGHT]
    removed = delta.where(F.col(WEIGHT) < 0).alias("r")
    copies = (
        current.alias("t").join(removed, on=_same_row("t", "r", columns), how="left_semi")
        .groupBy(*columns).agg(F.count(F.lit(1)).alias("__copies")).alias("c")
    )
    remaining = removed.join(copies, on=_same_row("r", "c", columns), how="left").select(
        *[F.col(f"r.`{c}`").alias(c) for c in columns],
        (F.coalesce(F.col("c.__copies"), F.lit(0)) + F.col(f"r.{WEIGHT}")).alias(WEIGHT),
    )
    markers = removed.select(*columns).withColumn(OP, F.lit("delete"))
    inserts = expand(delta.where(F.col(WEIGHT) > 0).unionByName(remaining))
    return markers.unionByName(inserts.withColumn(OP, F.lit("insert")))


def _same_row(left: str, right: str, columns: Sequence[str]) -> Column:
    """Null-safe equality of every column of two aliased DataFrames."""
    conditions = [F.col(f"{left}.`{c}`").eqNullSafe(F.col(f"{right}.`{c}`")) for c in columns]
    return reduce(lambda a, b: a & b, conditions)
