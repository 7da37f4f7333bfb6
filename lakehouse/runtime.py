"""The running application: catalog service, Spark session, sources, plans and sinks."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Collection, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, cast

import pyarrow as pa
import requests
from cachetools import TTLCache
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import RESTError
from pyiceberg.table.metadata import TableMetadata

from ivm import SourceInput, ViewPlan, local_refusal, recompute, referenced_sources
from lakehouse.catalog_client import (
    auth_config_error,
    catalog_mode,
    catalog_settings,
    connect_catalog,
    in_process_catalog,
    pipeline_credential,
    register_delta_copy,
    storage_properties,
)
from lakehouse.config import Config, DeltaSource, Source, ViewConfig, ViewSource
from lakehouse.dag import refresh_order
from lakehouse.errors import (
    ConfigError,
    HistoryError,
    LakehouseError,
    ListenError,
    RefreshError,
    SourceError,
)
from lakehouse.history import (
    SUSPENSION_TTL_S,
    HistoryRow,
    RefreshHistory,
    first_line,
    refreshed_from,
)
from lakehouse.history_writer import HistoryWriter
from lakehouse.metrics import RefreshMetrics
from lakehouse.reflected import VERSIONS_TTL_S, ReflectedFrontiers
from lakehouse.refresh import RefreshResult, ViewSinks, current_frontier, refresh_view
from lakehouse.schema_guard import SchemaGuard, built_columns
from lakehouse.slo import degraded_reason
from lakehouse.sources.arrow_bridge import ArrowBridge
from lakehouse.sources.base import SourceReader, pinned
from lakehouse.sources.column_cache import ColumnCache
from lakehouse.sources.delta import DeltaSourceReader
from lakehouse.sources.iceberg import IcebergSourceReader
from lakehouse.sources.manifest_cache import ManifestCache
from lakehouse.spark.arrow import to_arrow
from lakehouse.spark.lazy import LazySession
from lakehouse.spark.session import build_spark_session
from lakehouse.state_store import StateStore
from lakehouse.storage import delta_options, storage_s3, warehouse_folder
from lakehouse.storage_probe import prepare_warehouse
from lakehouse.view_state import ViewStates
from sinks.delta import DeltaSink
from sinks.delta_tables import DeltaTables
from sinks.iceberg import ARROW_MAX_ROWS, IcebergSink
from sinks.refresh_state import RefreshStates, SourceTable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from catalog_api.in_process import InProcessCatalog
    from catalog_api.server import RunningServer
    from lakehouse.maintenance import MaintenanceResult

log = logging.getLogger(__name__)


def start_catalog(config: Config, port: int | None = None) -> RunningServer:
    """Start the embedded REST catalog in this process (``catalog.embedded``).

    It serves the pipeline's routes too (:mod:`lakehouse.routes`).

    Args:
        config: The validated configuration; the catalog listens on ``catalog.listen``.
        port: A port instead of ``catalog.listen``'s (0: a free one).

    Returns:
        The running server; stop it when done.

    Raises:
        lakehouse.errors.ListenError: The address cannot be bound (it is taken, for one), or
            it is not loopback and ``catalog.auth`` is off.
        lakehouse.errors.StorageError: The warehouse's storage cannot be used.
        ConfigError: A secret of ``catalog.auth`` cannot be read.
    """
    # The web app and its errors are imported only when serving.
    from catalog_api.errors import ListenError as CatalogListenError
    from catalog_api.security import AuthSetupError

    prepare_warehouse(config)
    try:
        from catalog_api.server import serve_in_thread
        from lakehouse.served import pipeline_routers

        return serve_in_thread(catalog_settings(config), config.catalog.host,
                               config.catalog.port if port is None else port,
                               routers=pipeline_routers(config))
    except AuthSetupError as error:
        raise auth_config_error(error) from None
    except CatalogListenError as error:
        raise ListenError(f"{error.host}:{error.port}", error.reason,
                          key="catalog.listen") from None


def _source_table(source: Source) -> SourceTable:
    if isinstance(source, DeltaSource):
        return SourceTable(delta=source.delta)
    if isinstance(source, ViewSource):
        return SourceTable(iceberg=source.view)
    return SourceTable(iceberg=source.iceberg, ref=source.ref)


class Runtime(AbstractContextManager["Runtime"]):
    """Everything a tick needs, started once per process.

    Scratch files (Arrow tables handed to Spark) go to a folder of this process under
    ``<warehouse>/_scratch``, on the warehouse's storage, so executors on other machines
    read them too. Spark starts when a tick first needs it (:class:`LazySession`): a tick
    the local engine runs from a stored aggregate state starts no JVM.

    The catalog is the one ``catalog.uri`` serves; when it is the embedded one and no
    process serves it, it runs in this process (:func:`in_process_catalog`: no web service,
    no port), unless ``serve_catalog`` asks for the service or ``catalog.auth`` is on (the
    service then checks the pipeline's credential). Spark's Iceberg client speaks
    REST only: a tick that starts Spark then starts the service on a free loopback port.

    Args:
        config: The validated configuration.
        serve_catalog: Serve the embedded catalog (``catalog.listen``) while the runtime
            runs, when no process serves it: ``lakehouse run`` and the demo, whose
            catalog other clients query meanwhile.
        catalog: The catalog client to use instead
            (:func:`lakehouse.catalog_client.read_catalog` for a command that only reads).

    Raises:
        lakehouse.errors.StorageError: The warehouse's storage cannot be used.
    """

    def __init__(self, config: Config, *, serve_catalog: bool = False,
                 catalog: Catalog | None = None):
        self.config = config
        for view in config.views:  # a cycle between views is refused before anything starts
            refresh_order(config, view)
        prepare_warehouse(config)  # before the catalog and Spark meet a missing bucket
        self.server: RunningServer | None = None
        self._in_process: InProcessCatalog | None = None
        self.credential = pipeline_credential(config)
        with ExitStack() as undo:  # what is started here stops if the rest fails
            mode = catalog_mode(config, serve_catalog) if catalog is None else "remote"
            if mode == "serve":
                self.server = start_catalog(config)
                undo.callback(self.server.stop)
            elif mode == "in_process":
                catalog = self._in_process = in_process_catalog(config)
                undo.callback(self._in_process.close)
            self.catalog: Catalog = catalog or connect_catalog(
                config.catalog_uri, self.credential, storage_properties(config))
            self._build()
            undo.pop_all()

    def _build(self) -> None:
        """The readers, caches, state, history and metrics over the open catalog."""
        config = self.config
        self.session = LazySession(self._start_spark)
        self.spark = cast("SparkSession", self.session)  # started by the first tick needing it
        self.bridge = ArrowBridge(self.spark,
                                  warehouse_folder(config, "_scratch", uuid.uuid4().hex))
        self.column_cache = ColumnCache(config.column_cache_bytes)
        self.manifest_cache = ManifestCache()
        self.delta_tables = DeltaTables()
        self.readers: dict[str, SourceReader] = {
            name: self._reader(name, source) for name, source in config.sources.items()
        }
        self.reflected = ReflectedFrontiers(self.readers)
        self._view_sources = {name: source.view for name, source in config.sources.items()
                              if isinstance(source, ViewSource)}
        self._plans: dict[str, ViewPlan] = {}
        self._refresh_states: dict[str, RefreshStates] = {}
        self.schemas = SchemaGuard(config, self.catalog, iceberg_metadata=self._metadata)
        self.metrics = RefreshMetrics(targets_s={
            view.name: view.target_lag_s for view in config.views
            if view.target_lag_s is not None})
        self._listed_delta_copies: set[str] = set()
        self.states = ViewStates(StateStore(warehouse_folder(config, "_state"), self.spark))
        self.history = (RefreshHistory(self.catalog, config.history_table,
                                       config.history_retain_for_s)
                        if config.history_table else None)
        self.history_writer = HistoryWriter(self.history) if self.history else None
        self.metrics.watch_memory({"arrow_pool": pa.total_allocated_bytes,
                                   "column_cache": lambda: self.column_cache.size_bytes,
                                   "view_states": lambda: self.states.driver_bytes})
        self._suspended: TTLCache[str, dict[str, str]] = TTLCache(1, SUSPENSION_TTL_S)
        self._last_failure: dict[str, str] = {}
        self._suspension_error = ""
        self._lock = threading.RLock()  # the compiled plans, refresh states and suspensions
        self._view_locks = {view.name: threading.Lock() for view in config.views}

    def _start_spark(self) -> SparkSession:
        """Start the Spark session of the pipeline (:class:`LazySession` calls it once).

        Raises:
            lakehouse.errors.ListenError: The catalog service, needed by Spark's REST
                client when the catalog runs in this process, cannot listen.
        """
        config = self.config
        spark = build_spark_session(
            app_name="lakehouse-freshness", master=config.spark.master,
            catalog_name=config.spark.catalog_name, catalog_uri=self._spark_catalog_uri(),
            catalog_credential=self.credential,
            warehouse=config.warehouse_uri, extra_conf=config.spark.conf,
            jars=[Path(j) for j in config.spark.jars] or None,
            jars_packages=config.spark.jars_packages, s3=storage_s3(config),
            niceness=config.spark.niceness,
        )
        # Iceberg's "Unclosed ResolvingFileIO" warnings print whole stack traces.
        spark.sparkContext.setLogLevel(config.spark.log_level)
        return spark

    def _spark_catalog_uri(self) -> str:
        """The REST URI Spark reaches the catalog at (the service is started if it runs here)."""
        if isinstance(self.catalog, RestCatalog) or not self.config.catalog.embedded:
            return self.config.catalog_uri
        if self.server is None:
            self.server = start_catalog(self.config, port=0)
        return self.server.uri

    def _reader(self, name: str, source: Source) -> SourceReader:
        if isinstance(source, DeltaSource):
            return DeltaSourceReader(self.spark, name, source.delta,
                                     storage_options=delta_options(self.config, source.delta),
                                     bridge=self.bridge)
        if isinstance(source, ViewSource):
            identifier, ref = source.view, "main"
        else:
            identifier, ref = source.iceberg, source.ref
        return IcebergSourceReader(self.spark, self.catalog, self.config.spark.catalog_name,
                                   name, identifier, ref=ref, bridge=self.bridge,
                                   cache=self.column_cache, manifests=self.manifest_cache)

    def _metadata(self, name: str) -> TableMetadata:
        """Iceberg source ``name``'s current metadata, as its reader has it.

        During a tick, the metadata the tick pinned: no catalog round trip.
        """
        reader = self.readers[name]
        if not isinstance(reader, IcebergSourceReader):
            raise SourceError("not an Iceberg table", source=name)
        return reader.metadata()

    def plan(self, view: ViewConfig) -> ViewPlan:
        """The compiled plan of ``view``, compiled once.

        It is compiled from metadata, against the sources' schemas at the view's frontier,
        and ``*`` keeps meaning the columns the sinks were built with
        (:meth:`lakehouse.schema_guard.SchemaGuard.compile`).

        Raises:
            ivm.SqlParseError: The view's SQL does not resolve against its sources.
            lakehouse.errors.SourceError: A source's table cannot be read.
            lakehouse.errors.RefreshError: The SQL yields columns the sinks lack.
            lakehouse.errors.ConfigError: The view's engine is ``local`` and the local
                engine cannot take its plan (the reason is named).
        """
        with self._lock:  # compiled once, by the first thread asking
            return self._compiled(view)

    def _compiled(self, view: ViewConfig) -> ViewPlan:
        if view.name not in self._plans:
            sinks = self.sinks(view)
            frontier = next((f for f in sinks.frontiers().values() if f), None)
            sinks.release()
            keys = {name: key for name in referenced_sources(view.sql) & set(self.readers)
                    if (key := self.source_key(name))}
            plan = self.schemas.compile(view, frontier, built_columns(sinks), keys)
            refused = local_refusal(plan) if self.config.view_engine(view) == "local" else None
            if refused is not None:
                index = self.config.views.index(view)
                raise ConfigError(f"the local engine cannot run view {view.name}: {refused}",
                                  key=f"views.{index}.engine")
            self._plans[view.name] = plan
        return self._plans[view.name]

    def source_key(self, name: str) -> tuple[str, ...] | None:
        """The primary key of source ``name``, or None.

        The config's ``key``, else the table's Iceberg identifier fields, else (for a view
        read as a source) that view's key.
        """
        source = self.config.sources[name]
        if isinstance(source, ViewSource):
            return self.plan(self.config.view(source.view)).key
        if source.key is not None:
            return tuple(source.key)
        reader = self.readers[name]
        return reader.identifier_fields() if isinstance(reader, IcebergSourceReader) else None

    def sinks(self, view: ViewConfig) -> ViewSinks:
        """The configured sinks of ``view``; their commits record its sources' refresh state."""
        states = self.refresh_states(view)
        # engine spark: nothing collected to the driver, the sink is written from executors
        collect = 0 if self.config.view_engine(view) == "spark" else ARROW_MAX_ROWS
        iceberg = (IcebergSink(self.spark, self.catalog, self.config.spark.catalog_name, view.name,
                               refresh_states=states, arrow_max_rows=collect,
                               planner=self.manifest_cache)
                   if "iceberg" in view.sinks else None)
        uri = self.delta_uri(view)
        delta = (DeltaSink(uri, app_id=f"lakehouse:{view.name}",
                           storage_options=delta_options(self.config, uri),
                           refresh_states=states, spark=self.spark, tables=self.delta_tables)
                 if "delta" in view.sinks else None)
        return ViewSinks(iceberg, delta)

    def refresh_states(self, view: ViewConfig) -> RefreshStates:
        """Where the sources of ``view`` live, for the ``refresh-state`` of its commits."""
        with self._lock:
            if view.name not in self._refresh_states:
                tables = {name: _source_table(self.config.sources[name])
                          for name in referenced_sources(view.sql) & set(self.config.sources)}
                self._refresh_states[view.name] = RefreshStates(tables, self.catalog)
            return self._refresh_states[view.name]

    def recompute(self, view: ViewConfig) -> pa.Table:
        """The view computed in full from its sources' current versions.

        The oracle that every sink must equal after a refresh.

        Returns:
            The view's rows as Arrow (the view's columns).
        """
        plan = self.plan(view)
        frontier = current_frontier(self.readers, plan.sources)
        inputs = {s: SourceInput(self.readers[s].snapshot(frontier.get(s))) for s in plan.sources}
        return to_arrow(recompute(plan, inputs))

    def delta_uri(self, view: ViewConfig) -> str:
        """Where the Delta copy of ``view`` lives (:meth:`Config.delta_uri`)."""
        return self.config.delta_uri(view)

    def refresh(self, view: ViewConfig, *, full: bool = False, manual: bool = False,
                poll: bool = False) -> RefreshResult:
        """Run one tick of ``view`` now, after the views it reads.

        The tick holds ``view`` and the views upstream of it: a tick of another view
        sharing any of them, on another thread, waits for it. A view none of whose
        sources advanced is skipped. A suspended view
        (:meth:`suspended`) is skipped unless ``manual``; a suspended view that ``view``
        reads is not refreshed first: ``view`` reads its table as it stands.

        Args:
            view: The view.
            full: Recompute ``view`` in full and replace its sinks' content
                (:func:`lakehouse.refresh.refresh_view`); the views it reads refresh as
                usual.
            manual: Asked for now by a user (``lakehouse refresh``) rather than by the
                schedule: runs even when ``view`` is suspended.
            poll: A tick of the schedule: a view whose sinks a full check of this process
                saw at the sources' current versions in the last 30 s is skipped without
                reading its sinks (for ``on_change`` views, versions read at most
                :data:`lakehouse.reflected.VERSIONS_TTL_S` ago by any view's poll;
                :mod:`lakehouse.reflected`).

        Raises:
            ivm.IvmError: The view's SQL does not compile.
            lakehouse.errors.ConfigError: Views read each other in a cycle.
            lakehouse.errors.RefreshError: A source or sink failed.
        """
        suspended = self.suspended()
        if view.name in suspended and not manual:
            return RefreshResult(view.name, "skipped", {},
                                 reason=f"suspended since {suspended[view.name]}")
        *upstream, _ = order = refresh_order(self.config, view)
        with self._holding(order):
            for before in upstream:
                if before.name not in suspended:
                    self._refresh_one(before, poll=poll)
            return self._refresh_one(view, full, poll=poll)

    def maintain(self, view: ViewConfig) -> MaintenanceResult:
        """Compact ``view``'s tables and expire the snapshots nothing holds, holding the view.

        :func:`lakehouse.maintenance.maintain`, never beside a tick of the view (it waits
        for one in flight).

        Raises:
            lakehouse.errors.MaintenanceError: A step failed (what committed before it
                stands).
        """
        from lakehouse.maintenance import maintain

        with self._holding([view]):
            self._spark_pool(view, "maintain")
            return maintain(self, view)

    @contextmanager
    def _holding(self, views: list[ViewConfig]) -> Iterator[None]:
        """Hold the lock of every view of ``views`` (taken in name order: no deadlock)."""
        with ExitStack() as stack:
            for name in sorted({view.name for view in views}):
                stack.enter_context(self._view_locks[name])
            yield

    def suspended(self) -> dict[str, str]:
        """The suspended views, each with when it was suspended (ISO 8601).

        Read from the history table at most every :data:`lakehouse.history.SUSPENSION_TTL_S`;
        none without a history table, or when it cannot be loaded (logged: the schedule
        goes on).
        """
        if self.history is None:
            return {}
        with self._lock:  # a TTLCache is not thread-safe
            return self._suspended_views(self.history)

    def _suspended_views(self, history: RefreshHistory) -> dict[str, str]:
        views = self._suspended.get("views")
        if views is None:
            try:
                views = history.suspended()
            except HistoryError as error:  # no history (not granted, unreachable): no view
                if str(error) != self._suspension_error:  # is taken to be suspended
                    log.warning("%s; refreshing every view", error)  # (once per error)
                    self._suspension_error = str(error)
                views = {}
            self._suspended["views"] = views
            self.metrics.set_suspended(views)
        return views

    def _refresh_one(self, view: ViewConfig, full: bool = False, *,
                     poll: bool = False) -> RefreshResult:
        """One tick of ``view`` alone (a ``poll`` may skip it: :mod:`lakehouse.reflected`)."""
        started_s = time.time()
        before: Mapping[str, int] | None = None
        try:  # the tick loads each source's metadata from the catalog once
            sources = self._sources(view)
            reflected = (self.reflected.unchanged(view.name, sources, _versions_age_s(view))
                         if poll and not full else None)
            if reflected is not None:  # no source moved: skipped without reading the sinks
                result = RefreshResult(view.name, "skipped", reflected.frontier,
                                       duration_s=time.time() - started_s)
                self.metrics.record(result, reflected.as_of_s)
                return result
            self._spark_pool(view)  # py4j calls: not for a skipped poll
            with pinned(self.readers[name] for name in sources):
                sinks = self.sinks(view)
                committed = sinks.frontiers()  # read once per tick: a catalog round trip each
                target = current_frontier(self.readers, sources)
                before = refreshed_from(committed, target)
                self.schemas.check(view, sinks, committed)  # SchemaChangedError: view stops
                backfill = full or None in committed.values()  # an initial load, or asked for
                with self.metrics.backfilling(view.name, backfill):
                    result = refresh_view(view, self.plan(view), self.readers, sinks,
                                          self.states, committed, target,
                                          self.config.driver_read_max_rows,
                                          self.config.view_engine(view), full)
                sinks.release()  # not after a failure: the next tick loads the tables anew
        except Exception as error:
            self.reflected.forget(view.name)
            self.metrics.record_failure(view.name, degraded_reason(error))
            self._record_failure(view, started_s, before, error)
            if isinstance(error, RefreshError):  # its other sink's commit may have landed
                self._list_delta_copy(view, error.committed)
            raise
        finally:
            self.bridge.clear()
        self.reflected.record(view.name, result.frontier, started_s)
        if result.mode != "skipped":  # the views reading this one: their source moved
            self.reflected.moved(name for name, upstream in self._view_sources.items()
                                 if upstream == view.name)
        self.metrics.record(result, started_s)
        if result.mode != "skipped":
            self._last_failure.pop(view.name, None)
            self._record(HistoryRow.of(result, _utc(started_s), before))
        self._list_delta_copy(view, result.sinks)
        return result

    def _list_delta_copy(self, view: ViewConfig, committed: Collection[str]) -> None:
        """List the view's Delta copy in the catalog, once per process.

        Only once ``committed`` (the sink kinds a refresh committed to, even one that
        failed) names it. The commit stands by then: a refusal is logged, not raised, and
        the listing is tried again after the next refresh.
        """
        if "delta" not in committed or view.name in self._listed_delta_copies:
            return
        location = self.delta_uri(view)
        if self.config.warehouse_is_local:
            location = Path(location).as_uri()
        try:
            register_delta_copy(self.catalog, view.name, location, self.credential)
        except (requests.RequestException, RESTError, LakehouseError) as error:
            log.warning("%s: its Delta copy is not listed in the catalog (tried again after "
                        "the next refresh): %s", view.name, first_line(error))
            return
        self._listed_delta_copies.add(view.name)

    def _spark_pool(self, view: ViewConfig, job: str = "refresh") -> None:
        """Run this thread's Spark jobs in the view's own FAIR pool, if Spark runs.

        With ``spark.scheduler.mode`` FAIR (the default here), ticks of several views
        share the executors instead of queueing behind each other's stages. A tick that
        starts Spark runs in the default pool (setting a pool would start it).
        """
        if self.session.started:
            context = self.spark.sparkContext
            context.setLocalProperty("spark.scheduler.pool", view.name)
            context.setJobGroup(view.name, f"{job} {view.name}")  # the progress bar's tasks

    def _record_failure(self, view: ViewConfig, started_s: float,
                        before: Mapping[str, int] | None, error: Exception) -> None:
        """Record a failed refresh, unless it repeats the view's previous failure.

        A view that keeps failing the same way (a missing source, polled five times a
        second) is recorded once until a refresh succeeds or the error changes.
        """
        row = HistoryRow.failed(view.name, _utc(started_s), time.time() - started_s,
                                before, error)
        if self._last_failure.get(view.name) != row.error:
            self._last_failure[view.name] = row.error or ""
            self._record(row)

    def _record(self, row: HistoryRow) -> None:
        """Queue ``row`` for the history (appended off the refresh's path)."""
        if self.history_writer is not None:
            self.history_writer.record(row)

    def _sources(self, view: ViewConfig) -> list[str]:
        """The sources ``view`` reads (those its plan has, once compiled)."""
        if view.name in self._plans:
            return list(self._plans[view.name].sources)
        return sorted(referenced_sources(view.sql) & set(self.readers))

    def close(self) -> None:
        """Stop the history (once its queue is appended), Spark, the embedded catalog.

        Spark stops if a tick started it; scratch files are removed.
        """
        if self.history_writer is not None:
            self.history_writer.close()
        self.session.stop()
        if self.server is not None:
            self.server.stop()
        if self._in_process is not None:
            self._in_process.close()
        with contextlib.suppress(OSError):  # scratch left behind is no reason to fail
            self.bridge.remove()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


def _versions_age_s(view: ViewConfig) -> float:
    """How old a source's version read by another view's poll may be for ``view``'s poll."""
    return VERSIONS_TTL_S if view.every == "on_change" else 0.0


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)
