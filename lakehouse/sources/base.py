"""What the tick needs from a source: versions, snapshots, row counts and the change feed."""

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

    def row_count(self, version: int) -> int:
        """The table's rows at ``version``, from metadata alone (no Spark job, no data read).

        The ``auto`` refresh policy compares the change feed's rows with it. Exact for
        appends, deletes and rewrites; an upper bound where deletes are recorded in a way
        the metadata cannot count (Iceberg equality deletes, Delta deletion vectors).
        """
        ...
