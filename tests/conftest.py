"""Shared fixtures: the catalog service plugin, and helpers to compare multisets."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import Row, SparkSession

from ivm import ArrowRead, KeyValues
from lakehouse.sources.iceberg_keys import key_mask
from lakehouse.spark.session import build_spark_session

if TYPE_CHECKING:
    from tests.conftest_catalog import CatalogServerHandle

pytest_plugins = ["tests.conftest_catalog", "tests.conftest_postgres", "tests.conftest_trino",
                  "tests.conftest_spark_cluster"]

FLOAT_DIGITS = 6


def arrow_reader(new: pa.Table, old: pa.Table | None) -> ArrowRead:
    """Reads a source's rows at ``new`` or ``old`` on the driver, as a source would.

    It keeps the rows whose key columns match the keys, by the same lookup as an
    Iceberg source's reads (:func:`lakehouse.sources.iceberg_keys.key_mask`), so that
    the evaluator's joins are checked against restricted partners as they get them. It
    declines (None) a table of more than ``max_rows`` rows, as a source would.
    """
    def read(role: str, columns: Sequence[str], keys: Mapping[str, KeyValues],
             max_rows: int) -> pa.Table | None:
        table = new if role == "new" else old
        if table is None or table.num_rows > max_rows:
            return None
        names = {name.lower(): name for name in table.column_names}
        mask = pa.array([True] * table.num_rows, pa.bool_())
        for column, values in keys.items():
            mask = pc.and_(mask, key_mask(table.column(names[column.lower()]), values))
        return table.filter(mask).select([names[c.lower()] for c in columns])
    return read


def normal_row(row: Iterable[object]) -> tuple[object, ...]:
    """A row as a tuple, floats rounded so that summation order does not matter."""
    return tuple(round(v, FLOAT_DIGITS) if isinstance(v, float) else v for v in row)


def multiset(rows: Iterable[Iterable[object]]) -> Counter[tuple[object, ...]]:
    """Rows as a multiset of :func:`normal_row` tuples."""
    return Counter(normal_row(row) for row in rows)


def with_delta(view: Counter[tuple[object, ...]], delta: Iterable[Row], label: str
               ) -> Counter[tuple[object, ...]]:
    """``view`` plus a view delta's rows (the view's columns, then ``_weight``).

    Raises:
        AssertionError: A row's weight goes below zero (``label`` says where).
    """
    view = Counter(view)
    for row in delta:
        view[normal_row(tuple(row)[:-1])] += row["_weight"]
    assert all(w >= 0 for w in view.values()), f"{label}: negative weights"
    return +view


def assert_same_view(incremental: Counter[tuple[object, ...]],
                     full: Counter[tuple[object, ...]], label: str) -> None:
    """The incrementally maintained view equals the full recompute, both ways listed."""
    assert incremental == full, (
        f"{label}: incremental - full = {dict(incremental - full)}, "
        f"full - incremental = {dict(full - incremental)}")


@pytest.fixture(scope="session")
def spark(catalog_server: CatalogServerHandle) -> SparkSession:
    """One Spark session for the test run; its Iceberg catalog ``lakehouse`` is the REST server."""
    session = build_spark_session(
        app_name="lakehouse-tests", catalog_name="lakehouse", catalog_uri=catalog_server.uri,
        warehouse=catalog_server.warehouse.as_uri(),
    )
    session.sparkContext.setLogLevel("ERROR")
    return session
