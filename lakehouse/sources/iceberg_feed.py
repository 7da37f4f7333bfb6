"""The change feed of an Iceberg source, computed in Arrow before Spark sees it.

Of the data files whose rows changed between two snapshots (:mod:`.iceberg_files`):

- a file live at both snapshots changed only in its deleted positions (merge-on-read
  deletes, deletion vectors): its change is the rows at the newly deleted positions
  (:mod:`.iceberg_positions`), read without the file's other rows;
- a file added or removed (appends, copy-on-write rewrites, overwrites, compactions
  touched by another change) is read whole at both snapshots with pyiceberg, and the two
  sides are differenced by row hash (:mod:`.arrow_diff`), so that only the rows that
  differ are handed to Spark instead of twice the files.

pyiceberg 0.12 does not apply equality deletes: snapshots with any go through Spark.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan, schema_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.table import FileScanTask, Table

from ivm.arrow_diff import difference
from ivm.zset import consolidate
from lakehouse.sources.column_cache import ColumnCache
from lakehouse.sources.iceberg_positions import position_changes, readable
from lakehouse.sources.manifest_cache import ManifestCache

log = logging.getLogger(__name__)


@dataclass
class ArrowChangeFeed:
    """A consolidated change feed and how it was read.

    Attributes:
        rows: The schema's columns plus ``_weight`` (int64), consolidated.
        by_position: Data files whose change was read from their deleted positions.
        whole: Data files read whole at the snapshots they are live in.
    """

    rows: pa.Table
    by_position: list[str]
    whole: list[str]


def arrow_change_feed(table: Table, old: int, new: int, paths: set[str] | None,
                      schema: Schema, cache: ColumnCache | None = None,
                      planned: Callable[[int, Collection[str] | None],
                                        Mapping[str, FileScanTask]] | None = None,
                      max_rows: int | None = None) -> ArrowChangeFeed | None:
    """The change from snapshot ``old`` to ``new`` of the data files ``paths``.

    Args:
        table: The table (pyiceberg), with both snapshots and no equality deletes in them.
        old: The snapshot the change starts after.
        new: The snapshot the change ends at.
        paths: The data files that may have changed (None: every file live at either).
        schema: The Iceberg schema rows are projected onto (by field id).
        cache: Where the row groups that deleted positions are read from are kept
            between ticks (None: nowhere).
        planned: Gives a snapshot's scan tasks by data file path, of the data files given
            (None: all), when the caller keeps them (:func:`scan_tasks` otherwise). Only
            ``paths`` are planned when given: a change of a few files of a large table
            plans those, not every file.
        max_rows: Most rows the driver may read to compute the change (None: no bound),
            checked on the manifests' record counts before any file is read
            (:func:`rows_read`).

    Returns:
        The change as a consolidated Arrow Z-set, and which files were read how; None
        when reading it would take more than ``max_rows`` rows.
    """
    plan = planned or (lambda version, files: scan_tasks(table, version, paths=files))
    before, after = plan(old, paths), plan(new, paths)
    candidates = paths if paths is not None else set(before) | set(after)
    kept = sorted(p for p in candidates
                  if p in before and p in after and readable(before[p], after[p]))
    whole = sorted(set(candidates) - set(kept))
    if max_rows is not None and rows_read(before, after, whole, kept) > max_rows:
        return None
    target = schema_to_pyarrow(schema, include_field_ids=False)
    scan = ArrowScan(table.metadata, table.io, schema, AlwaysTrue())
    changed = difference(
        scan.to_table([after[p] for p in whole if p in after]).cast(target),
        scan.to_table([before[p] for p in whole if p in before]).cast(target))
    moved = position_changes(table.metadata, table.io, [(before[p], after[p]) for p in kept],
                             schema, cache)
    rows = consolidate(pa.concat_tables([changed, moved])) if moved.num_rows else changed
    log.debug("%s: %d rows changed; %d data files read by deleted position, %d read whole",
              table.name(), rows.num_rows, len(kept), len(whole))
    return ArrowChangeFeed(rows, kept, whole)


def rows_read(before: Mapping[str, FileScanTask], after: Mapping[str, FileScanTask],
              whole: Sequence[str], by_position: Sequence[str]) -> int:
    """At most how many rows computing a change reads onto the driver, from the manifests.

    A file read whole counts its record count at each snapshot it is live in; a file read by
    deleted position counts the positions of the delete files that differ between the two
    snapshots (an upper bound: a delete file may also hold positions of other files, or
    ones deleted before).

    Args:
        before: The old snapshot's scan tasks by data file path.
        after: The new snapshot's.
        whole: The data files read whole.
        by_position: The data files live at both, read by deleted position.
    """
    rows = sum(tasks[path].file.record_count for path in whole
               for tasks in (before, after) if path in tasks)
    for path in by_position:
        old, new = ({d.file_path: d.record_count for d in tasks[path].delete_files}
                    for tasks in (before, after))
        rows += sum(count for name, count in (old | new).items()
                    if (name in old) != (name in new))
    return rows


def scan_tasks(table: Table, version: int, manifests: ManifestCache | None = None,
               paths: Collection[str] | None = None) -> dict[str, FileScanTask]:
    """The scan tasks of snapshot ``version`` by data file path (delete files attached).

    Planned from the manifest entries ``manifests`` keeps, when given. ``paths``: the data
    files to plan (None: all).
    """
    if manifests is None:
        manifests = ManifestCache(max_entries=0)  # keeps nothing
    tasks = manifests.plan_files(table, version, paths=paths)
    return {task.file.file_path: task for task in tasks}
