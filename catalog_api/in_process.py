"""The catalog in its caller's process: pyiceberg's ``Catalog`` over the service's store.

A process that needs the catalog while no service answers for it (a one-shot ``lakehouse
refresh`` of an embedded catalog, the Python API) uses this client instead of starting the
web service for itself: the same database, the same store and the same rules as the REST
routes (names checked, requirements validated, locations confined to the warehouse, new
files inside the table's own prefixes, generic tables' locations reserved), without the web
framework, a port or HTTP. Reads are pyiceberg's ``SqlCatalog``'s over that database; every
write goes through :class:`catalog_api.store.CatalogStore`.

Nothing authenticates the caller: it holds the database itself, as the service does.
Errors are the ones a REST client raises for the same answers: pyiceberg's
``BadRequestError`` for a 400, ``ForbiddenError`` for a 403, ``RESTError`` for any other
refusal of the service's own (:class:`catalog_api.errors.CatalogError`), ``ServerError``
when the catalog's database fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar, cast

from pyiceberg.catalog import Catalog, PropertiesUpdateSummary
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import (
    BadRequestError,
    ForbiddenError,
    RESTError,
    ServerError,
    TableAlreadyExistsError,
)
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableResponse, Table, TableProperties
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER, SortOrder
from pyiceberg.typedef import EMPTY_DICT, Identifier, Properties
from sqlalchemy.exc import SQLAlchemyError

from catalog_api.core.config import CatalogSettings
from catalog_api.entity_rows import kind_of
from catalog_api.errors import CatalogError
from catalog_api.generic_table_models import CreateGenericTableRequest
from catalog_api.generic_tables import GenericTableStore
from catalog_api.metadata_files import ServerDeletesMetadata
from catalog_api.models import CreateTableBody
from catalog_api.store import CatalogStore, TableChangeRequest

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.table.update import TableRequirement, TableUpdate
    from pyiceberg.typedef import TableVersion

__all__ = ["InProcessCatalog"]

T = TypeVar("T")

_CLIENT_ERRORS: dict[int, type[RESTError]] = {400: BadRequestError, 403: ForbiddenError}


@contextmanager
def _as_client_errors() -> Iterator[None]:
    """Raise a service error as the pyiceberg error its REST answer would give a client.

    A refusal by the store's rules as its status code's error; a failure of the catalog's
    database (locked, unreachable) as ``ServerError``, the service's 500.
    """
    try:
        yield
    except CatalogError as error:
        raise _CLIENT_ERRORS.get(error.code, RESTError)(str(error)) from None
    except SQLAlchemyError as error:
        raise ServerError(f"the catalog's database: {type(error).__name__}") from None


class InProcessCatalog(ServerDeletesMetadata, SqlCatalog):
    """A pyiceberg catalog that writes through the service's store, in this process.

    Args:
        settings: The service's settings (database URL, warehouse, IO properties), as
            ``lakehouse serve`` would run with.
        io_properties: FileIO properties of the caller (storage endpoint, credentials).

    Raises:
        sqlalchemy.exc.OperationalError: The database cannot be reached.
    """

    def __init__(self, settings: CatalogSettings, io_properties: Properties = EMPTY_DICT):
        super().__init__(settings.catalog_name, **{
            **settings.io_properties, **io_properties, "uri": settings.database_url,
            "warehouse": settings.warehouse})
        try:
            self.store = CatalogStore(settings)
        except BaseException:
            self.engine.dispose()
            raise
        self.generic_tables = GenericTableStore(self.store)

    def close(self) -> None:
        """Release the database connections of the store and of this client."""
        self.store.close()
        self.engine.dispose()

    def destroy_tables(self) -> None:
        """Refused: the catalog's database belongs to the service, not to a client.

        Raises:
            NotImplementedError: Always.
        """
        raise NotImplementedError("the catalog's tables belong to the service")

    def load_table(self, identifier: str | Identifier) -> Table:
        """Load a table; a metadata file parsed before is not read and parsed again.

        One primary-key lookup names the table's current metadata file, as for the
        service's ``loadTable`` ETag; the file is parsed once, by the store
        (:meth:`catalog_api.store.CatalogStore.read_metadata`, which also keeps what its
        commits write). Each load gets a ``Table`` of its own (a commit through a ``Table``
        replaces that object's metadata).

        Raises:
            NoSuchTableError: No table has this name.
            ServerError: The catalog's database fails.
        """
        parts = Catalog.identifier_to_tuple(identifier)
        with _as_client_errors():
            location = self.store.metadata_location(parts)
        metadata = self.store.read_metadata(location)
        return Table(identifier=parts, metadata=metadata, metadata_location=location,
                     io=self._load_file_io(metadata.properties, location), catalog=self)

    def _write(self, action: Callable[[], T]) -> T:
        with _as_client_errors():
            return action()

    def create_table(self, identifier: str | Identifier, schema: Schema | pa.Schema,
                     location: str | None = None,
                     partition_spec: PartitionSpec = UNPARTITIONED_PARTITION_SPEC,
                     sort_order: SortOrder = UNSORTED_SORT_ORDER,
                     properties: Properties = EMPTY_DICT) -> Table:
        """Create a table as ``POST .../namespaces/{namespace}/tables`` would."""
        parts = Catalog.identifier_to_tuple(identifier)
        version = properties.get(TableProperties.FORMAT_VERSION,
                                 TableProperties.DEFAULT_FORMAT_VERSION)
        body = CreateTableBody.model_validate({
            "name": parts[-1],
            "schema": self._convert_schema_if_needed(schema, cast("TableVersion", int(version))),
            "location": location, "partition-spec": partition_spec,
            "write-order": sort_order, "properties": dict(properties)})
        self._write(lambda: self.store.create_table(parts[:-1], body))
        return self.load_table(parts)

    def commit_table(self, table: Table, requirements: tuple[TableRequirement, ...],
                     updates: tuple[TableUpdate, ...]) -> CommitTableResponse:
        """Commit a table's change as ``POST .../tables/{table}`` would."""
        change = TableChangeRequest(table.name(), requirements, updates)
        return self._write(lambda: self.store.commit_table(change))

    def register_table(self, identifier: str | Identifier, metadata_location: str,
                       overwrite: bool = False) -> Table:
        """Register a metadata file as a table as ``POST .../register`` would."""
        parts = Catalog.identifier_to_tuple(identifier)
        self._write(lambda: self.store.register_table(
            parts[:-1], parts[-1], metadata_location, overwrite))
        return self.load_table(parts)

    def drop_table(self, identifier: str | Identifier) -> None:
        """Drop a table (its files stay)."""
        self._write(lambda: self.store.drop_table(Catalog.identifier_to_tuple(identifier)))

    def purge_table(self, identifier: str | Identifier) -> None:
        """Drop a table and delete the files only it reaches (the service's purge)."""
        parts = Catalog.identifier_to_tuple(identifier)
        self._write(lambda: self.store.drop_table(parts, purge=True))

    def rename_table(self, from_identifier: str | Identifier,
                     to_identifier: str | Identifier) -> Table:
        """Rename a table, possibly into another namespace."""
        destination = Catalog.identifier_to_tuple(to_identifier)
        self._write(lambda: self.store.rename_table(
            Catalog.identifier_to_tuple(from_identifier), destination))
        return self.load_table(destination)

    def create_namespace(self, namespace: str | Identifier,
                         properties: Properties = EMPTY_DICT) -> None:
        """Create a namespace."""
        parts = Catalog.identifier_to_tuple(namespace)
        self._write(lambda: self.store.create_namespace(parts, dict(properties)))

    def drop_namespace(self, namespace: str | Identifier) -> None:
        """Drop an empty namespace."""
        self._write(lambda: self.store.drop_namespace(Catalog.identifier_to_tuple(namespace)))

    def update_namespace_properties(self, namespace: str | Identifier,
                                    removals: set[str] | None = None,
                                    updates: Properties = EMPTY_DICT
                                    ) -> PropertiesUpdateSummary:
        """Set and remove a namespace's properties."""
        parts = Catalog.identifier_to_tuple(namespace)
        return self._write(lambda: self.store.update_namespace_properties(
            parts, sorted(removals or ()), dict(updates)))

    def register_generic_table(self, namespace: Identifier, request: CreateGenericTableRequest,
                               ) -> bool:
        """List a generic table, as Polaris ``createGenericTable`` would; keep an existing one.

        A name already taken is answered before the location rules, which read the
        location of every table in the catalog.

        Returns:
            Whether it was created (False: a table of that name exists).

        Raises:
            pyiceberg.exceptions.BadRequestError: The name or base location breaks a rule.
            pyiceberg.exceptions.NoSuchNamespaceError: The namespace does not exist.
        """
        if kind_of(self, (*namespace, request.name)) is not None:
            return False
        try:
            self._write(lambda: self.generic_tables.create_table(namespace, request))
        except TableAlreadyExistsError:
            return False
        return True
