"""Deleting a dropped table's files (``DELETE .../tables/{table}?purgeRequested=true``)."""

from __future__ import annotations

import logging

from pyarrow.fs import FileSelector, FileType
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.table import Table

from catalog_api.core.config import CatalogSettings
from catalog_api.locations import is_within

logger = logging.getLogger(__name__)

#: Folders of the standard table layout that hold only that table's files.
TABLE_FOLDERS = ("data", "metadata")


def purge_table_folders(settings: CatalogSettings, table: Table) -> None:
    """Delete ``<location>/data`` and ``<location>/metadata`` of a dropped table.

    pyiceberg's ``purge_table`` deletes the files the current metadata reaches; this removes
    the rest (files of expired snapshots, orphans, old metadata files) when the table lives
    inside the warehouse, then the table folder itself if it is left empty. Locations outside
    the warehouse are never touched. Failures are logged, not raised: the table is already
    dropped.

    Args:
        settings: Service settings (the warehouse).
        table: The table as loaded before the drop.
    """
    location = table.metadata.location.rstrip("/")
    if location == settings.warehouse or not is_within(location, settings.warehouse):
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

