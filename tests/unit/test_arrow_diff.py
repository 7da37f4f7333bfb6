"""Arrow multiset difference and consolidation are exact, with Spark's grouping equality."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivm.arrow_diff import consolidate, difference, row_hashes
from lakehouse.sources.iceberg_positions import row_group_offsets

SCHEMA = pa.schema([("id", pa.int64()), ("x", pa.float64()), ("s", pa.large_string()),
                    ("d", pa.decimal128(15, 2))])
ROWS = st.lists(st.tuples(
    st.sampled_from([None, 1, 2]),
    st.sampled_from([None, 0.0, -0.0, math.nan, 1.5]),
    st.sampled_from([None, "a", "b"]),
    st.sampled_from([None, 1, 2]),
), max_size=25)
Key = tuple[object, ...]


def _table(rows: list[tuple]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in rows], SCHEMA)


def _key(row: tuple) -> Key:
    """A row as Spark groups it: -0.0 is 0.0, NaN is NaN."""
    return tuple("NaN" if isinstance(v, float) and math.isnan(v) else
                 (0.0 if v == 0 and isinstance(v, float) else v) for v in row)


def _expected(new: list[tuple], old: list[tuple]) -> dict[Key, int]:
    counts = Counter(_key(r) for r in new)
    counts.subtract(Counter(_key(r) for r in old))
    return {k: n for k, n in counts.items() if n}


def _zset(result: pa.Table) -> dict[Key, int]:
    """The result as {row: weight}; each row once, no zero weight, no -0.0 left."""
    assert result.schema.names == [*SCHEMA.names, "_weight"]
    assert result.schema.field("_weight").type == pa.int64()
    zset: dict[Key, int] = {}
    for row in result.to_pylist():
        x = row["x"]
        assert not (x == 0 and math.copysign(1.0, x) < 0), "-0.0 is output as 0.0"
        key = _key(tuple(row[c] for c in SCHEMA.names))
        assert key not in zset and row["_weight"] != 0
        zset[key] = row["_weight"]
    return zset


def _colliding(rows: pa.Table) -> np.ndarray:
    """A weak hash (equal rows still hash equally): the id's parity, so most rows collide."""
    return pc.fill_null(rows["id"], 0).to_numpy().astype(np.uint64) % 2


HASHES: list[Callable[[pa.Table], np.ndarray] | None] = [None, _colliding]


@pytest.mark.parametrize("hash_rows", HASHES, ids=["duckdb", "colliding"])
@settings(max_examples=100, deadline=None)
@given(new=ROWS, old=ROWS)
def test_difference_is_the_multiset_difference(hash_rows, new, old) -> None:
    assert _zset(difference(_table(new), _table(old), hash_rows)) == _expected(new, old)


@pytest.mark.parametrize("hash_rows", HASHES, ids=["duckdb", "colliding"])
@settings(max_examples=100, deadline=None)
@given(plus=ROWS, minus=ROWS, zeros=ROWS)
def test_consolidate_merges_equal_rows(hash_rows, plus, minus, zeros) -> None:
    rows = _table(plus + minus + zeros)
    weights = [2] * len(plus) + [-1] * len(minus) + [0] * len(zeros)
    result = consolidate(rows.append_column("_weight", pa.array(weights, pa.int64())),
                         hash_rows)
    expected = Counter({k: 2 * n for k, n in Counter(_key(r) for r in plus).items()})
    expected.subtract(Counter(_key(r) for r in minus))
    assert _zset(result) == {k: n for k, n in expected.items() if n}


def test_difference_cancels_a_rewrite_and_keeps_types() -> None:
    old = pa.table({"k": pa.array(range(10_000), pa.int64()),
                    "s": pa.array([f"s{i % 7}" for i in range(10_000)], pa.string()),
                    "t": pa.array([None] * 10_000, pa.timestamp("us", "UTC"))})
    new = old.filter(pc.not_equal(pc.bit_wise_and(old["k"], 1023), 5))  # drops 10 rows
    new = new.take(pa.array(np.random.default_rng(1).permutation(new.num_rows)))
    result = difference(new, old)
    assert result.schema == old.schema.append(pa.field("_weight", pa.int64()))
    assert sorted(result["k"].to_pylist()) == [k for k in range(10_000) if k % 1024 == 5]
    assert set(result["_weight"].to_pylist()) == {-1}


def test_difference_of_nested_columns_is_exact() -> None:
    """Arrow cannot compare lists: their rows are grouped by every column instead."""
    old = pa.table({"l": [[1, 2], [1, 2], None, [3]]})
    new = pa.table({"l": [[1, 2], None, [4]]})
    result = difference(new, old).to_pylist()
    assert sorted(result, key=str) == sorted(
        [{"l": [1, 2], "_weight": -1}, {"l": [3], "_weight": -1}, {"l": [4], "_weight": 1}],
        key=str)


def test_row_hashes_follow_row_order() -> None:
    rows = pa.table({"a": pa.array([3, 1, 3, None, 2, None], pa.int64())})
    hashes = row_hashes(rows)
    assert hashes.dtype == np.uint64 and len(hashes) == 6
    assert hashes[0] == hashes[2] and hashes[3] == hashes[5]
    assert len(set(hashes.tolist())) == 4


def test_row_group_offsets() -> None:
    sizes = np.array([100, 100, 50, 100])  # rows 0-99, 100-199, 200-249, 250-349
    groups, local = row_group_offsets(np.array([260, 5, 99, 251, 100]), sizes)
    assert groups.tolist() == [0, 1, 3]
    assert local.tolist() == [200 + 10, 5, 99, 200 + 1, 100]
    groups, local = row_group_offsets(np.array([260, 5, 251]), sizes)
    assert groups.tolist() == [0, 3]  # the row groups in between are not read
    assert local.tolist() == [100 + 10, 5, 100 + 1]
    assert row_group_offsets(np.zeros(0, np.int64), sizes)[0].tolist() == []
    with pytest.raises(IndexError):
        row_group_offsets(np.array([350]), sizes)
