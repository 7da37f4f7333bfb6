"""Source schema changes a view cannot follow, found before its refresh runs.

A view reflects its sources at its frontier, so the schemas it was built against are the
sources' schemas at the frontier's versions. Each tick compares them with the sources'
current schemas, column by column, for the columns the view's SQL reads:

- added columns, and changes to columns the view does not read, are ignored;
- a column the view reads that was dropped, renamed, retyped (type widening included) or
  dropped and re-added stops the view: the tick raises :class:`SchemaChangedError` before
  anything is read or written, and ``lakehouse status`` names the change.

Only table metadata is read (pyiceberg, delta-rs): no Spark job, no data file.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from cachetools import LRUCache, cachedmethod
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table.metadata import TableMetadata

from ivm import SqlParseError, ViewPlan, compile_view, referenced_sources, used_columns
from lakehouse.config import Config, DeltaSource, IcebergSource, ViewConfig, ViewSource
from lakehouse.errors import LakehouseError, RefreshError, SchemaChangedError, SourceError
from lakehouse.refresh import ViewSinks
from lakehouse.sources.schema import (
    SourceColumn,
    SourceSchema,
    delta_schema,
    iceberg_schema,
)
from lakehouse.storage import delta_options

Change = Literal["dropped", "renamed", "retyped", "replaced"]


@dataclass(frozen=True)
class SchemaChange:
    """One column a view reads that changed in a source since the view's frontier.

    Attributes:
        source: The source's name in the config.
        column: The column's name as the view reads it.
        change: ``dropped``, ``renamed``, ``retyped`` or ``replaced`` (dropped and
            added again: same name, new field id, old rows read as null).
        detail: What it became, e.g. ``renamed to 'delay'``, ``retyped from int to long``.
        version: The source version the view reflects (its frontier).
    """

    source: str
    column: str
    change: Change
    detail: str
    version: int

    def describe(self) -> str:
        """One line: ``source 'flights': column 'dep_delay' renamed to 'delay' (...)``."""
        return (f"source {self.source!r}: column {self.column!r} {self.detail} "
                f"(since version {self.version}, which the view reflects)")


def column_changes(
    source: str, version: int, before: SourceSchema, after: SourceSchema, columns: Iterable[str]
) -> list[SchemaChange]:
    """How each of ``columns`` changed from ``before`` to ``after`` (unchanged ones omitted).

    A column is matched by field id when both schemas have ids (Iceberg; Delta with column
    mapping), so a rename is told apart from a drop; otherwise by name.
    """
    changes = []
    for name in sorted(columns):
        old = before.column(name)
        if old is None:
            continue
        moved = after.column_by_id(old.field_id) if old.field_id is not None else None
        new = after.column(name)
        if moved is not None and moved.name != name:
            change: Change
            change, detail = "renamed", f"renamed to {moved.name!r}"
        elif new is None:  # without field ids a rename looks like a drop
            change, detail = "dropped", "dropped" if old.field_id is not None else (
                "dropped or renamed (no column ids to tell which: Delta without column mapping)")
        elif None not in (old.field_id, new.field_id) and new.field_id != old.field_id:
            change, detail = "replaced", "dropped and added again (its old values are gone)"
        elif new.type != old.type:
            change, detail = "retyped", f"retyped from {old.type} to {new.type}"
        else:
            continue
        changes.append(SchemaChange(source, name, change, detail, version))
    return changes


PAST_SCHEMAS = 4096
"""Schemas of past source versions kept, least recently used out. A tick asks for its
views' frontier versions, which stay the same between ticks that find nothing to do; a
source committing every second makes a new version each second, so without a bound the
schemas of every version ever checked were kept (in a long ``lakehouse run``, a memory
that only grew)."""


class SchemaGuard:
    """Reads source schemas from metadata and checks views against them.

    Schemas of past versions never change, so the last :data:`PAST_SCHEMAS` read are
    cached; current schemas are read on every call.

    Args:
        config: The configuration (source kinds and locations).
        catalog: The REST catalog through pyiceberg.
        iceberg_metadata: Returns the current metadata of an Iceberg source by its name
            in the config; by default it is loaded from ``catalog``. A tick passes the
            metadata its sources' readers loaded for it, so that the check costs no
            catalog round trip.
    """

    def __init__(self, config: Config, catalog: Catalog, *,
                 iceberg_metadata: Callable[[str], TableMetadata] | None = None):
        self.config = config
        self.catalog = catalog
        self._iceberg_metadata = iceberg_metadata or self._load_metadata
        self._past: LRUCache[tuple[str, int], SourceSchema | None] = LRUCache(PAST_SCHEMAS)
        self._past_lock = threading.Lock()  # ticks of several views check at once
        # equal schemas of several versions kept as one object, while a version keeps it
        self._shared: weakref.WeakValueDictionary[tuple[SourceColumn, ...], SourceSchema] = (
            weakref.WeakValueDictionary())
        self._plans: dict[str, tuple[str, ViewPlan]] = {}

    def schema(self, name: str, version: int | None) -> SourceSchema | None:
        """Source ``name``'s schema at ``version`` (None: current); None when unreadable.

        Unreadable means the table is missing or the version is gone (expired, vacuumed):
        the refresh itself reports those.
        """
        return self._read(name, None) if version is None else self._past_schema(name, version)

    @cachedmethod(lambda self: self._past, lock=lambda self: self._past_lock)
    def _past_schema(self, name: str, version: int) -> SourceSchema | None:
        """Source ``name``'s schema at past ``version``, kept (:data:`PAST_SCHEMAS`).

        A source's versions mostly share one schema: the versions kept refer to one object
        of it, not to a copy each (a source committing every second, as on the soak
        benchmark, made a copy of its columns a second, up to the bound).
        """
        schema = self._read(name, version)
        if schema is None:
            return None
        with self._past_lock:
            return self._shared.setdefault(schema.columns, schema)

    def _read(self, name: str, version: int | None) -> SourceSchema | None:
        source = self.config.sources[name]
        try:
            if isinstance(source, DeltaSource):
                return delta_schema(DeltaTable(
                    source.delta, version=version,
                    storage_options=delta_options(self.config, source.delta)))
            return iceberg_schema(self._iceberg_metadata(name), version)
        except (DeltaError, NoSuchTableError, OSError, SourceError):
            return None

    def _load_metadata(self, name: str) -> TableMetadata:
        source = self.config.sources[name]
        if isinstance(source, IcebergSource):
            return self.catalog.load_table(source.iceberg).metadata
        if isinstance(source, ViewSource):
            return self.catalog.load_table(source.view).metadata
        raise SourceError("not an Iceberg table", source=name)

    def compile_schemas(
        self, view: ViewConfig, frontier: Mapping[str, int] | None
    ) -> dict[str, dict[str, str]]:
        """The Spark schemas of ``view``'s sources at ``frontier``.

        A source the frontier does not cover (or whose version is gone) is taken at its
        current schema, as is every source before the first refresh.

        Returns:
            Source name -> column -> Spark SQL type (``ivm.compile_view``'s shape).

        Raises:
            SourceError: A source's table cannot be read.
        """
        schemas = {}
        for name in sorted(referenced_sources(view.sql) & set(self.config.sources)):
            version = (frontier or {}).get(name)
            schema = (self.schema(name, version) if version is not None else None) or (
                self.schema(name, None))
            if schema is None:
                raise SourceError("its table cannot be read (missing?)", source=name)
            schemas[name] = schema.spark_types()
        return schemas

    def compile(self, view: ViewConfig, frontier: Mapping[str, int] | None,
                built: Sequence[str] | None,
                source_keys: Mapping[str, Sequence[str]] | None = None) -> ViewPlan:
        """Compile ``view`` against its sources at ``frontier``, as its sinks were built.

        ``*`` is expanded once, when a view is built: columns a source added later are
        left out of the expansion, so the view keeps the columns its sinks have.

        Args:
            view: The view.
            frontier: Source versions the view reflects (None before the first refresh).
            built: The columns of the view's sink tables, or None before they exist.
            source_keys: The unique key of each source that has one.

        Raises:
            ivm.SqlParseError: The SQL does not resolve against the sources.
            RefreshError: The SQL names columns the sinks were not built with (the view's
                SQL was changed): the view must be rebuilt.
            SourceError: A source's table cannot be read.
        """
        schemas = self.compile_schemas(view, frontier)
        plan = self._compiled(view, schemas, source_keys)
        extra = set(plan.columns) - set(built or plan.columns)
        if not extra:
            return plan
        pinned = {name: {c: t for c, t in columns.items() if c not in extra}
                  for name, columns in schemas.items()}
        try:
            return compile_view(view.name, view.sql, pinned, view.key, source_keys)
        except SqlParseError:
            raise RefreshError(
                f"its SQL yields columns {sorted(extra)} that its sink tables (columns "
                f"{list(built or [])}) lack: was the SQL changed? Rebuild the view (drop its "
                "tables)", view=view.name) from None

    def _compiled(self, view: ViewConfig, schemas: dict[str, dict[str, str]],
                  source_keys: Mapping[str, Sequence[str]] | None) -> ViewPlan:
        """``compile_view`` of ``view`` over ``schemas``; the last plan per view is kept.

        Compiling is a pure function of its inputs and takes tens of milliseconds; the
        schema check of every tick compiles the same view over the same schemas.
        """
        key = json.dumps([view.sql, schemas, view.key, source_keys], sort_keys=True,
                         default=list)
        kept = self._plans.get(view.name)
        if kept is None or kept[0] != key:
            kept = (key, compile_view(view.name, view.sql, schemas, view.key, source_keys))
            self._plans[view.name] = kept
        return kept[1]

    def changes(self, view: ViewConfig, frontiers: Iterable[Mapping[str, int] | None],
                built: Sequence[str] | None = None) -> list[SchemaChange]:
        """Changes to the columns ``view`` reads, since each of its sinks' ``frontiers``.

        Args:
            view: The view.
            frontiers: The frontier of each of the view's sinks (None: never refreshed).
            built: The columns of the view's sink tables, when they exist.
        """
        found: list[SchemaChange] = []
        for frontier in {_key(f): f for f in frontiers if f}.values():
            for name, columns in self._used(view, frontier, built).items():
                before, after = self.schema(name, frontier.get(name)), self.schema(name, None)
                if name in frontier and before is not None and after is not None:
                    found += [c for c in column_changes(name, frontier[name], before, after,
                                                        columns) if c not in found]
        return found

    def check(self, view: ViewConfig, sinks: ViewSinks,
              committed: Mapping[str, Mapping[str, int] | None] | None = None) -> None:
        """Raise if a column ``view`` reads changed since its ``sinks``' frontiers.

        Args:
            view: The view.
            sinks: Its sinks.
            committed: Their frontiers by sink kind, when the caller read them already
                (:meth:`ViewSinks.frontiers`); None reads them.

        Raises:
            SchemaChangedError: Names the view and each source, column and change.
        """
        found = committed if committed is not None else sinks.frontiers()
        frontiers = [f for f in found.values() if f]
        if not frontiers:  # nothing built yet: the initial load follows the current schemas
            return
        changes = self.changes(view, frontiers, built_columns(sinks))
        if changes:
            first = changes[0]
            raise SchemaChangedError(
                "; ".join(c.describe() for c in changes), view=view.name, source=first.source,
                column=first.column, change=first.change)

    def _used(self, view: ViewConfig, frontier: Mapping[str, int],
              built: Sequence[str] | None) -> dict[str, set[str]]:
        """The columns ``view`` reads, resolved against its sources at ``frontier``."""
        try:
            plan = self.compile(view, frontier, built)
        except (LakehouseError, SqlParseError):  # the refresh reports these itself
            return {}
        return used_columns(plan.query, plan.sources)


def built_columns(sinks: ViewSinks) -> list[str] | None:
    """The columns of a view's sink tables (Iceberg first), or None before they exist."""
    if sinks.iceberg is not None:
        table = sinks.iceberg.table()
        if table is not None:
            return [f.name for f in table.schema().fields]
    if sinks.delta is not None:
        try:
            return [f.name for f in DeltaTable(sinks.delta.uri,
                                               storage_options=sinks.delta.storage_options)
                    .schema().fields]
        except TableNotFoundError:
            pass
    return None


def _key(frontier: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(frontier.items()))
