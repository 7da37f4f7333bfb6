"""Per-view cadences: ``every: 30s``, a cron expression, ``on_change``, or a target lag.

A view is due when its cadence fires; a due view whose sources did not advance is
skipped by the refresh itself (a poll: the sources' versions, read once for every view
polling, against the frontier the view's sinks were last seen at, :mod:`lakehouse.reflected`;
a full check of the sinks every 30 s). A view with a
``target_lag`` duration and no explicit ``every`` is refreshed every half target less its
last refresh's duration (at least every :data:`ON_CHANGE_POLL_S`): its lag then stays near
half the target, leaving the other half for a slower refresh. A ``downstream`` view is
never due by itself: the views reading it refresh it first
(:meth:`lakehouse.runtime.Runtime.refresh`).

Due views run on a bounded pool of worker threads (``workers``), the most overdue first.
A view is not started while a running tick holds a view it claims
(:func:`lakehouse.dag.claims`: itself and the views upstream of it), so the view-on-view
order is kept and a diamond commits a consistent state, while views sharing no view
refresh concurrently: a slow view takes one worker and the others keep their cadence.

View-table maintenance (``maintenance.every``: snapshot expiry and compaction,
:mod:`lakehouse.maintenance`) runs on the same workers, a view's maintenance claiming
the view, so it never runs beside that view's tick; one view's at a time, so that the
views falling due together take one worker, not all of them (the soak benchmark's lag
rose past the targets every time ten maintenance runs took the four workers).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from croniter import croniter

from lakehouse.config import DOWNSTREAM, Config, ViewConfig, duration_s
from lakehouse.dag import claims as view_claims

__all__ = ["ON_CHANGE_POLL_S", "Job", "Scheduler", "next_fire_s"]

ON_CHANGE_POLL_S = 0.2
"""How often an ``on_change`` view checks whether a source advanced (a few catalog reads)."""


Job = Literal["refresh", "maintain"]
"""What a worker runs for a view."""


@dataclass(frozen=True)
class _Running:
    """A job in flight: its kind, view, the views it claims, when it started."""

    job: Job
    view: ViewConfig
    claims: frozenset[str]
    started_s: float


class Scheduler:
    """Decide which views are due, and run them until stopped.

    Args:
        views: The views to schedule.
        clock: Seconds since the epoch (injectable for tests).
        workers: Most refreshes run at once, each on a thread of its own.
        claims: The views a tick of each view holds (:func:`lakehouse.dag.claims`); two
            ticks whose claims meet never run at once. Default: each view claims itself.
        maintenance_every: The cadence of each view's maintenance (a duration or a cron
            expression, as ``maintenance.every``); None: none scheduled.
    """

    def __init__(self, views: Sequence[ViewConfig], clock: Callable[[], float] = time.time,
                 *, workers: int = 1, claims: Mapping[str, frozenset[str]] | None = None,
                 maintenance_every: str | None = None):
        self.views = list(views)
        self.clock = clock
        self.workers = workers
        self.claims = dict(claims or {})
        self.maintenance_every = maintenance_every
        self.stop_event = threading.Event()
        now = clock()
        self.next_due_s = {view.name: now for view in self.views  # a downstream view is
                           if view.target_lag != DOWNSTREAM}     # never due by itself
        self.next_maintenance_s = ({view.name: _next_s(maintenance_every, now)
                                    for view in self.views} if maintenance_every else {})

    @classmethod
    def for_config(cls, config: Config, clock: Callable[[], float] = time.time) -> Scheduler:
        """The schedule of every view of ``config``, on ``config.workers`` workers."""
        return cls(config.views, clock, workers=config.workers, claims=view_claims(config),
                   maintenance_every=config.maintenance.every)

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

    def run(self, refresh: Callable[[ViewConfig], object],
            maintain: Callable[[ViewConfig], object] | None = None) -> None:
        """Refresh due views until :meth:`stop`, at most ``workers`` at once.

        After :meth:`stop`, no tick starts and the ticks in flight finish (each commits
        whole or not at all) before this returns.

        Args:
            refresh: Runs one tick of a view.
            maintain: Runs a view's maintenance when ``maintenance_every`` says (None:
                never).

        Raises:
            Exception: What ``refresh`` or ``maintain`` raised (after the jobs in flight
                finished).
        """
        jobs: dict[Job, Callable[[ViewConfig], object]] = {"refresh": refresh}
        if maintain is not None:
            jobs["maintain"] = maintain
        running: dict[Future[object], _Running] = {}
        with ThreadPoolExecutor(self.workers, thread_name_prefix="refresh") as pool:
            while not self.stop_event.is_set():
                self._start_due(pool, jobs, running)
                if running:
                    done, _ = wait(running, self._idle_s(), return_when=FIRST_COMPLETED)
                    self._finish(done, running)
                else:
                    self.stop_event.wait(self._idle_s())
            self._finish(wait(running).done, running)

    def _due_jobs(self, jobs: Mapping[Job, object]) -> list[tuple[float, Job, ViewConfig]]:
        """Each due job with when it fell due, the most overdue first."""
        now = self.clock()
        due: list[tuple[float, Job, ViewConfig]] = [
            (self.next_due_s[view.name], "refresh", view) for view in self.due()]
        if "maintain" in jobs:
            due += [(self.next_maintenance_s[view.name], "maintain", view)
                    for view in self.views if self.next_maintenance_s[view.name] <= now]
        return sorted(due, key=lambda item: item[0])

    def _start_due(self, pool: ThreadPoolExecutor,
                   jobs: Mapping[Job, Callable[[ViewConfig], object]],
                   running: dict[Future[object], _Running]) -> None:
        """Start the most overdue jobs whose claims no running or more overdue job holds."""
        held = set().union(*(job.claims for job in running.values()))
        for _, job, view in self._due_jobs(jobs):
            claims = (self.claims.get(view.name, frozenset({view.name})) if job == "refresh"
                      else frozenset({view.name}))
            if len(running) >= self.workers or self.stop_event.is_set():
                return
            if job == "maintain" and any(r.job == "maintain" for r in running.values()):
                continue  # one at a time: the other workers stay with the refreshes
            if held & claims:  # blocked: it keeps its views from less overdue jobs, so
                held |= claims  # ticks of the views it reads cannot starve it
                continue
            due = self.next_due_s if job == "refresh" else self.next_maintenance_s
            due[view.name] = float("inf")  # not due again while it runs
            running[pool.submit(jobs[job], view)] = _Running(job, view, claims, self.clock())
            held |= claims

    def _finish(self, done: set[Future[object]],
                running: dict[Future[object], _Running]) -> None:
        """Schedule the next run of each finished job; re-raise what one raised."""
        for future in done:
            job = running.pop(future)
            if job.job == "refresh":
                self.mark_ran(job.view, job.started_s, self.clock() - job.started_s)
            else:
                assert self.maintenance_every is not None
                self.next_maintenance_s[job.view.name] = _next_s(self.maintenance_every,
                                                                 self.clock())
        for future in done:
            future.result()

    def _idle_s(self) -> float:
        """How long to wait before looking for due jobs again."""
        next_s = min([*self.next_due_s.values(), *self.next_maintenance_s.values()],
                     default=self.clock() + 1)
        return max(0.05, min(next_s - self.clock(), ON_CHANGE_POLL_S))

    def stop(self) -> None:
        """Ask :meth:`run` to start no more ticks and return once those in flight end."""
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
    return _next_s(view.every, now_s)


def _next_s(every: str, now_s: float) -> float:
    """The next time after ``now_s`` of a cadence: a duration (``1h``) or a cron expression."""
    interval_s = duration_s(every)
    if interval_s is not None:
        return now_s + interval_s
    return float(croniter(every, datetime.fromtimestamp(now_s)).get_next(float))
