"""Freshness against a target: each view's lag over time, SLO compliance, degraded reasons.

A view's lag at time ``t`` is ``t - a``, where ``a`` is when the sources it reflects were
read (the start of the last refresh that committed, or that found nothing to do). The lag
grows until the next refresh commits, then drops to that refresh's duration: a sawtooth.
**SLO compliance** over a window is the fraction of the window's time the lag was within
the view's target (time before the process first saw the view refresh is not counted).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from pyiceberg.exceptions import ServerError
from requests.exceptions import ConnectionError as RequestConnectionError
from requests.exceptions import Timeout

from lakehouse.errors import (
    CatalogAccessError,
    CatalogUnavailableError,
    SchemaChangedError,
    SourceError,
)

__all__ = ["DEGRADED_REASONS", "FreshnessLog", "degraded_reason"]

DEGRADED_REASONS = ("suspended", "schema changed", "source unavailable", "catalog unavailable",
                    "refresh failing", "backfilling", "over target")
"""Why a view is late or cannot refresh, most telling first."""

SLO_WINDOW_S = 3600.0
"""The window SLO compliance is measured over, in seconds."""


def degraded_reason(error: BaseException) -> str:
    """The degraded reason a refresh that failed with ``error`` leaves its view in.

    The error and its causes are looked at (a refresh wraps what failed in a
    ``RefreshError``): a schema change, a source that cannot be read, or a catalog that
    does not answer (its client's connection errors and timeouts, a 5xx); else
    ``refresh failing``.
    """
    for cause in _causes(error):
        if isinstance(cause, SchemaChangedError):
            return "schema changed"
        if isinstance(cause, CatalogUnavailableError | CatalogAccessError | ServerError |
                      RequestConnectionError | Timeout):
            return "catalog unavailable"
        if isinstance(cause, SourceError):
            return "source unavailable"
    return "refresh failing"


def _causes(error: BaseException) -> list[BaseException]:
    """``error``, then what caused it, and so on (each once)."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


@dataclass(frozen=True, slots=True)  # a view keeps one per refresh of the window
class _Fresh:
    committed_s: float  # when the refresh landed
    as_of_s: float  # when it read the sources


class FreshnessLog:
    """When each view became fresh, over the last :data:`SLO_WINDOW_S` (and one before).

    Args:
        window_s: The SLO window, in seconds.
        clock: Seconds since the epoch (injectable for tests).
    """

    def __init__(self, window_s: float = SLO_WINDOW_S, clock: Callable[[], float] = time.time):
        self.window_s = window_s
        self.clock = clock
        self._points: dict[str, deque[_Fresh]] = {}
        self._lock = threading.Lock()  # the scheduler writes, the metrics server reads

    def fresh(self, view: str, as_of_s: float) -> None:
        """Record that ``view`` now reflects its sources as read at ``as_of_s``."""
        with self._lock:
            points = self._points.setdefault(view, deque())
            points.append(_Fresh(self.clock(), as_of_s))
            start_s = self.clock() - self.window_s
            while len(points) > 1 and points[1].committed_s <= start_s:
                points.popleft()  # the one before the window stays: the lag at its start

    def lag_s(self, view: str) -> float | None:
        """Seconds since the sources ``view`` reflects were read; None if never seen fresh."""
        points = self._copy(view)
        return self.clock() - points[-1].as_of_s if points else None

    def _copy(self, view: str) -> list[_Fresh]:
        with self._lock:
            return list(self._points.get(view, ()))

    def compliance(self, view: str, target_s: float) -> float | None:
        """The fraction of the window's time ``view``'s lag was at most ``target_s``.

        None before the view was first seen fresh.
        """
        points = self._copy(view)
        if not points:
            return None
        now_s = self.clock()
        start_s = max(now_s - self.window_s, points[0].committed_s)
        if now_s <= start_s:
            return 1.0
        over_s = 0.0
        ends = [p.committed_s for p in points[1:]] + [now_s]
        for point, end_s in zip(points, ends, strict=True):
            late_from_s = max(point.as_of_s + target_s, point.committed_s, start_s)
            over_s += max(0.0, end_s - late_from_s)
        return 1.0 - over_s / (now_s - start_s)
