import numpy as np
import pyarrow as pa
import pytest

from ivm.arrow_take import take_rows


def _chunked(sizes: list[int]) -> pa.Table:
    """A table with one record batch per size: an int, a decimal and a string column."""
    batches, first = [], 0
    for size in sizes:
        values = np.arange(first, first + size)
        batches.append(pa.record_batch({
            "i": pa.array(values),
            "d": pa.array([f"{v}.25" for v in values]).cast(pa.decimal128(12, 2)),
            "s": pa.array([None if v % 7 == 0 else f"row {v}" for v in values], pa.string())}))
        first += size
    return pa.Table.from_batches(batches)


@pytest.mark.parametrize("sizes", [[50], [10, 0, 25, 40], [1, 1, 1, 1, 1, 1]])
@pytest.mark.parametrize("kind", ["sorted", "shuffled", "repeated", "empty"])
def test_take_rows_equals_take(sizes: list[int], kind: str) -> None:
    table = _chunked(sizes)
    rng = np.random.default_rng(len(sizes))
    indices = {"sorted": np.sort(rng.choice(table.num_rows, 5, replace=False)),
               "shuffled": rng.permutation(table.num_rows),
               "repeated": rng.integers(0, table.num_rows, 40),
               "empty": np.array([], np.int64)}[kind]
    taken = take_rows(table, indices)
    assert taken.schema == table.schema
    assert taken.to_pylist() == table.take(pa.array(indices, pa.int64())).to_pylist()


@pytest.mark.parametrize("index", [-1, 100])
def test_an_index_outside_the_table_is_refused(index: int) -> None:
    with pytest.raises(IndexError):
        take_rows(_chunked([60, 40]), np.array([0, index]))


def test_columns_chunked_differently_are_taken_alike() -> None:
    table = pa.table({"i": pa.chunked_array([[0, 1, 2], [3, 4, 5, 6]]),
                      "s": pa.chunked_array([["a"], ["b", "c", "d", "e"], ["f", "g"]])})
    indices = np.array([6, 0, 3, 3, 1, 5])
    assert take_rows(table, indices).to_pylist() == table.take(indices).to_pylist()
