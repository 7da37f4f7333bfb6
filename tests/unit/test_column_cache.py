"""The decoded-column cache of source data files (``lakehouse.sources.column_cache``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.schema import Schema

from lakehouse.sources.column_cache import KEY_ENTRY_BYTES, ColumnCache, FileLayout


def key(path: Path) -> tuple[str, int]:
    """The cache's key of a data file: its path and size."""
    return str(path), path.stat().st_size


def read_groups(cache: ColumnCache, parquet: pq.ParquetFile, path: Path, groups: list[int],
                columns: list[str]) -> pa.Table:
    """``cache.read_row_groups`` of the open file ``parquet`` at ``path``."""
    return cache.read_row_groups(key(path), groups, columns, parquet.schema_arrow,
                                 lambda: parquet)


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
        read = read_groups(cache, parquet, data_file, groups, columns)
        assert read.equals(parquet.read_row_groups(groups, columns=columns))
        assert read.schema.equals(parquet.read_row_groups(groups, columns=columns).schema,
                                  check_metadata=True)
    # read 4, then 1 (2 kept), then none (4 kept)
    assert (cache.misses, cache.hits) == (5, 6)
    assert 0 < cache.size_bytes <= 1 << 20
    assert read_groups(cache, parquet, data_file, [], ["id"]).num_rows == 0


def test_the_budget_bounds_what_is_kept(data_file: Path) -> None:
    parquet = pq.ParquetFile(data_file)
    one_column = parquet.read_row_group(0, columns=["v"]).column("v").nbytes
    cache = ColumnCache(2 * one_column)
    for group in (0, 1, 2):
        read_groups(cache, parquet, data_file, [group], ["v"])
    assert cache.size_bytes <= 2 * one_column
    read_groups(cache, parquet, data_file, [0], ["v"])
    assert cache.hits == 0, "the least recently used group was dropped"
    read_groups(cache, parquet, data_file, [2], ["v"])
    assert cache.hits == 1
    too_small = ColumnCache(one_column // 2)
    read_groups(too_small, parquet, data_file, [0], ["v"])
    assert too_small.size_bytes == 0, "a column larger than the budget is not kept"


def test_a_zero_budget_keeps_nothing(data_file: Path) -> None:
    cache = ColumnCache(0)
    parquet = pq.ParquetFile(data_file)
    for _ in range(2):
        read = read_groups(cache, parquet, data_file, [1], ["id", "v"])
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


def test_kept_columns_are_read_without_opening_the_file(data_file: Path) -> None:
    cache = ColumnCache(1 << 20)
    parquet = pq.ParquetFile(data_file)
    opened: list[int] = []

    def opener() -> pq.ParquetFile:
        opened.append(1)
        return parquet

    first = cache.read_row_groups(key(data_file), [0, 2], ["id"], parquet.schema_arrow, opener)
    again = cache.read_row_groups(key(data_file), [2, 0], ["id"], parquet.schema_arrow, opener)
    assert len(opened) == 2, "one open per row group read, none for kept columns"
    assert again.equals(pa.concat_tables([first.slice(1000), first.slice(0, 1000)]))
    cache.read_row_groups(key(data_file), [0], ["id", "v"], parquet.schema_arrow, opener)
    assert len(opened) == 3, "a column not kept opens the file"


def test_file_layouts_are_kept_per_file_and_derivation(data_file: Path) -> None:
    parquet = pq.ParquetFile(data_file)
    reads: list[int] = []

    def read() -> FileLayout:
        reads.append(1)
        return FileLayout((1000, 1000, 1000), parquet.schema_arrow, Schema())

    cache = ColumnCache(1 << 20)
    for _ in range(2):
        assert cache.file_layout(key(data_file), ("mapping", 1), read).row_group_rows[0] == 1000
    assert len(reads) == 1
    cache.file_layout(key(data_file), ("mapping", 2), read)  # another name mapping
    assert len(reads) == 2
    ColumnCache(0).file_layout(key(data_file), ("mapping", 1), read)
    assert len(reads) == 3, "a zero budget keeps nothing"


def test_merged_deletes_are_kept_per_set_of_delete_files() -> None:
    merges: list[int] = []

    def merge() -> np.ndarray:
        merges.append(1)
        return np.array([2, 5, 9], np.int64)

    cache = ColumnCache(1 << 20)
    files = frozenset({("d1.parquet", 10), ("d2.parquet", 20)})
    first = cache.merged_deletes("a.parquet", files, merge)
    assert cache.merged_deletes("a.parquet", files, merge) is first and len(merges) == 1
    # the key names every delete file: it counts against the budget with the positions
    assert cache.size_bytes == 24 + len("a.parquet") + 2 * (KEY_ENTRY_BYTES + len("d1.parquet"))
    with pytest.raises(ValueError):
        first[0] = 3  # shared: read-only
    cache.merged_deletes("a.parquet", files | {("d3.parquet", 30)}, merge)  # one more delete
    cache.merged_deletes("b.parquet", files, merge)  # another data file
    assert len(merges) == 3
