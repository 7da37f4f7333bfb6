"""Which data files of an Iceberg table a run of snapshots changed.

Iceberg table spec, "Manifests" and "Delete Formats": each snapshot writes manifest
entries with status ADDED or DELETED for the data and delete files it adds or removes.
A data file's live rows change only when the file is added or removed, or when a delete
file that applies to it is added or removed:

- a position delete file applies to the data files it names (``file_path`` column; one
  file when ``referenced_data_file`` is set or its lower and upper bounds are equal);
- an equality delete file applies to every data file with a smaller data sequence number
  (taken here as every data file live in the snapshot before it).

``replace`` snapshots (compaction, rewrite_data_files, rewrite_position_delete_files)
move rows between files without changing them: their files are left out unless another
snapshot of the range touches one of them, so a compaction costs no data read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
)
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Operation, Snapshot

from lakehouse.sources.manifest_cache import ManifestCache

# Field id of ``file_path`` in position delete files (Iceberg spec, "Position Delete Files").
POSITION_FILE_PATH_ID = 2147483546


@dataclass
class ChangedFiles:
    """The data files whose live rows may differ between two snapshots.

    Attributes:
        paths: Data file paths; every other file has the same rows at both snapshots
            (or, for replace snapshots left out, the same rows in total).
        position_deletes: For data files that gained Parquet position delete files, those
            delete files' paths.
        rewritten: Data files of ``paths`` changed otherwise: added or removed, under an
            equality delete, a delete file removed with no replacement added, a deletion
            vector, or a replace snapshot's group.
        delete_rows: The positions each delete file of ``position_deletes`` lists.
        replaced_deletes: For data files whose Parquet delete file a snapshot removed
            while adding another one for them (file-scoped deletes merge the old positions
            into the new file), the removed delete files: the file only lost rows if the
            added files list every position the removed ones did.
        removed_deletes: The Parquet delete files the snapshots removed.
    """

    paths: set[str]
    position_deletes: dict[str, set[str]] = field(default_factory=dict)
    rewritten: set[str] = field(default_factory=set)
    delete_rows: dict[str, int] = field(default_factory=dict)
    replaced_deletes: dict[str, set[str]] = field(default_factory=dict)
    removed_deletes: set[str] = field(default_factory=set)

    def only_deleted(self) -> dict[str, set[str]]:
        """The files whose only change is rows deleted by position, with their delete files.

        The delete files are those added in the range and still live at its end (a file
        left with none is compared instead). A file's change is the rows of the old
        snapshot at those positions: no need to compare it at both snapshots.
        """
        found = {path: deletes - self.removed_deletes
                 for path, deletes in self.position_deletes.items() if path not in self.rewritten}
        return {path: deletes for path, deletes in found.items() if deletes}


def changed_files(metadata: TableMetadata, io: FileIO, snapshots: list[Snapshot],
                  manifests: ManifestCache | None = None) -> ChangedFiles:
    """The data files whose rows ``snapshots`` (a parent chain, oldest first) changed.

    Args:
        metadata: The table's metadata (for the parents' manifests).
        io: The table's FileIO (reads manifests and, when needed, position delete files).
        snapshots: The snapshots after the old version up to the new one, oldest first.
        manifests: Where manifest entries are read from and kept, if anywhere (the
            planning of the new snapshot reads the same manifests next).

    Returns:
        The changed data files, closed over the replace snapshots they touch.
    """
    result = ChangedFiles(set())
    groups: list[set[str]] = []  # files of each replace snapshot
    for snapshot in snapshots:
        entries = _own_entries(io, snapshot, manifests)
        if _operation(snapshot) == Operation.REPLACE:
            groups.append({e.data_file.file_path for e in entries})
            continue
        added: set[str] = set()
        removed: dict[str, set[str]] = {}
        for entry in entries:
            gained, lost = _add_entry(result, metadata, io, snapshot, entry)
            added |= gained
            for path in lost:
                removed.setdefault(path, set()).add(entry.data_file.file_path)
                result.removed_deletes.add(entry.data_file.file_path)
        for path, deletes in removed.items():
            if path in added:  # a merged replacement, to be checked by whoever reads it
                result.replaced_deletes.setdefault(path, set()).update(deletes)
            else:
                result.rewritten.add(path)
    result.rewritten |= _close_over_replacements(result.paths, groups)
    return result


def _operation(snapshot: Snapshot) -> Operation | None:
    return snapshot.summary.operation if snapshot.summary is not None else None


def _own_entries(io: FileIO, snapshot: Snapshot, manifests: ManifestCache | None
                 ) -> list[ManifestEntry]:
    """The manifest entries ``snapshot`` added or deleted (not the ones it carried over)."""
    if manifests is None:
        manifests = ManifestCache(max_entries=0)  # keeps nothing
    entries = []
    for manifest in manifests.added_in(io, snapshot):
        for entry in manifests.entries(io, manifest, discard_deleted=False):
            if entry.snapshot_id == snapshot.snapshot_id and entry.status in (
                    ManifestEntryStatus.ADDED, ManifestEntryStatus.DELETED):
                entries.append(entry)
    return entries


def _add_entry(result: ChangedFiles, metadata: TableMetadata, io: FileIO, snapshot: Snapshot,
               entry: ManifestEntry) -> tuple[set[str], set[str]]:
    """Add the data files whose rows one added or removed file changes.

    Returns:
        The data files an added Parquet position delete file applies to, and those a
        removed Parquet one applied to (else two empty sets). A writer that deletes more
        rows of a file may replace the file's delete file by one listing the old positions
        too (Iceberg's file-scoped deletes): the file then still only lost rows by position.
    """
    data_file = entry.data_file
    if data_file.content == DataFileContent.DATA:
        changed = {data_file.file_path}
    elif data_file.content == DataFileContent.POSITION_DELETES:
        changed = position_delete_targets(io, data_file)
        result.paths |= changed
        if data_file.file_format != FileFormat.PARQUET:  # a deletion vector
            result.rewritten |= changed
            return set(), set()
        if entry.status != ManifestEntryStatus.ADDED:
            return set(), changed
        for path in changed:
            result.position_deletes.setdefault(path, set()).add(data_file.file_path)
        result.delete_rows[data_file.file_path] = data_file.record_count
        return changed, set()
    else:  # equality deletes
        parent = (metadata.snapshot_by_id(snapshot.parent_snapshot_id)
                  if snapshot.parent_snapshot_id is not None else None)
        changed = live_data_files(io, parent) if parent is not None else set()
    result.paths |= changed
    result.rewritten |= changed
    return set(), set()


def position_delete_targets(io: FileIO, delete_file: DataFile) -> set[str]:
    """The data files a position delete file (or deletion vector) deletes rows from.

    Args:
        io: The table's FileIO.
        delete_file: A file with content POSITION_DELETES.

    Returns:
        Data file paths, from ``referenced_data_file``, equal ``file_path`` bounds, or
        else the file's ``file_path`` column (Parquet).

    Raises:
        ValueError: The file names several data files and is not Parquet.
    """
    referenced = getattr(delete_file, "referenced_data_file", None)
    if referenced:
        return {referenced}
    lower = (delete_file.lower_bounds or {}).get(POSITION_FILE_PATH_ID)
    upper = (delete_file.upper_bounds or {}).get(POSITION_FILE_PATH_ID)
    if lower is not None and lower == upper:
        return {lower.decode()}
    if delete_file.file_format != FileFormat.PARQUET:
        raise ValueError(f"cannot read position delete file {delete_file.file_path}")
    with io.new_input(delete_file.file_path).open() as stream:
        paths = pq.read_table(stream, columns=["file_path"]).column("file_path")
    return {str(p) for p in pc.unique(paths).to_pylist()}


def live_data_files(io: FileIO, snapshot: Snapshot) -> set[str]:
    """Paths of the data files live in ``snapshot``."""
    paths = set()
    for manifest in snapshot.manifests(io):
        if manifest.content != ManifestContent.DATA:
            continue
        for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
            paths.add(entry.data_file.file_path)
    return paths


def _close_over_replacements(paths: set[str], groups: list[set[str]]) -> set[str]:
    """Add every file of a replace group that shares a file with ``paths`` (to a fixpoint).

    A replace group left out contributes its old files' rows at the old snapshot and its
    new files' rows at the new one: equal, unless another snapshot changed one of its
    files, in which case the whole group must be read.

    Returns:
        The files of the groups added (each added or removed by its replace snapshot).
    """
    pending = list(groups)
    added: set[str] = set()
    changed = True
    while changed:
        changed = False
        for group in list(pending):
            if group & paths:
                paths |= group
                added |= group
                pending.remove(group)
                changed = True
    return added
