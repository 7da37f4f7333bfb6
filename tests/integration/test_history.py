"""The refresh history table and the suspended views, through the real REST catalog (no Spark)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from pyiceberg.catalog.rest import RestCatalog

from lakehouse import history as history_module
from lakehouse.config import parse_config
from lakehouse.errors import SourceError
from lakehouse.history import (
    EXPIRE_BATCH,
    HISTORY_SCHEMA,
    HISTORY_TABLE_PROPERTIES,
    KEPT_SNAPSHOTS,
    HistoryRow,
    RefreshHistory,
)
from lakehouse.history_writer import HistoryWriter
from lakehouse.refresh import RefreshResult
from lakehouse.runtime import Runtime
from tests.conftest_catalog import CatalogServerHandle

START = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)


def _row(view: str, minutes: int, mode: str = "incremental") -> HistoryRow:
    result = RefreshResult(view, mode, {"flights": minutes}, rows_in=minutes, rows_out=1,  # type: ignore[arg-type]
                           duration_s=0.5, sinks=["iceberg"], engine="local")
    return HistoryRow.of(result, START + timedelta(minutes=minutes), {"flights": minutes - 1})


def test_rows_read_back_newest_first_per_view(rest_catalog: RestCatalog,
                                              catalog_namespace: str) -> None:
    history = RefreshHistory(rest_catalog, f"{catalog_namespace}.history")
    assert history.read().num_rows == 0 and history.suspended() == {}  # no table yet
    history.append([_row("v.a", 1), _row("v.b", 2)])
    history.append([_row("v.a", 3, "full")])
    rows = history.read("v.a").to_pylist()
    assert [(r["started_at"], r["mode"]) for r in rows] == [
        (START + timedelta(minutes=3), "full"), (START + timedelta(minutes=1), "incremental")]
    assert (rows[1]["frontier_before"], rows[1]["frontier_after"]) == (
        '{"flights": 0}', '{"flights": 1}')
    assert [r["view"] for r in history.read(limit=2).to_pylist()] == ["v.a", "v.b"]
    recent = history.read(since=START + timedelta(minutes=2)).to_pylist()
    assert [(r["view"], r["mode"]) for r in recent] == [("v.a", "full"), ("v.b", "incremental")]
    assert [r["mode"] for r in history.read("v.a", since=START + timedelta(minutes=2))
            .to_pylist()] == ["full"]  # both filters


def test_concurrent_appends_each_land(rest_catalog: RestCatalog, catalog_namespace: str) -> None:
    """Writers that lose a commit race reload the table and commit again."""
    history = RefreshHistory(rest_catalog, f"{catalog_namespace}.history")
    history.append([_row("v.a", 0)])  # created once, before the race
    barrier = threading.Barrier(3)

    def write(minutes: int) -> None:
        barrier.wait()
        RefreshHistory(rest_catalog, history.identifier).append([_row("v.a", minutes)])

    threads = [threading.Thread(target=write, args=(m,)) for m in (1, 2, 3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r["rows_in"] for r in history.read("v.a").to_pylist()) == [0, 1, 2, 3]


def test_suspend_and_resume_are_namespace_properties(rest_catalog: RestCatalog,
                                                     catalog_namespace: str) -> None:
    identifier = f"{catalog_namespace}.history"
    history = RefreshHistory(rest_catalog, identifier)
    history.suspend("v.a")
    since = history.suspended()["v.a"]
    history.suspend("v.a")  # suspending again keeps the first time
    assert RefreshHistory(rest_catalog, identifier).suspended() == {"v.a": since}
    assert rest_catalog.load_namespace_properties(catalog_namespace)["suspended.v.a"] == since
    history.resume("v.b")  # never suspended: nothing to do
    history.resume("v.a")
    assert history.suspended() == {}
    assert "suspended.v.a" not in rest_catalog.load_namespace_properties(catalog_namespace)


def test_the_table_keeps_its_newest_snapshots_and_every_row(rest_catalog: RestCatalog,
                                                            catalog_namespace: str) -> None:
    history = RefreshHistory(rest_catalog, f"{catalog_namespace}.history")
    for minutes in range(KEPT_SNAPSHOTS + EXPIRE_BATCH + 1):
        history.append([_row("v.a", minutes)])
    table = rest_catalog.load_table(history.identifier)
    assert KEPT_SNAPSHOTS <= len(table.metadata.snapshots) < KEPT_SNAPSHOTS + EXPIRE_BATCH
    assert history.read("v.a").num_rows == KEPT_SNAPSHOTS + EXPIRE_BATCH + 1


def _at(view: str, started_at: datetime) -> HistoryRow:
    result = RefreshResult(view, "incremental", {"flights": 1}, rows_in=1, rows_out=1,
                           duration_s=0.5, sinks=["iceberg"], engine="local")
    return HistoryRow.of(result, started_at, {"flights": 0})


def _data_files(catalog: RestCatalog, identifier: str) -> int:
    snapshot = catalog.load_table(identifier).current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    return int(snapshot.summary["total-data-files"])


def test_compaction_rewrites_the_files_as_one_without_the_rows_past_retention(
        rest_catalog: RestCatalog, catalog_namespace: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(history_module, "COMPACT_FILES", 6)
    history = RefreshHistory(rest_catalog, f"{catalog_namespace}.history",
                             retain_for_s=7 * 86400.0)
    now = datetime.now(UTC)
    ages_d = [30, 10, 6, 2, 1]
    history.append([_at("v.old", now - timedelta(days=40)),  # its newest row: kept
                    _at("v.old", now - timedelta(days=50))])
    for age_d in ages_d[1:]:  # five appends, five files: not yet
        history.append([_at("v.a", now - timedelta(days=age_d))])
    assert _data_files(rest_catalog, history.identifier) == 5
    history.append([_at("v.a", now - timedelta(days=ages_d[0])), _at("v.a", now),
                    _at("v.b", now)])  # the sixth file: compacted
    assert _data_files(rest_catalog, history.identifier) == 1
    kept = history.read().to_pylist()
    assert sorted((r["view"], r["started_at"]) for r in kept) == sorted(
        [("v.a", now - timedelta(days=age_d)) for age_d in ages_d if age_d < 7]
        + [("v.a", now), ("v.b", now), ("v.old", now - timedelta(days=40))])


def test_a_compaction_that_lost_to_an_append_loses_no_row(
        rest_catalog: RestCatalog, catalog_namespace: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    history = RefreshHistory(rest_catalog, f"{catalog_namespace}.history")
    for minutes in range(3):
        history.append([_row("v.a", minutes)])
    stale = rest_catalog.load_table(history.identifier)  # read before another append lands
    history.append([_row("v.b", 3)])
    monkeypatch.setattr(history_module, "COMPACT_FILES", 1)
    history._compact(stale)  # refused: data files were added since it read the rows
    assert _data_files(rest_catalog, history.identifier) == 4
    assert sorted(r["view"] for r in history.read().to_pylist()) == ["v.a"] * 3 + ["v.b"]
    history._compact(rest_catalog.load_table(history.identifier))  # current: compacted
    assert _data_files(rest_catalog, history.identifier) == 1
    assert sorted(r["view"] for r in history.read().to_pylist()) == ["v.a"] * 3 + ["v.b"]


def test_a_table_created_before_its_properties_gets_them_with_the_next_append(
        rest_catalog: RestCatalog, catalog_namespace: str) -> None:
    history = RefreshHistory(rest_catalog, f"{catalog_namespace}.history")
    rest_catalog.create_table(history.identifier, schema=HISTORY_SCHEMA)
    history.append([_row("v.a", 1)])
    table = rest_catalog.load_table(history.identifier)
    assert table.properties.items() >= HISTORY_TABLE_PROPERTIES.items()
    assert len(table.metadata.metadata_log) == 1 and history.read().num_rows == 1  # one commit


def test_the_writer_appends_what_is_queued_in_one_commit(rest_catalog: RestCatalog,
                                                         catalog_namespace: str) -> None:
    history = RefreshHistory(rest_catalog, f"{catalog_namespace}.history")
    writer = HistoryWriter(history)
    for minutes in range(6):  # queued while the first append creates the table and commits
        writer.record(_row("v.a", minutes))
    writer.close()
    assert not writer._thread.is_alive()  # closing stops its thread
    assert history.read("v.a").num_rows == 6
    assert len(rest_catalog.load_table(history.identifier).metadata.snapshots) <= 2


def test_the_writer_pauses_between_appends_until_a_flush(rest_catalog: RestCatalog,
                                                          catalog_namespace: str) -> None:
    history = RefreshHistory(rest_catalog, f"{catalog_namespace}.history")
    writer = HistoryWriter(history, append_every_s=600)
    writer.record(_row("v.a", 0))
    deadline = time.monotonic() + 60
    while history.read("v.a").num_rows == 0 and time.monotonic() < deadline:
        time.sleep(0.1)  # the first row is appended at once
    for minutes in (1, 2):
        writer.record(_row("v.a", minutes))
    time.sleep(1.0)
    assert history.read("v.a").num_rows == 1  # the writer waits out its interval
    assert writer.flush(timeout_s=60)  # a flush appends the queued rows now
    assert history.read("v.a").num_rows == 3
    assert len(rest_catalog.load_table(history.identifier).metadata.snapshots) == 2
    started = time.monotonic()
    writer.close()
    assert not writer._thread.is_alive() and time.monotonic() - started < 60


def test_a_repeated_failure_is_recorded_once(catalog_server: CatalogServerHandle,
                                             catalog_namespace: str) -> None:
    """A view polled five times a second with a missing source adds one row, not one a poll."""
    identifier = f"{catalog_namespace}.history"
    config = parse_config({
        "warehouse": str(catalog_server.warehouse), "history_table": identifier,
        "catalog": {"embedded": False, "uri": catalog_server.uri},
        "sources": {"gone": {"iceberg": f"{catalog_namespace}.gone"}},
        "views": [{"name": f"{catalog_namespace}.v", "sql": "SELECT * FROM gone"}]})
    runtime = Runtime(config)
    for _ in range(3):
        with pytest.raises(SourceError):
            runtime.refresh(config.views[0])
    assert not runtime.session.started  # nothing here needed Spark
    assert runtime.history_writer is not None
    runtime.history_writer.flush()  # rows are appended off the refresh's path
    rows = RefreshHistory(runtime.catalog, identifier).read().to_pylist()
    runtime.close()
    assert [(r["mode"], r["frontier_before"]) for r in rows] == [("failed", None)]
    assert "gone" in rows[0]["error"] and rows[0]["engine"] is None
