"""Atomic table commits: validate requirements, apply updates, compare-and-swap.

A commit is planned for every table first (requirements validated against the current
metadata, updates applied in memory), then the new metadata files are written, then all
catalog rows are swapped in one database transaction whose ``UPDATE ... WHERE
metadata_location = <base>`` fails if any table moved meanwhile. Either every table of a
transaction advances or none does.

Before that, :func:`check_new_files` checks that what a commit adds stays inside the table's
own prefixes: its new metadata file, and for each snapshot it adds the manifest list, the
manifests the parent snapshot did not have, and every data and delete file those name.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TypeVar

from pyiceberg.catalog import METADATA, Catalog, delete_files
from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
from pyiceberg.exceptions import CommitFailedException, NoSuchNamespaceError, NoSuchTableError
from pyiceberg.io import FileIO
from pyiceberg.manifest import ManifestFile
from pyiceberg.table import CommitTableResponse, StagedTable, Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.table.update import AssertCreate, SetLocationUpdate, TableRequirement, TableUpdate
from pyiceberg.typedef import Identifier
from sqlalchemy import insert, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from catalog_api.errors import BadRequestError
from catalog_api.locations import check_inside, statistics_paths, table_roots, unreadable_reason
from catalog_api.metadata_files import dropped_metadata_files

T = TypeVar("T")

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlannedCommit:
    """A validated, applied but not yet published change of one table.

    Attributes:
        identifier: The table identifier (namespace parts + table name).
        base: The table as loaded before the change, or None when the commit creates it.
        staged: The table with the new metadata and its new metadata file location.
    """

    identifier: Identifier
    base: Table | None
    staged: StagedTable

    @property
    def changed(self) -> bool:
        """Whether publishing this commit changes anything."""
        return self.base is None or self.staged.metadata != self.base.metadata

    def response(self) -> CommitTableResponse:
        """Return the commit response clients expect (the metadata now current)."""
        table = self.base if not self.changed and self.base is not None else self.staged
        return CommitTableResponse.model_validate(
            {"metadata": table.metadata, "metadata-location": table.metadata_location}
        )


def plan_commit(
    catalog: SqlCatalog,
    identifier: Identifier,
    requirements: Sequence[TableRequirement],
    updates: Sequence[TableUpdate],
    default_location: Callable[[], str],
    load: Callable[[Identifier], Table | None],
) -> PlannedCommit:
    """Validate requirements and apply updates to one table, in memory.

    Args:
        catalog: The SQL catalog holding the table.
        identifier: Namespace parts followed by the table name.
        requirements: Requirements that must hold on the current metadata.
        updates: Updates to apply, in order.
        default_location: Gives the location used when a create transaction sets none.
        load: The table as it stands, or None when no table has the name.

    Returns:
        The planned commit.

    Raises:
        NoSuchTableError: If the table does not exist and the commit is not a create.
        NoSuchNamespaceError: If a create targets a namespace that does not exist.
        CommitFailedException: If a requirement does not hold.
        BadRequestError: If the updates cannot be applied to the metadata.
    """
    base = load(identifier)
    is_create = any(isinstance(req, AssertCreate) for req in requirements)
    if base is None and not is_create:
        raise NoSuchTableError(f"Table does not exist: {'.'.join(identifier)}")
    if base is None and not catalog.namespace_exists(Catalog.namespace_from(identifier)):
        raise NoSuchNamespaceError(f"Namespace does not exist: {'.'.join(identifier[:-1])}")
    if base is None and not any(isinstance(u, SetLocationUpdate) for u in updates):
        updates = (SetLocationUpdate(location=default_location()), *updates)
    try:
        staged = catalog._update_and_stage_table(
            base, identifier, tuple(requirements), tuple(updates)
        )
    except CommitFailedException:
        raise
    except StopIteration as exc:  # e.g. a create that adds no schema or partition spec
        raise BadRequestError(
            f"Cannot apply updates to {'.'.join(identifier)}: the metadata would be incomplete"
        ) from exc
    except (ValueError, AttributeError, KeyError) as exc:
        raise BadRequestError(f"Cannot apply updates to {'.'.join(identifier)}: {exc}") from exc
    return PlannedCommit(identifier=identifier, base=base, staged=_parents_kept(base, staged))


def _parents_kept(base: Table | None, staged: StagedTable) -> StagedTable:
    """``staged`` with every snapshot's parent id as in ``base``: a snapshot never changes.

    pyiceberg's ``remove-snapshots`` clears the parent id of a snapshot whose parent it
    removes; Iceberg's Java ``TableMetadata`` keeps it, naming a snapshot no longer in the
    metadata (the spec's ``parent-snapshot-id`` is part of an immutable snapshot; lineage
    walks stop at a parent not found). A Java client's file cleanup after its own expiry
    (``ExpireSnapshots``, ``ReachableFileCleanup``) compares the snapshots before and after
    the commit by value: a kept snapshot whose parent id had changed counted as expired,
    and its manifest list was deleted.
    """
    if base is None:
        return staged
    parents = {s.snapshot_id: s.parent_snapshot_id for s in base.metadata.snapshots}
    changed = {s.snapshot_id for s in staged.metadata.snapshots if s.snapshot_id in parents
               and s.parent_snapshot_id != parents[s.snapshot_id]}
    if not changed:
        return staged
    snapshots = [s.model_copy(update={"parent_snapshot_id": parents[s.snapshot_id]})
                 if s.snapshot_id in changed else s for s in staged.metadata.snapshots]
    return StagedTable(identifier=staged.name(),
                       metadata=staged.metadata.model_copy(update={"snapshots": snapshots}),
                       metadata_location=staged.metadata_location, io=staged.io,
                       catalog=staged.catalog)


def _read(read: Callable[[], T], what: str) -> T:
    """Read a file a client wrote; a failure is the client's (400), its content not quoted."""
    try:
        return read()
    except Exception as exc:  # any IO or Avro decoding failure
        raise BadRequestError(f"Cannot read {what}: {unreadable_reason(exc, 'Avro')}") from exc


def _manifest_paths(io: FileIO, snapshot: Snapshot | None) -> set[str]:
    if snapshot is None:
        return set()
    manifests = _read(
        functools.partial(snapshot.manifests, io), f"manifest list {snapshot.manifest_list}"
    )
    return {manifest.manifest_path for manifest in manifests}


def _check_snapshot(
    io: FileIO, metadata: TableMetadata, snapshot: Snapshot, roots: Sequence[str]
) -> None:
    check_inside(roots, [snapshot.manifest_list], "Manifest list")
    manifests: list[ManifestFile] = _read(
        functools.partial(snapshot.manifests, io), f"manifest list {snapshot.manifest_list}"
    )
    parent_id = snapshot.parent_snapshot_id
    parent = metadata.snapshot_by_id(parent_id) if parent_id is not None else None
    known = _manifest_paths(io, parent)
    new = [manifest for manifest in manifests if manifest.manifest_path not in known]
    check_inside(roots, (manifest.manifest_path for manifest in new), "Manifest")
    for manifest in new:
        read = functools.partial(manifest.fetch_manifest_entry, io, discard_deleted=False)
        entries = _read(read, f"manifest {manifest.manifest_path}")
        check_inside(roots, (e.data_file.file_path for e in entries), "Data or delete file")


def check_new_files(plan: PlannedCommit) -> None:
    """Check that the files a commit adds lie in the table's own prefixes.

    The prefixes are the table's location and write paths (:func:`table_roots`). Checked:
    the new metadata file, new statistics files, and for each added snapshot its manifest
    list, the manifests its parent snapshot did not list, and the data and delete files
    of those (read with the table's FileIO).

    Args:
        plan: The planned commit.

    Raises:
        BadRequestError: If a file lies outside, or a manifest list or manifest cannot be
            read.
    """
    metadata = plan.staged.metadata
    roots = table_roots(metadata.location, metadata.properties)
    check_inside(roots, [plan.staged.metadata_location], "Metadata file")
    base = plan.base.metadata if plan.base is not None else None
    known_stats = set(statistics_paths(base)) if base is not None else set()
    new_stats = (path for path in statistics_paths(metadata) if path not in known_stats)
    check_inside(roots, new_stats, "Statistics file")
    known = {snapshot.snapshot_id for snapshot in base.snapshots} if base is not None else set()
    for snapshot in metadata.snapshots:
        if snapshot.snapshot_id not in known:
            _check_snapshot(plan.staged.io, metadata, snapshot, roots)


def _check_distinct(plans: Sequence[PlannedCommit]) -> None:
    seen: set[Identifier] = set()
    for plan in plans:
        if plan.identifier in seen:
            raise BadRequestError(
                f"Table changed twice in one transaction: {'.'.join(plan.identifier)}"
            )
        seen.add(plan.identifier)


def _publish_row(session: Session, catalog: SqlCatalog, plan: PlannedCommit) -> None:
    namespace = Catalog.namespace_to_string(Catalog.namespace_from(plan.identifier))
    name = Catalog.table_name_from(plan.identifier)
    new_location = plan.staged.metadata_location
    if plan.base is None:
        try:
            session.execute(
                insert(IcebergTables).values(
                    **catalog._create_table_row(namespace, name, new_location)
                )
            )
        except IntegrityError as exc:
            raise CommitFailedException(
                f"Table was created concurrently: {namespace}.{name}"
            ) from exc
        return
    stmt = (
        update(IcebergTables)
        .where(
            IcebergTables.catalog_name == catalog.name,
            IcebergTables.table_namespace == namespace,
            IcebergTables.table_name == name,
            IcebergTables.metadata_location == plan.base.metadata_location,
        )
        .values(
            metadata_location=new_location, previous_metadata_location=plan.base.metadata_location
        )
    )
    if session.execute(stmt).rowcount < 1:  # type: ignore[attr-defined]
        raise CommitFailedException(
            f"Table has been updated by another process: {namespace}.{name}"
        )


def publish_commits(
    catalog: SqlCatalog, plans: Sequence[PlannedCommit], lock: threading.Lock | None = None
) -> None:
    """Write the new metadata files and swap all catalog rows in one database transaction.

    Once the swap committed, the metadata files each table's log dropped are deleted when
    the table asks for it (:mod:`catalog_api.metadata_files`).

    Args:
        catalog: The SQL catalog holding the tables.
        plans: Planned commits, at most one per table.
        lock: Optional in-process lock held around the database transaction.

    Raises:
        CommitFailedException: If any table changed since it was planned; nothing is published.
        BadRequestError: If a table appears twice.
    """
    _check_distinct(plans)
    changed = [plan for plan in plans if plan.changed]
    if not changed:
        return
    for plan in changed:
        catalog._write_metadata(plan.staged.metadata, plan.staged.io, plan.staged.metadata_location)
    with lock or nullcontext(), Session(catalog.engine) as session:
        for plan in changed:
            _publish_row(session, catalog, plan)
        session.commit()
    for plan in changed:
        _delete_dropped_metadata(plan)


def _delete_dropped_metadata(plan: PlannedCommit) -> None:
    """Delete the old metadata files a published commit dropped, if its table asks.

    See :mod:`catalog_api.metadata_files`. Never raises: the commit stands, and a file
    that could not be deleted is logged.
    """
    if plan.base is None:
        return
    try:
        dropped = dropped_metadata_files(plan.base.metadata, plan.staged.metadata)
        delete_files(plan.staged.io, dropped, METADATA)  # logs an OSError itself
    except Exception:  # another FileIO's error: the commit is published all the same
        logger.warning("Could not delete the old metadata files of %s",
                       ".".join(plan.identifier), exc_info=True)
