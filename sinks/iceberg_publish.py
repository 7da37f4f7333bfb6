"""Publish a refresh to ``main`` only if no other refresh committed since it started.

A refresh computes its delta from the frontier of ``main``'s snapshot S0. It writes on a
fresh branch created at S0, then fast-forwards ``main`` to the branch head in one
catalog commit that requires ``main`` to still be S0 (``assert-ref-snapshot-id``). If
another process committed first, the catalog answers 409 and nothing is published: the
loser's next tick starts from the winner's frontier (write-audit-publish, Iceberg
branching docs; requirement semantics: REST spec, ``TableRequirement``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import Table
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
from pyiceberg.table.update import (
    AssertRefSnapshotId,
    RemoveSnapshotRefUpdate,
    SetPropertiesUpdate,
    SetSnapshotRefUpdate,
    TableRequirement,
    TableUpdate,
)

from sinks.errors import SinkError

__all__ = ["BRANCH_PREFIX", "staged_on_branch"]

BRANCH_PREFIX = "lakehouse_refresh_"


# pyiceberg's models take the spec's hyphenated names; validating them keeps mypy exact.
def _set_ref(name: str, snapshot_id: int) -> SetSnapshotRefUpdate:
    return SetSnapshotRefUpdate.model_validate(
        {"ref-name": name, "type": SnapshotRefType.BRANCH, "snapshot-id": snapshot_id})


def _assert_ref(name: str, snapshot_id: int | None) -> AssertRefSnapshotId:
    return AssertRefSnapshotId.model_validate({"ref": name, "snapshot-id": snapshot_id})


def _remove_ref(name: str) -> RemoveSnapshotRefUpdate:
    return RemoveSnapshotRefUpdate.model_validate({"ref-name": name})


def _commit(catalog: Catalog, table: Table, requirements: tuple[TableRequirement, ...],
            updates: tuple[TableUpdate, ...]) -> None:
    catalog.commit_table(table, requirements, updates)


@contextmanager
def staged_on_branch(
    catalog: Catalog, identifier: str, base_snapshot_id: int, properties: dict[str, str]
) -> Iterator[str]:
    """Yield a new branch at ``base_snapshot_id``; on exit publish its head to ``main``.

    Args:
        catalog: The REST catalog.
        identifier: ``namespace.table``.
        base_snapshot_id: The snapshot of ``main`` the refresh started from.
        properties: Table properties set in the publishing commit (the freshness of the
            view, so that table properties and data change atomically).

    Yields:
        The branch name; the caller's writes go to it (Spark: ``<table>.branch_<name>``).

    Raises:
        SinkError: ``main`` moved since ``base_snapshot_id`` (another refresh committed
            first), or the branch could not be created or published. The branch is removed
            and ``main`` is unchanged.
    """
    branch = f"{BRANCH_PREFIX}{uuid.uuid4().hex[:12]}"
    table = catalog.load_table(identifier)
    _commit(catalog, table, (_assert_ref(branch, None),),
            (_set_ref(branch, base_snapshot_id),))
    try:
        yield branch
        table = catalog.load_table(identifier)
        head = table.metadata.refs[branch].snapshot_id
        _commit(catalog, table,
                (_assert_ref(MAIN_BRANCH, base_snapshot_id),),
                (_set_ref(MAIN_BRANCH, head), _remove_ref(branch),
                 SetPropertiesUpdate(updates=properties)))
    except CommitFailedException as error:
        _remove_branch(catalog, identifier, branch)
        raise SinkError(f"another refresh committed first (main moved from snapshot "
                        f"{base_snapshot_id}); nothing published: {error}",
                        table=identifier) from error
    except BaseException:
        _remove_branch(catalog, identifier, branch)
        raise


def _remove_branch(catalog: Catalog, identifier: str, branch: str) -> None:
    """Drop the refresh branch (best effort: a leftover branch holds no published data)."""
    try:
        table = catalog.load_table(identifier)
        if branch in table.metadata.refs:
            _commit(catalog, table, (), (_remove_ref(branch),))
    except Exception:  # noqa: BLE001 - cleanup must not hide the original error
        pass
