"""The Delta sink (delta-rs) on a local table: multiset and keyed deltas, refresh state."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from sinks.delta import DeltaSink
from sinks.delta_commit import USER_METADATA, commit_frontier, commit_properties
from sinks.delta_tables import DeltaTables
from sinks.errors import SinkError
from sinks.refresh_state import REFRESH_STATE_KEY


def _rows(uri: str) -> Counter:
    return Counter(tuple(r.values()) for r in DeltaTable(uri).to_pyarrow_table().to_pylist())


def _delta(k: list, n: list, w: list[int]) -> pa.Table:
    return pa.table({"k": pa.array(k, pa.int64()), "n": pa.array(n, pa.int64()),
                     "_weight": pa.array(w, pa.int64())})


def test_multiset_delta_on_a_column_named_n_removes_one_copy(tmp_path: Path) -> None:
    uri = str(tmp_path / "v")
    sink = DeltaSink(uri, app_id="lakehouse:v")
    sink.replace(pa.table({"k": pa.array([1, 1, 1, None], pa.int64()),
                           "n": pa.array([7, 7, 7, None], pa.int64())}), {"s": 1})
    assert sink.frontier() == {"s": 1}
    sink.apply(_delta([1, None, 2], [7, None, 3], [-1, -1, 2]), None, {"s": 2})
    assert _rows(uri) == Counter({(1, 7): 2, (2, 3): 2})


def test_keyed_delta_and_refresh_state_in_commit_info(tmp_path: Path) -> None:
    uri = str(tmp_path / "v")
    sink = DeltaSink(uri, app_id="lakehouse:v")
    sink.replace(pa.table({"k": pa.array([1, 2, None], pa.int64()),
                           "n": pa.array([10, 20, 30], pa.int64())}), {"s": 1})
    assert sink.frontier() == {"s": 1}
    sink.apply(_delta([1, 1, None], [10, 11, 31], [-1, 1, 1]), ["k"], {"s": 2})
    assert _rows(uri) == Counter({(1, 11): 1, (2, 20): 1, (None, 31): 1})
    (commit,) = DeltaTable(uri).history(1)
    assert commit_frontier(commit) == {"s": 2}
    assert json.loads(commit[USER_METADATA])[REFRESH_STATE_KEY]  # Delta's own provenance field
    state = json.loads(commit_properties(commit)[REFRESH_STATE_KEY])
    assert state["view-version-id"] == 1 and state["source-states"] == []
    assert state["refresh-start-timestamp-ms"] > 0


def test_app_transaction_version_is_the_commit_version_plus_one_and_strictly_increases(
    tmp_path: Path,
) -> None:
    uri = str(tmp_path / "v")
    seen = []
    sink = DeltaSink(uri, app_id="lakehouse:v")
    assert sink.frontier() is None
    sink.replace(pa.table({"k": pa.array([1], pa.int64()), "n": pa.array([1], pa.int64())}),
                 {"s": 1})
    deltas = [(_delta([2], [2], [1]), None), (_delta([1, 1], [1, 5], [-1, 1]), ["k"]),
              (_delta([2], [2], [-1]), None), (_delta([], [], []), ["k"])]
    for round_, (delta, key) in enumerate(deltas, start=1):  # append, merge, merge, append
        table = DeltaTable(uri)
        seen.append(table.transaction_version("lakehouse:v"))
        assert seen[-1] == table.version() + 1
        sink = DeltaSink(uri, app_id="lakehouse:v")
        assert sink.frontier() == {"s": round_}
        sink.apply(delta, key, {"s": round_ + 1})
    seen.append(DeltaTable(uri).transaction_version("lakehouse:v"))
    assert seen == [1, 2, 3, 4, 5]
    assert _rows(uri) == Counter({(1, 5): 1})


def test_app_transaction_version_continues_above_versions_counted_by_refreshes(
    tmp_path: Path,
) -> None:
    """Tables written when the version counted the refreshes keep increasing."""
    uri = str(tmp_path / "v")
    for count in (1, 2):  # what the sink wrote before: the number of its commits
        write_deltalake(uri, pa.table({"k": pa.array([count], pa.int64()),
                                       "n": pa.array([count], pa.int64())}), mode="append",
                        commit_properties=CommitProperties(
                            app_transactions=[Transaction(app_id="lakehouse:v", version=count)]))
    sink = DeltaSink(uri, app_id="lakehouse:v")
    sink.frontier()
    sink.apply(_delta([3], [3], [1]), ["k"], {"s": 3})
    assert DeltaTable(uri).transaction_version("lakehouse:v") == 3


def test_keyed_merge_from_a_stale_base_is_refused(tmp_path: Path) -> None:
    uri = str(tmp_path / "v")
    DeltaSink(uri, app_id="lakehouse:v").replace(
        pa.table({"k": pa.array([1], pa.int64()), "n": pa.array([1], pa.int64())}), {"s": 1})
    winner, loser = DeltaSink(uri, app_id="lakehouse:v"), DeltaSink(uri, app_id="lakehouse:v")
    assert winner.frontier() == loser.frontier() == {"s": 1}
    winner.apply(_delta([1, 1], [1, 2], [-1, 1]), ["k"], {"s": 2})
    with pytest.raises(SinkError):
        loser.apply(_delta([1, 1], [1, 3], [-1, 1]), ["k"], {"s": 2})
    assert _rows(uri) == Counter({(1, 2): 1})
    table = DeltaTable(uri)
    assert table.version() == 1 and table.transaction_version("lakehouse:v") == 2
    assert commit_frontier(table.history(1)[0]) == {"s": 2}


def test_a_table_created_from_non_null_columns_takes_keyed_merges(tmp_path: Path) -> None:
    """Columns are created nullable (as Spark creates them): a MERGE's delete markers hold
    NULL in every non-key column."""
    uri = str(tmp_path / "v")
    schema = pa.schema([pa.field("k", pa.int64()), pa.field("n", pa.int64(), nullable=False)])
    DeltaSink(uri, app_id="lakehouse:v").replace(
        pa.table({"k": [1, 2], "n": [10, 20]}, schema=schema), {"s": 1})
    assert all(field.nullable for field in DeltaTable(uri).schema().fields)
    sink = DeltaSink(uri, app_id="lakehouse:v")
    sink.frontier()
    sink.apply(_delta([1, 1], [10, 11], [-1, 1]), ["k"], {"s": 2})
    assert _rows(uri) == Counter({(1, 11): 1, (2, 20): 1})


class _KeptTables(DeltaTables):
    """Records each table kept, so a test can tell a kept table from a loaded one."""

    def __init__(self) -> None:
        super().__init__()
        self.kept: list[DeltaTable] = []

    def keep(self, uri: str, table: DeltaTable) -> None:
        self.kept.append(table)
        super().keep(uri, table)


def _one_row(k: int, n: int) -> pa.Table:
    return pa.table({"k": pa.array([k], pa.int64()), "n": pa.array([n], pa.int64())})


def test_a_kept_table_is_taken_again_with_the_commits_made_elsewhere(tmp_path: Path) -> None:
    uri, tables = str(tmp_path / "v"), _KeptTables()
    DeltaSink(uri, app_id="lakehouse:v", tables=tables).replace(_one_row(1, 1), {"s": 1})
    first = DeltaSink(uri, app_id="lakehouse:v", tables=tables)
    assert first.frontier() == {"s": 1}
    first.apply(_delta([1, 1], [1, 2], [-1, 1]), ["k"], {"s": 2})
    first.release()
    (kept,) = tables.kept
    other = DeltaSink(uri, app_id="lakehouse:v")  # another writer, keeping nothing
    assert other.frontier() == {"s": 2}
    other.apply(_delta([2], [5], [1]), ["k"], {"s": 3})
    second = DeltaSink(uri, app_id="lakehouse:v", tables=tables)
    assert second.frontier() == {"s": 3}  # the kept table, brought up to date
    second.replace(_one_row(2, 6), {"s": 4})  # a full refresh, written onto the kept table
    second.release()
    assert tables.kept == [kept, kept]
    assert kept.version() == DeltaTable(uri).version() == 3
    assert _rows(uri) == Counter({(2, 6): 1})


def test_a_table_is_held_by_one_sink_and_handed_back_without_a_commit(
    tmp_path: Path,
) -> None:
    uri, tables = str(tmp_path / "v"), _KeptTables()
    DeltaSink(uri, app_id="lakehouse:v").replace(_one_row(1, 1), {"s": 1})
    reader = DeltaSink(uri, app_id="lakehouse:v", tables=tables)
    assert reader.frontier() == {"s": 1}
    reader.release()  # nothing to commit: the table is handed back all the same
    winner, loser = (DeltaSink(uri, app_id="lakehouse:v", tables=tables) for _ in range(2))
    assert winner.frontier() == loser.frontier() == {"s": 1}
    winner.apply(_delta([1, 1], [1, 2], [-1, 1]), ["k"], {"s": 2})
    with pytest.raises(SinkError):  # from its own, stale table: the winner holds the kept one
        loser.apply(_delta([1, 1], [1, 3], [-1, 1]), ["k"], {"s": 2})
    winner.release()
    assert tables.kept[0] is tables.kept[1]
    taken = tables.take(uri, None)
    assert taken is tables.kept[0] and taken.version() == 1


def test_a_table_dropped_and_created_again_is_loaded_anew(tmp_path: Path) -> None:
    uri, tables = str(tmp_path / "v"), _KeptTables()
    DeltaSink(uri, app_id="lakehouse:v").replace(_one_row(1, 1), {"s": 1})
    sink = DeltaSink(uri, app_id="lakehouse:v", tables=tables)
    sink.frontier()
    sink.apply(_delta([2], [2], [1]), ["k"], {"s": 2})
    sink.release()
    shutil.rmtree(uri)  # the user drops the view's table to rebuild it
    DeltaSink(uri, app_id="lakehouse:v").replace(_one_row(3, 3), {"s": 7})
    again = DeltaSink(uri, app_id="lakehouse:v", tables=tables)
    assert again.frontier() == {"s": 7}
    again.apply(_delta([3, 3], [3, 4], [-1, 1]), ["k"], {"s": 8})
    assert _rows(uri) == Counter({(3, 4): 1})
    assert DeltaTable(uri).version() == 1
