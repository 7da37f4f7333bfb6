"""One Iceberg snapshot, committed by pyiceberg: remove data files, add data files, properties.

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
pyiceberg's own ``Transaction.append``/``overwrite`` (field ids, column metrics, target file
size); those public methods cannot be used as they commit a snapshot each (delete, append).

Two costs of pyiceberg 0.12 that grow with a view's history are avoided here, so that a
small refresh of a long-lived view stays cheap:

- ``Transaction.table_metadata`` replays the staged updates and deep-copies the whole
  metadata (every snapshot) on each read, and one commit reads it about twenty times:
  :class:`_Transaction` computes it once per staged state (what apache/iceberg-python
  pull request 3302 / 3784 does upstream), and not at all while nothing is staged; and
  computes it without the deep copy that ``update_table_metadata`` ends with (each update
  already copies what it changes and shares the rest), so a commit copies no metadata. On
  the soak benchmark that copy, one a commit (to read the table's uuid in
  ``commit_transaction``), was a twentieth of the pipeline's interpreter-lock samples.
- An overwrite carries every manifest of the parent snapshot forward, including the
  manifests of earlier overwrites that hold only ``DELETED`` entries, so the manifest list
  grows by one per refresh and each commit reads them all: :class:`_Overwrite` keeps only
  manifests with live files or written by this commit, as Iceberg Java's
  ``MergingSnapshotProducer`` does (and iceberg-go after issues 1153 / 1393).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Mapping

import pyarrow as pa
from pyiceberg.io.pyarrow import _dataframe_to_data_files
from pyiceberg.manifest import DataFile, ManifestFile
from pyiceberg.table import Table, TableProperties, Transaction
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.refs import MAIN_BRANCH
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update import TableUpdate, _apply_table_update, _TableMetadataUpdateContext
from pyiceberg.table.update.snapshot import _OverwriteFiles

NO_RETRIES = {TableProperties.COMMIT_NUM_RETRIES: "0"}
"""Table property: a commit that lost a race fails instead of being re-applied."""


class DataFileWriter:
    """Writes Arrow rows as data files of ``table`` (not yet part of any snapshot).

    Args:
        table: The table the files are for (its schema, spec, location, FileIO).
    """

    def __init__(self, table: Table):
        self.table = table
        self.write_uuid = uuid.uuid4()
        self._counter = itertools.count(0)
        self.written: list[DataFile] = []

    def write(self, rows: pa.Table) -> list[DataFile]:
        """Write ``rows`` (the table's Arrow schema) as new data files; none when empty.

        Each file carries the table's default partition spec id, so that a later commit
        can also remove it (pyiceberg 0.12's ``DataFile.from_args`` drops the ``spec_id``
        it is given; a file read from a manifest has it).
        """
        if rows.num_rows == 0:
            return []
        files = list(_dataframe_to_data_files(
            table_metadata=self.table.metadata, df=rows, io=self.table.io,
            write_uuid=self.write_uuid, counter=self._counter))
        for data_file in files:
            data_file.spec_id = self.table.metadata.default_spec_id
        self.written += files
        return files

    def discard(self) -> None:
        """Delete every file written (their commit failed: no snapshot refers to them)."""
        for data_file in self.written:
            self.table.io.delete(data_file.file_path)
        self.written = []


def commit_snapshot(table: Table, removed: list[DataFile], added: list[DataFile],
                    properties: Mapping[str, str]) -> int:
    """Commit one snapshot on ``main`` of ``table``, asserting main is still its head.

    Args:
        table: The table as loaded at the base snapshot; its metadata is updated in place
            on success.
        removed: Data files of the base snapshot to remove (copy-on-write rewrite).
        added: Data files to add (written by :class:`DataFileWriter`).
        properties: Added to the snapshot summary and set as table properties (none: the
            table's properties are left as they are).

    Returns:
        The new snapshot's id.

    Raises:
        pyiceberg.exceptions.CommitFailedException: ``main`` moved since ``table`` was
            loaded; nothing changed.
    """
    transaction = _Transaction(table)
    update = transaction.update_snapshot(snapshot_properties=dict(properties))
    producer = (_Overwrite(operation=Operation.OVERWRITE, transaction=transaction, io=table.io,
                           branch=MAIN_BRANCH, snapshot_properties=dict(properties))
                if removed else update.fast_append())
    with producer:  # built on the loaded metadata: nothing staged yet, nothing copied
        for data_file in removed:
            producer.delete_data_file(data_file)
        for data_file in added:
            producer.append_data_file(data_file)
    if properties:
        transaction.set_properties(dict(properties))
    transaction.commit_transaction()
    snapshot = table.current_snapshot()
    assert snapshot is not None  # a snapshot was just committed
    return snapshot.snapshot_id


class _Transaction(Transaction):
    """pyiceberg's transaction whose staged metadata is computed once per staged state.

    The state is the table's metadata and the tuple of staged updates, both replaced (never
    mutated) when they change, so identity tells when to recompute. With nothing staged it
    is the table's own metadata, not a copy.
    """

    _memo: tuple[TableMetadata, tuple[TableUpdate, ...], TableMetadata] | None = None

    @property
    def table_metadata(self) -> TableMetadata:
        """The table's metadata with the staged updates applied (do not mutate it)."""
        if not self._updates:
            return self._table.metadata
        memo = self._memo
        if memo is None or memo[0] is not self._table.metadata or memo[1] is not self._updates:
            staged = _staged(self._table.metadata, self._updates)
            memo = self._memo = (self._table.metadata, self._updates, staged)
        return memo[2]


def _staged(base: TableMetadata, updates: tuple[TableUpdate, ...]) -> TableMetadata:
    """``base`` with ``updates`` applied: pyiceberg's ``update_table_metadata`` less its copy.

    That function ends with a deep copy of the whole metadata, but each update already
    returns a copy with what it changes replaced (``model_copy(update=...)``) and the rest
    shared with ``base``, which nobody mutates.
    ``last-updated-ms`` is left as staged: the catalog sets it when it applies the commit.
    """
    context = _TableMetadataUpdateContext()
    for update in updates:
        base = _apply_table_update(update, base, context)
    return base


class _Overwrite(_OverwriteFiles):
    """pyiceberg's overwrite, without the parent's manifests that hold no live file."""

    def _process_manifests(self, manifests: list[ManifestFile]) -> list[ManifestFile]:
        return [manifest for manifest in manifests
                if manifest.has_added_files() or manifest.has_existing_files()
                or manifest.added_snapshot_id == self.snapshot_id]
