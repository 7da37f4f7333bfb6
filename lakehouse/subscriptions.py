"""Follow a view's changes: each snapshot of its Iceberg table as a Z-set, resumable.

A subscriber names the last snapshot it processed (``since``); it then receives every later
snapshot of the view table's ``main`` branch exactly once, in commit order, as the Z-set of
rows the snapshot added (weight +1) and removed (weight -1), computed in Arrow by the
change feed of :class:`lakehouse.sources.iceberg.IcebergSourceReader` (the same one a view
reading this view uses; :meth:`~lakehouse.sources.iceberg.IcebergSourceReader.arrow_change`,
no Spark). Without ``since`` the first change is the current content, all +1
(a snapshot, then its updates). Since the record is the table's snapshots, a subscriber
that was away catches up, as long as the snapshot it names has not been expired.

A *named* subscriber's position outlives the process: each change it moved past (its
iterator advanced beyond it) is acknowledged in a property ``subscriber.<view>.<name>`` of
the history table's namespace (:meth:`lakehouse.history.RefreshHistory.acknowledge`), and
it resumes from there when it names no ``since``. View-table maintenance keeps every
snapshot from the oldest such position on, and from the position of every subscription
live in this process (:data:`LIVE`), so a subscriber that was away still catches up
(:mod:`lakehouse.maintenance`). Compactions (``replace`` snapshots without a frontier,
:func:`sinks.iceberg.is_compaction`) change no row: they are passed over.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import cast

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot
from pyspark.sql import SparkSession

from lakehouse.errors import SnapshotExpiredError, SubscriptionError
from lakehouse.history import RefreshHistory
from lakehouse.sources.iceberg import IcebergSourceReader
from lakehouse.sources.iceberg_lineage import Lineage, lineage
from lakehouse.spark.lazy import LazySession
from sinks.iceberg import frontier_snapshot, is_compaction, snapshot_frontier

__all__ = ["LIVE", "SUBSCRIBER_NAME", "LiveSubscriptions", "Subscription", "ViewChange",
           "check_subscriber_name", "snapshots_after", "subscribe"]

POLL_S = 0.5
"""How often a following subscription looks for new snapshots (one catalog load)."""

SUBSCRIBER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What a subscriber's name may be (it is part of a namespace property's key)."""


@dataclass(frozen=True)
class ViewChange:
    """One snapshot of a view, as the change it made.

    Attributes:
        view: The view's name.
        snapshot_id: The view table's snapshot; pass it as ``since`` to resume after it.
        frontier: The source versions the snapshot reflects (None: not committed by a
            refresh).
        committed_at_ms: When the snapshot was committed (ms since the epoch).
        rows: The view's columns plus ``_weight`` (int64): +1 added, -1 removed,
            consolidated (no row with weight 0).
    """

    view: str
    snapshot_id: int
    frontier: dict[str, int] | None
    committed_at_ms: int
    rows: pa.Table


def check_subscriber_name(view: str, name: str) -> str:
    """``name``, if it is a valid subscriber name (:data:`SUBSCRIBER_NAME`).

    Raises:
        SubscriptionError: It is not.
    """
    if not SUBSCRIBER_NAME.fullmatch(name):
        raise SubscriptionError(f"subscriber name {name!r}: expected 1 to 64 letters, digits, "
                                "'_' or '-'", view=view)
    return name


class Subscription:
    """Where one subscriber is in a view's snapshots; each call hands out the next change.

    Reads with pyiceberg only: no Spark session is started. While it exists, its position
    (:attr:`last`) is held in :data:`LIVE`.

    Args:
        catalog: The pipeline's catalog (a client whose caller may read the view).
        view: The view's name (its Iceberg table's identifier).
        since: The last snapshot already processed; None: start with the current content,
            or, for a named subscriber, after its acknowledged position if it has one.
        name: The subscriber's name (:data:`SUBSCRIBER_NAME`), whose position is kept in
            ``positions``; None: an anonymous subscriber, which keeps its own position.
        positions: Where named subscribers' positions are kept (the history table's
            namespace); required with ``name``.

    Raises:
        SubscriptionError: ``name`` is invalid, or given without ``positions``.
        lakehouse.errors.HistoryError: The position cannot be read, or ``since`` recorded
            as the named subscriber's position.
    """

    def __init__(self, catalog: Catalog, view: str, since: int | None = None, *,
                 name: str | None = None, positions: RefreshHistory | None = None):
        self.catalog = catalog
        self.view = view
        self.name = name
        self.positions = positions
        if name is not None:
            check_subscriber_name(view, name)
            if positions is None:
                raise SubscriptionError("a named subscriber's position is kept in the history "
                                        "table's namespace: set history_table", view=view)
            if since is None:
                since = positions.subscribers(view).get(name)
            else:  # the subscriber says it is done with since: that is its position now,
                table = _table(catalog, view, must_exist=False)  # once known to the table
                if table is not None:
                    snapshots_after(table, since, view)  # SubscriptionError: not in its history
                positions.acknowledge(view, name, since)
        self.last = since
        no_spark = cast("SparkSession", LazySession(partial(_no_spark, view)))  # never started
        self.reader = IcebergSourceReader(no_spark, catalog, "", view, view)
        LIVE.add(self)

    def acknowledge(self, snapshot_id: int) -> None:
        """Record that the subscriber is done with ``snapshot_id`` (named subscribers only).

        Raises:
            lakehouse.errors.HistoryError: The position cannot be written.
        """
        if self.name is not None and self.positions is not None:
            self.positions.acknowledge(self.view, self.name, snapshot_id)

    def next_change(self, *, must_exist: bool = False) -> ViewChange | None:
        """The change of the snapshot after :attr:`last`, which it then becomes.

        None when caught up (compactions after :attr:`last` are no change), or when the
        view has no table yet. Two catalog loads (the table, then its change feed's).

        Raises:
            SubscriptionError: :attr:`last` is not in the table's history (expired, or the
                table was replaced), or the table does not exist and ``must_exist``.
        """
        table = _table(self.catalog, self.view, must_exist=must_exist)
        if table is None:
            return None
        chain = snapshots_after(table, self.last, self.view)
        if self.last is not None:  # a compaction is no change; the next change spans it
            chain = [snapshot for snapshot in chain if not is_compaction(snapshot)]
        if not chain:
            return None
        change = _change(self.reader, table, self.last, chain[0])
        self.last = change.snapshot_id
        return change


def subscribe(catalog: Catalog, view: str, since: int | None = None, *,
              name: str | None = None, positions: RefreshHistory | None = None,
              follow: bool = True, poll_s: float = POLL_S,
              stop: threading.Event | None = None) -> Iterator[ViewChange]:
    """Yield each snapshot of the view table after ``since`` as a :class:`ViewChange`.

    A named subscriber's change is acknowledged (its position) once the caller asks for
    the next one: a change being processed when the process dies is handed out again.

    Args:
        catalog: The pipeline's catalog (a client whose caller may read the view).
        view: The view's name (its Iceberg table's identifier).
        since: The last snapshot already processed; None: start with the current content
            (a named subscriber: after its acknowledged position, if any).
        name: The subscriber's name, whose position is kept; None: anonymous.
        positions: Where named subscribers' positions are kept; required with ``name``.
        follow: Keep waiting for new snapshots (until ``stop`` is set); False: return once
            caught up.
        poll_s: Seconds between looks for new snapshots while following.
        stop: Ends a following subscription at its next look.

    Raises:
        SubscriptionError: As :class:`Subscription` and :meth:`Subscription.next_change`;
            the table must exist unless ``follow``.
        lakehouse.errors.HistoryError: A named subscriber's position cannot be read or
            written.
    """
    stop = stop or threading.Event()
    subscription = Subscription(catalog, view, since, name=name, positions=positions)
    while True:
        change = subscription.next_change(must_exist=not follow)
        if change is not None:
            yield change
            subscription.acknowledge(change.snapshot_id)  # the caller moved past it
        elif not follow or stop.wait(poll_s):
            return


class LiveSubscriptions:
    """The subscriptions alive in this process, and where each is in its view.

    Held weakly: a subscription no longer referenced (its iterator finished or dropped, its
    stream closed) holds nothing.
    """

    def __init__(self) -> None:
        self._live: weakref.WeakSet[Subscription] = weakref.WeakSet()
        self._lock = threading.Lock()

    def add(self, subscription: Subscription) -> None:
        """Hold ``subscription``'s position while it is alive."""
        with self._lock:
            self._live.add(subscription)

    def positions(self, view: str) -> set[int]:
        """The snapshots of ``view`` that live subscriptions last handed out."""
        with self._lock:
            live = list(self._live)
        return {s.last for s in live if s.view == view and s.last is not None}


LIVE = LiveSubscriptions()
"""The live subscriptions of this process (maintenance keeps their positions)."""


def snapshots_after(table: Table, since: int | None, view: str) -> list[Snapshot]:
    """The snapshots of ``table`` (view ``view``)'s ``main`` after ``since``, oldest first.

    ``since`` None: the current snapshot alone (its whole content is the first change).

    Raises:
        SubscriptionError: ``since`` is not an ancestor of the current snapshot.
    """
    current = table.current_snapshot()
    if current is None:
        return []
    if since is None:
        return [current]
    try:  # the change feeds' own walk from a snapshot back to an older one
        chain = lineage(table.metadata, since, current.snapshot_id, source=view)
    except SnapshotExpiredError:
        chain = Lineage(None, f"snapshot {since} was expired")
    if chain.snapshots is None:
        raise SubscriptionError(
            f"snapshot {since} is no longer in the table's history ({chain.reason}): "
            "subscribe again without since, from its current content", view=view)
    return chain.snapshots


def _change(reader: IcebergSourceReader, table: Table, last: int | None,
            snapshot: Snapshot) -> ViewChange:
    rows = reader.arrow_change(last, snapshot.snapshot_id)
    frontier = snapshot_frontier(frontier_snapshot(table.metadata, snapshot.snapshot_id))
    return ViewChange(reader.identifier, snapshot.snapshot_id, frontier, snapshot.timestamp_ms,
                      rows)


def _table(catalog: Catalog, identifier: str, *, must_exist: bool) -> Table | None:
    try:
        return catalog.load_table(identifier)
    except NoSuchTableError:
        if must_exist:
            raise SubscriptionError("the view has no table yet (it is built by its first "
                                    "refresh)", view=identifier) from None
        return None


def _no_spark(view: str) -> SparkSession:
    raise SubscriptionError("following this view would need Spark", view=view)
