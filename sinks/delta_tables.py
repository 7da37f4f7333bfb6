"""Delta tables kept between refreshes, brought up to date instead of loaded again.

Loading a Delta table replays its log from the last checkpoint: up to
``delta.checkpointInterval`` commits (delta-rs writes a checkpoint every 100 by default,
delta-spark every 10), one JSON file each. A view's table takes a commit each tick, so
loading it anew at every tick read tens of log files. A kept table reads only the commits
made since (delta-rs ``DeltaTable.update_incremental``), whoever made them (delta-spark,
view-table maintenance).

A table is held by one user at a time: :meth:`DeltaTables.take` removes it and
:meth:`DeltaTables.keep` puts it back, so two threads never share a ``DeltaTable`` (delta-rs
updates its state in place). A user that finds none, because another holds it or none was
kept, loads the table from storage.

A table deleted meanwhile (a user dropping a view's tables to rebuild it) is not noticed by
``update_incremental``: it finds no newer commit. :meth:`DeltaTables.take` therefore also
reads the kept version's commit, and loads the table anew when that commit is gone. A
table deleted and created again past the kept version in between is not told apart.
"""

from __future__ import annotations

import logging
import threading

from cachetools import LRUCache
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

__all__ = ["DeltaTables", "load"]

_log = logging.getLogger(__name__)

KEPT = 256
"""Tables kept (least recently kept dropped first): one a view. A table's state is its
live files' add actions: small for a view table that maintenance compacts."""


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
        bringing it up to date fails, or its latest commit is gone) the table is loaded
        from storage.
        """
        with self._lock:
            table = self._tables.pop(uri, None)
        if table is not None:
            try:
                table.update_incremental()
                if table.history(1):  # else the table was deleted meanwhile
                    return table
            except DeltaError as error:  # its log cannot be read on from there
                _log.debug("loading Delta table %s anew: %s", uri, error)
        return load(uri, storage_options)

    def keep(self, uri: str, table: DeltaTable) -> None:
        """Keep ``table`` (taken from here or loaded) for the next :meth:`take` of ``uri``."""
        with self._lock:
            self._tables[uri] = table
