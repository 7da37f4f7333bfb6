"""The change between two Delta versions from their data files, without a change data feed.

Delta protocol, "Add File and Remove File": a version's rows are the rows of its live
data files (its add actions). A file is immutable, so the change from ``old`` to ``new``
is the rows of the files live at ``new`` but not at ``old`` (+1) and of the files live at
``old`` but not at ``new`` (-1). Rewritten files (DELETE/UPDATE/MERGE rewrite whole files)
are read whole on both sides; consolidation cancels their unchanged rows. That reads more
than a change data feed would, which is why the caller warns.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.dataset as ds
from deltalake import DeltaTable

from ivm import WEIGHT


def live_files(table: DeltaTable) -> set[str]:
    """Paths (relative to the table root, as in the log) of the table's live data files."""
    return {str(path) for path in pa.table(table.get_add_actions()).column("path").to_pylist()}


def file_rows(table: DeltaTable, paths: set[str], schema: pa.Schema) -> pa.Table:
    """The rows of the live data files ``paths`` of ``table`` (partition values filled in).

    Args:
        table: A Delta table loaded at some version.
        paths: Data file paths as in the log; files not live in ``table`` are ignored.
        schema: The Arrow schema to read the rows as (the newer version's).

    Raises:
        OSError: A file is missing (vacuumed).
    """
    dataset = table.to_pyarrow_dataset()
    fragments = [f for f in dataset.get_fragments() if f.path in paths]
    if not fragments:
        return schema.empty_table()
    rows = ds.FileSystemDataset(fragments, dataset.schema, dataset.format,
                                dataset.filesystem).to_table()
    return rows.select([c for c in schema.names if c in rows.column_names])


def file_change(old: DeltaTable, new: DeltaTable) -> pa.Table:
    """The change from version ``old`` to ``new`` as an unconsolidated Arrow Z-set.

    Args:
        old: The table at the older version.
        new: The table at the newer version.

    Returns:
        The columns of ``new`` plus ``_weight`` (int64): +1 rows of added files,
        -1 rows of removed ones.

    Raises:
        OSError: A removed file was vacuumed.
    """
    before, after = live_files(old), live_files(new)
    schema = pa.schema(new.schema().to_arrow())
    added = file_rows(new, after - before, schema)
    removed = file_rows(old, before - after, schema)
    parts = [_weighted(added, 1), _weighted(removed, -1)]
    return pa.concat_tables(parts, promote_options="permissive")


def _weighted(rows: pa.Table, weight: int) -> pa.Table:
    return rows.append_column(WEIGHT, pa.array([weight] * rows.num_rows, pa.int64()))
