"""Aggregate states stored in the warehouse: read back only for the same SQL and frontier."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

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
    assert store.load("v.a", SQL, {"flights": 3}, on_driver=False) is None  # engine spark
    assert store.load("v.a", SQL + " HAVING SUM(fare) > 0", {"flights": 3}) is None
    assert store.load("v.b", SQL, {"flights": 3}) is None


def test_saving_drops_the_views_other_states_but_not_a_file_being_written(
        tmp_path: Path) -> None:
    store = StateStore(Folder.local(tmp_path / "_state"))
    store.save("v.a", "SELECT 1", {"flights": 3}, _state())  # the view's former SQL
    store.save("v.a", SQL, {"flights": 3}, _state())
    (folder,) = [p for p in (tmp_path / "_state" / "v.a").iterdir() if p.is_dir()]
    staging = folder / "another-process.json.1234.tmp"
    staging.write_bytes(b"being written")
    store.save("v.a", SQL, {"flights": 4}, _state())
    assert store.load("v.a", SQL, {"flights": 3}) is None
    assert store.load("v.a", "SELECT 1", {"flights": 3}) is None
    assert store.load("v.a", SQL, {"flights": 4}) is not None
    assert staging.exists() and len(list(folder.iterdir())) == 3  # record, data, staging
    store.save("v.a", SQL, {"flights": 5}, None)  # no state kept: nothing stale is left
    assert list((tmp_path / "_state" / "v.a").iterdir()) == []


def _groups(counts: dict[str | None, int]) -> pa.Table:
    """A state of COUNT(*) by carrier with these row counts."""
    return pa.table({"__g0": pa.array(list(counts), pa.string()),
                     "__n": pa.array(list(counts.values()), pa.int64())})


def test_a_tick_stores_its_change_and_the_state_reads_back_as_base_plus_changes(
        tmp_path: Path) -> None:
    store = StateStore(Folder.local(tmp_path / "_state"))
    base: dict[str | None, int] = {f"c{i}": 1 for i in range(10)} | {None: 2}
    store.save("v.c", SQL, {"f": 1}, AggregateState((), table=_groups(base)))
    states, frontier, expected = [], {"f": 1}, dict(base)
    changes: list[dict[str | None, int]] = [{"c0": 2, None: -2}, {"c1": -1, "new": 1},
                                            {"c0": -3}]
    for tick, change in enumerate(changes):
        for group, rows in change.items():
            expected[group] = expected.get(group, 0) + rows
        expected = {g: n for g, n in expected.items() if n}
        after = {"f": tick + 2}
        state = AggregateState((), table=_groups(expected), change=_groups(change))
        store.save("v.c", SQL, after, state, previous=frontier)
        states.append((after, dict(expected)))
        frontier = after
    folder = next(p for p in (tmp_path / "_state" / "v.c").iterdir())
    assert len(list(folder.glob("*.json"))) == 4  # a base and three changes
    for at, counts in states:
        loaded = store.load("v.c", SQL, at)
        assert loaded is not None and loaded.table is not None
        assert dict(zip(loaded.table["__g0"].to_pylist(), loaded.table["__n"].to_pylist(),
                        strict=True)) == counts
    # changes as large as the base: the whole state is stored again, older entries dropped
    big: dict[str | None, int] = {f"c{i}": 1 for i in range(2, 10)}
    store.save("v.c", SQL, {"f": 9}, AggregateState((), table=_groups(expected),
                                                    change=_groups(big)), previous=frontier)
    assert len(list(folder.glob("*.json"))) == 1
    assert store.load("v.c", SQL, frontier) is None
    assert store.load("v.c", SQL, {"f": 9}) is not None
    # a change whose previous state is not stored is stored whole
    store.save("v.c", SQL, {"f": 11}, AggregateState((), table=_groups({"x": 1}),
                                                     change=_groups({"x": 1})),
               previous={"f": 10})
    loaded = store.load("v.c", SQL, {"f": 11})
    assert loaded is not None and loaded.table is not None
    assert loaded.table["__g0"].to_pylist() == ["x"]


def test_a_missing_link_of_the_chain_reads_as_no_state(tmp_path: Path) -> None:
    store = StateStore(Folder.local(tmp_path / "_state"))
    store.save("v.c", SQL, {"f": 1}, AggregateState((), table=_groups({"a": 5, "b": 5})))
    store.save("v.c", SQL, {"f": 2}, AggregateState((), table=_groups({"a": 6, "b": 5}),
                                                    change=_groups({"a": 1})),
               previous={"f": 1})
    folder = next(p for p in (tmp_path / "_state" / "v.c").iterdir())
    base = min(folder.glob("*.json"), key=lambda p: json.loads(p.read_text())["changes"])
    base.unlink()
    assert store.load("v.c", SQL, {"f": 2}) is None


def test_view_states_fall_back_to_the_store_and_survive_its_failures(tmp_path: Path) -> None:
    folder = tmp_path / "_state"
    ViewStates(StateStore(Folder.local(folder))).put("v.a", SQL, {"flights": 3}, _state())
    fresh = ViewStates(StateStore(Folder.local(folder)))  # a new process
    assert fresh.get("v.a", SQL, {"flights": 3}, on_driver=False) is None
    assert fresh.get("v.a", SQL, {"flights": 3}) is not None
    assert fresh.get("v.a", SQL, {"flights": 3}, on_driver=False) is None  # kept, not used
    assert fresh.get("v.a", SQL, None) is None
    (folder / "v.a").rename(tmp_path / "moved")
    (folder / "v.a").write_text("a file where the view's folder was")
    broken = ViewStates(StateStore(Folder.local(folder)))
    assert broken.get("v.a", SQL, {"flights": 3}) is None  # logged, rebuilt by the tick
    broken.put("v.a", SQL, {"flights": 4}, _state())  # logged; the refresh goes on
    assert broken.get("v.a", SQL, {"flights": 4}) is not None  # kept in memory


def test_data_not_holding_the_rows_its_record_counts_reads_as_no_state(tmp_path: Path) -> None:
    """A state file cut short (deleted and rewritten by another process) is never read."""
    store = StateStore(Folder.local(tmp_path / "_state"))
    store.save("v.c", SQL, {"f": 1}, AggregateState((), table=_groups({"a": 5, "b": 5})))
    store.save("v.c", SQL, {"f": 2}, AggregateState((), table=_groups({"a": 5, "b": 5}),
                                                    change=_groups({})), previous={"f": 1})
    loaded = store.load("v.c", SQL, {"f": 2})  # a tick that changed nothing: an empty change
    assert loaded is not None and loaded.table is not None and loaded.table.num_rows == 2
    folder = next(p for p in (tmp_path / "_state" / "v.c").iterdir())
    [base] = [p for p in folder.glob("*.parquet") if pq.read_table(p).num_rows == 2]
    pq.write_table(_groups({"a": 5}), base)
    with pytest.raises(ValueError, match="holds 1 rows, its record 2"):
        store.load("v.c", SQL, {"f": 2})
    assert ViewStates(StateStore(Folder.local(tmp_path / "_state"))).get(
        "v.c", SQL, {"f": 2}) is None  # logged; the tick rebuilds the state


def test_view_states_count_the_bytes_they_hold_on_the_driver() -> None:
    states = ViewStates()
    assert states.driver_bytes == 0
    states.put("v.a", SQL, {"flights": 3}, _state())
    states.put("v.b", SQL, {"flights": 3}, AggregateState((), table=_groups({"a": 1})))
    one, two = _state().table, _groups({"a": 1})
    assert states.driver_bytes == one.get_total_buffer_size() + two.get_total_buffer_size()
    states.put("v.a", SQL, {"flights": 4}, None)  # forgotten
    assert states.driver_bytes == two.get_total_buffer_size()
    states.put("v.b", SQL, {"flights": 4}, AggregateState((), table=two, change=two))
    assert states.driver_bytes == 2 * two.get_total_buffer_size()  # with its change
