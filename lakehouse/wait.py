"""Read-your-writes for orchestrators: wait until a view reflects a source's snapshot.

A producer that committed snapshot ``S`` of a source asks for the first snapshot of the
view's Iceberg table whose frontier includes ``S``: for an Iceberg source (or a view read
as one) the frontier's snapshot is ``S`` or a descendant of it on the source's lineage
(``S`` itself must be on the source's branch, ``ref``); for a Delta source its version is
at least ``S``. Frontiers only move forward along the view table's ``main``, so the answer
is found by walking that branch back from its head while the frontiers still include
``S``: the last one that does is the first. Compactions (``replace`` snapshots without a
frontier, :func:`sinks.iceberg.is_compaction`) change no row and are passed over.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot

from lakehouse.config import Config, DeltaSource, IcebergSource
from lakehouse.errors import SourceError, WaitTimeoutError
from lakehouse.storage import delta_options
from sinks.frontier import FRONTIER_KEY, decode_frontier
from sinks.iceberg import is_compaction

__all__ = ["WaitRequest", "first_reflecting", "wait_for"]

POLL_S = 0.5
"""How often a wait looks at the view table again (one catalog load, one per source)."""


@dataclass(frozen=True)
class WaitRequest:
    """A view, and the source version it must reflect.

    Attributes:
        view: The view's name.
        source: The source's name in the config (one the view reads directly).
        version: The source's Iceberg snapshot id, or Delta version.
    """

    view: str
    source: str
    version: int


def wait_for(config: Config, catalog: Catalog, request: WaitRequest, timeout_s: float,
             late_reason: Callable[[], str], poll_s: float = POLL_S) -> int:
    """The first snapshot of the view table that reflects the request, once there is one.

    Args:
        config: The pipeline's configuration.
        catalog: Its catalog.
        request: What to wait for.
        timeout_s: Seconds to wait at most.
        late_reason: Says why the view is late (its degraded reason), for the timeout.
        poll_s: Seconds between looks.

    Raises:
        SourceError: The source has no such snapshot or version.
        WaitTimeoutError: No snapshot reflected it within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        found = first_reflecting(config, catalog, request)
        if found is not None:
            return found
        if time.monotonic() >= deadline:
            raise WaitTimeoutError(
                f"no snapshot reflects {request.source} at {request.version} after "
                f"{timeout_s:g} s", view=request.view, source=request.source,
                version=request.version, reason=late_reason())
        time.sleep(max(0.0, min(poll_s, deadline - time.monotonic())))


def first_reflecting(config: Config, catalog: Catalog, request: WaitRequest) -> int | None:
    """The oldest snapshot of the view table whose frontier includes the request, or None.

    Raises:
        SourceError: The source's table is missing, or has no such snapshot on its branch
            (or version).
    """
    try:
        table = catalog.load_table(request.view)
    except NoSuchTableError:
        table = None  # not built yet
    includes = _inclusion(config, catalog, request)  # loaded after: knows every frontier's
    if table is None:
        return None
    first = None
    for snapshot in _lineage(_by_id(table.metadata), table.metadata.current_snapshot_id):
        if is_compaction(snapshot):  # no row changed: the snapshot under it answers
            continue
        summary = snapshot.summary.additional_properties if snapshot.summary else {}
        frontier = decode_frontier(summary.get(FRONTIER_KEY))
        if frontier is None or not includes(frontier.get(request.source)):
            break
        first = snapshot.snapshot_id
    return first


def _inclusion(config: Config, catalog: Catalog,
               request: WaitRequest) -> Callable[[int | None], bool]:
    """Whether a frontier's version of the source includes the requested one.

    Raises:
        SourceError: The source's table is missing, or has no such snapshot on its branch
            (or version).
    """
    source = config.sources[request.source]
    if isinstance(source, DeltaSource):
        return _delta_inclusion(config, source, request)
    identifier, ref = ((source.iceberg, source.ref) if isinstance(source, IcebergSource)
                       else (source.view, "main"))
    try:
        metadata = catalog.load_table(identifier).metadata
    except NoSuchTableError:
        raise SourceError(f"its table is missing ({identifier})", source=request.source) from None
    by_id = _by_id(metadata)
    if request.version not in by_id:
        raise SourceError(f"has no snapshot {request.version}", source=request.source)
    head = metadata.refs[ref].snapshot_id if ref in metadata.refs else None
    floor = by_id[request.version].sequence_number
    known: dict[int, bool] = {request.version: True}

    def includes(version: int | None) -> bool:
        """Whether ``request.version`` is ``version`` or one of its ancestors.

        Every snapshot walked through gets the same answer: the walks of all the view's
        frontiers together visit each source snapshot once.
        """
        if version is None:
            return False
        walked: list[int] = []
        answer = False
        for snapshot in _lineage(by_id, version, stop_below=floor):
            if snapshot.snapshot_id in known:
                answer = known[snapshot.snapshot_id]
                break
            walked.append(snapshot.snapshot_id)
        known.update(dict.fromkeys(walked, answer))
        return answer

    if head is None or not includes(head):
        raise SourceError(f"snapshot {request.version} is not on {ref} (another branch, or "
                          "rolled back)", source=request.source)
    return includes


def _delta_inclusion(config: Config, source: DeltaSource,
                     request: WaitRequest) -> Callable[[int | None], bool]:
    try:
        latest = DeltaTable(source.delta,
                            storage_options=delta_options(config, source.delta)).version()
    except TableNotFoundError:
        raise SourceError(f"its table is missing ({source.delta})",
                          source=request.source) from None
    if request.version > latest:
        raise SourceError(f"has no version {request.version} (latest {latest})",
                          source=request.source)
    return lambda version: version is not None and version >= request.version


def _by_id(metadata: TableMetadata) -> dict[int, Snapshot]:
    """Each snapshot by id (pyiceberg's ``snapshot_by_id`` scans them all each time)."""
    return {snapshot.snapshot_id: snapshot for snapshot in metadata.snapshots}


def _lineage(by_id: Mapping[int, Snapshot], head: int | None,
             stop_below: int | None = None) -> Iterator[Snapshot]:
    """The snapshots from ``head`` back through their parents, newest first.

    ``stop_below``: stop at a snapshot whose sequence number is lower (none older can be
    the one looked for).
    """
    current = by_id.get(head) if head is not None else None
    while current is not None:
        if stop_below is not None and current.sequence_number is not None and \
                current.sequence_number < stop_below:
            return
        yield current
        parent = current.parent_snapshot_id
        current = by_id.get(parent) if parent is not None else None
