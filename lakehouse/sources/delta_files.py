"""The change between two Delta versions from their data files, without a change data feed.

Delta protocol, "Add File and Remove File": a version's rows are the rows of its live
data files (its add actions). A file is immutable, so the change from ``old`` to ``new``
is the rows of the files live at ``new`` but not at ``old`` (+1) and of the files live at
``old`` but not at ``new`` (-1). Rewritten files (DELETE/UPDATE/MERGE rewrite whole files)
are read whole on both sides; consolidation cancels their unchanged rows. That reads more
than a change data feed would, which is why the caller warns.

A file whose deletion vector changed (Delta protocol, "Deletion Vectors") keeps its path:
it counts as changed when the number of rows its deletion vector removes differs (deletion
vectors only grow while a file stays live), and is read at both versions, each read
applying that version's deletion vector.

The file lists come from the log (delta-rs, on the driver: metadata only); the rows are
read by Spark's executors, each version's scan restricted to the changed files by the
``_metadata.file_name`` column.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ivm import WEIGHT


def live_files(table: DeltaTable) -> dict[str, int]:
    """The table's live data files: file name -> rows its deletion vector removes (0: none).

    Names are unique within a table (writers put a UUID in each). Deletion vectors are read
    only for tables with that reader feature.
    """
    paths = pa.table(table.get_add_actions()).column("path").to_pylist()
    files = {_name(str(path)): 0 for path in paths}
    if "deletionVectors" in (table.protocol().reader_features or []):
        files.update(_deleted_rows(pa.table(table.deletion_vectors().read_all())))
    return files


def _deleted_rows(vectors: pa.Table) -> dict[str, int]:
    """File name -> rows removed, from delta-rs's deletion vectors (one bool per row).

    delta-rs materializes each vector as a list of booleans on the driver: a cost in memory
    of one byte per row of each file with a deletion vector, paid only for tables without a
    change data feed.
    """
    selection = vectors["selection_vector"].combine_chunks()
    removed = pc.invert(pc.list_flatten(selection))
    owner = pc.list_parent_indices(selection)
    counts = pa.table({"file": owner, "removed": pc.cast(removed, pa.int64())}).group_by(
        "file").aggregate([("removed", "sum")])
    names = vectors["filepath"].to_pylist()
    return {_name(names[i]): n for i, n in zip(counts["file"].to_pylist(),
                                              counts["removed_sum"].to_pylist(), strict=True)}


def file_change(old: DeltaTable, new: DeltaTable,
                read: Callable[[int], DataFrame]) -> DataFrame:
    """The change from version ``old`` to ``new`` as an unconsolidated Z-set on Spark.

    Args:
        old: The table at the older version (its log only is read here).
        new: The table at the newer version.
        read: The table's rows at a version, as a Spark DataFrame.

    Returns:
        The columns of ``new`` plus ``_weight`` (long): +1 rows of added files, -1 rows of
        removed ones. Evaluating it fails if a removed file was vacuumed.
    """
    before, after = live_files(old), live_files(new)
    added = read(new.version()).where(_in_files(after.items() - before.items()))
    removed = read(old.version()).where(_in_files(before.items() - after.items()))
    columns = added.columns
    weighted = added.withColumn(WEIGHT, F.lit(1).cast("long")).unionByName(
        removed.withColumn(WEIGHT, F.lit(-1).cast("long")), allowMissingColumns=True)
    return weighted.select(*[F.col(_quoted(c)) for c in columns], WEIGHT)


def _in_files(files: Iterable[tuple[str, int]]) -> Column:
    """Rows read from one of ``files`` (name, deletion vector size) pairs."""
    names = sorted({name for name, _ in files})
    return F.col("_metadata.file_name").isin(names) if names else F.lit(False)


def _name(path: str) -> str:
    """A data file's name from its path or URI (as the log or delta-rs spells it)."""
    return unquote(posixpath.basename(path))


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
