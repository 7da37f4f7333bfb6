"""Iceberg sources read by Spark through the REST catalog.

The change feed is computed from the table's metadata, snapshot by snapshot, for every
kind of commit (append, overwrite, copy-on-write and merge-on-read delete/update/MERGE,
position and equality deletes; replace is skipped): :mod:`lakehouse.sources.iceberg_files`
finds the data files whose live rows changed, and the change is the rows of those files
at the new snapshot (+1) minus their rows at the old snapshot (-1), consolidated. Rows of
files nobody touched are the same on both sides and are never read. With a bridge, that
difference is computed in Arrow (:mod:`lakehouse.sources.iceberg_feed`: deleted positions
only for merge-on-read deletes, a row-hash difference otherwise) and Spark gets only it;
otherwise (engine ``spark``, equality deletes) the executors read those files
(:mod:`lakehouse.sources.iceberg_staged`) and Spark computes it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial

import pyarrow as pa
from cachetools import LRUCache
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.table import FileScanTask, Table
from pyiceberg.table.metadata import TableMetadata
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from ivm import DRIVER_DELTA_MAX_ROWS, WEIGHT, KeyValues, consolidate, with_weight
from lakehouse.errors import SourceError
from lakehouse.sources.arrow_bridge import ArrowBridge
from lakehouse.sources.base import ChangeFeed, aligned, projected
from lakehouse.sources.column_cache import ColumnCache
from lakehouse.sources.iceberg_feed import arrow_change_feed, scan_tasks
from lakehouse.sources.iceberg_files import ChangedFiles, changed_files
from lakehouse.sources.iceberg_keys import rows_for_keys
from lakehouse.sources.iceberg_lineage import lineage
from lakehouse.sources.iceberg_spark_feed import staged_change
from lakehouse.sources.manifest_cache import ManifestCache
from lakehouse.sources.row_counts import iceberg_row_count

log = logging.getLogger(__name__)

SNAPSHOTS_KEPT = 4
"""Snapshot DataFrames a reader keeps resolved (a tick reads the old and the new one)."""


class _Pin(threading.local):
    """One thread's pin of a reader's metadata (:meth:`IcebergSourceReader.pinned`).

    Attributes:
        count: How many ``pinned`` blocks of this thread are open.
        table: The metadata loaded in the outermost one, once loaded.
    """

    count = 0
    table: Table | None = None


class IcebergSourceReader:
    """Read one Iceberg table as snapshots and change feeds.

    Args:
        spark: A session whose catalog ``catalog_name`` is the REST catalog.
        catalog: The same catalog through pyiceberg, for cheap metadata reads.
        catalog_name: The Spark catalog name.
        name: The source's name in the config.
        identifier: ``namespace.table``.
        ref: The branch or tag whose head is the current version.
        bridge: When given, a change feed may be computed in Arrow on the driver
            (pyiceberg reads the changed files) and handed to Spark through it; otherwise
            the executors read the changed files (:mod:`lakehouse.sources.iceberg_staged`).
        cache: Decoded row groups of data files kept between ticks, shared by the
            readers of a pipeline (None: none kept).
        manifests: Decoded manifest entries kept between ticks, shared likewise (None:
            every plan decodes its manifests).
        arrow_max_rows: Most rows the driver reads to compute a change in Arrow (by the
            manifests' record counts); a larger change is computed by Spark, so the
            driver holds at most this many.
    """

    def __init__(
        self, spark: SparkSession, catalog: Catalog, catalog_name: str, name: str, identifier: str,
        *, ref: str = "main", bridge: ArrowBridge | None = None,
        cache: ColumnCache | None = None, manifests: ManifestCache | None = None,
        arrow_max_rows: int = DRIVER_DELTA_MAX_ROWS,
    ):
        self.spark = spark
        self.catalog = catalog
        self.name = name
        self.identifier = identifier
        self.table_name = f"{catalog_name}.{identifier}"
        self.ref = ref
        self.bridge = bridge
        self.cache = cache
        self.manifests = manifests
        self.arrow_max_rows = arrow_max_rows
        self._snapshots: LRUCache[int, DataFrame] = LRUCache(SNAPSHOTS_KEPT)
        self._tasks: LRUCache[int, dict[str, FileScanTask]] = LRUCache(SNAPSHOTS_KEPT)
        self._lock = threading.Lock()  # the caches above, shared by concurrent ticks
        self._recent: Table | None = None  # the metadata last loaded, by any thread
        self._pin = _Pin()

    def _table(self) -> Table:
        """The table's current metadata: loaded now, or once while :meth:`pinned`."""
        pin = self._pin
        if pin.count and pin.table is not None:
            return pin.table
        try:
            table = self._recent = self.catalog.load_table(self.identifier)
        except NoSuchTableError:
            raise SourceError(f"no Iceberg table {self.identifier!r}", source=self.name) from None
        if pin.count:
            pin.table = table
        return table

    def _table_with(self, version: int) -> Table:
        """The table as last loaded if its metadata has snapshot ``version``, else reloaded.

        A snapshot never changes: a tick's partner reads reuse the metadata its change
        feed loaded instead of a catalog round trip each.
        """
        recent = self._recent
        if recent is not None and recent.metadata.snapshot_by_id(version) is not None:
            return recent
        return self._table()

    def _scan_tasks(self, table: Table, version: int, paths: Collection[str] | None = None
                    ) -> Mapping[str, FileScanTask]:
        """Snapshot ``version``'s scan tasks by data file path, of ``paths`` (None: all).

        A snapshot never changes: its whole plan, once made (for a partner read, or a
        change feed without the changed files), is kept, with those of the last few
        snapshots. Planning costs about 20 microseconds a data file with the manifests'
        entries kept (:mod:`lakehouse.sources.manifest_cache`), so a change feed, which
        reads the few data files its commits changed, plans only those unless the whole
        plan is kept: a tick's cost then does not grow with the source's files.
        """
        with self._lock:
            found = self._tasks.get(version)
        if found is not None:
            return found if paths is None else {p: found[p] for p in paths if p in found}
        if paths is not None:
            return scan_tasks(table, version, self.manifests, paths)
        found = scan_tasks(table, version, self.manifests)
        with self._lock:
            self._tasks[version] = found
        return found

    def identifier_fields(self) -> tuple[str, ...] | None:
        """The table's Iceberg identifier fields (its primary key), or None when it has none.

        Raises:
            SourceError: The table does not exist.
        """
        schema = self._table().schema()
        names = [schema.find_column_name(i) for i in sorted(schema.identifier_field_ids)]
        return tuple(n for n in names if n is not None) or None

    def metadata(self) -> TableMetadata:
        """The table's current metadata (loaded once while :meth:`pinned`).

        Raises:
            SourceError: The table does not exist.
        """
        return self._table().metadata

    @contextmanager
    def pinned(self) -> Iterator[None]:
        """Within, the table's metadata is loaded from the catalog once, on first use.

        A tick reads its sources' current versions, checks their schemas, plans scans
        and computes change feeds from the same metadata, instead of a catalog round
        trip (and a parse of the metadata) for each. The pin is the calling thread's:
        ticks of other views running at once on other threads each load their own.
        """
        pin = self._pin
        if not pin.count:
            pin.table = None
        pin.count += 1
        try:
            yield
        finally:
            pin.count -= 1

    def current_version(self) -> int | None:
        """The snapshot id at the head of the reader's ref (None when the table has none).

        Raises:
            SourceError: The table does not exist, or has snapshots but no such ref.
        """
        metadata = self._table().metadata
        ref = metadata.refs.get(self.ref)
        if ref is not None:
            return ref.snapshot_id
        if self.ref == "main" and not metadata.snapshots:
            return None
        raise SourceError(f"table {self.identifier!r} has no branch or tag {self.ref!r}",
                          source=self.name)

    def snapshot(self, version: int | None) -> DataFrame:
        """The table's rows at snapshot ``version`` (time travel).

        A snapshot never changes, so its DataFrame is resolved once (each resolution is a
        catalog round trip from the JVM) and kept for the last few versions asked for.
        """
        if version is None:
            return self.spark.table(self.table_name).limit(0)
        with self._lock:
            frame = self._snapshots.get(version)
        if frame is None:
            frame = self.spark.read.option("snapshot-id", str(version)).table(self.table_name)
            with self._lock:
                self._snapshots[version] = frame
        return frame

    def schema_key(self, version: int) -> Hashable:
        """The table's uuid, the snapshot's schema id and the current schema id.

        Both ids: a Spark time-travel read resolves one of the two.

        Raises:
            SourceError: The table does not exist.
        """
        table = self._table_with(version)
        snapshot = table.metadata.snapshot_by_id(version)
        current = table.metadata.current_schema_id
        if snapshot is not None and snapshot.schema_id is not None:
            return (str(table.metadata.table_uuid), snapshot.schema_id, current)
        return (str(table.metadata.table_uuid), _snapshot_schema(table, version).model_dump_json(),
                current)

    def change_feed(self, old: int | None, new: int,
                    columns: Collection[str] | None = None, *,
                    in_arrow: bool = True) -> ChangeFeed:
        """The change between two snapshots as a consolidated Z-set.

        Args:
            old: The snapshot the change starts after (None: before the first one).
            new: The snapshot the change ends at.
            columns: Read only these columns (those a view uses); None or a name the
                table lacks: every column.
            in_arrow: Whether the change may be computed in Arrow on the driver; False
                (engine ``spark``) has the executors read the changed files
                (:mod:`lakehouse.sources.iceberg_staged`) and the driver no row.

        Returns:
            The table's columns at ``new`` (or ``columns``) plus ``_weight`` (int64);
            computed in Arrow (``ChangeFeed.arrow``) when ``in_arrow``, the reader has a
            bridge, neither snapshot has equality deletes and the files to read hold at
            most :attr:`arrow_max_rows` rows; else by Spark and materialized on the
            executors.

        Raises:
            SnapshotExpiredError: ``old`` was expired; only a full refresh can catch up.
            SourceError: The table or ``new`` does not exist.
        """
        if old is None:
            return self._whole(new, columns)
        if old == new:
            return self._empty(new, projected(self.snapshot(new).schema.names, columns))
        table = self._table()  # fresh (once per tick): ``old`` may have been expired since
        at_new = _snapshot_schema(table, new)
        names = projected([f.name for f in at_new.fields], columns)
        changed = self._changed_files(table, old, new)
        if changed is not None and not changed.paths:
            return self._empty(new, names)
        if in_arrow and self.bridge is not None and not (_has_equality_deletes(table, old)
                                                         or _has_equality_deletes(table, new)):
            rows = self._arrow_feed(table, old, new, changed, at_new.select(*names),
                                    self.arrow_max_rows)
            if rows is not None:
                return self._bridged(new, names, rows)
        return self._spark_feed(old, new, changed, at_new.select(*names),
                                table.schema().column_names)

    def arrow_change(self, old: int | None, new: int,
                     columns: Collection[str] | None = None) -> pa.Table:
        """The change between two snapshots as a consolidated Z-set, in Arrow, without Spark.

        What :meth:`change_feed` computes in Arrow, for a reader with no Spark at hand (a
        subscriber of a view, :mod:`lakehouse.subscriptions`): ``old`` None reads the whole
        snapshot ``new`` (weight 1), with pyiceberg.

        Returns:
            The table's columns at ``new`` (or ``columns``) plus ``_weight`` (int64).

        Raises:
            SnapshotExpiredError: ``old`` was expired.
            SourceError: The table or a snapshot does not exist, or a snapshot has
                equality deletes (which pyiceberg does not apply).
        """
        table = self._table()
        schema = _snapshot_schema(table, new)
        at_new = schema.select(*projected([f.name for f in schema.fields], columns))
        if _has_equality_deletes(table, new) or (
                old is not None and _has_equality_deletes(table, old)):
            raise SourceError("a snapshot has equality deletes, which only Spark applies",
                              source=self.name)
        if old is None:
            rows = table.scan(snapshot_id=new, selected_fields=tuple(at_new.column_names)
                              ).to_arrow()
            return consolidate(rows.append_column(
                WEIGHT, pa.repeat(pa.scalar(1, pa.int64()), rows.num_rows)))
        changed = self._changed_files(table, old, new) if old != new else None
        if old == new or (changed is not None and not changed.paths):
            empty = schema_to_pyarrow(at_new, include_field_ids=False).empty_table()
            return empty.append_column(WEIGHT, pa.array([], pa.int64()))
        rows = self._arrow_feed(table, old, new, changed, at_new, max_rows=None)
        assert rows is not None
        return rows

    def _changed_files(self, table: Table, old: int, new: int) -> ChangedFiles | None:
        """The files that changed from ``old`` to ``new``, if a lineage links them.

        None (logged) when none does: the whole snapshots are compared then.

        Raises:
            SnapshotExpiredError: ``old`` was expired.
        """
        chain = lineage(table.metadata, old, new, source=self.name)
        if chain.snapshots is None:
            log.warning("source %r: %s; comparing whole snapshots %s and %s (reads the table "
                        "twice)", self.name, chain.reason, old, new)
            return None
        return changed_files(table.metadata, table.io, chain.snapshots, self.manifests)

    def _arrow_feed(self, table: Table, old: int, new: int, changed: ChangedFiles | None,
                    schema: Schema, max_rows: int | None) -> pa.Table | None:
        """The change read in Arrow (:func:`arrow_change_feed`), in ``schema``'s columns.

        None when it would read more than ``max_rows`` rows (None: no bound).
        """
        paths = changed.paths if changed is not None else None
        feed = arrow_change_feed(table, old, new, paths, schema, self.cache,
                                 partial(self._scan_tasks, table), max_rows)
        return feed.rows if feed is not None else None

    def _bridged(self, new: int, names: Sequence[str], rows: pa.Table) -> ChangeFeed:
        """A change read in Arrow; it reaches Spark through the bridge if Spark reads it."""
        bridge = self.bridge
        assert bridge is not None

        def spark_rows() -> DataFrame:  # resolves the snapshot only if Spark reads it
            frame = bridge.to_spark(rows)
            return frame.selectExpr(*aligned(frame, self._spark_columns(new, names)), WEIGHT)
        return ChangeFeed(spark_rows, rows)

    def _spark_feed(self, old: int, new: int, changed: ChangedFiles | None, schema: Schema,
                    table_columns: Collection[str]) -> ChangeFeed:
        """The change computed by Spark from the ``changed`` files (``staged_change``).

        Read with the columns of ``schema`` (the snapshot ``new``'s, matched by field id).
        Without ``changed`` (no lineage between the snapshots), the whole snapshots.
        """
        if changed is None:
            at_new, at_old = self.snapshot(new), self.snapshot(old)
            columns = self._spark_columns(new, [f.name for f in schema.fields])
            return ChangeFeed.of(_difference(at_new, at_old, columns))
        names = {f.field_id: f.name for f in schema.fields}
        rows, count = staged_change(self.spark, self.table_name, old, new, changed, names,
                                    table_columns)
        return ChangeFeed.of(rows, checkpointed_rows=count)

    def _spark_columns(self, version: int, names: Sequence[str]) -> StructType:
        """The Spark fields ``names`` of snapshot ``version`` (resolved in Spark)."""
        kept = set(names)
        return StructType([f for f in self.snapshot(version).schema.fields if f.name in kept])

    def _whole(self, new: int, columns: Collection[str] | None) -> ChangeFeed:
        """The change from nothing to ``new``: every row, weight 1."""
        at_new = self.snapshot(new)
        spark_columns = self._spark_columns(new, projected(at_new.schema.names, columns))
        return ChangeFeed.of(consolidate(with_weight(
            at_new.selectExpr(*aligned(at_new, spark_columns)))))

    def _empty(self, version: int, names: Sequence[str]) -> ChangeFeed:
        """No change: the columns ``names`` of snapshot ``version``, no row.

        Made from an RDD of no partition: a frame of a Python list has partitions, and
        each scan of it would run a task on a Python worker.
        """
        return ChangeFeed.empty(with_weight(self.spark.createDataFrame(
            self.spark.sparkContext.emptyRDD(), self._spark_columns(version, names))))

    def arrow_rows(self, version: int, columns: Sequence[str],
                   keys: Mapping[str, KeyValues], max_rows: int) -> pa.Table | None:
        """The rows at snapshot ``version`` that may match ``keys``, read by pyiceberg.

        See :func:`lakehouse.sources.iceberg_keys.rows_for_keys`; None also when the
        snapshot has equality deletes (pyiceberg does not apply them).

        Raises:
            SourceError: The table does not exist.
        """
        table = self._table_with(version)
        if _has_equality_deletes(table, version):
            return None
        schema = _snapshot_schema(table, version)
        return rows_for_keys(table, version, schema, columns, keys, max_rows, self.cache,
                             self._scan_tasks(table, version).values())

    def row_count(self, version: int) -> int:
        """Live rows of snapshot ``version``, from its summary (no data file is read).

        An upper bound while the snapshot has equality deletes
        (:func:`lakehouse.sources.row_counts.iceberg_row_count`).

        Raises:
            SourceError: The table or snapshot ``version`` does not exist.
        """
        return iceberg_row_count(self._table(), version, self.name)


def _difference(at_new: DataFrame, at_old: DataFrame, columns: StructType) -> DataFrame:
    """``at_new`` (+1) minus ``at_old`` (-1), both as ``columns``, consolidated."""
    added = with_weight(at_new.selectExpr(*aligned(at_new, columns)), 1)
    removed = with_weight(at_old.selectExpr(*aligned(at_old, columns)), -1)
    return consolidate(added.unionByName(removed))


def _snapshot_schema(table: Table, version: int) -> Schema:
    """The Iceberg schema snapshot ``version`` was written with (what Spark reads it as)."""
    snapshot = table.metadata.snapshot_by_id(version)
    if snapshot is not None and snapshot.schema_id is not None:
        schema = table.metadata.schema_by_id(snapshot.schema_id)
        if schema is not None:
            return schema
    return table.schema()


def _has_equality_deletes(table: Table, version: int) -> bool:
    """Whether snapshot ``version`` has live equality deletes (pyiceberg cannot read them)."""
    snapshot = table.metadata.snapshot_by_id(version)
    summary = snapshot.summary if snapshot is not None else None
    # Summary.__getitem__ answers None for a missing key (so .get ignores its default).
    return summary is None or (summary["total-equality-deletes"] or "0") != "0"
