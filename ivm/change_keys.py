"""The join-key values of a change feed, which :mod:`ivm.key_ranges` restricts partners to.

Read from the change's Arrow table when the caller has one (no Spark job: the change
feeds of Iceberg and Delta sources are computed in Arrow), else with one Spark
aggregate over the change feed (bounds only).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ivm.key_ranges import KeyValues

IN_LIST_MAX = 1000
"""Most distinct values of a column listed in an ``IN``; more get the range only."""


def arrow_keys(change: pa.Table, names: Sequence[str], max_values: int = IN_LIST_MAX
               ) -> dict[str, KeyValues] | None:
    """Bounds and, when few, the distinct values of columns ``names`` of ``change``.

    Args:
        change: A change feed as Arrow (any columns, ``_weight`` too).
        names: Columns of ``change``.
        max_values: The values of a column are listed up to this many.

    Returns:
        :class:`KeyValues` by column name; None when ``change`` lacks one of ``names`` or
        Arrow cannot compare its values (the caller then asks Spark).
    """
    if any(name not in change.column_names for name in names):
        return None
    found = {}
    for name in names:
        try:
            distinct = pc.unique(pc.drop_null(change.column(name)))
        except pa.ArrowNotImplementedError:  # e.g. pyiceberg's uuid extension type
            return None
        if len(distinct) == 0:
            found[name] = KeyValues(None, None)
            continue
        bounds = pc.min_max(distinct).as_py()
        values = tuple(distinct.to_pylist()) if len(distinct) <= max_values else None
        found[name] = KeyValues(bounds["min"], bounds["max"], values)
    return found


def spark_keys(change: DataFrame, names: Sequence[str]) -> dict[str, KeyValues]:
    """The bounds of columns ``names`` of ``change`` (one small Spark job)."""
    found = change.agg(*[f(name) for name in names for f in (F.min, F.max)]).first()
    assert found is not None  # a global aggregate has one row
    return {name: KeyValues(found[2 * k], found[2 * k + 1]) for k, name in enumerate(names)}
