"""A process's in-memory DuckDB database, shared by cursors and renewed now and then.

The local engine and the change feeds' grouping run many small queries (a long
``lakehouse run`` tens a second) on one in-memory database: a new database costs several
milliseconds, a cursor on it next to nothing.

DuckDB leaves a dead node in its buffer pool's eviction queue for each temporary buffer a
query destroys, a hash aggregate's for one, and on this workload never purges them
(duckdb/duckdb PR 23444 fixes another path to dead nodes that pile up). Measured here: a
database running one small GROUP BY after another grows about 300 bytes a query without
end, on DuckDB 1.5.5 and on 2.0.0 (whose ``duckdb_eviction_queues()`` counted as many dead
nodes as queries after 30,000). On the soak benchmark that was about 1.3 MiB a minute, most
of the native memory growth of ``lakehouse run`` (memray: ``duckdb::BlockHandle`` objects
held by those nodes). A :class:`SharedDatabase` therefore hands out cursors of a new
database after :data:`RENEW_AFTER` cursors; the old one is freed when its last cursor
closes.
"""

from __future__ import annotations

import threading
from typing import Any

import duckdb

__all__ = ["RENEW_AFTER", "SharedDatabase"]

RENEW_AFTER = 10_000
"""Cursors taken from one database before the next is opened: its dead eviction nodes are
then at most a few MB, and opening a database (about 6 ms) costs under a microsecond a
cursor."""


class SharedDatabase:
    """An in-memory DuckDB database of a given configuration, one cursor per caller.

    Args:
        config: DuckDB settings of the database (``duckdb.connect(config=...)``).
        renew_after: Cursors taken before a new database is opened.
    """

    def __init__(self, config: dict[str, Any], renew_after: int = RENEW_AFTER):
        self.config = config
        self.renew_after = renew_after
        self._database: duckdb.DuckDBPyConnection | None = None
        self._taken = 0
        self._lock = threading.Lock()

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A new cursor: a connection of its own (its registered tables are its own).

        The caller closes it. Cursors of a database that was renewed keep working.
        """
        with self._lock:
            if self._database is None or self._taken >= self.renew_after:
                # the old one is dropped, never closed: closing would close its cursors
                self._database = duckdb.connect(config=self.config)
                self._taken = 0
            self._taken += 1
            return self._database.cursor()
