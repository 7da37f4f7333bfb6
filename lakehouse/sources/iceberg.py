"""Iceberg sources read by Spark through the REST catalog.

The change feed comes from Iceberg's ``create_changelog_view`` procedure (appends
and copy-on-write deletes, updates and MERGE; Iceberg Spark procedures docs).
"""

from __future__ import annotations

import re

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ivm import WEIGHT, consolidate, with_weight
from lakehouse.errors import SourceError

_CHANGE_WEIGHT = {"INSERT": 1, "DELETE": -1, "UPDATE_AFTER": 1, "UPDATE_BEFORE": -1}


class IcebergSourceReader:
    """Read one Iceberg table as snapshots and change feeds.

    Args:
        spark: A session whose catalog ``catalog_name`` is the REST catalog.
        catalog: The same catalog through pyiceberg, for cheap metadata reads.
        catalog_name: The Spark catalog name.
        name: The source's name in the config.
        identifier: ``namespace.table``.
    """

    def __init__(
        self, spark: SparkSession, catalog: Catalog, catalog_name: str, name: str, identifier: str
    ):
        self.spark = spark
        self.catalog = catalog
        self.name = name
        self.identifier = identifier
        self.table_name = f"{catalog_name}.{identifier}"

    def current_version(self) -> int | None:
        """The current snapshot id of the table (None when it has no snapshot).

        Raises:
            SourceError: The table does not exist in the catalog.
        """
        try:
            table = self.catalog.load_table(self.identifier)
        except NoSuchTableError:
            raise SourceError(f"no Iceberg table {self.identifier!r}", source=self.name) from None
        return table.metadata.current_snapshot_id

    def snapshot(self, version: int | None) -> DataFrame:
        """The table's rows at snapshot ``version`` (time travel)."""
        if version is None:
            return self.spark.table(self.table_name).limit(0)
        return self.spark.read.option("snapshot-id", str(version)).table(self.table_name)

    def change_feed(self, old: int | None, new: int) -> DataFrame:
        """The change between two snapshots as a consolidated Z-set.

        Returns:
            The table's columns plus ``_weight`` (int64).
        """
        if old is None:
            return with_weight(self.snapshot(new))
        view = re.sub(r"\W", "_", f"__changes_{self.name}_{old}_{new}")
        self.spark.sql(
            f"CALL {self.table_name.split('.')[0]}.system.create_changelog_view("
            f"table => '{self.identifier}', changelog_view => '{view}', "
            f"options => map('start-snapshot-id', '{old}', 'end-snapshot-id', '{new}'))"
        )
        changes = self.spark.table(view)
        columns = [c for c in changes.columns if not c.startswith("_change") and
                   c != "_commit_snapshot_id"]
        weight = F.lit(None).cast("bigint")
        for change, value in _CHANGE_WEIGHT.items():
            weight = F.when(F.col("_change_type") == change, F.lit(value)).otherwise(weight)
        return consolidate(changes.select(*columns, weight.cast("bigint").alias(WEIGHT)))
