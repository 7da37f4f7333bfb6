"""Partner reads on the driver (``lakehouse.sources.iceberg_keys``) and their key lookups."""

from __future__ import annotations

import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo
from pyiceberg.types import LongType

from ivm import KeyValues
from lakehouse.sources import iceberg_positions
from lakehouse.sources.column_cache import ColumnCache
from lakehouse.sources.iceberg_keys import key_mask, rows_for_keys
from lakehouse.sources.iceberg_positions import rows_at, sorted_difference

values = st.lists(st.one_of(st.none(), st.integers(-50, 50)), max_size=60)


@settings(max_examples=200, deadline=None)
@given(column=values, low=st.integers(-60, 60), span=st.integers(0, 60),
       listed=st.one_of(st.none(), st.lists(st.integers(-60, 60), max_size=20)),
       chunks=st.integers(1, 3))
def test_key_mask_is_bounds_and_values_and_never_null(column, low, span, listed,
                                                      chunks) -> None:
    high = low + span
    size = -(-len(column) // chunks) or 1
    chunked = pa.chunked_array([pa.array(column[i:i + size], pa.int64())
                                for i in range(0, len(column), size)], pa.int64())
    keys = KeyValues(low, high, None if listed is None else tuple(listed))
    expected = [v is not None and low <= v <= high and (listed is None or v in listed)
                for v in column]
    assert key_mask(chunked, keys).to_pylist() == expected


def test_key_mask_compares_decimals_and_dates_in_the_columns_type() -> None:
    prices = pa.chunked_array([pa.array([Decimal("1.50"), Decimal("2.25"), None],
                                        pa.decimal128(15, 2))])
    keys = KeyValues(Decimal("1.5"), Decimal("2"), (Decimal("1.5"),))
    assert key_mask(prices, keys).to_pylist() == [True, False, False]
    day = datetime.date(2024, 1, 2)
    dates = pa.chunked_array([pa.array([day, day + datetime.timedelta(days=1)])])
    assert key_mask(dates, KeyValues(day, day, (day,))).to_pylist() == [True, False]


def test_key_mask_is_empty_without_bounds_and_a_superset_for_values_of_another_type() -> None:
    ids = pa.chunked_array([pa.array([1, 2, 3], pa.int32())])
    assert key_mask(ids, KeyValues(None, None)).to_pylist() == [False, False, False]
    # "x" is no int: the list cannot be checked, the bounds still are
    assert key_mask(ids, KeyValues(2, 3, ("x",))).to_pylist() == [False, True, True]


def test_partner_reads_without_keys_and_files_without_the_columns_keep_every_row(
        tmp_path: Path) -> None:
    """A partner the change does not restrict is read whole (deletes applied); a data file
    holding none of the columns read still gives one (null) row per position, and a read
    of no column one row per live row."""
    catalog = SqlCatalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=tmp_path.as_uri())
    catalog.create_namespace("ns")
    rows = pa.table({"id": pa.array([1, 2, 3, 4], pa.int64())})
    table = catalog.create_table("ns.t", schema=rows.schema)
    table.append(rows)
    table.delete(EqualTo("id", 3))
    with table.update_schema() as update:
        update.add_column("later", LongType())
    table = catalog.load_table("ns.t")
    version = table.metadata.current_snapshot_id
    assert version is not None
    for cache in (None, ColumnCache(1 << 20)):
        found = rows_for_keys(table, version, table.schema(), ["id"], {}, 100, cache)
        assert found is not None and sorted(found["id"].to_pylist()) == [1, 2, 4]
    task = next(iter(table.scan().plan_files()))
    later = table.schema().select("later")
    for cache in (None, ColumnCache(1 << 20)):
        nulls = rows_at(table.metadata, table.io, task.file, np.array([0, 2]), later, cache)
        assert nulls.to_pylist() == [{"later": None}, {"later": None}]
    table.append(rows.slice(0, 2))  # a second data file: the parts are concatenated
    for cache in (None, ColumnCache(1 << 20)):  # a read of no column still counts the rows
        counted = rows_for_keys(table, table.metadata.current_snapshot_id or 0, table.schema(),
                                [], {}, 100, cache)
        assert counted is not None and (counted.num_rows, counted.num_columns) == (5, 0)


def test_a_data_file_whose_columns_are_kept_is_read_without_opening_it(tmp_path: Path) -> None:
    catalog = SqlCatalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=tmp_path.as_uri())
    catalog.create_namespace("ns")
    rows = pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "v": ["a", "b", "c", "d"]})
    table = catalog.create_table("ns.t", schema=rows.schema)
    table.append(rows)
    task = next(iter(table.scan().plan_files()))
    ids, both = table.schema().select("id"), table.schema()
    cache = ColumnCache(1 << 20)
    first = rows_at(table.metadata, table.io, task.file, np.array([3, 1]), ids, cache)
    Path(task.file.file_path.removeprefix("file:")).unlink()
    again = rows_at(table.metadata, table.io, task.file, np.array([3, 1]), ids, cache)
    assert again.equals(first) and again["id"].to_pylist() == [4, 2]
    with pytest.raises(FileNotFoundError):  # ``v`` is not kept: the file is opened
        rows_at(table.metadata, table.io, task.file, np.array([0]), both, cache)


def test_a_kept_projection_reads_what_pyicebergs_conversion_gives(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file read again with a kept layout gives the rows and the Arrow schema (no Parquet
    field ids in it) of a read without one, without pyiceberg's conversion when it changes
    nothing, as the table's schema evolves: a column renamed, one promoted to long."""
    conversions: list[str] = []
    convert = iceberg_positions._to_requested_schema

    def counted(*args: Any, **kwargs: Any) -> pa.RecordBatch:
        conversions.append("converted")
        return convert(*args, **kwargs)

    monkeypatch.setattr(iceberg_positions, "_to_requested_schema", counted)
    catalog = SqlCatalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=tmp_path.as_uri())
    catalog.create_namespace("ns")
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int32()), "v": ["a", "b", "c"]})
    table = catalog.create_table("ns.t", schema=rows.schema)
    table.append(rows)
    task = next(iter(table.scan().plan_files()))
    cache = ColumnCache(1 << 20)

    def read_twice() -> tuple[pa.Table, int]:
        """A read without a cache; then two with it: the conversions of the second."""
        fresh = rows_at(table.metadata, table.io, task.file, np.array([2, 0]), table.schema())
        for _ in range(2):  # the second read uses the projection kept with the layout
            conversions.clear()
            kept = rows_at(table.metadata, table.io, task.file, np.array([2, 0]),
                           table.schema(), cache)
            assert kept.equals(fresh) and kept.schema.equals(fresh.schema, check_metadata=True)
        return fresh, len(conversions)

    fresh, converted = read_twice()
    assert fresh.to_pylist() == [{"id": 3, "v": "c"}, {"id": 1, "v": "a"}] and not converted
    with table.update_schema() as update:
        update.rename_column("v", "label")
    table = catalog.load_table("ns.t")
    fresh, converted = read_twice()
    assert fresh.column_names == ["id", "label"] and converted  # the file names it ``v``
    with table.update_schema() as update:
        update.update_column("id", LongType())
    table = catalog.load_table("ns.t")
    fresh, converted = read_twice()
    assert fresh.schema.field("id").type == pa.int64() and converted


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.integers(0, 80), unique=True),
       removed=st.lists(st.integers(0, 80), unique=True))
def test_sorted_difference_is_setdiff(values: list[int], removed: list[int]) -> None:
    array = np.array(values, np.int64)
    found = sorted_difference(array, np.array(sorted(removed), np.int64))
    assert found.tolist() == [v for v in values if v not in set(removed)]
