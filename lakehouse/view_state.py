"""Aggregate states kept between ticks, by view and frontier: in memory, and in the warehouse.

A view maintained by the invertible-aggregate law reads the state of the groups a
change touches instead of the sources. The state is a pure function of the view's SQL and
of the sources at the view's frontier: the running process keeps the latest one in memory,
and a :class:`lakehouse.state_store.StateStore` keeps it in the warehouse for the next
process (a new ``lakehouse refresh``, a restart). When neither has the state at a sink's
frontier, the tick rebuilds it from the sources' snapshots at that frontier; exactly-once
is not affected either way.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa

from ivm import AggregateState, TopKState
from lakehouse.state_store import StateStore

_LOG = logging.getLogger(__name__)


@dataclass
class ViewStates:
    """The latest aggregate state of each view, tagged with the frontier it reflects.

    Attributes:
        store: Where states outlive the process, or None (kept in memory only).
    """

    store: StateStore | None = None
    _kept: dict[str, tuple[str, dict[str, int], AggregateState | TopKState]] = field(
        default_factory=dict)

    @property
    def driver_bytes(self) -> int:
        """Bytes of the states on the driver now: their rows' and last changes' buffers."""
        held = 0
        for _, _, state in list(self._kept.values()):  # a copy: the workers write
            aggregate = state.inner if isinstance(state, TopKState) else state
            if aggregate is not None and aggregate.table is not None:
                change = aggregate.change if isinstance(aggregate.change, pa.Table) else None
                held += sum(t.get_total_buffer_size() for t in (aggregate.table, change)
                            if t is not None)
        return held

    def get(self, view: str, sql: str, frontier: Mapping[str, int] | None,
            on_driver: bool = True) -> AggregateState | TopKState | None:
        """The state of ``view`` (compiled from ``sql``) at exactly ``frontier``, or None.

        A store that cannot be read counts as holding nothing (the tick rebuilds the
        state); it is logged. With ``on_driver`` False (engine ``spark``), a state held on
        the driver counts as none either: it is not even read. A top-K buffer is kept in
        memory only (a new process fills it again).
        """
        if frontier is None:
            return None
        kept = self._kept.get(view)
        if kept is not None and kept[0] == sql and kept[1] == dict(frontier):
            return kept[2] if on_driver or not _held_on_driver(kept[2]) else None
        if self.store is None:
            return None
        try:
            state = self.store.load(view, sql, frontier, on_driver)
        except Exception as error:  # a cache: any error of Arrow, Spark or the storage
            _LOG.warning("aggregate state of %s not read from the warehouse: %s", view,
                         _first_line(error))
            return None
        if state is not None:
            self._kept[view] = (sql, dict(frontier), state)
        return state

    def put(self, view: str, sql: str, frontier: Mapping[str, int],
            state: AggregateState | TopKState | None,
            previous: Mapping[str, int] | None = None) -> None:
        """Keep ``state`` as the state of ``view`` at ``frontier`` (None forgets it).

        Called after the sinks committed ``frontier``: a store that cannot be written does
        not fail the refresh (the next process rebuilds the state); it is logged.
        ``previous`` is the frontier the tick started from, whose state the new one's
        ``change`` was added to (None when the state was aggregated whole).
        """
        if state is None:
            self._kept.pop(view, None)
        else:
            self._kept[view] = (sql, dict(frontier), state)
        if self.store is None:
            return
        try:
            self.store.save(view, sql, frontier,
                            state if isinstance(state, AggregateState) else None, previous)
        except Exception as error:  # a cache: any error of Arrow, Spark or the storage
            _LOG.warning("aggregate state of %s not written to the warehouse: %s", view,
                         _first_line(error))


def _held_on_driver(state: AggregateState | TopKState) -> bool:
    """Whether the state, or the aggregate state inside a top-K buffer, is on the driver."""
    aggregate = state.inner if isinstance(state, TopKState) else state
    return aggregate is not None and aggregate.table is not None


def _first_line(error: Exception) -> str:
    """The error's first line (a Spark error carries the JVM's stack trace after it)."""
    text = str(error)
    return text.splitlines()[0] if text else type(error).__name__
