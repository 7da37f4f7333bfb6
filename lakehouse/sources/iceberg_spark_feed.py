"""An Iceberg change feed computed by Spark from the files a run of snapshots changed.

Engine ``spark`` reads no row on the driver: the driver picks the changed data files from
metadata (:mod:`lakehouse.sources.iceberg_files`) and the executors read them
(:mod:`lakehouse.sources.iceberg_staged`). Two kinds of changed files are read apart:

- A file whose only change is rows deleted by position (merge-on-read deletes) is read
  once, at the old snapshot, with each row's position; its change is the rows at the
  positions the new delete files list (weight -1), found by a join with those delete
  files (read by the executors too). Nothing is compared or shuffled but the deleted rows.
  A delete file the range removed must have its positions in the file that replaced it
  (checked by the executors); else, as when a wanted column is named ``_file`` or
  ``_pos``, the file is compared as below.
- Any other changed file (added, removed, under an equality delete, compacted) is read at
  both snapshots, +1 at the new and -1 at the old, and equal rows cancel.

Both parts are consolidated together in one aggregation.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from contextlib import ExitStack
from functools import reduce

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ivm import consolidate, with_weight
from ivm.spark_observe import counted_checkpoint
from lakehouse.sources.iceberg_files import ChangedFiles
from lakehouse.sources.iceberg_staged import POSITION_COLUMNS, staged_files

__all__ = ["BROADCAST_MAX_BYTES", "staged_change"]

BROADCAST_MAX_BYTES = 64 << 20
"""Most bytes of deleted positions (path and position each) sent whole to every executor
to find the deleted rows; more are joined by a shuffle (of the files' rows too)."""

_FILE, _POS = "__delete_file_path", "__delete_pos"
_GLOB = re.compile(r"[\[\]{}*?\\]")
"""Characters Hadoop reads as a glob in a path given to ``spark.read``."""


def staged_change(spark: SparkSession, table_name: str, old: int, new: int,
                  changed: ChangedFiles, names: Mapping[int, str],
                  table_columns: Collection[str]) -> tuple[DataFrame, int]:
    """The rows ``changed`` gained and lost from snapshot ``old`` to ``new``, checkpointed.

    Args:
        spark: A session whose catalog holds ``table_name``.
        table_name: ``catalog.namespace.table``.
        old: The snapshot the change starts after.
        new: The snapshot it ends at.
        changed: The changed data files (:func:`lakehouse.sources.iceberg_files.changed_files`).
        names: The columns wanted, by Iceberg field id, named as at ``new``.
        table_columns: The table's current column names: one named ``_file`` or ``_pos``
            would hide Iceberg's metadata column of that name.

    Returns:
        A consolidated Z-set: the columns of ``names`` plus ``_weight`` (bigint),
        materialized on the executors (``localCheckpoint``) while the files are staged;
        and its number of rows, counted in the same Spark action.
    """
    deleted = _read_once(spark, changed, {*names.values(), *table_columns})
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
        return counted_checkpoint(consolidate(reduce(DataFrame.unionByName, parts)))


def _read_once(spark: SparkSession, changed: ChangedFiles, columns: Collection[str]
               ) -> dict[str, set[str]]:
    """The files to read once (only rows deleted by position), with their new delete files.

    None when one of ``columns`` is named like a metadata column (``_file``, ``_pos``),
    none whose delete files Hadoop would read as a glob, and none whose removed delete file
    lists a position its replacement does not (rows restored), which the executors check.
    """
    if set(columns) & set(POSITION_COLUMNS):
        return {}
    deleted = {path: deletes for path, deletes in changed.only_deleted().items()
               if not any(_GLOB.search(d) for d in deletes | changed.replaced_deletes.get(
                   path, set()))}
    replaced = {path: changed.replaced_deletes[path] for path in deleted
                if path in changed.replaced_deletes}
    if replaced and _restores(spark, replaced, {p: deleted[p] for p in replaced}):
        for path in replaced:  # compared at both snapshots instead
            del deleted[path]
    return deleted


def _restores(spark: SparkSession, removed: Mapping[str, set[str]],
              added: Mapping[str, set[str]]) -> bool:
    """Whether a removed delete file lists a position no added one does (for its file).

    One Spark job on the delete files; only its answer reaches the driver.
    """
    lost = _positions_of(spark, removed)
    kept = _positions_of(spark, added)
    return not lost.join(kept, [_FILE, _POS], "left_anti").isEmpty()


def _positions_of(spark: SparkSession, deletes: Mapping[str, set[str]]) -> DataFrame:
    """The positions (``_FILE``, ``_POS``) the delete files list for the data files named.

    Position delete files are Parquet files of ``file_path`` (string) and ``pos`` (long)
    (Iceberg spec, "Position Delete Files"); one may list positions of other files too.
    """
    files = sorted(set().union(*deletes.values()))
    return (spark.read.parquet(*files)
            .select(F.col("file_path").alias(_FILE), F.col("pos").alias(_POS))
            .where(F.col(_FILE).isin(list(deletes))))


def _at_positions(spark: SparkSession, rows: DataFrame, deleted: Mapping[str, set[str]],
                  changed: ChangedFiles) -> DataFrame:
    """The ``rows`` (with ``_file``, ``_pos``) at the positions their delete files list."""
    positions = _positions_of(spark, deleted)
    if _position_bytes(changed, deleted) <= BROADCAST_MAX_BYTES:
        positions = F.broadcast(positions)
    at = (rows["_file"] == positions[_FILE]) & (rows["_pos"] == positions[_POS])
    return rows.join(positions, at, "left_semi").drop("_file", "_pos")


def _position_bytes(changed: ChangedFiles, deleted: Mapping[str, set[str]]) -> int:
    """About how many bytes the positions take, from the delete files' manifest counts.

    Each position counts as the longest data file path and 16 bytes.
    """
    files: set[str] = set().union(*deleted.values())
    rows = sum(changed.delete_rows.get(path, BROADCAST_MAX_BYTES) for path in files)
    return rows * (max(map(len, deleted), default=0) + 16)
