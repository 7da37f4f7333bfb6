"""Read only some data files of an Iceberg snapshot with Spark, on the executors.

A change feed needs the live rows of the few data files a change touched, at the old and
at the new snapshot. Spark's Iceberg reader does not prune files on a ``_file`` filter (the
filter is applied after every file is read), so the files are chosen on the driver from the
snapshot's scan plan (metadata only) and handed to Iceberg's own staged scans
(``ScanTaskSetManager``, the mechanism of its ``rewrite_data_files`` action): the executors
read exactly those files, with the snapshot's position and equality deletes applied, and
the driver reads no row. Columns are matched by field id to the names the caller asks for
(a column renamed since keeps its values).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager

from pyspark.sql import DataFrame, SparkSession

__all__ = ["POSITION_COLUMNS", "staged_files"]

POSITION_COLUMNS = ("_file", "_pos")
"""Iceberg's metadata columns of a row's data file and its position in the file."""

_SCAN_TASK_SET_ID = "scan-task-set-id"  # org.apache.iceberg.spark.SparkReadOptions


@contextmanager
def staged_files(spark: SparkSession, table_name: str, version: int, paths: Collection[str],
                 names: Mapping[int, str], positions: bool = False) -> Iterator[DataFrame]:
    """The live rows of the data files ``paths`` at snapshot ``version``, read by Spark.

    The files are staged while the context is open: materialize what reads the DataFrame
    (``localCheckpoint``) before leaving it, since each planning of a query on it fetches
    the staged files again.

    Args:
        spark: A session whose catalog holds ``table_name``.
        table_name: ``catalog.namespace.table``.
        version: The snapshot id.
        paths: Data file locations, as the snapshot's manifests write them; those not in
            the snapshot are ignored.
        names: The columns wanted, by Iceberg field id: each is read as the table's
            current column of that id (renamed since, perhaps) and named as given here;
            one the table no longer has is left out.
        positions: Also read each row's data file and position in it, as the metadata
            columns ``_file`` (string) and ``_pos`` (bigint) (Iceberg spec, "Reserved
            Field IDs").

    Yields:
        The files' rows, the columns of ``names`` the table has (and ``_file``, ``_pos``
        when ``positions``).
    """
    jvm = spark._jvm
    assert jvm is not None, "a Spark session on a running JVM"
    iceberg = jvm.org.apache.iceberg
    table = iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, table_name)
    wanted = set(paths)
    tasks = jvm.java.util.ArrayList()
    found = table.newScan().useSnapshot(version).planFiles()
    try:
        iterator = found.iterator()
        while iterator.hasNext():
            task = iterator.next()
            if task.file().location() in wanted:
                tasks.add(task)
    finally:
        found.close()
    current = {field.fieldId(): field.name() for field in table.schema().columns()}
    selected = [f"{_quoted(current[i])} AS {_quoted(name)}" for i, name in names.items()
                if i in current] + (list(POSITION_COLUMNS) if positions else [])
    if tasks.isEmpty():  # none of the files is live at ``version``
        yield spark.table(table_name).limit(0).selectExpr(*selected)
        return
    set_id = uuid.uuid4().hex
    manager = iceberg.spark.ScanTaskSetManager.get()
    manager.stageTasks(table, set_id, tasks)
    try:
        yield (spark.read.format("iceberg").option(_SCAN_TASK_SET_ID, set_id).load(table_name)
               .selectExpr(*selected))
    finally:
        manager.removeTasks(table, set_id)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
