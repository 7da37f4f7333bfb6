"""Per-view cadences: ``every: 30s``, a cron expression, ``on_change``, or a target lag.

A view is due when its cadence fires; a due view whose sources did not advance is
skipped by the refresh itself (the dirty check costs a few catalog reads). A view with a
``target_lag`` duration and no explicit ``every`` is refreshed every half target less its
last refresh's duration (at least every :data:`ON_CHANGE_POLL_S`): its lag then stays near
half the target, leaving the other half for a slower refresh. A ``downstream`` view is
never due by itself: the views reading it refresh it first
(:meth:`lakehouse.runtime.Runtime.refresh`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime

from croniter import croniter

from lakehouse.config import DOWNSTREAM, ViewConfig

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
        self.next_due_s = {view.name: now for view in self.views  # a downstream view is
                           if view.target_lag != DOWNSTREAM}     # never due by itself

    def due(self) -> list[ViewConfig]:
        """The views whose cadence has fired, in config order (never a ``downstream`` one)."""
        now = self.clock()
        return [view for view in self.views
                if view.name in self.next_due_s and self.next_due_s[view.name] <= now]

    def mark_ran(self, view: ViewConfig, started_s: float | None = None,
                 duration_s: float = 0.0) -> None:
        """Schedule the next run of ``view``.

        After a run that started at ``started_s`` (default: now) and took ``duration_s``.
        """
        started_s = self.clock() if started_s is None else started_s
        self.next_due_s[view.name] = next_fire_s(view, started_s, duration_s)

    def run(self, refresh: Callable[[ViewConfig], object]) -> None:
        """Refresh due views until :meth:`stop`; a refresh in progress finishes first."""
        while not self.stop_event.is_set():
            for view in self.due():
                if self.stop_event.is_set():
                    break
                started_s = self.clock()
                self.mark_ran(view, started_s)
                refresh(view)
                self.mark_ran(view, started_s, self.clock() - started_s)
            wait_s = min(self.next_due_s.values(), default=self.clock() + 1) - self.clock()
            self.stop_event.wait(max(0.05, min(wait_s, ON_CHANGE_POLL_S)))

    def stop(self) -> None:
        """Ask :meth:`run` to return after the current refresh."""
        self.stop_event.set()


def next_fire_s(view: ViewConfig, now_s: float, duration_s: float = 0.0) -> float:
    """When ``view`` is next due, in seconds since the epoch.

    After a run that started at ``now_s`` and took ``duration_s``.
    """
    target_s = view.target_lag_s
    if target_s is not None and "every" not in view.model_fields_set:
        return now_s + max(ON_CHANGE_POLL_S, target_s / 2 - duration_s)
    if view.interval_s is not None:
        return now_s + view.interval_s
    if view.every == "on_change":
        return now_s + ON_CHANGE_POLL_S
    return float(croniter(view.every, datetime.fromtimestamp(now_s)).get_next(float))
