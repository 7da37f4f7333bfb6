"""The running application: catalog service, Spark session, sources, plans and sinks."""

from __future__ import annotations

import shutil
import time
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import RestCatalog
from pyspark.sql import SparkSession

from catalog_api import CatalogSettings
from catalog_api.server import RunningServer, serve_in_thread
from ivm import SourceInput, ViewPlan, recompute
from lakehouse.catalog_client import catalog_answers, register_delta_copy
from lakehouse.config import Config, DeltaSource, Source, ViewConfig, ViewSource
from lakehouse.dag import refresh_order
from lakehouse.metrics import RefreshMetrics
from lakehouse.refresh import RefreshResult, ViewSinks, current_frontier, refresh_view
from lakehouse.schema_guard import SchemaGuard, built_columns
from lakehouse.sources.arrow_bridge import ArrowBridge
from lakehouse.sources.base import SourceReader
from lakehouse.sources.delta import DeltaSourceReader
from lakehouse.sources.iceberg import IcebergSourceReader
from lakehouse.spark.arrow import to_arrow
from lakehouse.spark.session import build_spark_session
from sinks.delta import DeltaSink
from sinks.iceberg import IcebergSink


def start_catalog(config: Config, port: int | None = None) -> RunningServer:
    """Start the embedded REST catalog in this process (``catalog.embedded``)."""
    config.warehouse_path.mkdir(parents=True, exist_ok=True)
    settings = CatalogSettings(warehouse=config.warehouse_uri, database_url=config.database_url)
    return serve_in_thread(settings, config.catalog.host,
                           config.catalog.port if port is None else port)


class Runtime(AbstractContextManager["Runtime"]):
    """Everything a tick needs, started once per process.

    Args:
        config: The validated configuration.
        start_embedded_catalog: Start the catalog service when the config says it is
            embedded (False when another process serves it).
    """

    def __init__(self, config: Config, *, start_embedded_catalog: bool = True):
        self.config = config
        for view in config.views:  # a cycle between views is refused before anything starts
            refresh_order(config, view)
        self.server: RunningServer | None = None
        if config.catalog.embedded and start_embedded_catalog and not catalog_answers(
                config.catalog_uri):
            self.server = start_catalog(config)
        self.catalog: Catalog = RestCatalog("lakehouse", uri=config.catalog_uri)
        self.spark: SparkSession = build_spark_session(
            app_name="lakehouse-freshness", master=config.spark.master,
            catalog_name=config.spark.catalog_name, catalog_uri=config.catalog_uri,
            warehouse=config.warehouse_uri, extra_conf=config.spark.conf,
            jars=[Path(j) for j in config.spark.jars] or None,
            jars_packages=config.spark.jars_packages,
        )
        # Iceberg's "Unclosed ResolvingFileIO" warnings print whole stack traces.
        self.spark.sparkContext.setLogLevel(config.spark.log_level)
        self.scratch_dir = config.warehouse_path / "_scratch"
        self.bridge = ArrowBridge(self.spark, self.scratch_dir)
        self.readers: dict[str, SourceReader] = {
            name: self._reader(name, source) for name, source in config.sources.items()
        }
        self._plans: dict[str, ViewPlan] = {}
        self.schemas = SchemaGuard(config, self.catalog)
        self.metrics = RefreshMetrics()
        self._listed_delta_copies: set[str] = set()

    def _reader(self, name: str, source: Source) -> SourceReader:
        if isinstance(source, DeltaSource):
            return DeltaSourceReader(self.bridge, name, source.delta)
        if isinstance(source, ViewSource):
            identifier, ref = source.view, "main"
        else:
            identifier, ref = source.iceberg, source.ref
        return IcebergSourceReader(self.spark, self.catalog, self.config.spark.catalog_name,
                                   name, identifier, ref=ref, bridge=self.bridge)

    def plan(self, view: ViewConfig) -> ViewPlan:
        """The compiled plan of ``view``, compiled once.

        It is compiled from metadata, against the sources' schemas at the view's frontier,
        and ``*`` keeps meaning the columns the sinks were built with
        (:meth:`lakehouse.schema_guard.SchemaGuard.compile`).

        Raises:
            ivm.SqlParseError: The view's SQL does not resolve against its sources.
            lakehouse.errors.SourceError: A source's table cannot be read.
            lakehouse.errors.RefreshError: The SQL yields columns the sinks lack.
        """
        if view.name not in self._plans:
            sinks = self.sinks(view)
            frontier = next((f for f in sinks.frontiers().values() if f), None)
            self._plans[view.name] = self.schemas.compile(view, frontier, built_columns(sinks))
        return self._plans[view.name]

    def sinks(self, view: ViewConfig) -> ViewSinks:
        """The configured sinks of ``view``."""
        iceberg = (IcebergSink(self.spark, self.catalog, self.config.spark.catalog_name, view.name)
                   if "iceberg" in view.sinks else None)
        delta = DeltaSink(self.delta_uri(view), app_id=f"lakehouse:{view.name}") if (
            "delta" in view.sinks) else None
        return ViewSinks(iceberg, delta)

    def recompute(self, view: ViewConfig) -> pa.Table:
        """The view computed in full from its sources' current versions.

        The oracle that every sink must equal after a refresh.

        Returns:
            The view's rows as Arrow (the view's columns).
        """
        plan = self.plan(view)
        frontier = current_frontier(self.readers, plan)
        inputs = {s: SourceInput(self.readers[s].snapshot(frontier.get(s))) for s in plan.sources}
        return to_arrow(recompute(plan, inputs))

    def delta_uri(self, view: ViewConfig) -> str:
        """Where the Delta copy of ``view`` lives: ``<warehouse>/delta/<namespace>/<table>``."""
        namespace, table = view.name.rsplit(".", 1)
        if self.config.warehouse_is_local:
            return str(self.config.warehouse_path / "delta" / namespace / table)
        return f"{self.config.warehouse.rstrip('/')}/delta/{namespace}/{table}"

    def refresh(self, view: ViewConfig) -> RefreshResult:
        """Run one tick of ``view`` now, after the views it reads.

        A view none of whose sources advanced is skipped.

        Raises:
            ivm.IvmError: The view's SQL does not compile.
            lakehouse.errors.ConfigError: Views read each other in a cycle.
            lakehouse.errors.RefreshError: A source or sink failed.
        """
        *upstream, _ = refresh_order(self.config, view)
        for before in upstream:
            self._refresh_one(before)
        return self._refresh_one(view)

    def _refresh_one(self, view: ViewConfig) -> RefreshResult:
        started_s = time.time()
        try:
            sinks = self.sinks(view)
            self.schemas.check(view, sinks)  # SchemaChangedError: the view stops
            result = refresh_view(view, self.plan(view), self.readers, sinks)
        except Exception:
            self.metrics.record_failure(view.name)
            raise
        finally:
            self.bridge.clear()
        self.metrics.record(result, started_s)
        if "delta" in result.sinks and view.name not in self._listed_delta_copies:
            location = self.delta_uri(view)
            if self.config.warehouse_is_local:
                location = Path(location).as_uri()
            register_delta_copy(self.config.catalog_uri, view.name, location)
            self._listed_delta_copies.add(view.name)
        return result

    def close(self) -> None:
        """Stop Spark and the embedded catalog; remove scratch files."""
        self.spark.stop()
        if self.server is not None:
            self.server.stop()
        shutil.rmtree(self.scratch_dir, ignore_errors=True)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()
