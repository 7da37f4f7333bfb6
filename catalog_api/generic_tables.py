"""Generic (non-Iceberg) tables in Apache Polaris's shape: create, load, list, drop.

Each generic table owns a row of ``iceberg_tables`` (``iceberg_type = 'GENRC'``, no metadata
file), which keeps its name unique among tables and views, and a row of
``lakehouse_generic_tables`` with its format, base location, doc and properties. Both rows are
written and deleted in one database transaction.
"""

from __future__ import annotations

import json

from pyiceberg.catalog.sql import IcebergTables
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError, TableAlreadyExistsError
from pyiceberg.typedef import Identifier
from sqlalchemy import String, Text, delete, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from catalog_api.entity_rows import GENERIC_TABLE_TYPE, kind_of, names_of_type, row_filter
from catalog_api.errors import BadRequestError
from catalog_api.generic_table_models import CreateGenericTableRequest, GenericTable
from catalog_api.locations import check_no_overlap, check_table_location
from catalog_api.store import CatalogStore, check_namespace, table_identifier


class GenericTablesBase(DeclarativeBase):
    """Declarative base of the service's own tables (apart from pyiceberg's)."""


class GenericTableRow(GenericTablesBase):
    """The description of one generic table."""

    __tablename__ = "lakehouse_generic_tables"

    catalog_name: Mapped[str] = mapped_column(String(255), primary_key=True)
    table_namespace: Mapped[str] = mapped_column(String(255), primary_key=True)
    table_name: Mapped[str] = mapped_column(String(255), primary_key=True)
    format: Mapped[str] = mapped_column(String(255))
    base_location: Mapped[str | None] = mapped_column(String(1000), nullable=True)
    doc: Mapped[str | None] = mapped_column(Text, nullable=True)
    properties: Mapped[str] = mapped_column(Text)


def _name(identifier: Identifier) -> str:
    return ".".join(identifier)


class GenericTableStore:
    """Generic tables of the catalog; creates its database table if absent.

    Args:
        store: The table store; its SQL catalog and namespace rules are shared.
    """

    def __init__(self, store: CatalogStore) -> None:
        self.store = store
        self.catalog = store.catalog
        GenericTablesBase.metadata.create_all(self.catalog.engine)
        store.location_sources.append(self.base_locations)

    def base_locations(self) -> list[tuple[Identifier, str]]:
        """The identifier and base location of every generic table that has one."""
        stmt = select(
            GenericTableRow.table_namespace, GenericTableRow.table_name,
            GenericTableRow.base_location,
        ).where(
            GenericTableRow.catalog_name == self.catalog.name,
            GenericTableRow.base_location.is_not(None),
        )
        with Session(self.catalog.engine) as session:
            rows = session.execute(stmt).all()
        return [
            ((*namespace.split("."), name), location)
            for namespace, name, location in rows if location
        ]

    def _key(self, identifier: Identifier) -> dict[str, str]:
        return {
            "catalog_name": self.catalog.name,
            "table_namespace": ".".join(identifier[:-1]),
            "table_name": identifier[-1],
        }

    def _require_namespace(self, namespace: Identifier) -> None:
        check_namespace(namespace, NoSuchNamespaceError)
        if not self.store.namespace_exists(namespace):
            raise NoSuchNamespaceError(f"Namespace does not exist: {_name(namespace)}")

    def list_tables(self, namespace: Identifier) -> list[Identifier]:
        """List the generic tables of a namespace, sorted (Polaris ``listGenericTables``).

        Raises:
            NoSuchNamespaceError: If the namespace does not exist.
        """
        self._require_namespace(namespace)
        names = names_of_type(self.catalog, namespace, GENERIC_TABLE_TYPE)
        return [(*namespace, name) for name in names]

    def create_table(
        self, namespace: Identifier, request: CreateGenericTableRequest
    ) -> GenericTable:
        """Create a generic table (Polaris ``createGenericTable``).

        Raises:
            BadRequestError: If the name is invalid, or the base location is outside the
                warehouse or overlaps another table's, view's or generic table's.
            NoSuchNamespaceError: If the namespace does not exist.
            TableAlreadyExistsError: If a table, view or generic table has that name (409).
        """
        identifier = table_identifier(namespace, request.name, BadRequestError,
                                      "Generic table name")
        self._require_namespace(namespace)
        if request.base_location:
            settings, location = self.store.settings, request.base_location.rstrip("/")
            check_table_location(settings, location, "Base location")
            check_no_overlap(location, self.store.entity_locations(identifier), "Base location")
        key = self._key(identifier)
        pointer = {**key, "metadata_location": None, "iceberg_type": GENERIC_TABLE_TYPE}
        details = {
            **key,
            "format": request.format,
            "base_location": request.base_location,
            "doc": request.doc,
            "properties": json.dumps(request.properties, sort_keys=True),
        }
        try:
            with Session(self.catalog.engine) as session:
                session.execute(insert(IcebergTables).values(**pointer))
                session.execute(insert(GenericTableRow).values(**details))
                session.commit()
        except IntegrityError as exc:
            kind = kind_of(self.catalog, identifier) or "table"
            raise TableAlreadyExistsError(
                f"A {kind} named {_name(identifier)} already exists"
            ) from exc
        return GenericTable.model_validate(request.model_dump())

    def load_table(self, identifier: Identifier) -> GenericTable:
        """Load a generic table (Polaris ``loadGenericTable``).

        Raises:
            NoSuchTableError: If no generic table has that name.
        """
        check_namespace(identifier[:-1], NoSuchTableError)
        key = self._key(identifier)
        stmt = select(GenericTableRow).where(
            *(getattr(GenericTableRow, column) == value for column, value in key.items())
        )
        with Session(self.catalog.engine) as session:
            row = session.scalars(stmt).first()
        if row is None:
            raise NoSuchTableError(f"Generic table does not exist: {_name(identifier)}")
        return GenericTable.model_validate(
            {
                "name": row.table_name,
                "format": row.format,
                "base-location": row.base_location,
                "doc": row.doc,
                "properties": json.loads(row.properties),
            }
        )

    def drop_table(self, identifier: Identifier) -> None:
        """Drop a generic table; its files are left alone (Polaris ``dropGenericTable``).

        Raises:
            NoSuchTableError: If no generic table has that name.
        """
        check_namespace(identifier[:-1], NoSuchTableError)
        key = self._key(identifier)
        pointer = row_filter(self.catalog, identifier) & (
            IcebergTables.iceberg_type == GENERIC_TABLE_TYPE
        )
        with Session(self.catalog.engine) as session:
            deleted = session.execute(delete(IcebergTables).where(pointer))
            session.execute(
                delete(GenericTableRow).where(
                    *(getattr(GenericTableRow, column) == value for column, value in key.items())
                )
            )
            if deleted.rowcount < 1:  # type: ignore[attr-defined]
                raise NoSuchTableError(f"Generic table does not exist: {_name(identifier)}")
            session.commit()
