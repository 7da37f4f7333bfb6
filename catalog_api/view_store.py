"""Iceberg views: metadata JSON files in the warehouse, pointer rows in ``iceberg_tables``.

A view is stored the way Iceberg Java's ``JdbcCatalog`` stores one: a row with
``iceberg_type = 'VIEW'`` whose ``metadata_location`` names the current metadata file. Commits
write a new file and swap the pointer with ``UPDATE ... WHERE metadata_location = <base>``, so
of two concurrent commits exactly one wins and the other gets 409 ``CommitFailedException``.

A view's location follows the rules of table locations (:mod:`catalog_api.locations`):
inside the warehouse, overlapping no other table's, view's or generic table's location.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyiceberg.catalog.rest import ViewResponse
from pyiceberg.catalog.sql import IcebergTables
from pyiceberg.exceptions import (
    CommitFailedException,
    NoSuchNamespaceError,
    NoSuchViewError,
    TableAlreadyExistsError,
    ViewAlreadyExistsError,
)
from pyiceberg.typedef import Identifier
from pyiceberg.view.metadata import ViewMetadata
from sqlalchemy import ColumnElement, delete, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from catalog_api.entity_rows import VIEW_TYPE, kind_of, names_of_type, row_filter
from catalog_api.errors import BadRequestError, CatalogError
from catalog_api.locations import (
    check_inside,
    check_location,
    check_no_overlap,
    check_table_location,
    check_updates,
)
from catalog_api.store import CatalogStore, check_namespace, table_identifier
from catalog_api.view_metadata import (
    apply_view_updates,
    new_metadata_location,
    new_view_metadata,
    read_view_metadata,
    write_view_metadata,
)
from catalog_api.view_models import AssertViewUUID, CreateViewBody, ViewUpdate


def _name(identifier: Identifier) -> str:
    return ".".join(identifier)


class ViewStore:
    """Views of the catalog, next to the tables of a ``CatalogStore``.

    Args:
        store: The table store; its SQL catalog, settings and namespace rules are shared.
    """

    def __init__(self, store: CatalogStore) -> None:
        self.store = store
        self.catalog = store.catalog
        self.io_properties = dict(store.settings.io_properties)

    def _view_row(self, identifier: Identifier) -> ColumnElement[bool]:
        return row_filter(self.catalog, identifier) & (IcebergTables.iceberg_type == VIEW_TYPE)

    def _metadata_location(self, identifier: Identifier) -> str:
        check_namespace(identifier[:-1], NoSuchViewError)
        stmt = select(IcebergTables.metadata_location).where(self._view_row(identifier))
        with Session(self.catalog.engine) as session:
            location = session.scalar(stmt)
        if not location:
            raise NoSuchViewError(f"View does not exist: {_name(identifier)}")
        return location

    def _response(self, metadata: ViewMetadata, location: str) -> ViewResponse:
        return ViewResponse.model_validate(
            {"metadata-location": location, "metadata": metadata, "config": {}}
        )

    def _raise_taken(self, identifier: Identifier) -> None:
        kind = kind_of(self.catalog, identifier)
        if kind == "view":
            raise ViewAlreadyExistsError(f"View already exists: {_name(identifier)}")
        if kind is not None:
            raise TableAlreadyExistsError(f"A {kind} named {_name(identifier)} already exists")

    def _insert(self, identifier: Identifier, metadata_location: str) -> None:
        row = {
            "catalog_name": self.catalog.name,
            "table_namespace": ".".join(identifier[:-1]),
            "table_name": identifier[-1],
            "metadata_location": metadata_location,
            "previous_metadata_location": None,
            "iceberg_type": VIEW_TYPE,
        }
        try:
            with Session(self.catalog.engine) as session:
                session.execute(insert(IcebergTables).values(**row))
                session.commit()
        except IntegrityError as exc:
            self._raise_taken(identifier)
            raise ViewAlreadyExistsError(f"Name taken: {_name(identifier)}") from exc

    def _place(self, identifier: Identifier, location: str) -> None:
        """Refuse a view location outside the warehouse or overlapping another entity's."""
        check_table_location(self.store.settings, location, "View location")
        others = self.store.entity_locations(identifier)
        check_no_overlap(location, others, "View location")

    def _require_namespace(self, namespace: Identifier) -> None:
        if not self.store.namespace_exists(namespace):
            raise NoSuchNamespaceError(f"Namespace does not exist: {_name(namespace)}")

    def list_views(self, namespace: Identifier) -> list[Identifier]:
        """List the views of a namespace, sorted (spec: ``listViews``).

        Raises:
            NoSuchNamespaceError: If the namespace does not exist.
        """
        check_namespace(namespace, NoSuchNamespaceError)
        self._require_namespace(namespace)
        return [(*namespace, name) for name in names_of_type(self.catalog, namespace, VIEW_TYPE)]

    def create_view(self, namespace: Identifier, body: CreateViewBody) -> ViewResponse:
        """Create a view: write metadata file ``00000-*`` and insert its row (``createView``).

        The location defaults to the one a table of that name would get.

        Raises:
            BadRequestError: If the name, the view version or the location is invalid (the
                location must be inside the warehouse and overlap no other entity's).
            NoSuchNamespaceError: If the namespace does not exist.
            ViewAlreadyExistsError: If a view of that name exists.
            TableAlreadyExistsError: If a table or generic table of that name exists.
        """
        identifier = table_identifier(namespace, body.name, BadRequestError, "View name")
        self._require_namespace(namespace)
        self._raise_taken(identifier)
        location = (body.location or "").rstrip("/")
        location = location or self.store.default_table_location(namespace, body.name)
        self._place(identifier, location)
        metadata = new_view_metadata(
            location, body.view_schema, body.view_version, body.properties
        )
        metadata_location = new_metadata_location(metadata.location, None)
        write_view_metadata(metadata, metadata_location, self.io_properties)
        self._insert(identifier, metadata_location)
        return self._response(metadata, metadata_location)

    def load_view(self, identifier: Identifier) -> ViewResponse:
        """Load a view's current metadata (``loadView``).

        Raises:
            NoSuchViewError: If the view does not exist.
        """
        location = self._metadata_location(identifier)
        metadata = read_view_metadata(location, self.io_properties, CatalogError)
        return self._response(metadata, location)

    def view_exists(self, identifier: Identifier) -> bool:
        """Tell whether a view exists (``viewExists``)."""
        try:
            self._metadata_location(identifier)
        except NoSuchViewError:
            return False
        return True

    def drop_view(self, identifier: Identifier) -> None:
        """Remove a view's row; its metadata files stay (``dropView``).

        Raises:
            NoSuchViewError: If the view does not exist.
        """
        check_namespace(identifier[:-1], NoSuchViewError)
        with Session(self.catalog.engine) as session:
            deleted = session.execute(delete(IcebergTables).where(self._view_row(identifier)))
            session.commit()
        if deleted.rowcount < 1:  # type: ignore[attr-defined]
            raise NoSuchViewError(f"View does not exist: {_name(identifier)}")

    def rename_view(self, source: Identifier, destination: Identifier) -> None:
        """Rename a view, possibly into another namespace (``renameView``).

        Raises:
            NoSuchViewError: If the source view does not exist.
            NoSuchNamespaceError: If the destination namespace does not exist.
            ViewAlreadyExistsError: If the destination name is a view.
            TableAlreadyExistsError: If the destination name is a table or generic table.
        """
        self._metadata_location(source)
        destination = table_identifier(
            destination[:-1], destination[-1], BadRequestError, "View name"
        )
        self._require_namespace(destination[:-1])
        self._raise_taken(destination)
        stmt = (
            update(IcebergTables)
            .where(self._view_row(source))
            .values(table_namespace=".".join(destination[:-1]), table_name=destination[-1])
        )
        try:
            with Session(self.catalog.engine) as session:
                renamed = session.execute(stmt)
                session.commit()
        except IntegrityError as exc:
            self._raise_taken(destination)
            raise ViewAlreadyExistsError(f"Name taken: {_name(destination)}") from exc
        if renamed.rowcount < 1:  # type: ignore[attr-defined]
            raise NoSuchViewError(f"View does not exist: {_name(source)}")

    def register_view(
        self, namespace: Identifier, name: str, metadata_location: str
    ) -> ViewResponse:
        """Register an existing view metadata file under a name (``registerView``).

        The file must be inside the warehouse and inside the view's own location, which
        must be inside the warehouse and overlap no other entity's.

        Raises:
            BadRequestError: If the name is invalid, the file is not readable view metadata
                or a location breaks a rule.
            NoSuchNamespaceError: If the namespace does not exist.
            ViewAlreadyExistsError: If a view of that name exists.
            TableAlreadyExistsError: If a table or generic table of that name exists.
        """
        identifier = table_identifier(namespace, name, BadRequestError, "View name")
        self._require_namespace(namespace)
        check_location(self.store.settings, metadata_location, "Metadata location")
        metadata = read_view_metadata(metadata_location, self.io_properties)
        check_table_location(self.store.settings, metadata.location, "View location")
        check_inside([metadata.location], [metadata_location], "Metadata file")
        self._raise_taken(identifier)
        self._place(identifier, metadata.location)
        self._insert(identifier, metadata_location)
        return self._response(metadata, metadata_location)

    def commit_view(
        self,
        identifier: Identifier,
        requirements: Sequence[AssertViewUUID],
        updates: Sequence[ViewUpdate],
    ) -> ViewResponse:
        """Check requirements, apply updates, write a new file, swap the row (``replaceView``).

        Raises:
            NoSuchViewError: If the view does not exist.
            CommitFailedException: If ``assert-view-uuid`` fails or another commit won the race.
            BadRequestError: If an update is invalid for the view, or its location would be
                outside the warehouse or overlap another entity's.
        """
        check_updates(self.store.settings, updates)
        base_location = self._metadata_location(identifier)
        base = read_view_metadata(base_location, self.io_properties, CatalogError)
        for requirement in requirements:
            if str(requirement.uuid) != base.view_uuid:
                raise CommitFailedException(
                    f"View UUID does not match: {requirement.uuid} != {base.view_uuid}"
                )
        metadata = apply_view_updates(base, updates)
        if metadata == base:
            return self._response(base, base_location)
        if metadata.location != base.location:
            self._place(identifier, metadata.location)
        check_table_location(self.store.settings, metadata.location, "View location")
        new_location = new_metadata_location(metadata.location, base_location)
        write_view_metadata(metadata, new_location, self.io_properties)
        self._swap(identifier, base_location, new_location)
        return self._response(metadata, new_location)

    def _swap(self, identifier: Identifier, base_location: str, new_location: str) -> None:
        stmt = (
            update(IcebergTables)
            .where(self._view_row(identifier), IcebergTables.metadata_location == base_location)
            .values(metadata_location=new_location, previous_metadata_location=base_location)
        )
        with Session(self.catalog.engine) as session:
            swapped = session.execute(stmt)
            session.commit()
        if swapped.rowcount < 1:  # type: ignore[attr-defined]
            raise CommitFailedException(f"View changed concurrently: {_name(identifier)}")
