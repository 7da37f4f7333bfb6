"""The decoded-column cache of source data files (``lakehouse.sources.column_cache``)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakehouse.sources.column_cache import ColumnCache


def key(path: Path) -> tuple[str, int]:
    """The cache's key of a data file: its path and size."""
    return str(path), path.stat().st_size


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    """A Parquet file of three row groups of 1,000 rows: ``id`` int64, ``v`` string."""
    path = tmp_path / "data.parquet"
    rows = pa.table({"id": pa.array(range(3000), pa.int64()),
                     "v": [f"value {i:04d}" for i in range(3000)]})
    pq.write_table(rows, path, row_group_size=1000)
    return path


def test_cached_reads_equal_the_files_and_are_kept(data_file: Path) -> None:
    cache = ColumnCache(1 << 20)
    parquet = pq.ParquetFile(data_file)
    for groups, columns in (([2, 0], ["v", "id"]), ([0, 2, 1], ["id"]), ([2, 0], ["v", "id"])):
        read = cache.read_row_groups(parquet, key(data_file), groups, columns)
        assert read.equals(parquet.read_row_groups(groups, columns=columns))
        assert read.schema.equals(parquet.read_row_groups(groups, columns=columns).schema,
                                  check_metadata=True)
    # read 4, then 1 (2 kept), then none (4 kept)
    assert (cache.misses, cache.hits) == (5, 6)
    assert 0 < cache.size_bytes <= 1 << 20
    assert cache.read_row_groups(parquet, key(data_file), [], ["id"]).num_rows == 0


def test_the_budget_bounds_what_is_kept(data_file: Path) -> None:
    parquet = pq.ParquetFile(data_file)
    one_column = parquet.read_row_group(0, columns=["v"]).column("v").nbytes
    cache = ColumnCache(2 * one_column)
    for group in (0, 1, 2):
        cache.read_row_groups(parquet, key(data_file), [group], ["v"])
    assert cache.size_bytes <= 2 * one_column
    cache.read_row_groups(parquet, key(data_file), [0], ["v"])
    assert cache.hits == 0, "the least recently used group was dropped"
    cache.read_row_groups(parquet, key(data_file), [2], ["v"])
    assert cache.hits == 1
    too_small = ColumnCache(one_column // 2)
    too_small.read_row_groups(parquet, key(data_file), [0], ["v"])
    assert too_small.size_bytes == 0, "a column larger than the budget is not kept"


def test_a_zero_budget_keeps_nothing(data_file: Path) -> None:
    cache = ColumnCache(0)
    parquet = pq.ParquetFile(data_file)
    for _ in range(2):
        read = cache.read_row_groups(parquet, key(data_file), [1], ["id", "v"])
        assert read.equals(parquet.read_row_group(1, columns=["id", "v"]))
    assert (cache.hits, cache.size_bytes) == (0, 0)


def test_delete_files_are_read_once_within_the_budget() -> None:
    positions = {"a.parquet": pa.chunked_array([pa.array([3, 7], pa.int64())])}
    reads: list[int] = []

    def read() -> dict[str, pa.ChunkedArray]:
        reads.append(1)
        return positions

    cache = ColumnCache(1 << 20)
    for _ in range(3):
        assert cache.deleted_positions(("d.parquet", 100), read) == positions
    assert len(reads) == 1 and cache.size_bytes == 16
    assert cache.deleted_positions(("d.parquet", 101), read) == positions  # rewritten: new size
    assert len(reads) == 2
    small = ColumnCache(8)  # 16 bytes of positions do not fit: read every time
    for _ in range(2):
        assert small.deleted_positions(("d.parquet", 100), read) == positions
    assert len(reads) == 4 and small.size_bytes == 0
