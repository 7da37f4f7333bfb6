"""Apply view deltas to a Delta table with delta-rs.

Each commit carries the new frontier and the refresh state
(:mod:`sinks.refresh_state`) in its commit info (``custom_metadata``) and an application
transaction ``(app_id, version)`` that advances with every refresh
(Delta protocol, "Transaction Identifiers"), so a replayed tick is recognised.

The application transaction's version is the commit's table version plus one: every commit
is made without retries on the version :meth:`DeltaSink.frontier` read, so it lands at that
version + 1, and the number strictly increases from one commit of the view to the next
without reading the table's transactions back (``DeltaTable.transaction_version`` replays
the log). It equals what counting the refreshes gave before (a view table is written by its
sink only: the commit at version v was the (v + 1)-th), and exceeds it otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import DeltaError, TableNotFoundError

from ivm import WEIGHT
from sinks.arrow_zset import expanded
from sinks.errors import SinkError
from sinks.frontier import FRONTIER_KEY, Frontier, decode_frontier
from sinks.merge_source import OP
from sinks.refresh_state import RefreshStates, freshness_properties, now_ms


class DeltaSink:
    """One view's Delta table.

    Args:
        uri: Path or URI of the table (created on the first commit).
        app_id: Identifies the writer in Delta's application transactions.
        storage_options: delta-rs storage options (S3 endpoint, credentials).
        refresh_states: Builds the ``refresh-state`` of each commit from the view's
            sources; by default one that records no source state.
    """

    def __init__(self, uri: str, app_id: str, storage_options: dict[str, str] | None = None,
                 *, refresh_states: RefreshStates | None = None):
        self.uri = uri
        self.app_id = app_id
        self.storage_options = storage_options
        self.refresh_states = refresh_states or RefreshStates({})
        self._base: DeltaTable | None = None
        self._started_ms: int | None = None

    def _table(self) -> DeltaTable | None:
        try:
            return DeltaTable(self.uri, storage_options=self.storage_options)
        except TableNotFoundError:
            return None

    def frontier(self) -> dict[str, int] | None:
        """The frontier of the table's latest commit; None before the first commit.

        The version read here is the base of this sink's next commit, which is made
        without retries: if another refresh committed in between, the commit fails
        instead of being re-applied on top of the other one. The call also marks the
        start of the refresh (``refresh-start-timestamp-ms`` of the refresh state).
        """
        self._started_ms = now_ms()
        table = self._base = self._table()
        if table is None:
            return None
        for commit in table.history(1):
            return decode_frontier(commit.get(FRONTIER_KEY))
        return None

    def apply(self, delta: pa.Table, key: Sequence[str] | None, frontier: Frontier) -> None:
        """Apply a view delta in one Delta commit carrying ``frontier``.

        Args:
            delta: Consolidated Z-set as Arrow: the view's columns plus ``_weight``.
            key: The view's unique key, or None when rows have multiplicities.
            frontier: The source versions the table reflects after this commit.

        Raises:
            SinkError: The commit failed; the table is unchanged.
        """
        table = self._base_table()
        lowest = pc.min(delta[WEIGHT]).as_py()
        only_inserts = key is None and (lowest is None or lowest > 0)
        if table is None or delta.num_rows == 0 or only_inserts:
            self._write(expanded(delta), "append", frontier)
            return
        source = (_keyed_source(delta, key) if key is not None
                  else _multiset_source(delta, table))
        self._merge(table, source, key, frontier)

    def replace(self, rows: pa.Table, frontier: Frontier) -> None:
        """Replace the table's content by ``rows`` in one commit (full refresh)."""
        self._write(rows, "overwrite", frontier)

    def _base_table(self) -> DeltaTable | None:
        """The table as of :meth:`frontier` (or now, if the frontier was not read)."""
        return self._base if self._base is not None else self._table()

    def _properties(self, frontier: Frontier) -> CommitProperties:
        table = self._base_table()
        version = app_transaction_version(table.version() if table is not None else None)
        state = self.refresh_states.state(frontier, self._started_ms)
        return CommitProperties(
            custom_metadata=freshness_properties(frontier, state),
            max_commit_retries=0,
            app_transactions=[Transaction(app_id=self.app_id, version=version)],
        )

    def _write(
        self, data: pa.Table, mode: Literal["append", "overwrite"], frontier: Frontier
    ) -> None:
        try:
            write_deltalake(self._base_table() or self.uri, data, mode=mode,
                            commit_properties=self._properties(frontier),
                            storage_options=self.storage_options, schema_mode=None)
        except DeltaError as error:
            raise SinkError(f"write failed: {error}", table=self.uri) from error

    def _merge(self, table: DeltaTable, source: pa.Table, key: Sequence[str] | None,
               frontier: Frontier) -> None:
        columns = [c for c in source.column_names if c != OP]
        matched = key if key is not None else columns
        # DataFusion binds IS NOT DISTINCT FROM looser than AND: parenthesise every term.
        match = [f"(t.{_quoted(c)} IS NOT DISTINCT FROM s.{_quoted(c)})" for c in matched]
        predicate = " AND ".join([f"(s.{OP} = 'delete')", *match])
        try:
            (table.merge(source, predicate=predicate, source_alias="s", target_alias="t",
                         commit_properties=self._properties(frontier))
             .when_matched_delete()
             .when_not_matched_insert({c: f"s.{_quoted(c)}" for c in columns},
                                      predicate=f"s.{OP} = 'insert'")
             .execute())
        except DeltaError as error:
            raise SinkError(f"merge failed: {error}", table=self.uri) from error


def app_transaction_version(base_version: int | None) -> int:
    """The application transaction version of a commit made on ``base_version``.

    Args:
        base_version: The table version the commit is made on; None for the commit that
            creates the table (version 0).

    Returns:
        The commit's own table version + 1 (>= 1).
    """
    return (base_version + 1 if base_version is not None else 0) + 1


def _keyed_source(delta: pa.Table, key: Sequence[str]) -> pa.Table:
    """Delete markers for every changed key, then the new rows (see merge_source)."""
    columns = [c for c in delta.column_names if c != WEIGHT]
    if key:
        keys = delta.select(list(key)).group_by(list(key)).aggregate([])
        count = keys.num_rows
    else:
        keys, count = delta, min(delta.num_rows, 1)
    markers = pa.table(
        {c: keys[c] if c in key else pa.nulls(count, delta.schema.field(c).type) for c in columns}
        | {OP: pa.array(["delete"] * count, pa.string())}
    )
    inserts = delta.filter(pc.greater(delta[WEIGHT], 0)).select(columns)
    inserts = inserts.append_column(OP, pa.array(["insert"] * inserts.num_rows, pa.string()))
    schema = pa.schema([field.with_nullable(True) for field in inserts.schema])
    return pa.concat_tables([markers.cast(schema), inserts.cast(schema)])


def _multiset_source(delta: pa.Table, table: DeltaTable) -> pa.Table:
    """Delete markers for rows losing copies, then every copy to insert (see merge_source)."""
    columns = [c for c in delta.column_names if c != WEIGHT]
    current = table.to_pyarrow_dataset()  # noqa: F841  (scanned by DuckDB below)
    same = " AND ".join(f"r.{_quoted(c)} IS NOT DISTINCT FROM t.{_quoted(c)}" for c in columns)
    select = ", ".join(f"r.{_quoted(c)}" for c in columns)
    result = duckdb.sql(f"""
        WITH removed AS (SELECT * FROM delta WHERE {WEIGHT} < 0),
        remaining AS (
            SELECT {select}, r.{WEIGHT} + (SELECT count(*) FROM current t WHERE {same}) AS __copies
            FROM removed r),
        inserts AS (
            SELECT {', '.join(map(_quoted, columns))}, {WEIGHT} AS __copies
            FROM delta WHERE {WEIGHT} > 0
            UNION ALL SELECT * FROM remaining)
        SELECT {', '.join(map(_quoted, columns))}, 'delete' AS {OP} FROM removed
        UNION ALL
        SELECT {', '.join(map(_quoted, columns))}, 'insert' AS {OP}
        FROM inserts, range(CAST(greatest(__copies, 0) AS BIGINT))
    """).arrow()
    return pa.table(result)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
