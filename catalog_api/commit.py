"""Atomic table commits: validate requirements, apply updates, compare-and-swap.

A commit is planned for every table first (requirements validated against the current
metadata, updates applied in memory), then the new metadata files are written, then all
catalog rows are swapped in one database transaction whose ``UPDATE ... WHERE
metadata_location = <base>`` fails if any table moved meanwhile. Either every table of a
transaction advances or none does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
from pyiceberg.exceptions import CommitFailedException, NoSuchNamespaceError, NoSuchTableError
from pyiceberg.table import CommitTableResponse, StagedTable, Table
from pyiceberg.table.update import AssertCreate, SetLocationUpdate, TableRequirement, TableUpdate
from pyiceberg.typedef import Identifier
from sqlalchemy import insert, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from catalog_api.errors import BadRequestError


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


def _load_or_none(catalog: SqlCatalog, identifier: Identifier) -> Table | None:
    try:
        return catalog.load_table(identifier)
    except NoSuchTableError:
        return None


def plan_commit(
    catalog: SqlCatalog,
    identifier: Identifier,
    requirements: Sequence[TableRequirement],
    updates: Sequence[TableUpdate],
    default_location: Callable[[], str],
) -> PlannedCommit:
    """Validate requirements and apply updates to one table, in memory.

    Args:
        catalog: The SQL catalog holding the table.
        identifier: Namespace parts followed by the table name.
        requirements: Requirements that must hold on the current metadata.
        updates: Updates to apply, in order.
        default_location: Gives the location used when a create transaction sets none.

    Returns:
        The planned commit.

    Raises:
        NoSuchTableError: If the table does not exist and the commit is not a create.
        NoSuchNamespaceError: If a create targets a namespace that does not exist.
        CommitFailedException: If a requirement does not hold.
        BadRequestError: If the updates cannot be applied to the metadata.
    """
    base = _load_or_none(catalog, identifier)
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
    except (ValueError, AttributeError, KeyError) as exc:
        raise BadRequestError(f"Cannot apply updates to {'.'.join(identifier)}: {exc}") from exc
    return PlannedCommit(identifier=identifier, base=base, staged=staged)


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
