"""One Iceberg snapshot, committed by pyiceberg: remove data files, add rows, set properties.

The commit is one ``POST .../tables/{t}`` (REST spec, ``CommitTableRequest``) whose updates
are ``add-snapshot``, ``set-snapshot-ref`` (main) and ``set-properties``, and whose
requirements are ``assert-ref-snapshot-id`` (main is still the snapshot the table was
loaded at) and ``assert-table-uuid``. pyiceberg builds the manifests, the manifest list and
the snapshot summary (its ``_OverwriteFiles`` / ``_FastAppendFiles`` producers); the summary
also carries the caller's properties.

pyiceberg retries a commit that lost a race on the new head (``commit.retry.num-retries``,
default 4). A refresh must not: its delta was computed from the old head. View tables
therefore carry ``commit.retry.num-retries=0`` (:data:`NO_RETRIES`), and a lost race
surfaces as :class:`pyiceberg.exceptions.CommitFailedException`.

Data files are written by ``pyiceberg.io.pyarrow._dataframe_to_data_files``, the writer behind
pyiceberg's own ``Transaction.append``/``overwrite`` (field ids, metrics, target file size);
those public methods cannot be used as they commit a snapshot each (delete, then append).
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import _dataframe_to_data_files
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table, TableProperties, Transaction

NO_RETRIES = {TableProperties.COMMIT_NUM_RETRIES: "0"}
"""Table property: a commit that lost a race fails instead of being re-applied."""


def commit_snapshot(table: Table, removed: list[DataFile], rows: pa.Table,
                    properties: Mapping[str, str]) -> int:
    """Commit one snapshot on ``main`` of ``table``, asserting main is still its head.

    Args:
        table: The table as loaded at the base snapshot; its metadata is updated in place
            on success.
        removed: Data files of the base snapshot to remove (copy-on-write rewrite).
        rows: Rows to add, in the table's Arrow schema (may be empty).
        properties: Added to the snapshot summary and set as table properties.

    Returns:
        The new snapshot's id.

    Raises:
        CommitFailedException: ``main`` moved since ``table`` was loaded; nothing changed
            and the data files written for this commit are deleted.
    """
    transaction = table.transaction()
    transaction.set_properties(dict(properties))
    written = _stage(transaction, table.io, removed, rows, dict(properties))
    try:
        transaction.commit_transaction()
    except CommitFailedException:
        for data_file in written:
            table.io.delete(data_file.file_path)
        raise
    snapshot = table.current_snapshot()
    assert snapshot is not None  # a snapshot was just committed
    return snapshot.snapshot_id


def _stage(transaction: Transaction, io: FileIO, removed: list[DataFile], rows: pa.Table,
           properties: dict[str, str]) -> list[DataFile]:
    """Stage the snapshot in ``transaction``; return the data files written for it."""
    update = transaction.update_snapshot(snapshot_properties=properties)
    producer = update.overwrite() if removed else update.fast_append()
    with producer:
        for data_file in removed:
            producer.delete_data_file(data_file)
        written = list(_dataframe_to_data_files(
            table_metadata=transaction.table_metadata, df=rows, io=io,
            write_uuid=producer.commit_uuid)) if rows.num_rows else []
        for data_file in written:
            producer.append_data_file(data_file)
    return written
