"""Deleting a dropped table's files (``DELETE .../tables/{table}?purgeRequested=true``).

A purge deletes only files inside the table's own location and inside no other table's,
view's or generic table's: a table's metadata may name any path (files added by a client,
a metadata file registered from elsewhere), and none of those may be destroyed through it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pyarrow.fs import FileSelector, FileType
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.table import Table

from catalog_api.core.config import CatalogSettings
from catalog_api.locations import confined, is_within, statistics_paths

logger = logging.getLogger(__name__)

#: Folders of the standard table layout that hold only that table's files.
TABLE_FOLDERS = ("data", "metadata")


def _snapshot_files(table: Table) -> set[str]:
    """Manifest lists, manifests, data and delete files of every snapshot (unreadable: skipped)."""
    io, files, read = table.io, set(), set()
    for snapshot in table.metadata.snapshots:
        files.add(snapshot.manifest_list)
        try:
            manifests = snapshot.manifests(io)
        except Exception:  # a missing or corrupt file: purge what can be reached
            logger.warning("Cannot read manifest list %s", snapshot.manifest_list)
            continue
        for manifest in manifests:
            if manifest.manifest_path in read:
                continue
            read.add(manifest.manifest_path)
            files.add(manifest.manifest_path)
            try:
                entries = manifest.fetch_manifest_entry(io, discard_deleted=False)
            except Exception:
                logger.warning("Cannot read manifest %s", manifest.manifest_path)
                continue
            files.update(entry.data_file.file_path for entry in entries)
    return files


def reachable_files(table: Table) -> set[str]:
    """Every file a table's metadata reaches: metadata files, statistics, snapshot files.

    Args:
        table: The table as loaded before the drop.
    """
    metadata = table.metadata
    files = {table.metadata_location, *(entry.metadata_file for entry in metadata.metadata_log)}
    return files | set(statistics_paths(metadata)) | _snapshot_files(table)


def _delete(io: FileIO, paths: Sequence[str]) -> None:
    for path in paths:
        try:
            io.delete(path)
        except OSError:
            logger.warning("Could not delete %s", path, exc_info=True)


def purge_table(settings: CatalogSettings, table: Table, others: Sequence[str]) -> None:
    """Delete the files of a dropped table that lie inside its location and no other's.

    Then :func:`purge_table_folders` removes what is left of its standard folders. Failures
    are logged, not raised: the table is already dropped.

    Args:
        settings: Service settings (the warehouse).
        table: The table as loaded before the drop.
        others: The locations of every other table, view and generic table.
    """
    location = table.metadata.location
    _delete(table.io, confined(sorted(reachable_files(table)), location, others))
    purge_table_folders(settings, table, others)


def purge_table_folders(settings: CatalogSettings, table: Table, others: Sequence[str]) -> None:
    """Delete ``<location>/data`` and ``<location>/metadata`` of a dropped table.

    This removes files no metadata reaches any more (files of expired snapshots, orphans,
    old metadata files) when the table lives inside the warehouse and holds no other
    entity's location, then the table folder itself if it is left empty. Locations outside
    the warehouse are never touched. Failures are logged, not raised.

    Args:
        settings: Service settings (the warehouse).
        table: The table as loaded before the drop.
        others: The locations of every other table, view and generic table.
    """
    location = table.metadata.location.rstrip("/")
    if is_within(settings.warehouse, location) or not is_within(location, settings.warehouse):
        return
    if any(is_within(other, location) for other in others):
        return
    io = table.io
    if not isinstance(io, PyArrowFileIO):
        return
    scheme, netloc, path = io.parse_location(location)
    try:
        fs = io.fs_by_scheme(scheme, netloc)
        for folder in TABLE_FOLDERS:
            if fs.get_file_info(f"{path}/{folder}").type == FileType.Directory:
                fs.delete_dir(f"{path}/{folder}")
        info = fs.get_file_info(path)
        if info.type == FileType.Directory and not fs.get_file_info(FileSelector(path)):
            fs.delete_dir(path)
    except OSError:
        logger.warning("Could not delete every file under %s", location, exc_info=True)
