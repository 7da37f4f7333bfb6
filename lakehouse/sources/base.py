"""What the tick needs from a source: versions, snapshots and the change feed."""

from __future__ import annotations

from typing import Protocol

from pyspark.sql import DataFrame


class SourceReader(Protocol):
    """A versioned table read by Spark.

    Versions are Iceberg snapshot ids or Delta table versions (int). A version of
    None means "before the table had any data": its snapshot is empty.
    """

    name: str

    def current_version(self) -> int | None:
        """The newest committed version, or None when the table has none yet."""
        ...

    def snapshot(self, version: int | None) -> DataFrame:
        """The table's rows at ``version`` (empty, with the current schema, for None)."""
        ...

    def change_feed(self, old: int | None, new: int) -> DataFrame:
        """The change from ``old`` (exclusive) to ``new`` (inclusive) as a Z-set.

        Returns:
            The table's columns plus ``_weight`` (int64), consolidated.
        """
        ...
