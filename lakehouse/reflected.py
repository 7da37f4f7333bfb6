"""Which views reflect their sources' newest versions, known without reading their sinks.

An ``on_change`` view is polled every :data:`lakehouse.scheduler.ON_CHANGE_POLL_S`. The
tick's own dirty check reads each sink's committed frontier and each source's metadata
(two or three catalog round trips and the parse of a source's metadata per view and poll:
the soak's eight views made 80 table loads a second, on the catalog and on the
interpreter lock the ticks need). Once a tick of this process has seen every sink of a
view at frontier F, the view stays at F until a source moves past it (only a tick
commits to a view's sinks), so a poll compares the sources' current versions with F
alone. For ``on_change`` views those versions are read once per :data:`VERSIONS_TTL_S`
for every view that polls; a view on another cadence reads them at its tick. The tick's
full check still runs every :data:`FULL_CHECK_EVERY_S`, for what a poll cannot see: a
sink dropped or rolled back by hand, a schema changed without a snapshot.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from lakehouse.sources.base import SourceReader

__all__ = ["FULL_CHECK_EVERY_S", "VERSIONS_TTL_S", "Reflected", "ReflectedFrontiers"]

VERSIONS_TTL_S = 0.1
"""How long a source's current version, once read, answers every ``on_change`` view's poll:
one catalog read per source and period, for at most this much more lag (plus a poll's
period, when a change is missed by one poll and seen by the next)."""

FULL_CHECK_EVERY_S = 30.0
"""Longest time a view is polled from its remembered frontier without a full check."""


@dataclass(frozen=True)
class Reflected:
    """A view no source of which moved past the frontier its sinks are at.

    Attributes:
        frontier: The sources' versions the view reflects (as ``current_frontier``).
        as_of_s: Since when (seconds since the epoch) the view is known to reflect its
            sources: the oldest of this poll's reads, or the full check's, if later.
    """

    frontier: dict[str, int]
    as_of_s: float


@dataclass(frozen=True)
class _Seen:
    """A view's sinks' frontier as a full check saw it: as of when, and when checked."""

    frontier: dict[str, int]
    as_of_s: float
    checked_s: float


class ReflectedFrontiers:
    """The frontier each view's sinks were last seen at, and the sources' current versions.

    Safe to share between the threads of concurrent ticks.

    Args:
        readers: A reader of every source, by name.
        clock: Seconds since the epoch, for what a view reflects (injectable for tests).
        monotonic: Seconds of a clock that never steps back, for ages (injectable too).
    """

    def __init__(self, readers: Mapping[str, SourceReader],
                 clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic):
        self._readers = readers
        self._clock = clock
        self._monotonic = monotonic
        self._versions: dict[str, _Read] = {}
        self._seen: dict[str, _Seen] = {}
        self._lock = threading.Lock()

    def record(self, view: str, frontier: Mapping[str, int], as_of_s: float) -> None:
        """Every sink of ``view`` is at ``frontier``: a tick's full check saw or put it there.

        Args:
            view: The view.
            frontier: The sources' versions its sinks are at.
            as_of_s: When the tick read those versions as the sources' current ones.
        """
        with self._lock:
            self._seen[view] = _Seen(dict(frontier), as_of_s, self._monotonic())

    def forget(self, view: str) -> None:
        """Check ``view`` in full at its next poll (its tick failed)."""
        with self._lock:
            self._seen.pop(view, None)

    def moved(self, sources: Iterable[str]) -> None:
        """``sources`` moved (a view they name just committed): read them again."""
        with self._lock:
            for name in sources:
                self._versions.pop(name, None)

    def unchanged(self, view: str, sources: Iterable[str], max_age_s: float = VERSIONS_TTL_S
                  ) -> Reflected | None:
        """What ``view`` reflects when no source moved past its sinks' frontier, else None.

        None also when the view was not seen by a full check in this process in the last
        :data:`FULL_CHECK_EVERY_S`: the tick must then check in full.

        Args:
            view: The view.
            sources: The sources it reads.
            max_age_s: Oldest read of a source's version that answers (0: read it now).

        Raises:
            lakehouse.errors.SourceError: A source cannot be read.
        """
        with self._lock:
            seen = self._seen.get(view)
        if seen is None or self._monotonic() - seen.checked_s > FULL_CHECK_EVERY_S:
            return None
        current: dict[str, int] = {}
        as_of_s = self._clock()
        for name in sources:
            read = self._version(name, max_age_s)
            as_of_s = min(as_of_s, read.as_of_s)
            if read.version is not None:  # a source without data is left out, as by a tick
                current[name] = read.version
        if current != seen.frontier:
            return None
        return Reflected(current, max(as_of_s, seen.as_of_s))

    def _version(self, source: str, max_age_s: float) -> _Read:
        """The source's current version, read at most ``max_age_s`` ago."""
        with self._lock:
            found = self._versions.get(source)
        if found is not None and self._monotonic() - found.read_s < max_age_s:
            return found
        read_s, as_of_s = self._monotonic(), self._clock()  # the newest as of at least then
        found = _Read(self._readers[source].current_version(), read_s, as_of_s)
        with self._lock:
            kept = self._versions.get(source)
            if kept is None or kept.read_s <= found.read_s:  # a slower, older read loses
                self._versions[source] = found
        return found


@dataclass(frozen=True)
class _Read:
    """A source's current version, read at ``read_s`` (monotonic) and ``as_of_s`` (epoch)."""

    version: int | None
    read_s: float
    as_of_s: float
