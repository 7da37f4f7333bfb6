"""Delta sources read with delta-rs, handed to Spark as DataFrames.

The change feed is Delta's change data feed (``delta.enableChangeDataFeed``),
read with ``DeltaTable.load_cdf`` (Delta protocol, "Change Data Files"), or, for versions
without it, the difference of the versions' data files (``delta_files``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ivm import WEIGHT, KeyValues, consolidate, with_weight
from lakehouse.errors import SnapshotExpiredError, SourceError
from lakehouse.sources.arrow_bridge import ArrowBridge, plain_types
from lakehouse.sources.arrow_diff import consolidate as consolidate_arrow
from lakehouse.sources.base import ChangeFeed, projected
from lakehouse.sources.delta_files import file_change
from lakehouse.sources.row_counts import delta_row_count

log = logging.getLogger(__name__)
# How delta-rs and pyarrow word a data file that is gone.
_MISSING = re.compile(r"not found|no such file", re.IGNORECASE)

_CHANGE_WEIGHT = {"insert": 1, "delete": -1, "update_preimage": -1, "update_postimage": 1}
_CDF_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


class DeltaSourceReader:
    """Read one Delta table as snapshots and change feeds.

    Args:
        bridge: Hands Arrow data to Spark.
        name: The source's name in the config.
        uri: Path or URI of the Delta table.
        storage_options: delta-rs storage options (S3 endpoint, credentials).
    """

    def __init__(self, bridge: ArrowBridge, name: str, uri: str,
                 storage_options: dict[str, str] | None = None):
        self.bridge = bridge
        self.name = name
        self.uri = uri
        self.storage_options = storage_options

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
            schema = pa.schema(self._table().schema().to_arrow())
            return self.bridge.to_spark(schema.empty_table())
        table = self._table(version)
        return self.bridge.to_spark(pa.table(table.to_pyarrow_table()))

    def schema_key(self, version: int) -> Hashable:
        """The table's location and its schema at ``version`` (read from its log).

        Raises:
            SourceError: The table or ``version`` does not exist.
        """
        return (self.uri, self._table(version).schema().to_json())

    def change_feed(self, old: int | None, new: int,
                    columns: Collection[str] | None = None) -> ChangeFeed:
        """The change between two versions as a consolidated Z-set.

        Reads Delta's change data feed when it is on over the whole range; otherwise
        compares the versions' data files (:mod:`lakehouse.sources.delta_files`, which
        reads whole rewritten files: costlier, so it logs a warning).

        Args:
            old: The version the change starts after (None: before the first one).
            new: The version the change ends at.
            columns: Keep only these columns (those a view uses); None or a name the
                table lacks: every column.

        Returns:
            The table's columns (or ``columns``) plus ``_weight`` (int64), computed in Arrow
            (``ChangeFeed.arrow``) except from the empty version (``old`` None).

        Raises:
            SnapshotExpiredError: Files or log entries the change needs were vacuumed or
                cleaned up; only a full refresh can catch up.
            SourceError: The table or a version cannot be read.
        """
        if old is None or old == new:
            rows = self.snapshot(new)
            kept = projected(rows.columns, columns)
            if kept != rows.columns:  # quoted: a Delta column name may hold a dot
                rows = rows.select(*[F.col("`" + n.replace("`", "``") + "`") for n in kept])
            rows = with_weight(rows)
            return ChangeFeed.of(consolidate(rows)) if old is None else ChangeFeed.empty(rows)
        if self._change_data_feed_on(old + 1) and self._change_data_feed_on(new):
            changes = self._read_or_expired(old, lambda: self._cdf(old, new))
        else:
            log.warning(
                "source %r: no change data feed from version %s to %s "
                "(delta.enableChangeDataFeed off); comparing the versions' data files instead, "
                "which reads every rewritten file whole", self.name, old + 1, new)
            before, after = self._at(old), self._at(new)
            changes = self._read_or_expired(old, lambda: file_change(before, after))
        names = projected([n for n in changes.column_names if n != WEIGHT], columns)
        changes = consolidate_arrow(plain_types(changes.select([*names, WEIGHT])))
        bridge = self.bridge
        return ChangeFeed(lambda: bridge.to_spark(changes), changes)

    def _at(self, version: int) -> DeltaTable:
        """The table at ``version``; SnapshotExpiredError when its log is gone."""
        try:
            return DeltaTable(self.uri, version=version, storage_options=self.storage_options)
        except DeltaError as error:
            self._table()  # the table itself exists: the version's log was cleaned up
            raise SnapshotExpiredError(
                f"version {version} can no longer be loaded (log cleaned up: {error})",
                source=self.name, version=version) from None

    def _change_data_feed_on(self, version: int) -> bool:
        configuration = self._at(version).metadata().configuration
        return configuration.get("delta.enableChangeDataFeed", "false").lower() == "true"

    def _cdf(self, old: int, new: int) -> pa.Table:
        """Delta's change data feed of versions ``old + 1`` to ``new`` as an Arrow Z-set."""
        reader = self._table().load_cdf(starting_version=old + 1, ending_version=new)
        changes = pa.table(reader.read_all())
        weights = _weights(changes["_change_type"])
        data = changes.drop_columns([c for c in _CDF_COLUMNS if c in changes.column_names])
        return data.append_column(WEIGHT, weights)

    def _read_or_expired(self, old: int, read: Callable[[], pa.Table]) -> pa.Table:
        """Run ``read``; a missing data file means a VACUUM removed it."""
        try:
            return read()
        except Exception as error:  # delta-rs raises bare Exception through Arrow streams
            if isinstance(error, FileNotFoundError) or _MISSING.search(str(error)):
                raise SnapshotExpiredError(
                    f"a data file the change since version {old} needs was removed by VACUUM "
                    f"({error})", source=self.name, version=old) from None
            raise SourceError(f"change since version {old} unavailable: {error}",
                              source=self.name) from None

    def arrow_rows(self, version: int, columns: Sequence[str],
                   keys: Mapping[str, KeyValues], max_rows: int) -> pa.Table | None:
        """None: a Delta source's rows are read by Spark (a join view's partners too)."""
        return None

    def row_count(self, version: int) -> int:
        """Rows at ``version``, from the add actions' statistics (no data file is read).

        An upper bound for tables with deletion vectors
        (:func:`lakehouse.sources.row_counts.delta_row_count`).

        Raises:
            SourceError: The table or ``version`` cannot be opened.
        """
        return delta_row_count(self._table(version))


def _weights(change_type: pa.ChunkedArray) -> pa.ChunkedArray:
    """Map ``_change_type`` (insert, delete, update_pre/postimage) to +1/-1."""
    names = pc.cast(change_type, pa.string())
    index = pc.index_in(names, value_set=pa.array(list(_CHANGE_WEIGHT)))
    return pc.take(pa.array(list(_CHANGE_WEIGHT.values()), pa.int64()), index)
