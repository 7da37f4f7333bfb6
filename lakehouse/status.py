"""How fresh each view is, read from the catalog and the sinks without Spark."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError

from ivm import IvmError, referenced_sources
from lakehouse.config import Config, DeltaSource, IcebergSource, ViewConfig, ViewSource
from lakehouse.errors import HistoryError, SourceError
from lakehouse.history import RefreshHistory
from lakehouse.schema_guard import SchemaGuard
from lakehouse.storage import delta_options
from sinks.frontier import ENGINE_KEY, FRONTIER_KEY, REFRESHED_AT_KEY, decode_frontier
from sinks.iceberg import frontier_snapshot

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ViewStatus:
    """The freshness of one view.

    Attributes:
        view: The view's name.
        frontier: Source versions the view's Iceberg table reflects (None: never refreshed).
        current: The sources' newest versions.
        refreshed_at_ms: When the last refresh committed (ms since epoch), if ever.
        rows: Rows in the view's Iceberg table, if known.
        behind: Sources that advanced past the frontier.
        lag_s: 0 when fresh; else seconds since the last refresh (or None if never).
        stopped: Why the view cannot refresh until someone acts (a column it reads was
            dropped, renamed or retyped in a source), or None.
        engine: The engine that computed the last refresh (``local`` or ``spark``), as
            its commit records it; None when unknown (never refreshed, or an older commit).
        suspended_since: When the view was suspended (ISO 8601, UTC), if it is
            (:mod:`lakehouse.history`): the schedule does not refresh it.
        target_lag: The view's ``target_lag`` (a duration or ``downstream``), if set.
        degraded: Why the view is late or cannot refresh (:data:`lakehouse.slo.DEGRADED_REASONS`:
            ``suspended``; ``source unavailable``, ``schema changed`` or ``refresh failing``
            when stopped; ``over target`` when its lag exceeds its target), or None.
    """

    view: str
    frontier: dict[str, int] | None
    current: dict[str, int]
    refreshed_at_ms: int | None
    rows: int | None
    behind: tuple[str, ...]
    lag_s: float | None
    stopped: str | None = None
    engine: str | None = None
    suspended_since: str | None = None
    target_lag: str | None = None
    degraded: str | None = None


def source_version(config: Config, catalog: Catalog, name: str) -> int | None:
    """The newest version of source ``name`` (None when it has none yet: an empty table).

    Raises:
        SourceError: The source's table does not exist (an upstream view of this config
            not built yet is no error: None).
    """
    source = config.sources[name]
    try:
        if isinstance(source, DeltaSource):
            return DeltaTable(source.delta,
                              storage_options=delta_options(config, source.delta)).version()
        if isinstance(source, IcebergSource):
            ref = catalog.load_table(source.iceberg).metadata.refs.get(source.ref)
            return ref.snapshot_id if ref is not None else None
        return catalog.load_table(source.view).metadata.current_snapshot_id
    except (TableNotFoundError, NoSuchTableError):
        if isinstance(source, ViewSource) and any(v.name == source.view for v in config.views):
            return None  # an upstream view not built yet: ``run`` builds it first
        where = (source.delta if isinstance(source, DeltaSource)
                 else source.iceberg if isinstance(source, IcebergSource) else source.view)
        raise SourceError(f"its table is missing (sources.{name}: {where})",
                          source=name) from None


def view_statuses(config: Config, catalog: Catalog,
                  views: Sequence[ViewConfig] | None = None) -> list[ViewStatus]:
    """The status of ``views`` (default: every view of ``config``), in that order.

    Each is :func:`view_status`, with its suspension, target and degraded reason. The
    suspended views are read from the history table's namespace; when they cannot be (not
    granted, say), a warning is logged and no view shows as suspended.
    """
    suspended: dict[str, str] = {}
    try:
        if config.history_table:
            suspended = RefreshHistory(catalog, config.history_table).suspended()
    except HistoryError as error:
        log.warning("%s; suspended views are not shown", error)
    statuses = []
    for view in config.views if views is None else views:
        state = replace(view_status(config, catalog, view),
                        suspended_since=suspended.get(view.name), target_lag=view.target_lag)
        statuses.append(replace(state, degraded=_degraded(state, view.target_lag_s)))
    return statuses


def _degraded(state: ViewStatus, target_s: float | None) -> str | None:
    """The degraded reason of a view in ``state`` (see :attr:`ViewStatus.degraded`)."""
    if state.suspended_since:
        return "suspended"
    if state.stopped:
        return state.degraded  # set with the stop's cause
    if target_s is not None and state.lag_s is not None and state.lag_s > target_s:
        return "over target"
    return None


def view_status(config: Config, catalog: Catalog, view: ViewConfig) -> ViewStatus:
    """Read the freshness of ``view`` from its Iceberg table and its sources.

    Also checks the columns the view reads against its sources' current schemas
    (:mod:`lakehouse.schema_guard`), from metadata only. A view whose SQL does not parse,
    reads a table the config does not declare, or one of whose sources is missing, is
    ``stopped`` with that reason.
    """
    problems: list[str] = []
    kind = "refresh failing"  # the degraded reason of the first problem found
    try:
        referenced = referenced_sources(view.sql)
    except IvmError as error:
        referenced, problems = frozenset(), [str(error)]
    names = sorted(referenced & set(config.sources))
    problems += [f"it reads {name!r}, which is not among the sources"
                 for name in sorted(referenced - set(config.sources))]
    current: dict[str, int] = {}
    for name in names:
        try:
            version = source_version(config, catalog, name)
        except SourceError as error:
            problems.append(str(error))
            kind = "source unavailable" if len(problems) == 1 else kind
            continue
        if version is not None:
            current[name] = version
    built, summary, rows = _view_table(catalog, view)
    frontier = decode_frontier(summary.get(FRONTIER_KEY))
    refreshed_at = int(summary[REFRESHED_AT_KEY]) if REFRESHED_AT_KEY in summary else None
    behind = tuple(n for n in current if (frontier or {}).get(n) != current[n])
    lag_s: float | None = 0.0
    if behind:
        lag_s = time.time() - refreshed_at / 1000 if refreshed_at else None
    if problems:  # nothing to check the columns against
        lag_s = time.time() - refreshed_at / 1000 if refreshed_at else None
    else:
        problems = [c.describe() for c in SchemaGuard(config, catalog).changes(
            view, [frontier], built)]
        kind = "schema changed"
    stopped = "; ".join(problems) or None
    return ViewStatus(view.name, frontier, current, refreshed_at, rows, behind, lag_s, stopped,
                      summary.get(ENGINE_KEY), degraded=kind if stopped else None)


def _view_table(catalog: Catalog, view: ViewConfig
                ) -> tuple[list[str] | None, dict[str, str], int | None]:
    """The view table's columns, its last refresh's summary and its rows (all None: no table).

    The summary is that of the newest snapshot carrying a frontier, past compactions on
    top (:func:`sinks.iceberg.frontier_snapshot`): its frontier, refresh time and engine
    still hold. The rows are the current snapshot's (``total-records``).
    """
    try:
        table = catalog.load_table(view.name)
    except NoSuchTableError:
        return None, {}, None
    metadata = table.metadata
    current = table.current_snapshot()
    records = (current.summary.additional_properties.get("total-records")
               if current is not None and current.summary is not None else None)
    refreshed = frontier_snapshot(metadata, metadata.current_snapshot_id)
    summary = ({**refreshed.summary.additional_properties}
               if refreshed is not None and refreshed.summary is not None else {})
    return ([f.name for f in table.schema().fields], summary,
            int(records) if records is not None else None)
