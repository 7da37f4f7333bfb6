"""The Delta sink (delta-rs) on a local table: multiset and keyed deltas, refresh state."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

from sinks.delta import DeltaSink
from sinks.frontier import FRONTIER_KEY, decode_frontier
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
    assert decode_frontier(commit[FRONTIER_KEY]) == {"s": 2}
    state = json.loads(commit[REFRESH_STATE_KEY])
    assert state["view-version-id"] == 1 and state["source-states"] == []
    assert state["refresh-start-timestamp-ms"] > 0
