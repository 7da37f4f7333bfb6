"""A source's rows at a version, counted from table metadata alone.

The ``auto`` refresh policy weighs a change feed against the sources' rows on every tick
(:func:`lakehouse.refresh._large_change_reason`); counting them with Spark would scan every
source (merge-on-read ones with their delete files) each time. Both table formats keep
per-file record counts in their metadata, so the count reads no data file.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from pyiceberg.manifest import DataFile, DataFileContent
from pyiceberg.table import Table
from pyiceberg.table.snapshots import TOTAL_POSITION_DELETES, TOTAL_RECORDS, Snapshot

from lakehouse.errors import SourceError

_FILE_PATH_ID = 2147483546
"""The ``file_path`` column of position delete files (Iceberg table spec, "Reserved Field IDs")."""


def iceberg_row_count(table: Table, version: int, source: str) -> int:
    """Live rows of Iceberg snapshot ``version``.

    Without position deletes, the snapshot summary's ``total-records`` (Iceberg table spec,
    "Snapshots": the optional summary totals, which Spark and pyiceberg write). With them,
    :func:`manifest_row_count`: the summary's ``total-position-deletes`` still counts delete
    files a compaction left behind although their data files are gone (seen with Spark's
    ``rewrite_data_files``), which would undercount. Exact for appends and for copy-on-write
    and merge-on-read (position) deletes. Equality deletes are not subtracted: one equality
    delete removes any number of rows, none included (a Flink upsert of a new key writes
    one), so while a snapshot has live equality deletes the count is an upper bound.

    Args:
        table: The table, as loaded by pyiceberg.
        version: A snapshot id of ``table``.
        source: The source's config name, for errors.

    Raises:
        SourceError: ``table`` has no snapshot ``version``.
    """
    snapshot = table.metadata.snapshot_by_id(version)
    if snapshot is None:
        raise SourceError(f"table has no snapshot {version}", source=source)
    summary = snapshot.summary
    # Summary.__getitem__ answers None for a missing key.
    records = summary[TOTAL_RECORDS] if summary is not None else None
    deletes = summary[TOTAL_POSITION_DELETES] if summary is not None else None
    if records is not None and deletes == "0":
        return int(records)
    return manifest_row_count(table, snapshot)


def manifest_row_count(table: Table, snapshot: Snapshot) -> int:
    """Records of the live data files minus those of the position delete files on them.

    Reads the snapshot's manifests (Avro metadata), no data or delete file. A position
    delete file that names one data file (equal ``file_path`` bounds, as Spark writes them
    by default) counts only while that file is live; one that spans several data files
    counts in full.
    """
    data: dict[str, int] = {}
    deletes: list[DataFile] = []
    for manifest in snapshot.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            if entry.data_file.content == DataFileContent.DATA:
                data[entry.data_file.file_path] = entry.data_file.record_count
            elif entry.data_file.content == DataFileContent.POSITION_DELETES:
                deletes.append(entry.data_file)
    deleted = sum(f.record_count for f in deletes
                  if (target := _referenced_file(f)) is None or target in data)
    return sum(data.values()) - deleted


def _referenced_file(delete_file: DataFile) -> str | None:
    """The one data file a position delete file applies to, or None when it spans several.

    From the bounds of its ``file_path`` column (reserved field id 2147483546, Iceberg table
    spec, "Position Delete Files").
    """
    lower = (delete_file.lower_bounds or {}).get(_FILE_PATH_ID)
    upper = (delete_file.upper_bounds or {}).get(_FILE_PATH_ID)
    return lower.decode() if lower is not None and lower == upper else None


def delta_row_count(table: DeltaTable) -> int:
    """Rows of a Delta table at the version it was opened at.

    The sum of the ``numRecords`` statistic of its add actions (Delta protocol, "Per-file
    Statistics"), as delta-rs lists them (``DeltaTable.get_add_actions``). Files written
    without statistics are counted from their Parquet footers instead. Rows hidden by
    deletion vectors are counted (the statistic is of the physical file): an upper bound
    for tables that use them.
    """
    actions = pa.table(table.get_add_actions())
    counts = actions["num_records"]
    if counts.null_count == 0:
        return int(pc.sum(counts).as_py() or 0)
    return int(table.to_pyarrow_dataset().count_rows())
