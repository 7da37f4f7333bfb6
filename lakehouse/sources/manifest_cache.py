"""Manifest entries of Iceberg tables, kept in memory between ticks.

A manifest file never changes once written (Iceberg table spec, "Manifests": a commit
writes new manifests and a new manifest list). Planning a snapshot's scan reads every
manifest it lists, and pyiceberg decodes each Avro file again at each plan (1-3 ms a
manifest). Consecutive snapshots share all their manifests but those the commits between
them added, so with the entries kept a tick decodes only those: planning a source's new
snapshot costs a tenth of a millisecond instead of 20 ms for a few manifests.

A snapshot's manifest list never changes either ("Manifest Lists": one per snapshot), and
pyiceberg reads it again at each ``Snapshot.manifests`` call. Every view reading a source
reads the same snapshots' lists at each tick, so they are kept too: a source of a few
hundred manifests costs 20-50 ms of Python per read of its list. Consecutive lists name
mostly the same manifests, and a list kept refers to each of them as decoded once, by path:
pyiceberg shares a manifest's object between reads through an LRU of 128 manifests, which a
source appending a manifest per commit outgrows. On the soak benchmark (a source of several
hundred manifests, one more a second) the 256 lists kept each held their own copies, and
the pipeline's memory grew about 10 MiB a minute with the source's manifests.

Entries are kept only while a kept list names their manifest. A table's new snapshots
stop naming the manifests that compaction rewrote or expiry left behind, and their lists
then age out; so do those entries. Before, entries were dropped only past
:data:`DEFAULT_MAX_ENTRIES`: on the soak benchmark the view tables' sinks, which plan their
tables' files at each tick, added about 15 entries a second (an object census of
``lakehouse run``) that nothing would read again, kept until that bound (at 1-2 KB an
entry, some 200-400 MB).

A change feed plans a snapshot's scan of the few data files its commits changed, and a
plan visits only the manifests that may list them: the kept entries are indexed by data
file (the manifests listing each one live), so a plan restricted to some files reads
those manifests, the delete manifests and the data manifests not kept yet (a set
difference, in C), not every manifest of the snapshot. On the soak benchmark the source
gains a manifest a second, and a plan that visited each (a lookup in this cache, about 2
microseconds) grew with them: 17% of the pipeline's time after 44 minutes, of 3,000
manifests (py-spy). Measured apart, a plan of one file took 2.28 ms at 1,000 manifests
that way, and takes 0.08 ms.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable, Iterator
from functools import cached_property

from cachetools import Cache, LRUCache
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.io import FileIO
from pyiceberg.manifest import (
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
)
from pyiceberg.table import FileScanTask, ManifestGroupPlanner, Table
from pyiceberg.table.metadata import INITIAL_SEQUENCE_NUMBER
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.typedef import KeyDefaultDict
from pyiceberg.utils.concurrent import ExecutorFactory

__all__ = ["DEFAULT_MAX_ENTRIES", "MANIFEST_LISTS", "MEMBERSHIPS", "ManifestCache"]

DEFAULT_MAX_ENTRIES = 200_000
"""Entries kept by default: a few hundred MB at most (an entry with its column bounds
takes 1-2 KB)."""

MANIFEST_LISTS = 256
"""Manifest lists kept (the latest snapshots' of every table read), and with them the
entries of the manifests they name. A list shares its manifests' objects with the other
lists, so it costs a tuple of references (and a tuple of those its snapshot added). A
change feed over more snapshots than this, or more tables than this read in turn, finds
its lists and entries gone and decodes them again."""

MEMBERSHIPS = 32
"""Sets of a list's data manifests kept, for the restricted plans of the latest snapshots
(a tick's change feeds plan each source at two): about 130 KB each for 3,000 manifests."""


class ManifestCache:
    """Decoded manifest lists, and the entries of the manifests they name, by path.

    The last :data:`MANIFEST_LISTS` lists read are kept; a manifest's entries are kept
    while one of them names it, up to ``max_entries`` (least recently used out).

    Safe to share between threads and between the readers of several tables (paths are
    unique across a warehouse).

    Args:
        max_entries: Most manifest entries kept (and :data:`MANIFEST_LISTS` lists); 0
            keeps none of either.
    """

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES):
        self.max_entries = max_entries
        self._entries = _KeptEntries(max(max_entries, 1))
        self._lists = _Lists(MANIFEST_LISTS if max_entries else 1, self._unlist)
        self._memberships: LRUCache[str, frozenset[str]] = LRUCache(MEMBERSHIPS)
        # each listed manifest once, with the number of kept lists naming it
        self._listed: dict[str, tuple[ManifestFile, int]] = {}
        self._lock = threading.Lock()

    def manifests(self, io: FileIO, snapshot: Snapshot) -> tuple[ManifestFile, ...]:
        """The manifests ``snapshot`` lists, as ``Snapshot.manifests`` reads them.

        Returns:
            The manifest files; shared, not to be changed.
        """
        kept = self._kept_list(io, snapshot)
        return kept.manifests if isinstance(kept, _KeptList) else kept

    def added_in(self, io: FileIO, snapshot: Snapshot) -> tuple[ManifestFile, ...]:
        """The manifests ``snapshot`` added: those of its list its own commit wrote.

        Found once per kept list: a change feed's cost then does not grow with the
        manifests the snapshot carried over.
        """
        kept = self._kept_list(io, snapshot)
        if isinstance(kept, _KeptList):
            return kept.added
        return tuple(m for m in kept if m.added_snapshot_id == snapshot.snapshot_id)

    def _kept_list(self, io: FileIO, snapshot: Snapshot
                   ) -> _KeptList | tuple[ManifestFile, ...]:
        """``snapshot``'s list as kept, or as read when nothing is kept (``max_entries`` 0)."""
        with self._lock:
            found = self._lists.get(snapshot.manifest_list)
        if found is not None:
            return found
        read = tuple(snapshot.manifests(io))
        if not self.max_entries:
            return read
        with self._lock:
            found = self._lists.get(snapshot.manifest_list)  # another thread's read
            if found is None:
                found = _KeptList(tuple(self._list(manifest) for manifest in read),
                                  snapshot.snapshot_id)
                self._lists[snapshot.manifest_list] = found
        return found

    def _holding(self, io: FileIO, snapshot: Snapshot, paths: Collection[str]
                 ) -> tuple[ManifestFile, ...]:
        """The manifests of ``snapshot`` that may list the data files ``paths``.

        Those are all its delete manifests (a delete file may apply to any data file),
        then, by sequence number, its data manifests whose kept entries list one of the
        files live and those not kept (unknown until read). The set of the list's data
        manifests is kept for the :data:`MEMBERSHIPS` lists planned last.
        """
        kept = self._kept_list(io, snapshot)
        if not isinstance(kept, _KeptList):
            return kept
        with self._lock:
            data = self._memberships.get(snapshot.manifest_list)
        if data is None:
            data = frozenset(m.manifest_path for m in kept.manifests
                             if m.content == ManifestContent.DATA)
        with self._lock:
            if self._lists.get(snapshot.manifest_list) is not kept:
                return kept.manifests  # dropped since, and its manifests with it
            self._memberships[snapshot.manifest_list] = data
            chosen = (self._entries.manifests_of(paths) & data) | (data - self._entries.held)
            found = [self._listed[path][0] for path in chosen]
        found.sort(key=lambda m: (m.sequence_number or 0, m.manifest_path))
        return kept.deletes + tuple(found)

    def _list(self, manifest: ManifestFile) -> ManifestFile:
        """Count one more kept list naming ``manifest``; its shared object. Under the lock."""
        shared, lists = self._listed.get(manifest.manifest_path, (manifest, 0))
        self._listed[manifest.manifest_path] = (shared, lists + 1)
        return shared

    def _unlist(self, kept: _KeptList) -> None:
        """Count one list fewer naming each manifest of ``kept``, a list dropped from here.

        A manifest no kept list names any more is forgotten, with its entries. Under the lock.
        """
        for manifest in kept.manifests:
            path = manifest.manifest_path
            shared, lists = self._listed[path]
            if lists > 1:
                self._listed[path] = (shared, lists - 1)
            else:
                del self._listed[path]
                self._entries.pop(path, None)

    def entries(self, io: FileIO, manifest: ManifestFile, discard_deleted: bool = True,
                paths: Collection[str] | None = None) -> list[ManifestEntry]:
        """The entries of ``manifest``, as ``ManifestFile.fetch_manifest_entry`` reads them.

        Args:
            io: The table's FileIO.
            manifest: The manifest file.
            discard_deleted: Leave out the entries of status DELETED (the files the
                manifest's snapshot removed).
            paths: Only the entries of these data files, and none of status DELETED
                (None: every entry). Found through an index of the kept entries by path,
                so their cost does not grow with the manifest's other entries.

        Returns:
            The entries; the list and its entries are shared, not to be changed.
        """
        with self._lock:
            found = self._entries.get(manifest.manifest_path)
        kept = found is not None
        if found is None:
            found = _Entries(manifest.fetch_manifest_entry(io, discard_deleted=False))
            with self._lock:
                kept = (manifest.manifest_path in self._listed
                        and len(found) <= self.max_entries)
                if kept:
                    self._entries[manifest.manifest_path] = found
        if paths is not None:
            return found.live_of(paths) if kept else found.live_scan(paths)
        if discard_deleted:
            return [e for e in found if e.status != ManifestEntryStatus.DELETED]
        return found

    def holds(self, manifest: ManifestFile) -> bool:
        """Whether the entries of ``manifest`` are kept (reading them decodes nothing)."""
        with self._lock:
            return manifest.manifest_path in self._entries

    def plan_files(self, table: Table, snapshot_id: int,
                   row_filter: BooleanExpression | None = None,
                   paths: Collection[str] | None = None) -> list[FileScanTask]:
        """The scan tasks of snapshot ``snapshot_id`` (as ``table.scan(...).plan_files()``).

        Planned by pyiceberg's ``ManifestGroupPlanner`` (manifest, partition and metrics
        pruning by ``row_filter``, None for all rows; delete files matched by sequence
        number) over entries read through this cache.

        Args:
            table: The table, with the snapshot in its metadata.
            snapshot_id: The snapshot.
            row_filter: Rows the scan keeps (None: all).
            paths: The data files to plan, by path (None: all). A data file's task is
                the same whichever other files are planned with it; restricted, a plan
                costs what the snapshot's delete files and the restricted files do, not
                what every data file's task would (a tick's change feed over a source of
                thousands of files plans the few its commits changed), and visits only
                the manifests that may list them (the index of kept entries by data file).

        Raises:
            ValueError: The table has no snapshot ``snapshot_id``, or equality deletes
                that may apply to the files planned (pyiceberg cannot apply them).
        """
        snapshot = table.metadata.snapshot_by_id(snapshot_id)
        if snapshot is None:
            raise ValueError(f"table {table.name()} has no snapshot {snapshot_id}")
        restricted = frozenset(paths) if paths is not None else None
        planner = _CachedPlanner(self, table, row_filter or AlwaysTrue(), restricted)
        return list(planner.plan_files(
            self.manifests(table.io, snapshot) if restricted is None
            else self._holding(table.io, snapshot, restricted)))


class _Entries(list[ManifestEntry]):
    """A manifest's entries, and an index of its live ones by data file path.

    The index is made on the first lookup by path of a kept manifest (threads racing to
    make it make equal ones), about 40 bytes an entry beside its 1-2 KB (not counted in
    :attr:`ManifestCache.max_entries`). A manifest lists a data file once; one that lists
    a live file twice gets no index, and each lookup scans it.
    """

    _live_by_path: dict[str, ManifestEntry] | None = None
    _listed_twice: bool = False

    def live_of(self, paths: Collection[str]) -> list[ManifestEntry]:
        """The entries of the data files ``paths``, but those of status DELETED."""
        index = self._live_by_path
        if index is None and not self._listed_twice:
            live = [e for e in self if e.status != ManifestEntryStatus.DELETED]
            index = {entry.data_file.file_path: entry for entry in live}
            if len(index) < len(live):
                self._listed_twice, index = True, None
            else:
                self._live_by_path = index
        if index is None:
            return self.live_scan(paths)
        return [index[path] for path in paths if path in index]

    def live_data_files(self) -> set[str]:
        """The paths of the data files (not delete files) listed live."""
        return {e.data_file.file_path for e in self if e.status != ManifestEntryStatus.DELETED
                and e.data_file.content == DataFileContent.DATA}

    def live_scan(self, paths: Collection[str]) -> list[ManifestEntry]:
        """As :meth:`live_of`, by a scan of every entry (a manifest read once)."""
        wanted = paths if isinstance(paths, (set, frozenset)) else set(paths)
        return [e for e in self if e.status != ManifestEntryStatus.DELETED
                and e.data_file.file_path in wanted]


class _KeptEntries(LRUCache[str, _Entries]):
    """Manifests' entries by manifest path, least recently used out (sized in entries).

    Indexed by data file: :meth:`manifests_of` finds the kept manifests that list given
    data files live (about 150 bytes a live data file, not counted in the size). :attr:`held`
    is the set of manifest paths kept, so that a set difference finds those of a list not
    kept in C, not in a loop over the list.
    """

    def __init__(self, max_entries: int):
        super().__init__(max_entries, getsizeof=lambda entries: max(len(entries), 1))
        self.held: set[str] = set()
        self._by_file: dict[str, list[str]] = {}  # data file path -> manifest paths

    def manifests_of(self, files: Iterable[str]) -> set[str]:
        """The kept manifests that list one of the data files ``files`` live."""
        by_file = self._by_file
        return {manifest for file in files for manifest in by_file.get(file, ())}

    def __setitem__(self, path: str, entries: _Entries) -> None:
        if path in self:
            del self[path]
        super().__setitem__(path, entries)  # may evict others first
        self.held.add(path)
        for file in entries.live_data_files():
            self._by_file.setdefault(file, []).append(path)

    def __delitem__(self, path: str) -> None:
        entries = Cache.__getitem__(self, path)  # not LRUCache's, which reorders
        super().__delitem__(path)
        self.held.discard(path)
        for file in entries.live_data_files():
            manifests = self._by_file[file]
            manifests.remove(path)
            if not manifests:
                del self._by_file[file]

    def clear(self) -> None:
        """Remove every manifest's entries, and their index."""
        while self:
            self.popitem()


class _KeptList:
    """A snapshot's manifest list, kept.

    Also found once, on first use: the manifests its snapshot added, and its delete
    manifests.

    Attributes:
        manifests: The manifests, in the list's order.
        snapshot_id: The snapshot whose list it is.
    """

    def __init__(self, manifests: tuple[ManifestFile, ...], snapshot_id: int):
        self.manifests = manifests
        self.snapshot_id = snapshot_id

    @cached_property
    def added(self) -> tuple[ManifestFile, ...]:
        """The manifests the snapshot added (its own commit wrote), in the list's order."""
        return tuple(m for m in self.manifests if m.added_snapshot_id == self.snapshot_id)

    @cached_property
    def deletes(self) -> tuple[ManifestFile, ...]:
        """The delete manifests, in the list's order."""
        return tuple(m for m in self.manifests if m.content != ManifestContent.DATA)


class _Lists(LRUCache[str, _KeptList]):
    """Manifest lists by path, least recently used out.

    Each list removed (evicted, popped, deleted or cleared) is handed to ``dropped``.
    """

    def __init__(self, maxsize: int, dropped: Callable[[_KeptList], None]):
        super().__init__(maxsize)
        self._dropped = dropped

    def __delitem__(self, path: str) -> None:
        kept = Cache.__getitem__(self, path)  # not LRUCache's, which reorders
        super().__delitem__(path)
        self._dropped(kept)

    def clear(self) -> None:
        """Remove every list (each handed to ``dropped``)."""
        while self:
            self.popitem()


class _CachedPlanner(ManifestGroupPlanner):
    """pyiceberg's planner, its manifests' entries read through a :class:`ManifestCache`.

    ``paths``: the data files to plan (None: all); delete files are all considered.
    """

    def __init__(self, cache: ManifestCache, table: Table, row_filter: BooleanExpression,
                 paths: frozenset[str] | None = None):
        super().__init__(table.metadata, table.io, row_filter)
        self.cache = cache
        self.paths = paths

    def plan_manifest_entries(self, manifests: Iterable[ManifestFile]
                              ) -> Iterator[list[ManifestEntry]]:
        """Each manifest's entries that may match the row filter, as pyiceberg's planner.

        Manifests not kept are decoded in parallel, in pyiceberg's executor; kept ones are
        read on this thread. Handing a kept manifest to the executor costs more than reading
        it (a future and its lock against a lookup by path): a change feed's plan over a
        source of 1,000 manifests took 6.6 ms that way (1.8 ms read here), and on the soak
        benchmark, where the source gains a manifest a second, planning grew to two fifths
        of a tick.
        """
        candidates = self._candidates(manifests)
        partitions = {spec_id: self._build_partition_evaluator(spec_id)
                      for spec_id in {m.partition_spec_id for m in candidates}}
        metrics = self._build_metrics_evaluator()
        paths = self.paths

        def matching(manifest: ManifestFile) -> list[ManifestEntry]:
            matches = partitions[manifest.partition_spec_id]
            restricted = paths if manifest.content == ManifestContent.DATA else None
            return [entry for entry in self.cache.entries(self.io, manifest, paths=restricted)
                    if matches(entry.data_file) and metrics(entry.data_file)]
        new = [m for m in candidates if not self.cache.holds(m)]
        decoded = dict(zip((m.manifest_path for m in new),
                           ExecutorFactory.get_or_create().map(matching, new), strict=True))
        return iter([decoded[m.manifest_path] if m.manifest_path in decoded else matching(m)
                     for m in candidates])

    def _candidates(self, manifests: Iterable[ManifestFile]) -> list[ManifestFile]:
        """The manifests that may hold matching entries, as pyiceberg's planner prunes them.

        Pruned: by the row filter's partition projection, and the delete manifests older
        than every data manifest left.
        """
        evaluators: dict[int, Callable[[ManifestFile], bool]] = KeyDefaultDict(
            self._build_manifest_evaluator)
        left = [m for m in manifests if evaluators[m.partition_spec_id](m)]
        data = [m.min_sequence_number or INITIAL_SEQUENCE_NUMBER for m in left
                if m.content == ManifestContent.DATA]
        oldest = min(data, default=INITIAL_SEQUENCE_NUMBER)  # older delete manifests: skipped
        return [m for m in left if self._check_sequence_number(oldest, m)]
