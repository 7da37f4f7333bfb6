"""Progress of a refresh, phase by phase, for whoever listens (the CLI's progress bar).

A refresh announces its phases (read sources, compute, sink commits) and
the rows it works on with :func:`phase` and :func:`counted`; without a listener these do
nothing. A listener is installed for a block of code with :func:`reporting`. Spark gives
no per-row progress of a query, so a phase is the unit; the rows of a phase are known
once the view (or its delta) has been computed and counted.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Protocol

PHASES = ("read sources", "compute view", "compute view delta", "sink commits")
"""Every phase name a refresh reports, in the order they can occur."""
PHASES_PER_GROUP = 3
"""Phases one group of sinks goes through: read sources, compute (the view or its delta),
sink commits (both at once)."""


@dataclass(frozen=True)
class Phase:
    """One phase of one refresh, as reported when it starts.

    Attributes:
        view: The view's name.
        name: One of :data:`PHASES`.
        rows: Rows the phase works on: the view's rows (full) or the view delta's rows
            (incremental), once computed; None before.
        detail: Why the refresh is a full one (``initial load: ...``), if it is.
        started_s: When the phase started (``time.time()``).
    """

    view: str
    name: str
    rows: int | None = None
    detail: str | None = None
    started_s: float = 0.0


class Reporter(Protocol):
    """Receives the phases of the refreshes run while it is installed."""

    def phase(self, event: Phase) -> None:
        """A phase starts; the previous one of the same view has ended."""
        ...

    def rows(self, event: Phase) -> None:
        """The current phase's rows became known (``event.rows``)."""
        ...


_listening: ContextVar[tuple[Reporter, list[Phase]] | None] = ContextVar(
    "lakehouse_progress", default=None)


@contextmanager
def reporting(reporter: Reporter) -> Iterator[None]:
    """Send the phases of refreshes run inside the block to ``reporter``."""
    token = _listening.set((reporter, []))
    try:
        yield
    finally:
        _listening.reset(token)


def phase(name: str, *, view: str | None = None, detail: str | None = None) -> None:
    """Announce that phase ``name`` of the current refresh starts.

    Args:
        name: One of :data:`PHASES`.
        view: The view, when a new refresh starts (its first phase); later phases of
            the same refresh inherit it, its detail and its rows.
        detail: Why the refresh is full, when that is decided.
    """
    listening = _listening.get()
    if listening is None:
        return
    reporter, last = listening
    previous = last[-1] if last and view is None else Phase(view or "?", name)
    event = replace(previous, name=name, detail=detail or previous.detail,
                    started_s=time.time())
    last[:] = [event]
    reporter.phase(event)


def counted(rows: int) -> int:
    """Report that the current phase works on ``rows`` rows, and return ``rows``."""
    listening = _listening.get()
    if listening is not None and listening[1]:
        reporter, last = listening
        last[0] = replace(last[0], rows=rows)
        reporter.rows(last[0])
    return rows
