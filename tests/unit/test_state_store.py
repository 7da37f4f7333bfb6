"""Aggregate states stored in the warehouse: read back only for the same SQL and frontier."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow as pa

from ivm import AggregateState
from lakehouse.state_store import StateStore
from lakehouse.storage import Folder
from lakehouse.view_state import ViewStates

SQL = "SELECT carrier, SUM(fare) AS s FROM flights GROUP BY carrier"


def _state() -> AggregateState:
    table = pa.table({"__g0": ["AA", None], "__s0": pa.array([Decimal("1.50"), None],
                                                             pa.decimal128(17, 2)),
                      "__c0": [1, 0], "__n": [1, 2]})
    return AggregateState(("decimal(7,2)",), table=table)


def test_a_state_is_read_back_for_its_sql_and_frontier_only(tmp_path: Path) -> None:
    store = StateStore(Folder.local(tmp_path / "_state"))
    store.save("v.a", SQL, {"flights": 3}, _state())
    loaded = store.load("v.a", SQL, {"flights": 3})
    assert loaded is not None and loaded.arg_types == ("decimal(7,2)",)
    assert loaded.table is not None and loaded.table.equals(_state().table)
    assert store.load("v.a", SQL, {"flights": 4}) is None
    assert store.load("v.a", SQL + " HAVING SUM(fare) > 0", {"flights": 3}) is None
    assert store.load("v.b", SQL, {"flights": 3}) is None


def test_saving_drops_the_views_other_states_but_not_a_file_being_written(
        tmp_path: Path) -> None:
    store = StateStore(Folder.local(tmp_path / "_state"))
    store.save("v.a", SQL, {"flights": 3}, _state())
    staging = tmp_path / "_state" / "v.a" / "another-process.parquet.1234.tmp"
    staging.write_bytes(b"being written")
    store.save("v.a", SQL, {"flights": 4}, _state())
    assert store.load("v.a", SQL, {"flights": 3}) is None
    assert store.load("v.a", SQL, {"flights": 4}) is not None
    assert staging.exists()
    store.save("v.a", SQL, {"flights": 5}, None)  # no state kept: nothing stale is left
    assert [p.name for p in staging.parent.iterdir()] == [staging.name]


def test_view_states_fall_back_to_the_store_and_survive_its_failures(tmp_path: Path) -> None:
    folder = tmp_path / "_state"
    ViewStates(StateStore(Folder.local(folder))).put("v.a", SQL, {"flights": 3}, _state())
    fresh = ViewStates(StateStore(Folder.local(folder)))  # a new process
    assert fresh.get("v.a", SQL, {"flights": 3}) is not None
    assert fresh.get("v.a", SQL, None) is None
    (folder / "v.a").rename(tmp_path / "moved")
    (folder / "v.a").write_text("a file where the view's folder was")
    broken = ViewStates(StateStore(Folder.local(folder)))
    assert broken.get("v.a", SQL, {"flights": 3}) is None  # logged, rebuilt by the tick
    broken.put("v.a", SQL, {"flights": 4}, _state())  # logged; the refresh goes on
    assert broken.get("v.a", SQL, {"flights": 4}) is not None  # kept in memory
