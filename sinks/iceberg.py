"""Apply view deltas to an Iceberg v2 table with Spark, through the REST catalog.

Every commit is one Iceberg snapshot whose summary carries the new frontier
(:data:`sinks.frontier.FRONTIER_KEY`), so the data and the frontier land atomically.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from ivm import WEIGHT, expand
from sinks.errors import SinkError
from sinks.frontier import (
    FRONTIER_KEY,
    REFRESHED_AT_KEY,
    Frontier,
    decode_frontier,
    encode_frontier,
)
from sinks.iceberg_commit import run_with_commit_properties
from sinks.iceberg_publish import staged_on_branch
from sinks.merge_source import OP, keyed_merge_source, multiset_merge_source

TABLE_PROPERTIES = {
    "format-version": "2",
    "write.delete.mode": "copy-on-write",
    "write.update.mode": "copy-on-write",
    "write.merge.mode": "copy-on-write",
}
"""Copy-on-write keeps the view readable by every client, and its change feed exact."""


class IcebergSink:
    """One view's Iceberg table.

    Args:
        spark: Session whose catalog ``catalog_name`` is the REST catalog.
        catalog: The same REST catalog through pyiceberg (metadata reads).
        catalog_name: The Spark catalog name.
        identifier: ``namespace.table`` of the view.
    """

    def __init__(self, spark: SparkSession, catalog: Catalog, catalog_name: str, identifier: str):
        self.spark = spark
        self.catalog = catalog
        self.identifier = identifier
        self.table_name = f"{catalog_name}.{identifier}"
        self._catalog_name = catalog_name
        self._base_snapshot_id: int | None = None

    def frontier(self) -> dict[str, int] | None:
        """The frontier of the table's current snapshot; None before the first commit.

        The snapshot read here is the base of this sink's next commit: the commit is
        refused if ``main`` moves in between (:mod:`sinks.iceberg_publish`).
        """
        try:
            snapshot = self.catalog.load_table(self.identifier).current_snapshot()
        except NoSuchTableError:
            return None
        self._base_snapshot_id = snapshot.snapshot_id if snapshot is not None else None
        if snapshot is None or snapshot.summary is None:
            return None
        return decode_frontier(snapshot.summary.additional_properties.get(FRONTIER_KEY))

    def ensure_table(self, schema: StructType) -> None:
        """Create the namespace and the table (Iceberg v2) unless they exist."""
        namespace = self.identifier.rsplit(".", 1)[0]
        self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {self._catalog_name}.{namespace}")
        columns = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in schema.fields)
        properties = ", ".join(f"'{k}' = '{v}'" for k, v in TABLE_PROPERTIES.items())
        self.spark.sql(f"CREATE TABLE IF NOT EXISTS {self.table_name} ({columns}) "
                       f"USING iceberg TBLPROPERTIES ({properties})")

    def apply(self, delta: DataFrame, key: Sequence[str] | None, frontier: Frontier) -> None:
        """Apply a view delta in one snapshot carrying ``frontier``.

        Args:
            delta: Consolidated Z-set: the view's columns plus ``_weight`` (int64).
            key: The view's unique key, or None when rows have multiplicities.
            frontier: The source versions the table reflects after this commit.

        Raises:
            SinkError: The commit failed; the table is unchanged.
        """
        properties = _summary(frontier)
        with self._target(properties) as target:
            if delta.isEmpty() or (key is None and delta.where(F.col(WEIGHT) < 0).isEmpty()):
                self._append(target, expand(delta), properties)
                return
            current = self.spark.table(target)
            source = (keyed_merge_source(delta, key) if key is not None
                      else multiset_merge_source(delta, current))
            self._merge(target, source, key, properties)

    def replace(self, rows: DataFrame, frontier: Frontier) -> None:
        """Replace the table's content by ``rows`` in one snapshot (full refresh)."""
        properties = _summary(frontier)
        with self._target(properties) as target:
            writer = rows.writeTo(target)
            for name, value in properties.items():
                writer = writer.option(f"snapshot-property.{name}", value)
            self._guard(lambda: writer.overwrite(F.lit(True)))

    @contextmanager
    def _target(self, properties: dict[str, str]) -> Iterator[str]:
        """The Spark table to write: a branch published on exit, or ``main``.

        ``main`` only for the first commit: an initial load overwrites everything, so a
        concurrent one is harmless. The freshness ``properties`` become table properties
        too (in the publishing commit; after the first one).
        """
        if self._base_snapshot_id is None:
            yield self.table_name
            table = self.catalog.load_table(self.identifier)
            table.transaction().set_properties(properties).commit_transaction()
            return
        with staged_on_branch(self.catalog, self.identifier, self._base_snapshot_id,
                              properties) as branch:
            yield f"{self.table_name}.branch_{branch}"

    def _append(self, target: str, rows: DataFrame, properties: dict[str, str]) -> None:
        writer = rows.writeTo(target)
        for name, value in properties.items():
            writer = writer.option(f"snapshot-property.{name}", value)
        self._guard(writer.append)

    def _merge(
        self, target: str, source: DataFrame, key: Sequence[str] | None,
        properties: dict[str, str],
    ) -> None:
        columns = [c for c in source.columns if c != OP]
        view = f"__merge_{self.identifier.replace('.', '_')}"
        source.createOrReplaceTempView(view)
        matching = key if key is not None else columns
        matched = " AND ".join(f"t.`{c}` <=> s.`{c}`" for c in matching)
        on = f"s.{OP} = 'delete'" + (f" AND {matched}" if matched else "")
        names = ", ".join(f"`{c}`" for c in columns)
        values = ", ".join(f"s.`{c}`" for c in columns)
        statement = (f"MERGE INTO {target} t USING {view} s ON {on} "
                     f"WHEN MATCHED THEN DELETE "
                     f"WHEN NOT MATCHED AND s.{OP} = 'insert' "
                     f"THEN INSERT ({names}) VALUES ({values})")
        try:
            self._guard(lambda: run_with_commit_properties(
                self.spark, properties, lambda: self.spark.sql(statement)))
        finally:
            self.spark.catalog.dropTempView(view)

    def _guard(self, commit) -> None:
        try:
            commit()
        except Exception as error:  # py4j and Spark raise many types; report them all as one
            raise SinkError(f"commit failed: {str(error).splitlines()[0]}",
                            table=self.identifier) from error


def _summary(frontier: Frontier) -> dict[str, str]:
    return {FRONTIER_KEY: encode_frontier(frontier), REFRESHED_AT_KEY: str(int(time.time() * 1000))}
