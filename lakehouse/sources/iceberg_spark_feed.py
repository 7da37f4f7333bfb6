"""An Iceberg change feed computed by Spark from the files a run of snapshots changed.

Engine ``spark`` reads no row on the driver: the driver picks the changed data files from
metadata (:mod:`lakehouse.sources.iceberg_files`) and the executors read them
(:mod:`lakehouse.sources.iceberg_staged`). Two kinds of changed files are read apart:

- A file whose only change is rows deleted by position (merge-on-read deletes) is read
  once, at the old snapshot, with each row's position; its change is the rows at the
  positions the new delete files list (weight -1), found by a join with those delete
  files (read by the executors too). Nothing is compared or shuffled but the deleted rows.
- Any other changed file (added, removed, under an equality delete, compacted) is read at
  both snapshots, +1 at the new and -1 at the old, and equal rows cancel.

Both parts are consolidated together in one aggregation.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from contextlib import ExitStack
from functools import reduce

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ivm import consolidate, with_weight
from lakehouse.sources.iceberg_files import ChangedFiles
from lakehouse.sources.iceberg_staged import staged_files

__all__ = ["BROADCAST_MAX_POSITIONS", "staged_change"]

BROADCAST_MAX_POSITIONS = 2_000_000
"""Most deleted positions sent whole to every executor to find the deleted rows; more are
joined by a shuffle (of the files' rows too)."""

_FILE, _POS = "__delete_file_path", "__delete_pos"


def staged_change(spark: SparkSession, table_name: str, old: int, new: int,
                  changed: ChangedFiles, names: Mapping[int, str]) -> DataFrame:
    """The rows ``changed`` gained and lost from snapshot ``old`` to ``new``, checkpointed.

    Args:
        spark: A session whose catalog holds ``table_name``.
        table_name: ``catalog.namespace.table``.
        old: The snapshot the change starts after.
        new: The snapshot it ends at.
        changed: The changed data files (:func:`lakehouse.sources.iceberg_files.changed_files`).
        names: The columns wanted, by Iceberg field id, named as at ``new``.

    Returns:
        A consolidated Z-set: the columns of ``names`` plus ``_weight`` (bigint),
        materialized on the executors (``localCheckpoint``) while the files are staged.
    """
    deleted = changed.only_deleted()
    compared = changed.paths - deleted.keys()
    with ExitStack() as staged:
        parts = []
        if compared:
            at_new = staged.enter_context(staged_files(spark, table_name, new, compared, names))
            at_old = staged.enter_context(staged_files(spark, table_name, old, compared, names))
            parts += [with_weight(at_new, 1), with_weight(at_old.select(*at_new.columns), -1)]
        if deleted:
            at_old = staged.enter_context(staged_files(spark, table_name, old, deleted, names,
                                                       positions=True))
            parts.append(with_weight(_at_positions(spark, at_old, deleted, changed), -1))
        return consolidate(reduce(DataFrame.unionByName, parts)).localCheckpoint(eager=True)


def _at_positions(spark: SparkSession, rows: DataFrame, deleted: Mapping[str, set[str]],
                  changed: ChangedFiles) -> DataFrame:
    """The ``rows`` (with ``_file``, ``_pos``) at the positions their delete files list.

    Position delete files are Parquet files of ``file_path`` (string) and ``pos`` (long)
    (Iceberg spec, "Position Delete Files"); one may list positions of other files too.
    """
    delete_files = sorted(set().union(*deleted.values()))
    positions = (spark.read.parquet(*delete_files)
                 .select(F.col("file_path").alias(_FILE), F.col("pos").alias(_POS))
                 .where(F.col(_FILE).isin(list(deleted))))
    if _positions(changed, delete_files) <= BROADCAST_MAX_POSITIONS:
        positions = F.broadcast(positions)
    at = (rows["_file"] == positions[_FILE]) & (rows["_pos"] == positions[_POS])
    return rows.join(positions, at, "left_semi").drop("_file", "_pos")


def _positions(changed: ChangedFiles, delete_files: Collection[str]) -> int:
    """How many positions the delete files list in all (from their manifests' counts)."""
    return sum(changed.delete_rows.get(path, BROADCAST_MAX_POSITIONS + 1)
               for path in delete_files)
