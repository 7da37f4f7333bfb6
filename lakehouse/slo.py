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
from array import array
from collections.abc import Callable

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


class _Refreshes:
    """One view's refreshes, oldest first: when each landed and when it read its sources.

    Two float arrays, 16 bytes a refresh (up to twice that before the dropped ones are
    shifted out): a view polled on change records one a poll
    (skipped polls included), about 17 a second for the soak benchmark's ten views, all
    kept for the window (an object a refresh took about 90 bytes, 5 MB an hour there).
    """

    __slots__ = ("_first", "as_of_s", "committed_s")
    COMPACT_AT = 4096
    """Refreshes dropped, at least, before the arrays are shifted down, and at least half of
    them (amortised: not a shift a drop)."""

    def __init__(self) -> None:
        self.committed_s = array("d")
        self.as_of_s = array("d")
        self._first = 0  # index of the oldest kept

    def append(self, committed_s: float, as_of_s: float) -> None:
        """Add a refresh that landed at ``committed_s`` having read at ``as_of_s``."""
        committed_s, as_of_s = float(committed_s), float(as_of_s)  # both or neither
        self.committed_s.append(committed_s)
        self.as_of_s.append(as_of_s)

    def keep_from(self, start_s: float) -> None:
        """Drop the refreshes before ``start_s`` but the last of them (the lag at ``start_s``)."""
        first, committed = self._first, self.committed_s
        while len(committed) - first > 1 and committed[first + 1] <= start_s:
            first += 1
        if first >= self.COMPACT_AT and 2 * first >= len(committed):
            del committed[:first]
            del self.as_of_s[:first]
            first = 0
        self._first = first

    def copy(self) -> tuple[array[float], array[float]]:
        """The kept refreshes' commit and read times (copies)."""
        return self.committed_s[self._first:], self.as_of_s[self._first:]


class FreshnessLog:
    """When each view became fresh, over the last :data:`SLO_WINDOW_S` (and one before).

    Args:
        window_s: The SLO window, in seconds.
        clock: Seconds since the epoch (injectable for tests).
    """

    def __init__(self, window_s: float = SLO_WINDOW_S, clock: Callable[[], float] = time.time):
        self.window_s = window_s
        self.clock = clock
        self._refreshes: dict[str, _Refreshes] = {}
        self._lock = threading.Lock()  # the scheduler writes, the metrics server reads

    def fresh(self, view: str, as_of_s: float) -> None:
        """Record that ``view`` now reflects its sources as read at ``as_of_s``."""
        with self._lock:
            refreshes = self._refreshes.setdefault(view, _Refreshes())
            now_s = self.clock()
            refreshes.append(now_s, as_of_s)
            refreshes.keep_from(now_s - self.window_s)

    def lag_s(self, view: str) -> float | None:
        """Seconds since the sources ``view`` reflects were read; None if never seen fresh."""
        with self._lock:
            refreshes = self._refreshes.get(view)
            as_of_s = refreshes.as_of_s[-1] if refreshes is not None else None
        return self.clock() - as_of_s if as_of_s is not None else None

    def _copy(self, view: str) -> tuple[array[float], array[float]]:
        with self._lock:
            refreshes = self._refreshes.get(view)
            return refreshes.copy() if refreshes is not None else (array("d"), array("d"))

    def compliance(self, view: str, target_s: float) -> float | None:
        """The fraction of the window's time ``view``'s lag was at most ``target_s``.

        None before the view was first seen fresh.
        """
        committed, as_of = self._copy(view)
        if not committed:
            return None
        now_s = self.clock()
        start_s = max(now_s - self.window_s, committed[0])
        if now_s <= start_s:
            return 1.0
        over_s = 0.0
        ends = [*committed[1:], now_s]
        for committed_s, as_of_s, end_s in zip(committed, as_of, ends, strict=True):
            late_from_s = max(as_of_s + target_s, committed_s, start_s)
            over_s += max(0.0, end_s - late_from_s)
        return 1.0 - over_s / (now_s - start_s)
