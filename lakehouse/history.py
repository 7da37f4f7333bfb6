"""The refresh history, and which views are suspended, in one Iceberg table of the catalog.

Every refresh that committed (``incremental`` or ``full``) or ``failed`` appends one row to
the ``history_table`` of the config (``pipeline.refresh_history`` by default), an Iceberg
v2 table of the pipeline's own catalog, so DuckDB, Trino, Spark and pyiceberg query it by
name. A skipped tick (no source advanced) is not recorded: an ``on_change`` view checks its
sources five times a second.

The properties of the table's namespace record the suspended views (``suspended.<view>``:
when, ISO 8601 UTC) and the named subscribers' positions (``subscriber.<view>.<name>``: the
last snapshot id acknowledged, :mod:`lakehouse.subscriptions`), so each is one catalog
call, survives restarts and is seen by every process of the pipeline; the scheduler
re-reads the suspensions (one small call) at most every :data:`SUSPENSION_TTL_S`. The
table keeps its newest :data:`KEPT_SNAPSHOTS` snapshots (appends are only ever added to
the current one), so its metadata does not grow with every refresh. Each append writes a
data file; once the table has :data:`COMPACT_FILES`, they are rewritten as one, and the
rows older than the retention (``history_retain_for``) are left out then, but each view's
newest.

Columns (:data:`HISTORY_SCHEMA`): ``view`` string; ``started_at`` timestamp (UTC, µs);
``duration_s`` double; ``mode`` string (``incremental``, ``full``, ``failed``); ``reason``
string (why in full); ``engine`` and ``engine_reason`` strings; ``frontier_before`` and
``frontier_after`` strings (JSON objects, source name to version; null before the first
build); ``rows_in`` and ``rows_out`` longs; ``sinks`` string (the sink kinds committed,
comma-separated); ``error`` string (the first line of a failure's message).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException, NoSuchNamespaceError, NoSuchTableError
from pyiceberg.expressions import (
    And,
    BooleanExpression,
    EqualTo,
    GreaterThanOrEqual,
    Reference,
)
from pyiceberg.expressions.literals import literal
from pyiceberg.table import Table, TableProperties

from lakehouse.errors import HistoryError

if TYPE_CHECKING:
    from lakehouse.refresh import RefreshResult

__all__ = ["HISTORY_SCHEMA", "HistoryRow", "RefreshHistory", "SUSPENSION_TTL_S", "first_line",
           "retained"]

log = logging.getLogger(__name__)

SUSPENSION_TTL_S = 1.0
"""How long the scheduler trusts the suspended views it read (one catalog load each)."""

COMMIT_ATTEMPTS = 3
"""Appends retried after another process committed first (each reloads the table)."""

COMPACT_FILES = 64
"""Data files of the history table (about one per append) from which an append rewrites
them as one, the rows past the retention left out."""

KEPT_SNAPSHOTS = 20
"""Snapshots of the history table kept; older ones are expired, :data:`EXPIRE_BATCH` at a time."""
EXPIRE_BATCH = 20


HISTORY_TABLE_PROPERTIES = {"commit.manifest-merge.enabled": "true",
                            TableProperties.METADATA_DELETE_AFTER_COMMIT_ENABLED: "true"}
"""Appends merge small manifests, so the table's manifest list does not grow per refresh,
and the catalog deletes the metadata files that fall out of the metadata log."""

SUSPENDED_PREFIX = "suspended."
SUBSCRIBER_PREFIX = "subscriber."
"""Namespace property ``subscriber.<view>.<name>``: the last snapshot of the view that the
named subscriber acknowledged (:mod:`lakehouse.subscriptions`)."""

HISTORY_SCHEMA = pa.schema([
    pa.field("view", pa.string(), nullable=False),
    pa.field("started_at", pa.timestamp("us", tz="UTC"), nullable=False),
    pa.field("duration_s", pa.float64(), nullable=False),
    pa.field("mode", pa.string(), nullable=False),
    pa.field("reason", pa.string()),
    pa.field("engine", pa.string()),
    pa.field("engine_reason", pa.string()),
    pa.field("frontier_before", pa.string()),
    pa.field("frontier_after", pa.string()),
    pa.field("rows_in", pa.int64()),
    pa.field("rows_out", pa.int64()),
    pa.field("sinks", pa.string()),
    pa.field("error", pa.string()),
])
"""The history table's columns (Arrow; the Iceberg schema is derived from it)."""


@dataclass(frozen=True)
class HistoryRow:
    """One refresh, as recorded.

    Attributes:
        view: The view's name.
        started_at: When the refresh started (UTC).
        duration_s: Its wall time, in seconds.
        mode: ``incremental``, ``full`` or ``failed``.
        frontier_before: The source versions the refreshed sinks reflected before (None:
            never built, or unknown after an early failure).
        result: What the refresh did, when it committed; None when it failed.
        error: The first line of the failure's message, when it failed.
    """

    view: str
    started_at: datetime
    duration_s: float
    mode: str
    frontier_before: Mapping[str, int] | None = None
    result: RefreshResult | None = None
    error: str | None = None

    @classmethod
    def of(cls, result: RefreshResult, started_at: datetime,
           frontier_before: Mapping[str, int] | None) -> HistoryRow:
        """The row of a refresh that committed."""
        return cls(result.view, started_at, result.duration_s, result.mode, frontier_before,
                   result)

    @classmethod
    def failed(cls, view: str, started_at: datetime, duration_s: float,
               frontier_before: Mapping[str, int] | None, error: BaseException) -> HistoryRow:
        """The row of a refresh that failed with ``error``."""
        return cls(view, started_at, duration_s, "failed", frontier_before,
                   error=first_line(error))

    def to_dict(self) -> dict[str, object]:
        """The row as :data:`HISTORY_SCHEMA` columns."""
        result = self.result
        return {
            "view": self.view, "started_at": self.started_at, "duration_s": self.duration_s,
            "mode": self.mode,
            "reason": result.reason if result else None,
            "engine": result.engine if result else None,
            "engine_reason": result.engine_reason if result else None,
            "frontier_before": _json(self.frontier_before),
            "frontier_after": _json(result.frontier) if result else None,
            "rows_in": result.rows_in if result else None,
            "rows_out": result.rows_out if result else None,
            "sinks": ",".join(result.sinks) if result else None,
            "error": self.error,
        }


class RefreshHistory:
    """The history table of one catalog: refreshes appended, read back; views suspended.

    Args:
        catalog: The pipeline's catalog.
        identifier: ``namespace.table`` of the history table.
        retain_for_s: Rows of refreshes started longer ago than this, in seconds, are
            left out when the table's files are compacted; None keeps every row.
    """

    def __init__(self, catalog: Catalog, identifier: str, retain_for_s: float | None = None):
        self.catalog = catalog
        self.identifier = identifier
        self.namespace = identifier.rsplit(".", 1)[0]
        self.retain_for_s = retain_for_s

    def append(self, rows: Sequence[HistoryRow]) -> None:
        """Append ``rows`` in one commit, creating the table (and namespace) if absent.

        A table created before :data:`HISTORY_TABLE_PROPERTIES` gets them in that commit.

        Raises:
            HistoryError: The table cannot be created or written (after
                :data:`COMMIT_ATTEMPTS` commits lost to other writers).
        """
        data = pa.Table.from_pylist([row.to_dict() for row in rows], schema=HISTORY_SCHEMA)
        for attempt in range(1, COMMIT_ATTEMPTS + 1):
            try:
                table = self._load_or_create()
                with table.transaction() as transaction:
                    missing = {key: value for key, value in HISTORY_TABLE_PROPERTIES.items()
                               if table.properties.get(key) != value}
                    if missing:  # a table created before they were set
                        transaction.set_properties(missing)
                    transaction.append(data)
                break
            except CommitFailedException as error:
                if attempt == COMMIT_ATTEMPTS:
                    raise HistoryError(f"append lost to other writers: {error}",
                                       table=self.identifier) from error
            except HistoryError:
                raise
            except Exception as error:  # catalog and storage clients raise many types
                raise HistoryError(f"append failed: {first_line(error)}",
                                   table=self.identifier) from error
        _expire_old_snapshots(table)
        self._compact(table)

    def _compact(self, table: Table) -> None:
        """Rewrite the table's rows as one data file once it has :data:`COMPACT_FILES`.

        Rows of refreshes started before the retention (:attr:`retain_for_s`) are left
        out, but each view's newest row (:func:`retained`). Each append adds a data file,
        and each merge-append rewrites the manifest listing them all: without this, an
        append's cost and a read's grow with every refresh ever recorded. Best effort,
        after the append landed. A row another process appends meanwhile is never lost:
        pyiceberg retries the commit on the new head, and the overwrite's validation
        (serializable, the default ``write.update.isolation-level``) refuses it when data
        files were added since the rows were read. That refusal, or any failure, is
        logged; a later append tries again, and the file written for the refused commit
        is left unreferenced.
        """
        current = table.current_snapshot()
        summary = current.summary if current is not None else None
        if summary is None or int(summary.get("total-data-files") or 0) < COMPACT_FILES:
            return
        try:
            rows = retained(table.scan().to_arrow().cast(HISTORY_SCHEMA), self.retain_for_s)
            with table.transaction() as transaction:
                transaction.overwrite(rows)
        except Exception as error:  # refused (another writer appended), or storage failed
            log.info("history table: files not compacted this time: %s", first_line(error))

    def read(self, view: str | None = None, limit: int | None = None,
             since: datetime | None = None) -> pa.Table:
        """The recorded refreshes, newest first (:data:`HISTORY_SCHEMA`).

        Args:
            view: Only this view's refreshes; None: every view's.
            limit: At most this many rows; None: all.
            since: Only refreshes started at or after this time (naive: local time; the
                scan skips data files whose statistics end before it); None: all.

        Raises:
            HistoryError: The table cannot be read.
        """
        table = self._load()
        if table is None:
            return HISTORY_SCHEMA.empty_table()
        filters: list[BooleanExpression] = []
        if view:
            filters.append(EqualTo(term=Reference("view"), value=literal(view)))
        if since is not None:
            filters.append(GreaterThanOrEqual(term=Reference("started_at"),
                                              value=literal(since.astimezone(UTC).isoformat())))
        try:
            scan = table.scan(row_filter=And(*filters)) if len(filters) > 1 else (
                table.scan(row_filter=filters[0]) if filters else table.scan())
            rows = scan.to_arrow().cast(HISTORY_SCHEMA)
        except Exception as error:
            raise HistoryError(f"read failed: {first_line(error)}",
                               table=self.identifier) from error
        rows = rows.sort_by([("started_at", "descending")])
        return rows if limit is None else rows.slice(0, limit)

    def suspended(self) -> dict[str, str]:
        """The suspended views, each with when it was suspended (ISO 8601, UTC).

        One small catalog call (the namespace's properties), whatever the history's size.

        Raises:
            HistoryError: The namespace's properties cannot be read.
        """
        return {key.removeprefix(SUSPENDED_PREFIX): value
                for key, value in self._properties().items() if key.startswith(SUSPENDED_PREFIX)}

    def suspend(self, view: str) -> None:
        """Record ``view`` as suspended (one commit; a suspended view stays so).

        Raises:
            HistoryError: The namespace cannot be created or its properties set.
        """
        if view in self.suspended():
            return
        since = datetime.now(UTC).isoformat(timespec="seconds")
        self._set_properties(updates={SUSPENDED_PREFIX + view: since})

    def resume(self, view: str) -> None:
        """Record ``view`` as no longer suspended (one commit; nothing if it was not).

        Raises:
            HistoryError: The namespace's properties cannot be read or set.
        """
        if view in self.suspended():
            self._set_properties(removals={SUSPENDED_PREFIX + view})

    def subscribers(self, view: str) -> dict[str, int]:
        """The named subscribers of ``view``, each with the last snapshot it acknowledged.

        Read from the namespace's properties ``subscriber.<view>.<name>`` (one small call);
        view-table maintenance keeps every snapshot from the oldest of them on
        (:mod:`lakehouse.maintenance`).

        Raises:
            HistoryError: The namespace's properties cannot be read.
        """
        prefix = f"{SUBSCRIBER_PREFIX}{view}."
        found = {}
        for key, value in self._properties().items():
            name = key.removeprefix(prefix)
            if key.startswith(prefix) and "." not in name and value.lstrip("-").isdigit():
                found[name] = int(value)
        return found

    def acknowledge(self, view: str, name: str, snapshot_id: int) -> None:
        """Record that subscriber ``name`` of ``view`` is done with ``snapshot_id`` (one commit).

        Raises:
            HistoryError: The namespace cannot be created or its properties set.
        """
        self._set_properties(updates={f"{SUBSCRIBER_PREFIX}{view}.{name}": str(snapshot_id)})

    def unsubscribe(self, view: str, name: str) -> None:
        """Forget subscriber ``name`` of ``view``: its snapshot is no longer kept.

        Raises:
            HistoryError: The namespace's properties cannot be read or set.
        """
        if name in self.subscribers(view):
            self._set_properties(removals={f"{SUBSCRIBER_PREFIX}{view}.{name}"})

    def _properties(self) -> dict[str, str]:
        """The namespace's properties (none when it does not exist yet).

        Raises:
            HistoryError: They cannot be read.
        """
        try:
            return dict(self.catalog.load_namespace_properties(self.namespace))
        except NoSuchNamespaceError:
            return {}
        except Exception as error:
            raise HistoryError(f"cannot read its namespace's properties: {first_line(error)}",
                               table=self.identifier) from error

    def _set_properties(self, updates: Mapping[str, str] | None = None,
                        removals: set[str] | None = None) -> None:
        try:
            self.catalog.create_namespace_if_not_exists(self.namespace)
            self.catalog.update_namespace_properties(self.namespace, removals, dict(updates or {}))
        except Exception as error:
            raise HistoryError(f"cannot set its namespace's properties: {first_line(error)}",
                               table=self.identifier) from error

    def _load(self) -> Table | None:
        """The table; None when absent.

        Raises:
            HistoryError: It cannot be loaded.
        """
        try:
            return self.catalog.load_table(self.identifier)
        except NoSuchTableError:
            return None
        except Exception as error:
            raise HistoryError(f"cannot load it: {first_line(error)}",
                               table=self.identifier) from error

    def _load_or_create(self) -> Table:
        """The table, created with its namespace when absent.

        Raises:
            HistoryError: It cannot be loaded or created.
        """
        table = self._load()
        if table is not None:
            return table
        try:
            self.catalog.create_namespace_if_not_exists(self.namespace)
            return self.catalog.create_table_if_not_exists(
                self.identifier, schema=HISTORY_SCHEMA, properties=HISTORY_TABLE_PROPERTIES)
        except Exception as error:
            raise HistoryError(f"cannot create it: {first_line(error)}",
                               table=self.identifier) from error


def retained(rows: pa.Table, retain_for_s: float | None) -> pa.Table:
    """The history ``rows`` a compaction keeps: the recent ones, and each view's newest.

    Recent: of refreshes started within ``retain_for_s`` seconds of now (None: all). A
    view's newest row is kept whatever its age: it is what :meth:`RefreshHistory.read`
    answers about the view (its last failure, recorded once however often it repeats;
    its last refresh, however long ago).

    Args:
        rows: Rows of :data:`HISTORY_SCHEMA`.
        retain_for_s: The retention, in seconds; None keeps every row.
    """
    if retain_for_s is None or rows.num_rows == 0:
        return rows
    cutoff = pa.scalar(datetime.now(UTC) - timedelta(seconds=retain_for_s),
                       HISTORY_SCHEMA.field("started_at").type)
    newest = rows.group_by("view").aggregate([("started_at", "max")])
    joined = rows.join(newest, keys="view")
    keep = pc.or_(pc.greater_equal(joined["started_at"], cutoff),
                  pc.equal(joined["started_at"], joined["started_at_max"]))
    return joined.filter(keep).select(HISTORY_SCHEMA.names).cast(HISTORY_SCHEMA)


def _expire_old_snapshots(table: Table) -> None:
    """Expire the history table's snapshots beyond the newest :data:`KEPT_SNAPSHOTS`.

    Each append is a snapshot; without this, the table's metadata (rewritten by every
    commit) grows by one snapshot per refresh. Rows are never lost: they are all in the
    current snapshot. A snapshot a branch or tag points at is kept. Best effort, after
    the append landed: a failure (another process expiring the same ones first) is only
    logged, and the next append tries again.
    """
    referenced = {ref.snapshot_id for ref in table.metadata.refs.values()}
    snapshots = sorted(table.metadata.snapshots, key=lambda s: s.timestamp_ms)
    old = [s.snapshot_id for s in snapshots[:-KEPT_SNAPSHOTS] if s.snapshot_id not in referenced]
    if len(old) < EXPIRE_BATCH:
        return
    try:
        table.maintenance.expire_snapshots().by_ids(old).commit()
    except Exception as error:  # lost to another writer, or already expired by it
        log.info("history table: snapshots not expired this time: %s", first_line(error))


def refreshed_from(committed: Mapping[str, Mapping[str, int] | None],
                   target: Mapping[str, int]) -> Mapping[str, int] | None:
    """The frontier a refresh to ``target`` starts from: that of the first sink behind it.

    Args:
        committed: Each sink's committed frontier, by kind (None: never built).
        target: The sources' versions the refresh brings the sinks to.

    Returns:
        The first frontier of ``committed`` other than ``target``; ``target`` when every
        sink is there already (a full refresh asked for); None when a sink was never
        built or no sink is configured.
    """
    behind = [frontier for frontier in committed.values() if frontier != target]
    if behind:
        return behind[0]
    return target if committed else None


def _json(frontier: Mapping[str, int] | None) -> str | None:
    return None if frontier is None else json.dumps(dict(frontier), sort_keys=True)


def first_line(error: BaseException) -> str:
    """The first line of ``error``'s message (its type's name when it has none)."""
    return str(error).splitlines()[0] if str(error) else type(error).__name__
