"""The manifest cache keeps manifest lists and entries, and plans as pyiceberg does."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import PyArrowFile, PyArrowFileIO
from pyiceberg.manifest import ManifestEntryStatus, clear_manifest_cache
from pyiceberg.table import Table

from lakehouse.sources import manifest_cache
from lakehouse.sources.iceberg_files import changed_files
from lakehouse.sources.manifest_cache import DEFAULT_MAX_ENTRIES, ManifestCache


class CountingIO(PyArrowFileIO):
    """A FileIO that counts the files opened for reading, by path."""

    def __init__(self) -> None:
        super().__init__()
        self.opened: dict[str, int] = {}

    def new_input(self, location: str) -> PyArrowFile:
        self.opened[location] = self.opened.get(location, 0) + 1
        return super().new_input(location)


def _table(tmp_path: Path) -> Table:
    catalog = SqlCatalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=tmp_path.as_uri())
    catalog.create_namespace("ns")
    rows = pa.table({"id": pa.array([1, 2], pa.int64())})
    table = catalog.create_table("ns.t", schema=rows.schema)
    for _ in range(3):
        table.append(rows)
    return catalog.load_table("ns.t")


def test_a_manifest_list_is_read_once_and_planning_from_it_matches_pyiceberg(
        tmp_path: Path) -> None:
    table = _table(tmp_path)
    io, cache = CountingIO(), ManifestCache()
    snapshots = table.metadata.snapshots
    for _ in range(3):
        for snapshot in snapshots:
            assert [m.manifest_path for m in cache.manifests(io, snapshot)] == [
                m.manifest_path for m in snapshot.manifests(table.io)]
    assert {s.manifest_list: io.opened[s.manifest_list] for s in snapshots} == {
        s.manifest_list: 1 for s in snapshots}
    newest = snapshots[-1]
    planned = {t.file.file_path for t in cache.plan_files(table, newest.snapshot_id)}
    assert planned == {t.file.file_path for t in table.scan().plan_files()}
    assert len(planned) == 3


def test_a_change_feed_reads_each_snapshots_manifest_list_once(tmp_path: Path) -> None:
    table = _table(tmp_path)
    io, cache = CountingIO(), ManifestCache()
    chain = table.metadata.snapshots[1:]
    first = changed_files(table.metadata, io, chain, cache)
    again = changed_files(table.metadata, io, chain, cache)
    assert first.paths == again.paths and len(first.paths) == 2
    assert all(io.opened[s.manifest_list] == 1 for s in chain)


def test_no_cache_keeps_nothing(tmp_path: Path) -> None:
    table = _table(tmp_path)
    io, cache = CountingIO(), ManifestCache(max_entries=0)
    snapshot = table.metadata.snapshots[-1]
    cache.manifests(io, snapshot)
    cache.manifests(io, snapshot)
    assert io.opened[snapshot.manifest_list] == 2


def test_lists_naming_the_same_manifest_share_one_decoded_object(tmp_path: Path) -> None:
    table = _table(tmp_path)
    cache = ManifestCache()
    older, newer = table.metadata.snapshots[-2:]
    by_path = {m.manifest_path: m for m in cache.manifests(table.io, older)}
    clear_manifest_cache()  # as when a source's manifests outgrow pyiceberg's own cache
    shared = [m for m in cache.manifests(table.io, newer) if m.manifest_path in by_path]
    assert len(shared) == len(by_path) == 2  # fast appends: the newer list adds one
    assert all(m is by_path[m.manifest_path] for m in shared)


def test_entries_are_kept_while_a_kept_list_names_their_manifest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(manifest_cache, "MANIFEST_LISTS", 2)
    table = _table(tmp_path)  # three appends: manifests a, b, c; lists [a], [a b], [a b c]
    io, cache = CountingIO(), ManifestCache()
    first, second, third = table.metadata.snapshots
    only_first = cache.manifests(io, first)[0]
    cache.entries(io, only_first)
    cache.entries(io, only_first)
    assert io.opened[only_first.manifest_path] == 1
    cache.manifests(io, second)
    cache.manifests(io, third)  # the first list is dropped; the later ones name a too
    cache.entries(io, only_first)
    assert io.opened[only_first.manifest_path] == 1
    (tmp_path / "other").mkdir()
    other = _table(tmp_path / "other")  # a table whose lists do not name a
    for snapshot in other.metadata.snapshots[1:]:
        cache.manifests(io, snapshot)  # both lists of ``table`` are dropped
    cache.entries(io, only_first)
    cache.entries(io, only_first)
    assert io.opened[only_first.manifest_path] == 3  # forgotten: read at each call


def test_entries_by_path_are_the_live_entries_of_those_files(tmp_path: Path) -> None:
    table = _table(tmp_path)
    removed = table.scan().plan_files()[0].file.file_path
    with table.transaction() as transaction, transaction.update_snapshot().overwrite() as files:
        files.delete_data_file(next(t.file for t in table.scan().plan_files()
                                    if t.file.file_path == removed))
    table = table.refresh()
    cache, io = ManifestCache(), table.io
    manifests = cache.manifests(io, table.metadata.snapshots[-1])
    everything = [e for m in manifests for e in cache.entries(io, m, discard_deleted=False)]
    deleted = [e for e in everything if e.status == ManifestEntryStatus.DELETED]
    assert [e.data_file.file_path for e in deleted] == [removed]
    paths = {e.data_file.file_path for e in everything}
    for wanted in [set(), {removed}, paths - {removed}, paths | {"file:///nowhere.parquet"}]:
        for manifest in manifests:
            found = cache.entries(io, manifest, paths=wanted)
            assert sorted(map(id, found)) == sorted(
                id(e) for e in cache.entries(io, manifest) if e.data_file.file_path in wanted)


def _appended(tmp_path: Path, commits: int) -> Table:
    """A table of ``commits`` one-row fast appends (a manifest each), a file deleted."""
    catalog = SqlCatalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=tmp_path.as_uri())
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.t", schema=pa.schema([("id", pa.int64())]))
    for n in range(commits):
        table.append(pa.table({"id": pa.array([n], pa.int64())}))
    third = next(t.file for t in table.scan().plan_files() if t.file.record_count == 1
                 and t.file.file_path == sorted(f.file.file_path for f in
                                                table.scan().plan_files())[2])
    with table.transaction() as transaction, transaction.update_snapshot().overwrite() as files:
        files.delete_data_file(third)
    return catalog.load_table("ns.t")


def _whole(table: Table, snapshot_id: int) -> dict[str, int]:
    return {t.file.file_path: t.file.record_count
            for t in table.scan(snapshot_id=snapshot_id).plan_files()}


def test_a_restricted_plan_reads_only_the_manifests_that_list_its_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = _appended(tmp_path, 12)
    cache = ManifestCache()
    read: list[str] = []
    entries = ManifestCache.entries

    def recording(self, io, manifest, discard_deleted=True, paths=None):  # type: ignore[no-untyped-def]
        read.append(manifest.manifest_path)
        return entries(self, io, manifest, discard_deleted, paths)

    monkeypatch.setattr(ManifestCache, "entries", recording)
    snapshots = table.metadata.snapshots
    for snapshot in snapshots:
        cache.plan_files(table, snapshot.snapshot_id)  # every manifest read, and kept
    assert len(set(read)) >= 12
    for snapshot in snapshots[1:]:
        whole = _whole(table, snapshot.snapshot_id)
        for wanted in (set(list(whole)[-1:]), set(list(whole)[:2]), {"file:///nowhere"}):
            read.clear()
            planned = cache.plan_files(table, snapshot.snapshot_id, paths=wanted)
            assert {t.file.file_path: t.file.record_count for t in planned} == {
                path: rows for path, rows in whole.items() if path in wanted}
            assert len(read) <= len(wanted & set(whole)), snapshot.snapshot_id


def test_a_restricted_plan_reads_the_manifests_not_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = _appended(tmp_path, 8)
    snapshots = table.metadata.snapshots
    for max_entries in (DEFAULT_MAX_ENTRIES, 3):  # nothing read yet; entries evicted
        cache = ManifestCache(max_entries)
        for snapshot in [*snapshots[1:], *snapshots[1:]]:
            whole = _whole(table, snapshot.snapshot_id)
            wanted = set(sorted(whole)[::3])
            planned = cache.plan_files(table, snapshot.snapshot_id, paths=wanted)
            assert {t.file.file_path for t in planned} == wanted, (max_entries, snapshot)


def test_the_manifests_a_snapshot_added(tmp_path: Path) -> None:
    table = _appended(tmp_path, 4)
    cache = ManifestCache()
    for snapshot in table.metadata.snapshots:
        expected = [m.manifest_path for m in snapshot.manifests(table.io)
                    if m.added_snapshot_id == snapshot.snapshot_id]
        assert [m.manifest_path for m in cache.added_in(table.io, snapshot)] == expected
        assert expected  # each snapshot wrote one
