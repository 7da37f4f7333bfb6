"""Arrow Z-sets: rows a delta inserts, and positions of the table rows it deletes."""

from __future__ import annotations

import random
from collections import Counter

import duckdb
import pyarrow as pa
import pytest

from sinks.arrow_zset import _matched, deleted_rows, expanded, has_deletes, still_to_delete


def _delta(rows: list[tuple[object, object, int]]) -> pa.Table:
    k, v, w = zip(*rows, strict=True) if rows else ((), (), ())
    return pa.table({"k": pa.array(k, pa.int64()), "v": pa.array(v, pa.string()),
                     "_weight": pa.array(w, pa.int64())})


def _table(rows: list[tuple[object, object]]) -> pa.Table:
    k, v = zip(*rows, strict=True)
    return pa.table({"k": pa.array(k, pa.int64()), "v": pa.array(v, pa.string())})


def _remaining(table: pa.Table, delta: pa.Table, key: list[str] | None) -> Counter:
    positions = set(deleted_rows(table, delta, key).positions.tolist())
    rows = [tuple(r.values()) for i, r in enumerate(table.to_pylist()) if i not in positions]
    return Counter(rows)


def test_expanded_repeats_positive_rows_and_drops_the_rest() -> None:
    delta = _delta([(1, "a", 3), (2, "b", -2), (3, "c", 1)])
    assert Counter(tuple(r.values()) for r in expanded(delta).to_pylist()) == Counter(
        {(1, "a"): 3, (3, "c"): 1})
    assert expanded(delta).column_names == ["k", "v"]
    assert has_deletes(delta)
    assert not has_deletes(_delta([(1, "a", 1)]))
    assert not has_deletes(_delta([]))


def test_multiset_delete_removes_exactly_w_copies() -> None:
    table = _table([(1, "a"), (1, "a"), (1, "a"), (2, "b"), (None, None), (None, None)])
    delta = _delta([(1, "a", -2), (None, None, -1), (2, "b", 5), (9, "z", -1)])
    assert _remaining(table, delta, None) == Counter({(1, "a"): 1, (2, "b"): 1, (None, None): 1})


def test_multiset_delete_of_more_copies_than_exist_removes_all() -> None:
    table = _table([(1, "a"), (2, "b")])
    assert _remaining(table, _delta([(1, "a", -3)]), None) == Counter({(2, "b"): 1})


def test_keyed_delete_matches_keys_of_every_delta_row_null_safe() -> None:
    table = _table([(1, "a"), (2, "b"), (3, "c"), (None, "n")])
    delta = _delta([(1, "a", -1), (1, "a2", 1), (3, "new", 1), (None, "m", 1)])
    assert _remaining(table, delta, ["k"]) == Counter({(2, "b"): 1})


def test_keyed_delete_on_a_composite_key() -> None:
    table = _table([(1, "a"), (1, "b"), (2, "a")])
    assert _remaining(table, _delta([(1, "b", -1)]), ["k", "v"]) == Counter(
        {(1, "a"): 1, (2, "a"): 1})


def test_empty_key_means_one_row_view_replaced_by_any_change() -> None:
    table = _table([(7, "total")])
    assert _remaining(table, _delta([(8, "total", 1)]), []) == Counter()
    assert _remaining(table, _delta([]), []) == Counter({(7, "total"): 1})


def test_column_names_never_clash_with_the_query() -> None:
    table = pa.table({"position": [5, 5, 5], "copy": [1, 1, 1], "weight": ["w", "w", "w"]})
    delta = pa.table({"position": [5], "copy": [1], "weight": ["w"],
                      "_weight": pa.array([-2], pa.int64())})
    assert len(deleted_rows(table, delta, None).positions) == 2
    assert len(deleted_rows(table, delta, ["copy"]).positions) == 3


def test_copies_deleted_in_one_file_are_not_deleted_again_in_the_next() -> None:
    delta = _delta([(1, "a", -3), (2, "b", -1), (3, "c", 2)])
    first = _table([(1, "a"), (1, "a"), (2, "b")])
    deleted = deleted_rows(first, delta, None)
    assert deleted.positions.tolist() == [0, 1, 2]
    left = still_to_delete(delta, deleted)
    assert [tuple(r.values()) for r in left.to_pylist()] == [(1, "a", -1)]
    second = _table([(1, "a"), (1, "a"), (2, "b")])
    assert deleted_rows(second, left, None).positions.tolist() == [0]


def test_keyed_deleted_rows_name_the_delta_row() -> None:
    deleted = deleted_rows(_table([(5, "x"), (6, "y")]), _delta([(6, "z", 1)]), ["k"])
    assert deleted.positions.tolist() == [1] and deleted.changes.tolist() == [0]


def _random_rows(rng: random.Random, count: int) -> list[tuple[object, object, object]]:
    floats = [0.0, -0.0, 1.5, float("nan"), None]
    return [(rng.choice([1, 2, 3, None]), rng.choice(["a", "b", None]), rng.choice(floats))
            for _ in range(count)]


def _typed(rows: list[tuple[object, object, object]], weights: list[int] | None) -> pa.Table:
    k, s, x = (list(c) for c in zip(*rows, strict=True)) if rows else ([], [], [])
    columns = {"k": pa.array(k, pa.int64()), "s": pa.array(s, pa.string()),
               "x": pa.array(x, pa.float64())}
    if weights is not None:
        columns["_weight"] = pa.array(weights, pa.int64())
    return pa.table(columns)


@pytest.mark.parametrize("key", [["k"], ["s"], ["k", "s"], ["x"], ["k", "x"], [], None])
def test_arrow_narrowing_finds_what_the_duckdb_join_finds(key: list[str] | None) -> None:
    """Arrow's is_in pre-filter and one-column shortcut change no result (NULL, NaN, -0.0)."""
    rng = random.Random(7)
    with duckdb.connect() as connection:
        for _ in range(40):
            table = _typed(_random_rows(rng, rng.randint(0, 30)), None)
            changes = _random_rows(rng, rng.randint(0, 6))
            delta = _typed(changes, [rng.choice([-2, -1, 1, 2]) for _ in changes])
            columns = list(key) if key is not None else ["k", "s", "x"]
            expected = _matched(connection, table, delta, columns, key is not None)
            found = deleted_rows(table, delta, key, lambda: connection)
            assert found.positions.tolist() == expected.positions.tolist()
            assert found.changes.tolist() == expected.changes.tolist()


def _no_duckdb() -> duckdb.DuckDBPyConnection:
    raise AssertionError("the DuckDB join ran")


def test_exact_keys_and_rows_with_no_value_of_the_delta_never_reach_duckdb() -> None:
    table = _table([(k, "v") for k in range(1000)])
    delta = _delta([(5000, "x", -1)])
    assert not len(deleted_rows(table, delta, ["k", "v"], _no_duckdb).positions)
    assert not len(deleted_rows(table, delta, None, _no_duckdb).positions)
    one_key = deleted_rows(table, _delta([(5, "x", 1), (None, "y", 1)]), ["k"], _no_duckdb)
    assert one_key.positions.tolist() == [5] and one_key.changes.tolist() == [0]
    two_keys = deleted_rows(table, _delta([(7, "w", -1), (6, "v", -1), (5, "v", 1)]),
                            ["k", "v"], _no_duckdb)
    assert two_keys.positions.tolist() == [5, 6] and two_keys.changes.tolist() == [2, 1]
    with pytest.raises(AssertionError, match="join ran"):  # copies to count: DuckDB
        deleted_rows(table, _delta([(5, "v", -1)]), None, _no_duckdb)


def test_exact_key_compares_values_across_arrow_types_of_one_column() -> None:
    """The table's file may read back large strings or another time zone name than the delta."""
    moment = [1_700_000_000_000_000, 1_700_000_000_000_001]
    table = pa.table({"s": pa.array(["a", "b"], pa.large_string()),
                      "t": pa.array(moment, pa.timestamp("us", "UTC"))})
    delta = pa.table({"s": pa.array(["b", "a"], pa.string()),
                      "t": pa.array([moment[1], moment[1]], pa.timestamp("us", "+00:00")),
                      "_weight": pa.array([-1, 1], pa.int64())})
    found = deleted_rows(table, delta, ["s", "t"], _no_duckdb)
    assert found.positions.tolist() == [1] and found.changes.tolist() == [0]
