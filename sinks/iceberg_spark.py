"""The Iceberg sink's Spark path: a ``MERGE`` or write on a refresh branch, then publish.

For view deltas too large to collect to the driver. The delta becomes the source of one
``MERGE`` (:mod:`sinks.merge_source`) run on a branch created at the refresh's base
snapshot, and the branch is published to ``main`` only if ``main`` is still that snapshot
(:mod:`sinks.iceberg_publish`). Summary properties reach Spark's commits as
``snapshot-property.*`` write options, or through :mod:`sinks.iceberg_commit` for ``MERGE``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from pyiceberg.catalog import Catalog
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ivm import WEIGHT, expand
from sinks.errors import SinkError
from sinks.iceberg_commit import run_with_commit_properties
from sinks.iceberg_publish import staged_on_branch
from sinks.merge_source import OP, keyed_merge_source, multiset_merge_source
from sinks.spark_errors import spark_error_summary


class SparkWriter:
    """Writes one commit of a view table with Spark.

    Args:
        spark: Session whose catalog ``catalog_name`` is the REST catalog.
        catalog: The same catalog through pyiceberg (branches, properties).
        catalog_name: The Spark catalog name.
        identifier: ``namespace.table`` of the view.
        base_snapshot_id: ``main`` when the refresh read its frontier (None: first commit).
    """

    def __init__(self, spark: SparkSession, catalog: Catalog, catalog_name: str,
                 identifier: str, base_snapshot_id: int | None):
        self.spark = spark
        self.catalog = catalog
        self.identifier = identifier
        self.table_name = f"{catalog_name}.{identifier}"
        self.base_snapshot_id = base_snapshot_id

    def apply(self, delta: DataFrame, key: Sequence[str] | None,
              properties: dict[str, str]) -> None:
        """Apply a consolidated Z-set (view columns + ``_weight``) in one published snapshot.

        Raises:
            SinkError: The commit failed or ``main`` moved; nothing is published.
        """
        with self._target(properties) as target:
            if delta.isEmpty() or (key is None and delta.where(F.col(WEIGHT) < 0).isEmpty()):
                self._append(target, expand(delta), properties)
                return
            current = self.spark.table(target)
            source = (keyed_merge_source(delta, key) if key is not None
                      else multiset_merge_source(delta, current))
            self._merge(target, source, key, properties)

    def replace(self, rows: DataFrame, properties: dict[str, str]) -> None:
        """Overwrite the table with ``rows`` in one published snapshot.

        Raises:
            SinkError: The commit failed or ``main`` moved; nothing is published.
        """
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
        base_snapshot_id = self.base_snapshot_id
        if base_snapshot_id is None:
            yield self.table_name
            table = self.catalog.load_table(self.identifier)
            table.transaction().set_properties(properties).commit_transaction()
            return
        with staged_on_branch(self.catalog, self.identifier, base_snapshot_id,
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
        # a name of its own: merges of views whose names differ only by . and _ run at once
        view = f"__merge_{self.identifier.replace('.', '_')}_{uuid.uuid4().hex[:8]}"
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

    def _guard(self, commit: Callable[[], object]) -> None:
        try:
            commit()
        except Exception as error:  # py4j and Spark raise many types; report them all as one
            raise SinkError(f"commit failed: {spark_error_summary(error)}",
                            table=self.identifier) from error
