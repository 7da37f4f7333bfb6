"""Delta sources read by Spark (delta-spark); their logs read with delta-rs.

Rows are read by Spark's executors: a snapshot by time travel (``versionAsOf``), the change
feed from Delta's change data feed (``readChangeFeed``; Delta protocol, "Change Data Files")
or, for versions without it, from the difference of the versions' data files
(:mod:`lakehouse.sources.delta_files`). The driver reads the log (versions, schemas,
table properties, add actions, row counts) with delta-rs, and with it the rows of a small
table that a join view's small change matches (``arrow_rows``) and, unless the view's
engine is ``spark``, the change data feed itself (``load_cdf``), which the local engine
reads and Spark reads through the bridge.
"""

from __future__ import annotations

import logging
import operator
import re
from collections.abc import Collection, Hashable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from functools import reduce

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pds
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from ivm import DRIVER_DELTA_MAX_ROWS, WEIGHT, KeyValues, consolidate, with_weight
from ivm.spark_observe import counted_checkpoint
from lakehouse.errors import SnapshotExpiredError, SourceError
from lakehouse.sources.arrow_bridge import ArrowBridge
from lakehouse.sources.base import ChangeFeed, aligned, projected
from lakehouse.sources.delta_files import file_change
from lakehouse.sources.iceberg_keys import key_mask
from lakehouse.sources.row_counts import delta_row_count
from sinks.spark_errors import spark_error_summary

log = logging.getLogger(__name__)
# How Spark, Delta and Hadoop name a data file that is gone.
_MISSING = re.compile(r"FileNotFoundException|FILE_NOT_EXIST|DELTA_FILE_NOT_FOUND"
                      r"|DELTA_CHANGE_DATA_FILE_NOT_FOUND|No such file")

_REMOVED_CHANGES = ("delete", "update_preimage")  # the others: insert, update_postimage
_CDF_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


class DeltaSourceReader:
    """Read one Delta table as snapshots and change feeds.

    Args:
        spark: The session whose executors read the rows.
        name: The source's name in the config.
        uri: Path or URI of the Delta table.
        storage_options: delta-rs storage options (S3 endpoint, credentials) for the log.
        bridge: When given, a change may be read in Arrow on the driver (delta-rs) and
            handed to Spark through it only if a Spark query reads it.
        arrow_max_rows: Most rows of a change data feed read on the driver; a larger
            change is left to Spark, so the driver holds at most this many.
    """

    def __init__(self, spark: SparkSession, name: str, uri: str,
                 storage_options: dict[str, str] | None = None, *,
                 bridge: ArrowBridge | None = None,
                 arrow_max_rows: int = DRIVER_DELTA_MAX_ROWS):
        self.spark = spark
        self.name = name
        self.uri = uri
        self.storage_options = storage_options
        self.bridge = bridge
        self.arrow_max_rows = arrow_max_rows

    def _table(self, version: int | None = None) -> DeltaTable:
        try:
            return DeltaTable(self.uri, version=version, storage_options=self.storage_options)
        except TableNotFoundError:
            raise SourceError(f"no Delta table at {self.uri!r}", source=self.name) from None
        except DeltaError as error:
            raise SourceError(f"cannot open version {version}: {error}", source=self.name) from None

    def current_version(self) -> int | None:
        """The table's newest version."""
        return self._table().version()

    def pinned(self) -> AbstractContextManager[None]:
        """Nothing to pin: a Delta table's log is read from storage, not from a catalog."""
        return nullcontext()

    def snapshot(self, version: int | None) -> DataFrame:
        """The table's rows at ``version`` (empty with the current schema for None)."""
        if version is None:
            return self._read(self._table().version()).limit(0)
        self._table(version)  # SourceError now, rather than a Spark error when read
        return self._read(version)

    def _read(self, version: int) -> DataFrame:
        return self.spark.read.format("delta").option("versionAsOf", version).load(self.uri)

    def schema_key(self, version: int) -> Hashable:
        """The table's location and its schema at ``version`` (read from its log).

        Raises:
            SourceError: The table or ``version`` does not exist.
        """
        return (self.uri, self._table(version).schema().to_json())

    def change_feed(self, old: int | None, new: int,
                    columns: Collection[str] | None = None, *,
                    in_arrow: bool = True) -> ChangeFeed:
        """The change between two versions as a consolidated Z-set.

        Reads Delta's change data feed when it is on over the whole range; otherwise
        compares the versions' data files (:mod:`lakehouse.sources.delta_files`, which
        reads whole rewritten files: costlier, so it logs a warning).

        Args:
            old: The version the change starts after (None: before the first one).
            new: The version the change ends at.
            columns: Keep only these columns (those a view uses); None or a name the
                table lacks: every column.
            in_arrow: Whether the change may be read in Arrow on the driver; False
                (engine ``spark``) has the executors read it.

        Returns:
            The table's columns (or ``columns``) plus ``_weight`` (long). Read from the
            change data feed by delta-rs in Arrow (``ChangeFeed.arrow``) when
            ``in_arrow``, the reader has a bridge and the table is read alike by both
            (:func:`_driver_unreadable`); else computed by Spark and materialized on the
            executors (``localCheckpoint``).

        Raises:
            SnapshotExpiredError: Files or log entries the change needs were vacuumed or
                cleaned up; only a full refresh can catch up.
            SourceError: The table or a version cannot be read.
        """
        if old is None or old == new:
            rows = self.snapshot(new)
            kept = projected(rows.columns, columns)
            if kept != rows.columns:  # quoted: a Delta column name may hold a dot
                rows = rows.select(*[_column(n) for n in kept])
            rows = with_weight(rows)
            return ChangeFeed.of(consolidate(rows)) if old is None else ChangeFeed.empty(rows)
        at_new = self._at(new)
        if _change_data_feed_on(self._at(old + 1)) and _change_data_feed_on(at_new):
            arrow = (self._arrow_cdf(at_new, old, new, columns)
                     if in_arrow and self.bridge is not None else None)
            if arrow is not None:
                return self._arrow_feed(new, arrow)
            try:
                return self._feed(old, self._cdf(old, new), columns)
            except SnapshotExpiredError:
                raise
            except SourceError as error:  # e.g. the feed was off for a version in between
                reason = f"the change data feed is unreadable ({error})"
        else:
            reason = "delta.enableChangeDataFeed off"
        log.warning(
            "source %r: no change data feed from version %s to %s (%s); comparing the "
            "versions' data files instead, which reads every rewritten file whole",
            self.name, old + 1, new, reason)
        return self._feed(old, file_change(self._at(old), self._at(new), self._read), columns)

    def _feed(self, old: int, changes: DataFrame, columns: Collection[str] | None
              ) -> ChangeFeed:
        """``changes`` projected onto ``columns``, consolidated and materialized."""
        names = projected([n for n in changes.columns if n != WEIGHT], columns)
        rows = consolidate(changes.select(*[_column(n) for n in names], WEIGHT))
        held, count = self._materialized(old, rows)
        return ChangeFeed.of(held, checkpointed_rows=count)

    def _arrow_cdf(self, table: DeltaTable, old: int, new: int,
                   columns: Collection[str] | None) -> pa.Table | None:
        """The change data feed of versions ``old + 1`` to ``new``, read by delta-rs.

        ``table`` is the table at ``new``.

        Returns:
            A consolidated Z-set in Arrow: the columns (strings as ``large_string``)
            plus ``_weight`` (int64); None (Spark reads it) when the table uses a reader
            feature read here unlike Spark, the feed has more than :attr:`arrow_max_rows`
            rows, or delta-rs cannot read it (a schema changed in the range, change files
            vacuumed: Spark's read names the cause).
        """
        if _driver_unreadable(table):
            return None
        names = projected([field.name for field in table.schema().fields], columns)
        try:
            feed = pa.RecordBatchReader.from_stream(table.load_cdf(
                starting_version=old + 1, ending_version=new, columns=[*names, "_change_type"]))
            batches, rows_read = [], 0
            for batch in feed:  # stops at the bound: the driver holds no more than it
                rows_read += batch.num_rows
                if rows_read > self.arrow_max_rows:
                    return None
                batches.append(batch)
        except (DeltaError, pa.ArrowException, OSError):
            return None
        changes = pa.Table.from_batches(batches, feed.schema)
        kinds = changes.column("_change_type").cast(pa.string())
        weights = pc.if_else(pc.is_in(kinds, pa.array(_REMOVED_CHANGES)), -1, 1)
        rows = _without_views(changes.select(names))
        return consolidate(rows.append_column(WEIGHT, weights.cast(pa.int64())))

    def _arrow_feed(self, new: int, rows: pa.Table) -> ChangeFeed:
        """A change read in Arrow; it reaches Spark through the bridge if Spark reads it."""
        bridge = self.bridge
        assert bridge is not None

        def spark_rows() -> DataFrame:  # typed as Spark reads version ``new``
            frame = bridge.to_spark(rows)
            kept = set(rows.column_names)
            fields = StructType([f for f in self._read(new).schema.fields if f.name in kept])
            return frame.selectExpr(*aligned(frame, fields), WEIGHT)
        return ChangeFeed(spark_rows, rows)

    def _at(self, version: int) -> DeltaTable:
        """The table at ``version``; SnapshotExpiredError when its log is gone."""
        try:
            return DeltaTable(self.uri, version=version, storage_options=self.storage_options)
        except DeltaError as error:
            self._table()  # the table itself exists: the version's log was cleaned up
            raise SnapshotExpiredError(
                f"version {version} can no longer be loaded (log cleaned up: {error})",
                source=self.name, version=version) from None


    def _cdf(self, old: int, new: int) -> DataFrame:
        """Delta's change data feed of versions ``old + 1`` to ``new`` as a Z-set on Spark."""
        changes = (self.spark.read.format("delta").option("readChangeFeed", "true")
                   .option("startingVersion", old + 1).option("endingVersion", new)
                   .load(self.uri))
        weight = F.when(F.col("_change_type").isin(*_REMOVED_CHANGES), -1).otherwise(1)
        return changes.withColumn(WEIGHT, weight.cast("long")).drop(*_CDF_COLUMNS)

    def _materialized(self, old: int, rows: DataFrame) -> tuple[DataFrame, int]:
        """``rows`` computed once on the executors, and their number (one Spark action).

        A missing data file means a VACUUM.
        """
        try:
            return counted_checkpoint(rows)
        except Exception as error:  # py4j wraps Spark's and Hadoop's errors
            cause = spark_error_summary(error)
            if _MISSING.search(cause) or _MISSING.search(str(error)):
                raise SnapshotExpiredError(
                    f"a data file the change since version {old} needs was removed by VACUUM "
                    f"({cause})", source=self.name, version=old) from None
            raise SourceError(f"change since version {old} unavailable: {cause}",
                              source=self.name) from None

    def arrow_rows(self, version: int, columns: Sequence[str],
                   keys: Mapping[str, KeyValues], max_rows: int) -> pa.Table | None:
        """The rows at ``version`` whose ``keys`` lie in their bounds, read by delta-rs.

        A join view's partner for a small change, read on the driver: ``columns`` of the
        rows matching every key (:func:`lakehouse.sources.iceberg_keys.key_mask`), in the
        table's column names. None (Spark reads it) when the table has more than
        ``max_rows`` rows, or uses a reader feature read here differently from Spark:
        deletion vectors or column mapping (physical column names).

        Raises:
            SourceError: The table or ``version`` cannot be opened.
        """
        table = self._table(version)
        names = {field.name.lower(): field.name for field in table.schema().fields}
        wanted = [names[column.lower()] for column in columns]
        matched = {names[column.lower()]: values for column, values in keys.items()}
        try:
            if _driver_unreadable(table) or delta_row_count(table) > max_rows:
                return None
            rows = _read(table.to_pyarrow_dataset(), [*wanted, *matched], matched)
        except (pa.ArrowException, DeltaError, OSError):  # read here unlike Spark, or not at all
            return None
        mask = pa.array(np.ones(rows.num_rows, np.bool_))
        for column, values in matched.items():
            mask = pc.and_(mask, key_mask(rows.column(column), values))
        return rows.filter(mask).select(wanted)

    def row_count(self, version: int) -> int:
        """Rows at ``version``, from the add actions' statistics (no data file is read).

        An upper bound for tables with deletion vectors
        (:func:`lakehouse.sources.row_counts.delta_row_count`).

        Raises:
            SourceError: The table or ``version`` cannot be opened.
        """
        return delta_row_count(self._table(version))


def _read(dataset: pds.Dataset, columns: Sequence[str],
          keys: Mapping[str, KeyValues]) -> pa.Table:
    """``columns`` (once each) of the row groups the keys' bounds may match."""
    read = list(dict.fromkeys(columns))
    try:
        return dataset.to_table(columns=read, filter=_bounds(keys))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return dataset.to_table(columns=read)  # a bound that does not compare: no pruning


def _bounds(keys: Mapping[str, KeyValues]) -> pds.Expression | None:
    """The keys' bounds as a dataset filter: Parquet row groups outside them are skipped.

    A bound that does not convert to an Arrow scalar is left out (the filter only prunes;
    :func:`key_mask` then keeps the matching rows exactly).
    """
    conditions = []
    for column, values in keys.items():
        if values.low is None or values.high is None:
            continue  # nothing matches: key_mask keeps no row
        try:
            low, high = pa.scalar(values.low), pa.scalar(values.high)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            continue
        conditions.append((pds.field(column) >= low) & (pds.field(column) <= high))
    return reduce(operator.and_, conditions) if conditions else None


def _driver_unreadable(table: DeltaTable) -> bool:
    """Whether the table uses deletion vectors or column mapping (see ``arrow_rows``)."""
    protocol = table.protocol()
    features = set(protocol.reader_features or ())
    mapped = table.metadata().configuration.get("delta.columnMapping.mode", "none") != "none"
    return bool(features & {"deletionVectors", "columnMapping"}) or mapped


def _change_data_feed_on(table: DeltaTable) -> bool:
    configuration = table.metadata().configuration
    return configuration.get("delta.enableChangeDataFeed", "false").lower() == "true"


def _without_views(rows: pa.Table) -> pa.Table:
    """``rows`` with delta-rs's ``string_view``/``binary_view`` columns as large types.

    The local engine and the sinks read Arrow's plain string and binary types.
    """
    views = {pa.string_view(): pa.large_string(), pa.binary_view(): pa.large_binary()}
    if not any(field.type in views for field in rows.schema):
        return rows
    return rows.cast(pa.schema([field.with_type(views.get(field.type, field.type))
                                for field in rows.schema]))


def _column(name: str) -> Column:
    """Column ``name``, quoted: a Delta column name may hold a dot."""
    return F.col("`" + name.replace("`", "``") + "`")
