"""One view's Delta table: the frontier it reflects, and the commits that advance it.

One interface, :meth:`DeltaSink.apply` (a view delta) and :meth:`DeltaSink.replace` (a
view's content), takes rows from either engine; where they are held picks the writer: rows
computed on the driver (Arrow) are committed with delta-rs (:mod:`sinks.delta_rs`), rows on
Spark with delta-spark from the executors (:mod:`sinks.delta_spark`; nothing collected).
Both writers carry the same commit metadata (:mod:`sinks.delta_commit`), so their commits
interleave on one table, and the table is created with the change data feed on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
from deltalake import DeltaTable

from sinks import delta_rs
from sinks.delta_commit import (
    USER_METADATA,
    DeltaCommit,
    app_transaction_version,
    latest_frontier,
)
from sinks.delta_tables import DeltaTables, load
from sinks.errors import SinkError
from sinks.frontier import Frontier
from sinks.refresh_state import RefreshStates, freshness_properties, now_ms

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["DeltaSink", "app_transaction_version"]

_LANDED_LOOKBACK = 5  # commits searched for this sink's own: others may follow it at once


class DeltaSink:
    """One view's Delta table.

    Args:
        uri: Path or URI of the table (created on the first commit).
        app_id: Identifies the writer in Delta's application transactions.
        storage_options: delta-rs storage options (S3 endpoint, credentials).
        refresh_states: Builds the ``refresh-state`` of each commit from the view's
            sources; by default one that records no source state.
        spark: The session that commits deltas computed on Spark; None when every delta
            is given in Arrow.
        tables: Where the table is kept between refreshes (its log then read from where it
            was, not replayed from the last checkpoint); None to load it at each refresh.
    """

    def __init__(self, uri: str, app_id: str, storage_options: dict[str, str] | None = None,
                 *, refresh_states: RefreshStates | None = None,
                 spark: SparkSession | None = None, tables: DeltaTables | None = None):
        self.uri = uri
        self.app_id = app_id
        self.storage_options = storage_options
        self.refresh_states = refresh_states or RefreshStates({})
        self.spark = spark
        self.tables = tables
        self._base: DeltaTable | None = None
        self._started_ms: int | None = None

    def _table(self) -> DeltaTable | None:
        """The table as of its latest version, read from storage (never a kept one)."""
        return load(self.uri, self.storage_options)

    def frontier(self) -> dict[str, int] | None:
        """The frontier of the table's latest refresh commit; None before the first commit.

        Commits that change no row (``OPTIMIZE``, ``VACUUM``, ``SET TBLPROPERTIES``:
        view-table maintenance, :mod:`lakehouse.maintenance`) carry no frontier and are
        passed over
        (:func:`sinks.delta_commit.latest_frontier`).

        The table is taken from the sink's kept tables when it has them (hand it back with
        :meth:`release`), else loaded.

        The version read here is the base of this sink's next commit, which is made
        without retries: if another refresh committed in between, the commit fails (or
        Delta skips it, its transaction version being taken) instead of being re-applied
        on top of the other one. The call also marks the start of the refresh
        (``refresh-start-timestamp-ms`` of the refresh state).
        """
        self._started_ms = now_ms()
        table = self._base = (self.tables.take(self.uri, self.storage_options)
                              if self.tables is not None else self._table())
        if table is None:
            return None
        return latest_frontier(table.history)

    def apply(self, delta: pa.Table | DataFrame, key: Sequence[str] | None,
              frontier: Frontier, engine: str | None = None) -> None:
        """Apply a view delta in one commit carrying ``frontier``.

        In Arrow: written by delta-rs on the driver. A DataFrame: written by delta-spark,
        the executors writing the data files; nothing is collected to the driver.

        Args:
            delta: Consolidated Z-set: the view's columns plus ``_weight`` (int64), as an
                Arrow table or a DataFrame.
            key: The view's unique key, or None when rows have multiplicities.
            frontier: The source versions the table reflects after this commit.
            engine: The engine that computed the rows (``local``, ``spark``), recorded
                in the commit (:data:`sinks.frontier.ENGINE_KEY`).

        Raises:
            SinkError: The commit failed, or (Spark) the table moved; the table is unchanged.
        """
        table, commit = self._base_table(), self._commit(frontier, engine)
        if isinstance(delta, pa.Table):
            delta_rs.apply(table, self.uri, delta, key, commit, self.storage_options)
        else:
            from sinks import delta_spark

            delta_spark.apply(self._session(), self.uri, table.version() if table else None,
                              delta, key, commit, self._latest_version)
            self._require_landed(commit)

    def replace(self, rows: pa.Table | DataFrame, frontier: Frontier, engine: str | None = None
                ) -> None:
        """Replace the table's content by ``rows`` in one commit (full refresh).

        In Arrow: by delta-rs; a DataFrame: by delta-spark from the executors.

        Raises:
            SinkError: The commit failed; the table is unchanged.
        """
        commit = self._commit(frontier, engine)
        if isinstance(rows, pa.Table):
            delta_rs.write(self._base_table() or self.uri, rows, "overwrite", commit,
                           self.storage_options)
        else:
            from sinks import delta_spark

            delta_spark.write(self.uri, rows, "overwrite", commit)
            self._require_landed(commit)

    def release(self) -> None:
        """Hand the table read at :meth:`frontier` back for the next refresh to take.

        Called once the refresh is done, committed or not. After a failed refresh it is not
        called: the next refresh loads the table from storage.
        """
        if self.tables is not None and self._base is not None:
            self.tables.keep(self.uri, self._base)
        self._base = None

    def _require_landed(self, commit: DeltaCommit) -> None:
        """Fail unless ``commit`` is in the log.

        Delta skips a write whose transaction version is taken (a concurrent refresh of the
        view committed from the same base) without an error.

        Raises:
            SinkError: The commit is not among the table's latest commits.
        """
        table = self._table()
        recent = table.history(_LANDED_LOOKBACK) if table is not None else []
        if not any(c.get(USER_METADATA) == commit.user_metadata for c in recent):
            raise SinkError("another commit landed first (Delta skipped this one: its "
                            f"transaction version {commit.version} was taken)", table=self.uri)

    def _latest_version(self) -> int | None:
        """The table's latest version, read from its log with delta-rs (no Spark job)."""
        table = self._table()
        return table.version() if table is not None else None

    def _session(self) -> SparkSession:
        if self.spark is None:
            raise SinkError("a delta computed on Spark needs the sink's Spark session",
                            table=self.uri)
        return self.spark

    def _base_table(self) -> DeltaTable | None:
        """The table as of :meth:`frontier` (or now, if the frontier was not read)."""
        return self._base if self._base is not None else self._table()

    def _commit(self, frontier: Frontier, engine: str | None) -> DeltaCommit:
        table = self._base_table()
        state = self.refresh_states.state(frontier, self._started_ms)
        base_version = table.version() if table is not None else None
        return DeltaCommit(freshness_properties(frontier, state, engine), self.app_id,
                           app_transaction_version(base_version), create=table is None)
