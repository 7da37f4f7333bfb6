"""Delta tables kept between refreshes, brought up to date instead of loaded again.

Loading a Delta table replays its log from the last checkpoint: up to
``delta.checkpointInterval`` commits (100 by default), one JSON file each. A view's table
takes a commit each tick, so loading it anew at every tick read some fifty log files on
average. A kept table reads only the commits made since (delta-rs
``DeltaTable.update_incremental``), whoever made them (delta-spark, view-table maintenance).

A table is held by one user at a time: :meth:`DeltaTables.take` removes it and
:meth:`DeltaTables.keep` puts it back, so two threads never share a ``DeltaTable`` (delta-rs
updates its state in place). A user that finds none, because another holds it or none was
kept, loads the table from storage.

A table deleted and created again at the same URI by another process is not noticed by
:meth:`~deltalake.DeltaTable.update_incremental` if its log is shorter than the kept
version: this project never deletes a view's Delta table.
"""

from __future__ import annotations

import threading

from cachetools import LRUCache
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

__all__ = ["DeltaTables", "load"]

KEPT = 64
"""Tables kept (least recently kept dropped first): one a view, each a few KiB of state
for a view table that maintenance compacts."""


def load(uri: str, storage_options: dict[str, str] | None) -> DeltaTable | None:
    """The table at ``uri`` as of its latest version, read from storage; None if absent."""
    try:
        return DeltaTable(uri, storage_options=storage_options)
    except TableNotFoundError:
        return None


class DeltaTables:
    """Loaded Delta tables by URI, handed to one user at a time.

    Args:
        kept: How many tables to keep at most.
    """

    def __init__(self, kept: int = KEPT):
        self._lock = threading.Lock()
        self._tables: LRUCache[str, DeltaTable] = LRUCache(kept)

    def take(self, uri: str, storage_options: dict[str, str] | None) -> DeltaTable | None:
        """The table at ``uri`` as of its latest version; None if there is no table.

        A kept table is removed from here and brought up to date; otherwise (or if
        bringing it up to date fails) the table is loaded from storage.
        """
        with self._lock:
            table = self._tables.pop(uri, None)
        if table is not None:
            try:
                table.update_incremental()
                return table
            except DeltaError:  # its log cannot be read on from there: load it afresh
                pass
        return load(uri, storage_options)

    def keep(self, uri: str, table: DeltaTable) -> None:
        """Keep ``table`` (taken from here or loaded) for the next :meth:`take` of ``uri``."""
        with self._lock:
            self._tables[uri] = table
