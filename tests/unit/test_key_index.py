import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ivm import KeyValues
from lakehouse.sources.iceberg_keys import key_mask
from lakehouse.sources.key_index import KeyIndex, indexable

VALUES = st.lists(st.one_of(st.none(), st.integers(-50, 50)), max_size=300)


def _keys(wanted: list[int], listed: bool) -> KeyValues:
    if not wanted:
        return KeyValues(None, None)
    return KeyValues(min(wanted), max(wanted), tuple(wanted) if listed else None)


def _by_mask(column: pa.ChunkedArray, keys: KeyValues) -> np.ndarray:
    return np.flatnonzero(key_mask(column, keys).to_numpy(zero_copy_only=False))


@settings(max_examples=300, deadline=None)
@given(values=VALUES, wanted=st.lists(st.integers(-60, 60), max_size=20), listed=st.booleans(),
       chunks=st.integers(1, 3), presorted=st.booleans())
def test_lookup_finds_the_positions_a_comparison_of_every_value_finds(
        values, wanted, listed, chunks, presorted):
    if presorted:
        values = sorted(v for v in values if v is not None)
    cut = len(values) // chunks
    parts = [values[i * cut:(i + 1) * cut] for i in range(chunks - 1)]
    parts.append(values[(chunks - 1) * cut:])
    column = pa.chunked_array([pa.array(p, pa.int64()) for p in parts], pa.int64())
    keys = _keys(wanted, listed)
    found = KeyIndex.build(column).lookup(keys)
    assert found is not None
    assert found.dtype == np.int64
    np.testing.assert_array_equal(found, _by_mask(column, keys))


def test_dates_and_narrow_integers_are_indexed():
    days = [dt.date(2024, 1, d) for d in (5, 1, 3, 1, 9)]
    column = pa.chunked_array([pa.array(days, pa.date32())])
    keys = KeyValues(dt.date(2024, 1, 1), dt.date(2024, 1, 3),
                     (dt.date(2024, 1, 1), dt.date(2024, 1, 3)))
    np.testing.assert_array_equal(KeyIndex.build(column).lookup(keys), [1, 2, 3])
    small = pa.chunked_array([pa.array([7, 3, 7, None, 2], pa.int32())])
    np.testing.assert_array_equal(KeyIndex.build(small).lookup(KeyValues(3, 7, (3, 7))),
                                  [0, 1, 2])


def test_keys_that_do_not_cast_fall_back_or_widen():
    column = pa.chunked_array([pa.array([1, 5, 9, 5], pa.int32())])
    index = KeyIndex.build(column)
    # a bound beyond the column's type: the caller compares value by value
    assert index.lookup(KeyValues(1, 2**40, (1, 2**40))) is None
    # listed values that do not cast (a fraction): the bounds alone, a superset
    np.testing.assert_array_equal(index.lookup(KeyValues(Decimal(5), Decimal(9),
                                                         (Decimal(5), Decimal("5.5"),
                                                          Decimal(9)))), [1, 2, 3])
    # bounds of an exact decimal equal to an integer cast
    np.testing.assert_array_equal(index.lookup(KeyValues(Decimal(5), Decimal(5),
                                                         (Decimal(5),))), [1, 3])
    assert len(index.lookup(KeyValues(None, None))) == 0


def test_only_integers_and_dates_are_indexable():
    assert indexable(pa.int64()) and indexable(pa.date32())
    for other in (pa.string(), pa.float64(), pa.decimal128(10, 2), pa.timestamp("us")):
        assert not indexable(other)
        with pytest.raises(TypeError):
            KeyIndex.build(pa.chunked_array([pa.array([], other)]))
