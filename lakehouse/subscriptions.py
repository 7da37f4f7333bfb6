"""Follow a view's changes: each snapshot of its Iceberg table as a Z-set, resumable.

A subscriber names the last snapshot it processed (``since``); it then receives every later
snapshot of the view table's ``main`` branch exactly once, in commit order, as the Z-set of
rows the snapshot added (weight +1) and removed (weight -1), computed in Arrow by the
change feed of :class:`lakehouse.sources.iceberg.IcebergSourceReader` (the same one a view
reading this view uses; :meth:`~lakehouse.sources.iceberg.IcebergSourceReader.arrow_change`,
no Spark). Without ``since`` the first change is the current content, all +1
(a snapshot, then its updates). Since the record is the table's snapshots, a subscriber
that was away catches up, as long as the snapshot it names has not been expired.
"""

from __future__ import annotations

import threading
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
from lakehouse.sources.iceberg import IcebergSourceReader
from lakehouse.sources.iceberg_lineage import Lineage, lineage
from lakehouse.spark.lazy import LazySession
from sinks.frontier import FRONTIER_KEY, decode_frontier

__all__ = ["Subscription", "ViewChange", "snapshots_after", "subscribe"]

POLL_S = 0.5
"""How often a following subscription looks for new snapshots (one catalog load)."""


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


class Subscription:
    """Where one subscriber is in a view's snapshots; each call hands out the next change.

    Reads with pyiceberg only: no Spark session is started.

    Args:
        catalog: The pipeline's catalog (a client whose caller may read the view).
        view: The view's name (its Iceberg table's identifier).
        since: The last snapshot already processed; None: start with the current content.
    """

    def __init__(self, catalog: Catalog, view: str, since: int | None = None):
        self.catalog = catalog
        self.view = view
        self.last = since
        no_spark = cast("SparkSession", LazySession(partial(_no_spark, view)))  # never started
        self.reader = IcebergSourceReader(no_spark, catalog, "", view, view)

    def next_change(self, *, must_exist: bool = False) -> ViewChange | None:
        """The change of the snapshot after :attr:`last`, which it then becomes.

        None when caught up, or when the view has no table yet. Two catalog loads (the
        table, then its change feed's).

        Raises:
            SubscriptionError: :attr:`last` is not in the table's history (expired, or the
                table was replaced), or the table does not exist and ``must_exist``.
        """
        table = _table(self.catalog, self.view, must_exist=must_exist)
        chain = snapshots_after(table, self.last, self.view) if table is not None else []
        if not chain:
            return None
        change = _change(self.reader, self.last, chain[0])
        self.last = change.snapshot_id
        return change


def subscribe(catalog: Catalog, view: str, since: int | None = None, *,
              follow: bool = True, poll_s: float = POLL_S,
              stop: threading.Event | None = None) -> Iterator[ViewChange]:
    """Yield each snapshot of the view table after ``since`` as a :class:`ViewChange`.

    Args:
        catalog: The pipeline's catalog (a client whose caller may read the view).
        view: The view's name (its Iceberg table's identifier).
        since: The last snapshot already processed; None: start with the current content.
        follow: Keep waiting for new snapshots (until ``stop`` is set); False: return once
            caught up.
        poll_s: Seconds between looks for new snapshots while following.
        stop: Ends a following subscription at its next look.

    Raises:
        SubscriptionError: As :meth:`Subscription.next_change`; the table must exist
            unless ``follow``.
    """
    stop = stop or threading.Event()
    subscription = Subscription(catalog, view, since)
    while True:
        change = subscription.next_change(must_exist=not follow)
        if change is not None:
            yield change
        elif not follow or stop.wait(poll_s):
            return


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


def _change(reader: IcebergSourceReader, last: int | None, snapshot: Snapshot) -> ViewChange:
    rows = reader.arrow_change(last, snapshot.snapshot_id)
    summary = snapshot.summary.additional_properties if snapshot.summary is not None else {}
    return ViewChange(reader.identifier, snapshot.snapshot_id,
                      decode_frontier(summary.get(FRONTIER_KEY)), snapshot.timestamp_ms, rows)


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
