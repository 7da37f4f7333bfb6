"""Apply view deltas to an Iceberg v2 table through the REST catalog.

Every commit is one Iceberg snapshot whose summary carries the new frontier
(:data:`sinks.frontier.FRONTIER_KEY`) and the refresh state
(:data:`sinks.refresh_state.REFRESH_STATE_KEY`), so data and freshness land atomically; the
same commit sets them as table properties.

One interface, :meth:`IcebergSink.apply` (a view delta) and :meth:`IcebergSink.replace`
(a view's content), takes rows from either engine; where they are held picks the writer:

- Arrow (rows computed on the driver, or a DataFrame of at most ``arrow_max_rows`` rows,
  collected): pyiceberg writes the files and commits ONE catalog commit, which requires
  ``main`` to still be the snapshot :meth:`IcebergSink.frontier` read. Copy-on-write: only
  the data files holding deleted rows are read and rewritten (:mod:`sinks.iceberg_rewrite`).
  The delta, and the files it touches, must fit in the driver's memory.
- Spark (a larger DataFrame, or any with ``arrow_max_rows`` 0, engine ``spark``): a Spark
  ``MERGE``/write from the executors on a refresh branch, published to ``main`` under the
  same requirement (:mod:`sinks.iceberg_spark`); three catalog commits.

A compaction of the table (Spark's ``rewrite_data_files``: :mod:`lakehouse.maintenance`,
or any other writer's) commits a ``replace`` snapshot, which moves rows between files
without changing them and carries no frontier: the frontier of the table is that of the
newest snapshot under it that carries one (:func:`frontier_snapshot`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError
from pyiceberg.table import Table, TableProperties
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.refs import MAIN_BRANCH
from pyiceberg.table.snapshots import Operation, Snapshot
from pyiceberg.table.update import AssertRefSnapshotId, SetPropertiesUpdate
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from ivm import WEIGHT, collect_arrow
from sinks.arrow_zset import expanded, has_deletes
from sinks.errors import SinkError
from sinks.frontier import FRONTIER_KEY, Frontier, decode_frontier
from sinks.iceberg_rewrite import Rewrite, ScanPlanner, planned, rewrite_deleted
from sinks.iceberg_schema import arrow_schema, conformed
from sinks.iceberg_snapshot import NO_RETRIES, DataFileWriter, commit_snapshot
from sinks.iceberg_spark import SparkWriter
from sinks.refresh_state import RefreshStates, freshness_properties, now_ms

ARROW_MAX_ROWS = 1_000_000
"""Default: DataFrames of at most this many rows are collected and take the Arrow path."""

METADATA_CLEANUP = {TableProperties.METADATA_DELETE_AFTER_COMMIT_ENABLED: "true"}
"""Table property: the catalog deletes the metadata files that fall out of the table's
metadata log (its newest 100, ``write.metadata.previous-versions-max``) after each commit.
Iceberg's default keeps them all: a view refreshed every second wrote a metadata file a
second, never deleted (130 KB each on the soak benchmark)."""

KEPT_PROPERTIES = {**NO_RETRIES, **METADATA_CLEANUP}
"""Properties a refresh sets on a table created before them (one commit), before its own."""

TABLE_PROPERTIES = {
    "format-version": "2",
    "write.delete.mode": "copy-on-write",
    "write.update.mode": "copy-on-write",
    "write.merge.mode": "copy-on-write",
    **KEPT_PROPERTIES,
}
"""Copy-on-write keeps the view readable by every client, and its change feed exact; a
commit that lost a race is never re-applied on another head (:mod:`sinks.iceberg_snapshot`);
old metadata files are deleted (:data:`METADATA_CLEANUP`)."""


@dataclass(frozen=True)
class _Base:
    """The table as :meth:`IcebergSink.frontier` read it (None: no table yet)."""

    table: Table | None
    snapshot_id: int | None


class IcebergSink:
    """One view's Iceberg table.

    Args:
        spark: Session whose catalog ``catalog_name`` is the REST catalog (Spark path).
        catalog: The same REST catalog through pyiceberg.
        catalog_name: The Spark catalog name.
        identifier: ``namespace.table`` of the view.
        refresh_states: Builds the ``refresh-state`` of each commit from the view's
            sources (:class:`sinks.refresh_state.RefreshStates`); by default one that
            records no source state.
        arrow_max_rows: :meth:`apply`/:meth:`replace` collect DataFrames of at most this
            many rows and take the Arrow path; larger ones (and all, with 0) go through
            Spark.
        planner: Plans the scans of the table's files that a commit replaces (e.g. from
            manifest entries kept between refreshes); None: pyiceberg, from the manifests.
    """

    def __init__(self, spark: SparkSession, catalog: Catalog, catalog_name: str, identifier: str,
                 *, refresh_states: RefreshStates | None = None,
                 arrow_max_rows: int = ARROW_MAX_ROWS, planner: ScanPlanner | None = None):
        self.spark = spark
        self.catalog = catalog
        self.identifier = identifier
        self.table_name = f"{catalog_name}.{identifier}"
        self.refresh_states = refresh_states or RefreshStates({})
        self.arrow_max_rows = arrow_max_rows
        self.planner = planner
        self._catalog_name = catalog_name
        self._base: _Base | None = None
        self._started_ms: int | None = None

    def frontier(self) -> dict[str, int] | None:
        """The frontier of the table's current snapshot; None before the first commit.

        That of the newest snapshot carrying one, past compactions on top
        (:func:`frontier_snapshot`). The current snapshot read here is the base of this
        sink's next commit, which is refused if ``main`` moves in between; the call also
        marks the start of the refresh (the ``refresh-start-timestamp-ms`` of the refresh
        state).
        """
        self._started_ms = now_ms()
        try:
            table = self.catalog.load_table(self.identifier)
        except NoSuchTableError:
            self._base = _Base(None, None)
            return None
        snapshot = table.current_snapshot()
        self._base = _Base(table, snapshot.snapshot_id if snapshot is not None else None)
        return snapshot_frontier(frontier_snapshot(table.metadata, self._base.snapshot_id))

    def table(self) -> Table | None:
        """The table as :meth:`frontier` read it; None if absent.

        If :meth:`frontier` was not called, it is called now (which marks the refresh's
        start and the base of the next commit).
        """
        if self._base is None:
            self.frontier()
        assert self._base is not None
        return self._base.table

    def ensure_table(self, schema: StructType | pa.Schema) -> None:
        """Create the namespace and the table (Iceberg v2, every column optional) if absent.

        Free when :meth:`frontier` found the table; otherwise one ``loadTable`` (and the
        creation, the first time).

        Args:
            schema: The view's columns (Spark or Arrow schema, without ``_weight``).
        """
        if self._base is not None and self._base.table is not None:
            return
        namespace = self.identifier.rsplit(".", 1)[0]
        try:
            if not self.catalog.namespace_exists(namespace):  # creating one needs more rights
                self.catalog.create_namespace_if_not_exists(namespace)
            table = self.catalog.create_table_if_not_exists(
                self.identifier, schema=arrow_schema(schema), properties=TABLE_PROPERTIES)
        except Exception as error:  # catalog clients raise many types; report them as one
            raise SinkError(f"cannot create the table: {error}", table=self.identifier) from error
        if self._base is not None:
            self._base = _Base(table, self._base.snapshot_id)

    def apply(self, delta: pa.Table | DataFrame, key: Sequence[str] | None,
              frontier: Frontier, engine: str | None = None) -> None:
        """Apply a view delta in one snapshot carrying ``frontier``.

        Keyed views: every row whose key equals a delta row's key (NULL equals NULL) is
        deleted and the +1 rows are inserted. Multiset views: a row of weight -w deletes
        w copies, a row of weight +w inserts w copies. An empty delta still commits (an
        empty snapshot that advances the frontier). In Arrow, or a DataFrame of at most
        ``arrow_max_rows`` rows: one pyiceberg commit; a larger DataFrame: a Spark
        ``MERGE`` on a refresh branch, published if ``main`` did not move.

        Args:
            delta: Consolidated Z-set: the view's columns plus ``_weight`` (int64), as an
                Arrow table or a DataFrame; types are cast to the table's.
            key: The view's unique key, or None when rows have multiplicities.
            frontier: The source versions the table reflects after this commit.
            engine: The engine that computed the rows (``local``, ``spark``), recorded
                in the commit (:data:`sinks.frontier.ENGINE_KEY`).

        Raises:
            SinkError: Another refresh committed since :meth:`frontier`, the delta does not
                fit the table's schema, or the commit failed; the table is unchanged.
        """
        if not isinstance(delta, pa.Table):
            collected = self._collected(delta)
            if collected is None:
                self._spark_writer().apply(delta, key, self._properties(frontier, engine))
                return
            delta = collected
        table = self._commit_base()
        data = conformed(delta.drop_columns([WEIGHT]), table.schema(), self.identifier)
        data = data.append_column(WEIGHT, delta[WEIGHT].cast(pa.int64()))
        writer = DataFileWriter(table)

        def stage() -> Rewrite:
            if self._base_snapshot_id() is not None and (key is not None or has_deletes(data)):
                return rewrite_deleted(table, data, key, writer, inserts=expanded(data),
                                       planner=self.planner)
            return Rewrite([], writer.write(expanded(data)), 0)
        self._commit(table, writer, stage, self._properties(frontier, engine))

    def replace(self, rows: pa.Table | DataFrame, frontier: Frontier, engine: str | None = None
                ) -> None:
        """Replace the table's content by ``rows`` in one snapshot (full refresh).

        Arrow, or a DataFrame of at most ``arrow_max_rows`` rows: one pyiceberg commit; a
        larger DataFrame: a Spark overwrite on a refresh branch, published as by
        :meth:`apply`.

        Args:
            rows: The view's columns (cast to the table's types), in Arrow or Spark.
            frontier: The source versions the table reflects after this commit.
            engine: The engine that computed the rows (``local``, ``spark``), recorded
                in the commit (:data:`sinks.frontier.ENGINE_KEY`).

        Raises:
            SinkError: As :meth:`apply`.
        """
        if not isinstance(rows, pa.Table):
            collected = self._collected(rows)
            if collected is None:
                self._spark_writer().replace(rows, self._properties(frontier, engine))
                return
            rows = collected
        table = self._commit_base()
        data = conformed(rows, table.schema(), self.identifier)
        writer = DataFileWriter(table)

        def stage() -> Rewrite:
            removed = [task.file for task in planned(table, planner=self.planner)]
            return Rewrite(removed, writer.write(data), len(removed))
        self._commit(table, writer, stage, self._properties(frontier, engine))

    def _commit(self, table: Table, writer: DataFileWriter, stage: Callable[[], Rewrite],
                properties: dict[str, str]) -> None:
        """Write the data files (``stage``), then commit them with the freshness ``properties``.

        Raises:
            SinkError: Writing failed or the commit was refused (the files written are
                deleted), or the commit failed with an unknown outcome.
        """
        try:
            rewrite = stage()
        except Exception as error:  # IO and Arrow raise many types; report them as one
            writer.discard()
            raise SinkError(f"cannot write the data files: {error}",
                            table=self.identifier) from error
        try:
            snapshot_id = commit_snapshot(table, rewrite.removed, rewrite.added, properties)
        except CommitFailedException as error:
            writer.discard()
            raise SinkError(f"another refresh committed first (main moved from snapshot "
                            f"{self._base_snapshot_id()}); nothing published: {error}",
                            table=self.identifier) from error
        except Exception as error:  # the catalog may have applied it: keep the files
            raise SinkError(f"commit failed: {error}", table=self.identifier) from error
        self._base = _Base(table, snapshot_id)

    def _base_snapshot_id(self) -> int | None:
        return self._base.snapshot_id if self._base is not None else None

    def _commit_base(self) -> Table:
        """The table to commit on: as :meth:`frontier` read it, ``main`` unmoved since.

        Raises:
            SinkError: The table is missing, or ``main`` moved since :meth:`frontier`.
        """
        base = self._base
        table = base.table if base is not None else None
        if table is None:
            try:
                table = self.catalog.load_table(self.identifier)
            except NoSuchTableError as error:
                raise SinkError("no table; call ensure_table first",
                                table=self.identifier) from error
        head = _main_snapshot_id(table)
        if base is None:
            self._base = base = _Base(table, head)
        if head != base.snapshot_id:
            raise SinkError(f"another refresh committed first (main moved from snapshot "
                            f"{base.snapshot_id} to {head}); nothing published",
                            table=self.identifier)
        return self._with_kept_properties(table, head)

    def _with_kept_properties(self, table: Table, head: int | None) -> Table:
        """``table`` with :data:`KEPT_PROPERTIES` set (tables created before need one commit)."""
        if all(table.properties.get(k) == v for k, v in KEPT_PROPERTIES.items()):
            return table
        requirement = AssertRefSnapshotId.model_validate({"ref": MAIN_BRANCH, "snapshot-id": head})
        try:
            self.catalog.commit_table(table, (requirement,),
                                      (SetPropertiesUpdate(updates=KEPT_PROPERTIES),))
        except CommitFailedException as error:
            raise SinkError(f"another refresh committed first: {error}",
                            table=self.identifier) from error
        table = self.catalog.load_table(self.identifier)
        if _main_snapshot_id(table) != head:  # the commit below must assert the base, no other
            raise SinkError(f"another refresh committed first (main moved from snapshot {head})",
                            table=self.identifier)
        return table

    def _properties(self, frontier: Frontier, engine: str | None) -> dict[str, str]:
        state = self.refresh_states.state(frontier, self._started_ms)
        return freshness_properties(frontier, state, engine)

    def _collected(self, rows: DataFrame) -> pa.Table | None:
        """``rows`` in Arrow when they are at most ``arrow_max_rows`` (0: never), else None."""
        return collect_arrow(rows, self.arrow_max_rows) if self.arrow_max_rows else None

    def _spark_writer(self) -> SparkWriter:
        return SparkWriter(self.spark, self.catalog, self._catalog_name, self.identifier,
                           self._base_snapshot_id())


def _main_snapshot_id(table: Table) -> int | None:
    ref = table.metadata.refs.get(MAIN_BRANCH)
    return ref.snapshot_id if ref is not None else None



def is_compaction(snapshot: Snapshot) -> bool:
    """Whether ``snapshot`` is a compaction: a ``replace`` that carries no frontier.

    Iceberg table spec, "Snapshots": a ``replace`` snapshot's files were added and removed
    without changing the table's rows (``rewrite_data_files``, ``rewrite_manifests``).
    """
    summary = snapshot.summary
    return (summary is not None and summary.operation == Operation.REPLACE
            and FRONTIER_KEY not in summary.additional_properties)


def frontier_snapshot(metadata: TableMetadata, snapshot_id: int | None) -> Snapshot | None:
    """The snapshot whose frontier snapshot ``snapshot_id`` reflects.

    ``snapshot_id`` itself, or, when it is a compaction (:func:`is_compaction`), the newest
    ancestor under the compactions on top: they changed no row, so the table still
    reflects that snapshot's frontier.

    Args:
        metadata: The table's metadata.
        snapshot_id: A snapshot of the table (None: the table has none).

    Returns:
        The snapshot; None when ``snapshot_id`` is None or unknown, or when the walk
        reaches an expired parent (view-table maintenance keeps that snapshot:
        :mod:`lakehouse.maintenance`).
    """
    snapshot = metadata.snapshot_by_id(snapshot_id) if snapshot_id is not None else None
    while snapshot is not None and is_compaction(snapshot):
        parent = snapshot.parent_snapshot_id
        snapshot = metadata.snapshot_by_id(parent) if parent is not None else None
    return snapshot


def snapshot_frontier(snapshot: Snapshot | None) -> dict[str, int] | None:
    """The frontier ``snapshot``'s summary carries; None without one (or without a snapshot).

    Raises:
        ValueError: The summary holds a malformed frontier.
    """
    if snapshot is None or snapshot.summary is None:
        return None
    return decode_frontier(snapshot.summary.additional_properties.get(FRONTIER_KEY))
