"""The snapshots between two versions of an Iceberg table.

Iceberg table spec, "Snapshots": every snapshot names its parent; a change feed from
``old`` to ``new`` walks the parents of ``new`` back to ``old``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot

from lakehouse.errors import SnapshotExpiredError, SourceError


@dataclass(frozen=True)
class Lineage:
    """How ``new`` descends from ``old``.

    Attributes:
        snapshots: The snapshots after ``old`` up to ``new``, oldest first; None when
            the walk from ``new`` does not reach ``old``.
        reason: Why the walk did not reach ``old`` (None when it did).
    """

    snapshots: list[Snapshot] | None
    reason: str | None = None


def lineage(metadata: TableMetadata, old: int, new: int, *, source: str) -> Lineage:
    """Walk from snapshot ``new`` back to ``old`` through parent snapshot ids.

    Args:
        metadata: The table's current metadata.
        old: The snapshot the change starts after.
        new: The snapshot the change ends at.
        source: The source's name, for errors.

    Returns:
        The chain of snapshots, or no chain and the reason when ``old`` is not an
        ancestor of ``new`` (rollback, moved tag, or an expired snapshot in between).

    Raises:
        SnapshotExpiredError: ``old`` is no longer in the metadata (expire_snapshots).
        SourceError: ``new`` is not a snapshot of the table.
    """
    if metadata.snapshot_by_id(new) is None:
        raise SourceError(f"snapshot {new} is not in the table's metadata", source=source)
    if metadata.snapshot_by_id(old) is None:
        raise SnapshotExpiredError(
            f"snapshot {old}, the last one the view reflects, was expired (expire_snapshots) "
            "and its change up to the current snapshot cannot be read", source=source, version=old,
        )
    chain: list[Snapshot] = []
    current = metadata.snapshot_by_id(new)
    while current is not None and current.snapshot_id != old:
        chain.append(current)
        parent = current.parent_snapshot_id
        if parent is None:
            return Lineage(
                None, f"snapshot {old} is not an ancestor of {new} (rollback, moved ref, or "
                "snapshots in between expired by a catalog that clears a child's parent id)")
        current = metadata.snapshot_by_id(parent)
        if current is None:
            return Lineage(None, f"snapshot {parent} between {old} and {new} was expired")
    return Lineage(list(reversed(chain)))
