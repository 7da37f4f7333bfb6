"""A Delta source's rows read on the driver for a join's small change (delta-rs, no Spark)."""

from __future__ import annotations

import datetime
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from ivm import KeyValues
from ivm.arrow_diff import difference
from lakehouse.sources.delta import DeltaSourceReader


@pytest.fixture
def reader(tmp_path: Path) -> DeltaSourceReader:
    write_deltalake(str(tmp_path / "t"), pa.table({
        "K": pa.array([1, 2, 3, None], pa.int32()), "s": ["a", "b", "c", "d"],
        "day": [datetime.date(2020, 1, i) for i in (1, 2, 3, 4)],
        "m": pa.array([Decimal("1.10"), Decimal("2.20"), None, Decimal("4.40")],
                      pa.decimal128(5, 2))}))
    return DeltaSourceReader(None, "t", str(tmp_path / "t"))  # type: ignore[arg-type]


@pytest.mark.parametrize(("keys", "expected"), [
    ({"k": KeyValues(2, 3, (2, 3))}, ["b", "c"]),  # names match case-insensitively
    ({"k": KeyValues(1, 3, (1, 3))}, ["a", "c"]),  # listed values, not only the bounds
    ({"s": KeyValues("b", "c")}, ["b", "c"]),
    ({"day": KeyValues(datetime.date(2020, 1, 2), datetime.date(2020, 1, 2))}, ["b"]),
    ({"m": KeyValues(Decimal("2.2"), Decimal("4.4"))}, ["b", "d"]),
    ({"k": KeyValues(None, None)}, []),  # the change has no key value: nothing matches
    ({"k": KeyValues("x", "y")}, ["a", "b", "c"]),  # bounds that do not compare: a superset
])
def test_rows_matching_the_keys(reader: DeltaSourceReader, keys: dict, expected: list) -> None:
    rows = reader.arrow_rows(0, ["s"], keys, max_rows=100)
    assert rows is not None and rows.column_names == ["s"]
    assert sorted(rows.column("s").to_pylist()) == expected


def test_a_table_over_the_row_limit_is_left_to_spark(reader: DeltaSourceReader) -> None:
    assert reader.arrow_rows(0, ["s"], {"k": KeyValues(1, 3)}, max_rows=3) is None


def test_deletion_vectors_are_left_to_spark(tmp_path: Path) -> None:
    """delta-rs and Spark must agree on the rows; a deletion vector is Spark's to apply."""
    uri = str(tmp_path / "dv")
    write_deltalake(uri, pa.table({"k": [1, 2]}), configuration={
        "delta.enableDeletionVectors": "true"})
    reader = DeltaSourceReader(None, "dv", uri)  # type: ignore[arg-type]
    assert reader.arrow_rows(0, ["k"], {"k": KeyValues(1, 2)}, max_rows=100) is None


def _feed_table(uri: str) -> None:
    """Versions 0-3 with the change data feed on: a load, an update, a delete, an append."""
    write_deltalake(uri, pa.table({"k": pa.array([1, 2, 3], pa.int64()), "s": ["a", "b", "c"]}),
                    configuration={"delta.enableChangeDataFeed": "true"})
    DeltaTable(uri).update({"s": "'B'"}, predicate="k = 2")
    DeltaTable(uri).delete("k = 3")
    write_deltalake(uri, pa.table({"k": pa.array([4, 4], pa.int64()), "s": ["d", "d"]}),
                    mode="append")


def _zset(rows: pa.Table) -> Counter:
    return Counter({tuple(r[c] for c in rows.column_names if c != "_weight"): r["_weight"]
                    for r in rows.to_pylist()})


@pytest.mark.parametrize(("old", "new", "columns"), [(0, 3, None), (1, 2, None), (0, 3, ["s"])])
def test_the_change_data_feed_read_in_arrow_is_the_versions_difference(
    tmp_path: Path, old: int, new: int, columns: list[str] | None,
) -> None:
    """delta-rs's feed, as a Z-set, equals the multiset difference of the two versions."""
    uri = str(tmp_path / "feed")
    _feed_table(uri)
    reader = DeltaSourceReader(None, "feed", uri, bridge=object())  # type: ignore[arg-type]
    feed = reader.change_feed(old, new, columns)
    assert feed.arrow is not None  # read without Spark (the reader has none)
    names = columns or ["k", "s"]
    expected = difference(*(DeltaTable(uri, version=v).to_pyarrow_table().select(names)
                            for v in (new, old)))
    assert _zset(feed.arrow) == _zset(expected) and feed.arrow.column_names == [*names, "_weight"]


def test_a_change_data_feed_over_the_bound_is_left_to_spark(tmp_path: Path) -> None:
    uri = str(tmp_path / "feed")
    _feed_table(uri)
    reader = DeltaSourceReader(None, "feed", uri, bridge=object(),  # type: ignore[arg-type]
                               arrow_max_rows=4)
    assert reader._arrow_cdf(DeltaTable(uri, version=2), 0, 2, None) is not None  # the
    # update's two images and the delete; then the append's two rows: 5 in all
    assert reader._arrow_cdf(DeltaTable(uri, version=3), 0, 3, None) is None
