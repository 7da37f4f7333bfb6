"""Per-view cadences: ``every: 30s``, a cron expression, or ``on_change``.

A view is due when its cadence fires; a due view whose sources did not advance is
skipped by the refresh itself (the dirty check costs a few catalog reads).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime

from croniter import croniter

from lakehouse.config import ViewConfig

ON_CHANGE_POLL_S = 0.2
"""How often an ``on_change`` view checks whether a source advanced (a few catalog reads)."""


class Scheduler:
    """Decide which views are due, and run them until stopped.

    Args:
        views: The views to schedule.
        clock: Seconds since the epoch (injectable for tests).
    """

    def __init__(self, views: Sequence[ViewConfig], clock: Callable[[], float] = time.time):
        self.views = list(views)
        self.clock = clock
        self.stop_event = threading.Event()
        now = clock()
        self.next_due_s = {view.name: now for view in self.views}

    def due(self) -> list[ViewConfig]:
        """The views whose cadence has fired, in config order."""
        now = self.clock()
        return [view for view in self.views if self.next_due_s[view.name] <= now]

    def mark_ran(self, view: ViewConfig) -> None:
        """Schedule the next run of ``view`` after one has started now."""
        self.next_due_s[view.name] = next_fire_s(view, self.clock())

    def run(self, refresh: Callable[[ViewConfig], object]) -> None:
        """Refresh due views until :meth:`stop`; a refresh in progress finishes first."""
        while not self.stop_event.is_set():
            for view in self.due():
                if self.stop_event.is_set():
                    break
                self.mark_ran(view)
                refresh(view)
            wait_s = min(self.next_due_s.values(), default=self.clock() + 1) - self.clock()
            self.stop_event.wait(max(0.05, min(wait_s, ON_CHANGE_POLL_S)))

    def stop(self) -> None:
        """Ask :meth:`run` to return after the current refresh."""
        self.stop_event.set()


def next_fire_s(view: ViewConfig, now_s: float) -> float:
    """When ``view`` is next due, in seconds since the epoch, after a run at ``now_s``."""
    if view.interval_s is not None:
        return now_s + view.interval_s
    if view.every == "on_change":
        return now_s + ON_CHANGE_POLL_S
    return float(croniter(view.every, datetime.fromtimestamp(now_s)).get_next(float))
