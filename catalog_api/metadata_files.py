"""A table's old metadata files: which ones a commit dropped, and who deletes them.

Each commit writes a new metadata file and adds the one before it to the table's metadata
log, which keeps the newest ``write.metadata.previous-versions-max`` (100 by default).
When the table's ``write.metadata.delete-after-commit.enabled`` is true (false by
default), the files that fall out of the log are deleted after the commit, as Iceberg's
own catalogs do (Java ``CatalogUtil.deleteRemovedMetadataFiles``). Behind the REST
protocol the server writes a table's metadata files, so the server deletes them
(:func:`catalog_api.commit.publish_commits`): Spark's REST client never does.
"""

from __future__ import annotations

from pyiceberg.io import FileIO
from pyiceberg.table import TableProperties
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.utils.properties import property_as_bool

from catalog_api.locations import outside, table_roots

__all__ = ["METADATA_FILE_SUFFIX", "ServerDeletesMetadata", "dropped_metadata_files"]

METADATA_FILE_SUFFIX = ".metadata.json"
"""How a table metadata file's name ends (``.gz.metadata.json`` too: Iceberg spec, "Table
Metadata")."""


def dropped_metadata_files(base: TableMetadata, metadata: TableMetadata) -> set[str]:
    """The metadata files to delete after a commit from ``base`` to ``metadata``.

    Args:
        base: The table's metadata before the commit.
        metadata: Its metadata after the commit (its log names the base's file).

    Returns:
        The files of ``base``'s metadata log that ``metadata``'s log no longer names, when
        ``metadata`` asks for their deletion; only metadata files (by name) inside the
        table's own prefixes: a log is as the client that registered the table wrote it,
        and may name a data file.
    """
    if not property_as_bool(metadata.properties,
                            TableProperties.METADATA_DELETE_AFTER_COMMIT_ENABLED,
                            TableProperties.METADATA_DELETE_AFTER_COMMIT_ENABLED_DEFAULT):
        return set()
    kept = {entry.metadata_file for entry in metadata.metadata_log}
    dropped = {entry.metadata_file for entry in base.metadata_log
               if entry.metadata_file.endswith(METADATA_FILE_SUFFIX)} - kept
    return dropped.difference(outside(dropped, table_roots(metadata.location,
                                                             metadata.properties)))


class ServerDeletesMetadata:
    """Mixin of a catalog client whose server deletes the metadata files a commit drops.

    pyiceberg's ``Table`` deletes them itself after each commit through its catalog
    (``Catalog._delete_old_metadata``); the client's second try would log a warning for
    each file the server already deleted. The pipeline's REST client and its embedded
    catalog leave it to the server (this service; behind the REST protocol, Java's
    catalogs delete them too).
    """

    @staticmethod
    def _delete_old_metadata(io: FileIO, base: TableMetadata, metadata: TableMetadata) -> None:
        """Nothing: the server deleted them when it published the commit."""
