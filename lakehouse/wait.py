"""Read-your-writes for orchestrators: wait until a view reflects a source's snapshot.

A producer that committed snapshot ``S`` of a source asks for the first snapshot of the
view's Iceberg table whose frontier includes ``S``: for an Iceberg source (or a view read
as one) the frontier's snapshot is ``S`` or a descendant of it on the source's lineage;
for a Delta source its version is at least ``S``. Frontiers only move forward along the
view table's ``main``, so the answer is found by walking that branch from its oldest
snapshot.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from deltalake import DeltaTable
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table.snapshots import ancestors_of

from lakehouse.config import Config, DeltaSource, IcebergSource
from lakehouse.errors import SourceError, WaitTimeoutError
from lakehouse.storage import delta_options
from sinks.frontier import FRONTIER_KEY, decode_frontier

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
        SourceError: The source has no such snapshot or version.
    """
    try:
        table = catalog.load_table(request.view)
    except NoSuchTableError:
        table = None  # not built yet
    includes = _inclusion(config, catalog, request)  # loaded after: knows every frontier's
    current = table.current_snapshot() if table is not None else None
    if table is None or current is None:
        return None
    first = None
    for snapshot in ancestors_of(current, table.metadata):  # newest first
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
        SourceError: The source has no such snapshot or version.
    """
    source = config.sources[request.source]
    if isinstance(source, DeltaSource):
        latest = DeltaTable(source.delta,
                            storage_options=delta_options(config, source.delta)).version()
        if request.version > latest:
            raise SourceError(f"has no version {request.version} (latest {latest})",
                              source=request.source)
        return lambda version: version is not None and version >= request.version
    identifier = source.iceberg if isinstance(source, IcebergSource) else source.view
    metadata = catalog.load_table(identifier).metadata
    if metadata.snapshot_by_id(request.version) is None:
        raise SourceError(f"has no snapshot {request.version}", source=request.source)

    def includes(version: int | None) -> bool:
        snapshot = metadata.snapshot_by_id(version) if version is not None else None
        return snapshot is not None and any(
            s.snapshot_id == request.version for s in ancestors_of(snapshot, metadata))
    return includes
