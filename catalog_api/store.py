"""All catalog logic: namespaces and tables on top of pyiceberg's ``SqlCatalog``.

Routes stay thin and call one ``CatalogStore`` method each. Requests and responses are
pyiceberg's REST models, so the wire format is the one pyiceberg's own client speaks.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from cachetools import LRUCache
from pyiceberg.catalog import PropertiesUpdateSummary
from pyiceberg.catalog.rest import TableResponse
from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.serializers import Compressor, FromInputFile
from pyiceberg.table import CommitTableResponse, Table
from pyiceberg.table.metadata import TableMetadata, new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.table.update import AssertCreate, TableRequirement, TableUpdate
from pyiceberg.typedef import Identifier, Properties
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from catalog_api import names
from catalog_api.body_cache import BodyCache
from catalog_api.commit import PlannedCommit, check_new_files, plan_commit, publish_commits
from catalog_api.core.config import CatalogSettings, is_local_location, local_path
from catalog_api.entity_rows import (
    TABLE_LOCATION_QUERY,
    non_table_entities,
    table_location_parameters,
)
from catalog_api.errors import BadRequestError, UnprocessableEntityError
from catalog_api.locations import (
    check_location,
    check_no_overlap,
    check_properties,
    check_table_location,
    check_table_metadata,
    check_updates,
    unreadable_reason,
)
from catalog_api.models import CreateTableBody
from catalog_api.purge import purge_table

logger = logging.getLogger(__name__)

PARSED_KEPT = 256
"""Table metadata files kept parsed by :meth:`CatalogStore.read_metadata`, by location."""

SnapshotMode = Literal["all", "refs"]
#: Gives ``(identifier, location)`` of entities whose location is not in a metadata file.
LocationSource = Callable[[], Iterable[tuple[Identifier, str]]]


@dataclass(frozen=True)
class TableChangeRequest:
    """One table's requirements and updates, as sent to a commit endpoint.

    Attributes:
        identifier: Namespace parts followed by the table name.
        requirements: Requirements checked against the current metadata.
        updates: Updates applied in order when all requirements hold.
    """

    identifier: Identifier
    requirements: Sequence[TableRequirement]
    updates: Sequence[TableUpdate]


def check_namespace(namespace: Identifier, error: type[Exception] = BadRequestError) -> Identifier:
    """Validate a namespace with the rules of :func:`catalog_api.names.check_namespace`.

    Args:
        namespace: Namespace parts.
        error: Exception class raised when invalid (lookups raise a not-found error).

    Returns:
        The namespace, as a tuple.

    Raises:
        Exception: An instance of ``error`` naming the broken rule.
    """
    return names.check_namespace(namespace, error)


def table_identifier(
    namespace: Identifier, name: str, error: type[Exception], what: str = "Table name"
) -> Identifier:
    """Build a table (or view, generic table) identifier from validated parts.

    Args:
        namespace: Namespace parts.
        name: Table name.
        error: Exception class raised when a part is invalid.
        what: What the name is, for the message.

    Returns:
        Namespace parts followed by the table name.

    Raises:
        Exception: An instance of ``error`` naming the broken rule.
    """
    return (*check_namespace(namespace, error), names.check_name(name, what, error))


class CatalogStore:
    """The catalog: namespaces and tables stored by pyiceberg's ``SqlCatalog``.

    Args:
        settings: Service settings (database URL, warehouse, IO properties).
    """

    def __init__(self, settings: CatalogSettings) -> None:
        self.settings = settings
        properties = {
            **settings.io_properties,
            "uri": settings.database_url,
            "warehouse": settings.warehouse,
        }
        self.catalog = SqlCatalog(settings.catalog_name, **properties)
        self._lock = threading.Lock()
        self.table_bodies = BodyCache(settings.table_body_cache_bytes)
        # metadata file -> table or view location; files are immutable, entries never go stale
        self._location_in = functools.lru_cache(maxsize=65536)(self._read_location)
        # metadata file -> parsed metadata (immutable files; shared, never mutated)
        self._parsed: LRUCache[str, TableMetadata] = LRUCache(PARSED_KEPT)
        self._parsed_lock = threading.Lock()
        #: Further entities with a location (generic tables register theirs here).
        self.location_sources: list[LocationSource] = []

    def close(self) -> None:
        """Release the database connections."""
        self.catalog.engine.dispose()

    # ----------------------------------------------------------------- namespaces

    def list_namespaces(self, parent: Identifier = ()) -> list[Identifier]:
        """List the namespaces one level below ``parent`` (top level when empty).

        Raises:
            NoSuchNamespaceError: If ``parent`` does not exist.
        """
        if parent:
            check_namespace(parent, NoSuchNamespaceError)
        return sorted(self.catalog.list_namespaces(tuple(parent)))

    def create_namespace(self, namespace: Identifier, properties: Properties) -> Properties:
        """Create a namespace and return its stored properties.

        Raises:
            BadRequestError: If the namespace name is invalid.
            NamespaceAlreadyExistsError: If it exists already.
        """
        check_namespace(namespace)
        if properties.get("location"):
            check_location(self.settings, properties["location"], "Namespace location")
        with self._lock:
            self.catalog.create_namespace(namespace, dict(properties))
        return self.load_namespace(namespace)

    def load_namespace(self, namespace: Identifier) -> Properties:
        """Return the properties of a namespace.

        Raises:
            NoSuchNamespaceError: If it does not exist.
        """
        check_namespace(namespace, NoSuchNamespaceError)
        return self.catalog.load_namespace_properties(namespace)

    def namespace_exists(self, namespace: Identifier) -> bool:
        """Tell whether a namespace exists."""
        try:
            check_namespace(namespace, NoSuchNamespaceError)
        except NoSuchNamespaceError:
            return False
        return self.catalog.namespace_exists(namespace)

    def drop_namespace(self, namespace: Identifier) -> None:
        """Drop an empty namespace.

        Raises:
            NoSuchNamespaceError: If it does not exist.
            NamespaceNotEmptyError: If it holds tables or namespaces.
        """
        check_namespace(namespace, NoSuchNamespaceError)
        if self.catalog.list_namespaces(namespace):
            raise NamespaceNotEmptyError(f"Namespace {'.'.join(namespace)} has child namespaces")
        if others := non_table_entities(self.catalog, namespace):
            raise NamespaceNotEmptyError(f"Namespace {'.'.join(namespace)} holds {others}")
        with self._lock:
            self.catalog.drop_namespace(namespace)

    def update_namespace_properties(
        self, namespace: Identifier, removals: Sequence[str], updates: Properties
    ) -> PropertiesUpdateSummary:
        """Set and remove namespace properties.

        Raises:
            NoSuchNamespaceError: If the namespace does not exist.
            UnprocessableEntityError: If a key is both updated and removed.
        """
        check_namespace(namespace, NoSuchNamespaceError)
        if overlap := set(removals) & set(updates):
            raise UnprocessableEntityError(f"Keys both updated and removed: {sorted(overlap)}")
        if updates.get("location"):
            check_location(self.settings, updates["location"], "Namespace location")
        with self._lock:
            return self.catalog.update_namespace_properties(namespace, set(removals), dict(updates))

    # --------------------------------------------------------------------- tables

    def list_tables(self, namespace: Identifier) -> list[Identifier]:
        """List the tables of a namespace.

        Raises:
            NoSuchNamespaceError: If the namespace does not exist.
        """
        check_namespace(namespace, NoSuchNamespaceError)
        return sorted(self.catalog.list_tables(namespace))

    def default_table_location(self, namespace: Identifier, name: str) -> str:
        """Return where a table lives when its creator names no location.

        The namespace's ``location`` property wins; otherwise
        ``<warehouse>/<namespace parts joined by />/<table>``.

        Raises:
            NoSuchNamespaceError: If the namespace does not exist.
        """
        ns_location = self.load_namespace(namespace).get("location")
        if ns_location:
            return f"{ns_location.rstrip('/')}/{name}"
        return "/".join((self.settings.warehouse, *namespace, name))

    def _response(self, metadata: TableMetadata, metadata_location: str | None) -> TableResponse:
        return TableResponse.model_validate(
            {
                "metadata-location": metadata_location,
                "metadata": metadata,
                "config": dict(self.settings.table_config),
            }
        )

    def _prepare_create(
        self, namespace: Identifier, request: CreateTableBody
    ) -> tuple[Identifier, TableMetadata]:
        identifier = table_identifier(namespace, request.name, BadRequestError)
        if not self.catalog.namespace_exists(namespace):
            raise NoSuchNamespaceError(f"Namespace does not exist: {'.'.join(namespace)}")
        if self.catalog.table_exists(identifier):
            raise TableAlreadyExistsError(f"Table already exists: {'.'.join(identifier)}")
        location = (request.location or "").rstrip("/")
        location = location or self.default_table_location(namespace, request.name)
        check_table_location(self.settings, location, "Table location")
        check_properties(self.settings, request.properties, location)
        spec = request.partition_spec or UNPARTITIONED_PARTITION_SPEC
        order = request.write_order or UNSORTED_SORT_ORDER
        try:
            metadata = new_table_metadata(
                request.table_schema, spec, order, location, dict(request.properties)
            )
        except ValueError as exc:  # a partition or sort field on a column the schema lacks
            raise BadRequestError(f"Invalid table layout: {exc}") from exc
        return identifier, metadata

    def _make_folder(self, location: str) -> None:
        if not is_local_location(location):
            return
        try:
            (local_path(location) / "metadata").mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # e.g. a folder name longer than the file system allows
            reason = exc.strerror or type(exc).__name__
            raise BadRequestError(f"Cannot create the folder of {location}: {reason}") from exc

    def create_table(self, namespace: Identifier, request: CreateTableBody) -> TableResponse:
        """Create a table, or stage its creation when ``stage-create`` is true.

        A staged create writes nothing to the catalog; the table comes to exist when the
        client commits it with an ``assert-create`` requirement. For local warehouses the
        ``<location>/metadata/`` folder is created, since some writers expect it.

        Raises:
            BadRequestError: If the request is invalid, or the location is outside the
                warehouse or overlaps another table's, view's or generic table's.
            NoSuchNamespaceError: If the namespace does not exist.
            TableAlreadyExistsError: If the table exists.
        """
        identifier, metadata = self._prepare_create(namespace, request)
        with self._lock:
            check_no_overlap(metadata.location, self.entity_locations(identifier), "Table location")
            self._make_folder(metadata.location)
            if request.stage_create:
                return self._response(metadata, None)
            table = self.catalog.create_table(
                identifier,
                request.table_schema,
                metadata.location,
                request.partition_spec or UNPARTITIONED_PARTITION_SPEC,
                request.write_order or UNSORTED_SORT_ORDER,
                dict(request.properties),
            )
        return self._response(table.metadata, table.metadata_location)

    def metadata_location(self, identifier: Identifier) -> str:
        """Return a table's current metadata file: one primary-key lookup, no file read.

        The ``loadTable`` fast path: the ETag is computed from this location before the
        metadata file is read (or not read at all).

        Args:
            identifier: Namespace parts followed by the table name.

        Raises:
            NoSuchTableError: If no table has this name (also when its namespace does not
                exist, or a view or generic table holds the name).
        """
        check_namespace(identifier[:-1], NoSuchTableError)
        parameters = table_location_parameters(self.catalog, identifier)
        with self.catalog.engine.connect() as connection:
            location = connection.execute(TABLE_LOCATION_QUERY, parameters).scalar()
        if not location:
            raise NoSuchTableError(f"Table does not exist: {'.'.join(identifier)}")
        return str(location)

    def table_location(self, identifier: Identifier) -> str:
        """Return a table's location (``metadata.location``), read once per metadata file.

        Raises:
            NoSuchTableError: If no table has this name.
        """
        return self._location_in(self.metadata_location(identifier))

    def _read_location(self, metadata_location: str) -> str:
        """The ``location`` field of a table or view metadata file (gzip when ``*.gz.*``)."""
        io = self.catalog._load_file_io(location=metadata_location)
        compressor = Compressor.get_compressor(metadata_location)
        with io.new_input(metadata_location).open() as raw, compressor.stream_decompressor(
            raw
        ) as stream:
            return str(json.loads(stream.read())["location"])

    def entity_locations(self, exclude: Identifier | None = None) -> list[str]:
        """The locations of every table, view and generic table of the catalog.

        Table and view locations are read from their metadata files, each file once (files
        are immutable); a file that cannot be read is skipped and logged.

        Args:
            exclude: An identifier whose entity is left out (the one being placed).
        """
        stmt = select(
            IcebergTables.table_namespace, IcebergTables.table_name,
            IcebergTables.metadata_location,
        ).where(IcebergTables.catalog_name == self.catalog.name)
        with Session(self.catalog.engine) as session:
            rows = session.execute(stmt).all()
        skipped = (".".join(exclude[:-1]), exclude[-1]) if exclude else None
        locations = [
            location for source in self.location_sources
            for identifier, location in source() if identifier != exclude
        ]
        for namespace, name, metadata_location in rows:
            if metadata_location and (namespace, name) != skipped:
                locations.append(self._location_or_guess(metadata_location))
        return locations

    def _location_or_guess(self, metadata_location: str) -> str:
        """The location in a metadata file; when unreadable, the folder above ``metadata/``."""
        try:
            return self._location_in(metadata_location)
        except (OSError, ValueError, KeyError, TypeError):
            folder = metadata_location.rpartition("/metadata/")[0]
            logger.warning("Cannot read the location in %s", metadata_location)
            return folder or metadata_location

    def table_response(
        self, metadata_location: str, snapshots: SnapshotMode = "all"
    ) -> TableResponse:
        """Build the ``loadTable`` answer from one metadata file (read and parsed).

        Args:
            metadata_location: The table's metadata file, from :meth:`metadata_location`.
            snapshots: ``all`` returns every snapshot, ``refs`` only those branches/tags name.
        """
        metadata = self.read_metadata(metadata_location)
        if snapshots == "refs":
            referenced = {ref.snapshot_id for ref in metadata.refs.values()}
            kept = [snap for snap in metadata.snapshots if snap.snapshot_id in referenced]
            metadata = metadata.model_copy(update={"snapshots": kept})
        return self._response(metadata, metadata_location)

    def table_response_body(self, metadata_location: str, snapshots: SnapshotMode = "all") -> bytes:
        """The serialized ``loadTable`` answer (JSON bytes), from the body LRU when cached.

        Bodies are keyed by ``(metadata_location, snapshots)``: metadata files are immutable
        and the table ``config`` is static, so a cached body is never stale. Bodies with
        per-request content (vended credentials) must not come from here.

        Args:
            metadata_location: The table's metadata file, from :meth:`metadata_location`.
            snapshots: ``all`` or ``refs``.
        """
        return self.table_bodies.get_or_build(
            (metadata_location, snapshots),
            lambda: self.table_response(metadata_location, snapshots).model_dump_json().encode(),
        )

    def load_table(self, identifier: Identifier, snapshots: SnapshotMode = "all") -> TableResponse:
        """Load a table's current metadata.

        Args:
            identifier: Namespace parts followed by the table name.
            snapshots: ``all`` returns every snapshot, ``refs`` only those branches/tags name.

        Raises:
            NoSuchTableError: If the table does not exist (also when its namespace does not).
        """
        return self.table_response(self.metadata_location(identifier), snapshots)

    def table_exists(self, identifier: Identifier) -> bool:
        """Tell whether a table exists."""
        try:
            check_namespace(identifier[:-1], NoSuchTableError)
        except NoSuchTableError:
            return False
        return self.catalog.table_exists(identifier)

    def drop_table(self, identifier: Identifier, purge: bool = False) -> None:
        """Drop a table, deleting its files too when ``purge`` is true.

        A purge deletes the files the current metadata reaches that lie inside the table's
        location and no other entity's, then (for tables inside the warehouse) the ``data/``
        and ``metadata/`` folders of the table; see :func:`catalog_api.purge.purge_table`.
        Without purge every file stays.

        Raises:
            NoSuchTableError: If the table does not exist.
        """
        check_namespace(identifier[:-1], NoSuchTableError)
        with self._lock:
            if not purge:
                self.catalog.drop_table(identifier)
                return
            table = self.catalog.load_table(identifier)
            others = self.entity_locations(identifier)
            self.catalog.drop_table(identifier)
        purge_table(self.settings, table, others)

    def rename_table(self, source: Identifier, destination: Identifier) -> None:
        """Rename a table, possibly into another namespace.

        Raises:
            NoSuchTableError: If the source table does not exist.
            NoSuchNamespaceError: If the destination namespace does not exist.
            TableAlreadyExistsError: If the destination exists.
            BadRequestError: If the destination name is invalid.
        """
        check_namespace(source[:-1], NoSuchTableError)
        check_namespace(destination[:-1], NoSuchNamespaceError)
        names.check_name(destination[-1])
        if not self.catalog.table_exists(source):
            raise NoSuchTableError(f"Table does not exist: {'.'.join(source)}")
        if self.catalog.table_exists(destination):
            raise TableAlreadyExistsError(f"Table already exists: {'.'.join(destination)}")
        with self._lock:
            self.catalog.rename_table(source, destination)

    def _parse_metadata(self, metadata_location: str) -> TableMetadata:
        io = self.catalog._load_file_io(location=metadata_location)
        return FromInputFile.table_metadata(io.new_input(metadata_location))

    def read_metadata(self, metadata_location: str) -> TableMetadata:
        """Read and parse one table metadata file with the server's FileIO.

        A metadata file never changes once written: the last :data:`PARSED_KEPT` parsed
        (or written by a commit here) are kept by location, shared by every caller, who must
        not mutate them (pyiceberg's updates copy what they change).

        Raises:
            OSError: If the file cannot be read; pydantic's ``ValidationError`` if it does
                not parse.
        """
        with self._parsed_lock:
            metadata = self._parsed.get(metadata_location)
        if metadata is None:
            metadata = self._parse_metadata(metadata_location)
            self._keep_parsed(metadata_location, metadata)
        return metadata

    def _keep_parsed(self, metadata_location: str, metadata: TableMetadata) -> None:
        with self._parsed_lock:
            self._parsed[metadata_location] = metadata

    def load_table_or_none(self, identifier: Identifier) -> Table | None:
        """The table as it stands (its metadata through :meth:`read_metadata`), or None.

        Raises:
            OSError: The metadata file cannot be read.
        """
        try:
            location = self.metadata_location(identifier)
        except NoSuchTableError:
            return None
        metadata = self.read_metadata(location)
        return Table(identifier=identifier, metadata=metadata, metadata_location=location,
                     io=self.catalog._load_file_io(metadata.properties, location),
                     catalog=self.catalog)

    def _registrable(self, metadata_location: str) -> TableMetadata:
        """Read a metadata file a client names; the error never quotes the file.

        Parsed afresh, not through :meth:`read_metadata`'s cache: the file is validated
        before it becomes a table's, and a refused file fixed in place is read again.
        """
        try:
            return self._parse_metadata(metadata_location)
        except Exception as exc:  # any IO or parse failure is the caller's bad location
            reason = unreadable_reason(exc, "table metadata")
            message = f"Cannot read table metadata at {metadata_location}: {reason}"
            raise BadRequestError(message) from exc

    def register_table(
        self, namespace: Identifier, name: str, metadata_location: str, overwrite: bool = False
    ) -> TableResponse:
        """Register an existing metadata file as a table.

        The metadata file, and every location it names, must be inside the warehouse (see
        :func:`catalog_api.locations.check_table_metadata`), and the table's location may
        not overlap another entity's.

        Raises:
            BadRequestError: If the metadata file cannot be read or a location breaks a rule.
            NoSuchNamespaceError: If the namespace does not exist.
            TableAlreadyExistsError: If the table exists and ``overwrite`` is false.
        """
        identifier = table_identifier(namespace, name, BadRequestError)
        if not self.catalog.namespace_exists(namespace):
            raise NoSuchNamespaceError(f"Namespace does not exist: {'.'.join(namespace)}")
        check_location(self.settings, metadata_location, "Metadata location")
        metadata = self._registrable(metadata_location)
        check_table_metadata(self.settings, metadata, metadata_location)
        with self._lock:
            check_no_overlap(metadata.location, self.entity_locations(identifier), "Table location")
            if overwrite and self.catalog.table_exists(identifier):
                self._repoint(identifier, metadata_location)
            else:
                self.catalog.register_table(identifier, metadata_location)
        return self.load_table(identifier)

    def _repoint(self, identifier: Identifier, metadata_location: str) -> None:
        current = self.catalog.load_table(identifier).metadata_location
        stmt = (
            update(IcebergTables)
            .where(
                IcebergTables.catalog_name == self.catalog.name,
                IcebergTables.table_namespace == ".".join(identifier[:-1]),
                IcebergTables.table_name == identifier[-1],
                IcebergTables.metadata_location == current,
            )
            .values(metadata_location=metadata_location, previous_metadata_location=current)
        )
        with Session(self.catalog.engine) as session:
            if session.execute(stmt).rowcount < 1:  # type: ignore[attr-defined]
                raise CommitFailedException(f"Table changed concurrently: {'.'.join(identifier)}")
            session.commit()

    # -------------------------------------------------------------------- commits

    def _plan(self, change: TableChangeRequest) -> PlannedCommit:
        identifier = change.identifier
        creates = any(isinstance(requirement, AssertCreate) for requirement in change.requirements)
        error = BadRequestError if creates else NoSuchTableError
        names.check_name(identifier[-1], "Table name", error)
        check_namespace(identifier[:-1], error)
        check_updates(self.settings, change.updates)
        plan = plan_commit(
            self.catalog,
            identifier,
            change.requirements,
            change.updates,
            lambda: self.default_table_location(identifier[:-1], identifier[-1]),
            self.load_table_or_none,
        )
        self._check_locations(plan)
        return plan

    def _check_locations(self, plan: PlannedCommit) -> None:
        """Check where a planned commit writes and what files it adds.

        The location and write paths must be inside the warehouse (a table registered
        before these rules may name others); a new or moved location may not overlap
        another entity's; the new metadata file and the files of new snapshots must lie in
        the table's own prefixes (:func:`catalog_api.commit.check_new_files`).

        Raises:
            BadRequestError: If a location breaks a rule.
        """
        metadata = plan.staged.metadata
        check_table_location(self.settings, metadata.location)
        check_properties(self.settings, metadata.properties, metadata.location)
        if plan.base is None or plan.base.metadata.location != metadata.location:
            others = self.entity_locations(plan.identifier)
            check_no_overlap(metadata.location, others, "Table location")
        check_new_files(plan)

    def commit_table(self, change: TableChangeRequest) -> CommitTableResponse:
        """Commit requirements and updates to one table atomically.

        An ``assert-create`` requirement on a table that does not exist creates it (the end
        of a staged create).

        Raises:
            NoSuchTableError: If the table does not exist and the commit is not a create.
            CommitFailedException: If a requirement fails or another commit won the race.
            BadRequestError: If the updates are invalid for the table.
        """
        plan = self._plan(change)
        publish_commits(self.catalog, [plan], self._lock)
        self._keep_published([plan])
        return plan.response()

    def _keep_published(self, plans: Sequence[PlannedCommit]) -> None:
        """Keep the metadata just written, parsed: the next commit's base, the next load's."""
        for plan in plans:
            if plan.changed:
                self._keep_parsed(plan.staged.metadata_location, plan.staged.metadata)

    def commit_transaction(self, changes: Sequence[TableChangeRequest]) -> None:
        """Commit changes to several tables: all of them or none.

        Every table's requirements are validated and updates applied before anything is
        written; the catalog rows are then swapped in one database transaction.

        Raises:
            NoSuchTableError: If a table does not exist (and is not being created).
            CommitFailedException: If any requirement fails or any table moved meanwhile.
            BadRequestError: If a table appears twice or an update is invalid.
        """
        plans = [self._plan(change) for change in changes]
        publish_commits(self.catalog, plans, self._lock)
        self._keep_published(plans)
