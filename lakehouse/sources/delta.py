"""Delta sources read with delta-rs, handed to Spark as DataFrames.

The change feed is Delta's change data feed (``delta.enableChangeDataFeed``),
read with ``DeltaTable.load_cdf`` (Delta protocol, "Change Data Files").
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError
from pyspark.sql import DataFrame

from ivm import WEIGHT, consolidate, with_weight
from lakehouse.errors import SourceError
from lakehouse.sources.arrow_bridge import ArrowBridge

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

    def snapshot(self, version: int | None) -> DataFrame:
        """The table's rows at ``version`` (empty with the current schema for None)."""
        if version is None:
            schema = pa.schema(self._table().schema().to_arrow())
            return self.bridge.to_spark(schema.empty_table())
        table = self._table(version)
        return self.bridge.to_spark(pa.table(table.to_pyarrow_table()))

    def change_feed(self, old: int | None, new: int) -> DataFrame:
        """The change between two versions as a consolidated Z-set.

        Returns:
            The table's columns plus ``_weight`` (int64).

        Raises:
            SourceError: The change data feed is off or does not cover the range.
        """
        if old is None:
            return with_weight(self.snapshot(new))
        try:
            reader = self._table().load_cdf(starting_version=old + 1, ending_version=new)
            changes = pa.table(reader.read_all())
        except DeltaError as error:
            raise SourceError(
                f"change data feed from version {old + 1} to {new} unavailable: {error}",
                source=self.name,
            ) from None
        weights = _weights(changes["_change_type"])
        data = changes.drop_columns([c for c in _CDF_COLUMNS if c in changes.column_names])
        return consolidate(self.bridge.to_spark(data.append_column(WEIGHT, weights)))


def _weights(change_type: pa.ChunkedArray) -> pa.ChunkedArray:
    """Map ``_change_type`` (insert, delete, update_pre/postimage) to +1/-1."""
    names = pc.cast(change_type, pa.string())
    index = pc.index_in(names, value_set=pa.array(list(_CHANGE_WEIGHT)))
    return pc.take(pa.array(list(_CHANGE_WEIGHT.values()), pa.int64()), index)
