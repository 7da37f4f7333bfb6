"""Show refresh progress: a rich progress bar on a terminal, plain lines in a log.

The bar advances by phase (read sources, compute, sink commits) and names the rows
once known; while a phase runs Spark jobs, it also shows their tasks done out of total
(Spark's status tracker: the finest progress Spark reports). Without a terminal, full
refreshes (backfills, which can run long) print one line per phase; incremental ticks
print nothing here (the CLI prints their one-line summary).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from types import TracebackType

from pyspark import SparkContext, StatusTracker
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from lakehouse.progress import PHASES_PER_GROUP, Phase

POLL_S = 0.5
"""How often Spark's task counts are read while a phase runs."""


class ProgressDisplay:
    """A :class:`lakehouse.progress.Reporter` that draws on a rich console.

    Use as a context manager around the refreshes, inside :func:`lakehouse.progress.reporting`.

    Args:
        console: Where to draw.
        phases: View name -> phases a refresh of it has (:data:`PHASES_PER_GROUP`).
        spark: Returns the session's SparkContext once Spark runs (None before), to show
            task counts; None to not poll.
    """

    def __init__(self, console: Console, phases: Mapping[str, int],
                 spark: Callable[[], SparkContext | None] | None = None):
        self.console = console
        self.phases = dict(phases)
        self.spark = spark
        self.live = console.is_terminal
        self.progress = Progress(
            SpinnerColumn(), TextColumn("[bold]{task.fields[view]}"),
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), console=console, transient=True)
        self.tasks: dict[str, TaskID] = {}
        self.current: dict[str, Phase] = {}
        self._lock = threading.RLock()  # ticks on several threads, and the poller
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="progress-poll", daemon=True)

    def __enter__(self) -> ProgressDisplay:
        if self.live:
            self.progress.start()
            if self.spark is not None:
                self._poller.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._stop.set()
        if self._poller.is_alive():
            self._poller.join()
        if self.live:
            self.progress.stop()

    def phase(self, event: Phase) -> None:
        """Advance ``event.view``'s bar to the phase that starts."""
        with self._lock:
            self._phase(event)

    def _phase(self, event: Phase) -> None:
        first = event.view not in self.tasks
        if first:
            self.tasks[event.view] = self.progress.add_task(
                "", total=self.phases.get(event.view, PHASES_PER_GROUP), view=event.view)
        task = self.tasks[event.view]
        if not first:
            self.progress.advance(task)
        state = next(t for t in self.progress.tasks if t.id == task)
        if state.completed >= (state.total or 0):  # a sink left behind: one more group
            self.progress.update(task, total=(state.total or 0) + PHASES_PER_GROUP)
        self.current[event.view] = event
        self._show(event)

    def rows(self, event: Phase) -> None:
        """Show the rows of the running phase."""
        with self._lock:
            self.current[event.view] = event
            self._show(event)

    def clear(self, views: Iterable[str]) -> None:
        """A refresh of ``views`` (a view and those it reads) returned: remove their bars."""
        with self._lock:
            for view in views:
                self.current.pop(view, None)
                task = self.tasks.pop(view, None)
                if task is not None:
                    self.progress.remove_task(task)

    def _show(self, event: Phase, tasks: str = "") -> None:
        text = describe(event) + tasks
        if self.live and event.view not in self.tasks:  # cleared meanwhile (poller)
            return
        if self.live:
            self.progress.update(self.tasks[event.view], description=text)
        elif event.detail is not None:
            self.console.print(f"{datetime.now():%H:%M:%S} {event.view}: {text}",
                               highlight=False)

    def _poll(self) -> None:
        """Show on each running phase the task counts of its view's active Spark stages.

        A tick's jobs carry its view's name as their job group (``Runtime._spark_pool``).
        """
        assert self.spark is not None
        while not self._stop.wait(POLL_S):
            context = self.spark()
            if context is None:  # Spark not started: no task to count
                continue
            tracker = context.statusTracker()
            with self._lock:
                for event in list(self.current.values()):
                    self._show(event, _tasks(tracker, event.view))


def _tasks(tracker: StatusTracker, group: str) -> str:
    """``, Spark tasks 3/8`` over the active stages of the group's active jobs; empty if none."""
    active_stages = set(tracker.getActiveStageIds())
    done = total = 0
    for job in set(tracker.getJobIdsForGroup(group)) & set(tracker.getActiveJobsIds()):
        info = tracker.getJobInfo(job)
        for stage in set(info.stageIds if info is not None else ()) & active_stages:
            stage_info = tracker.getStageInfo(stage)
            if stage_info is not None:
                done, total = done + stage_info.numCompletedTasks, total + stage_info.numTasks
    return f", Spark tasks {done}/{total}" if total else ""


def describe(event: Phase) -> str:
    """``compute view (initial load: ...), 200,000 rows``."""
    text = event.name
    if event.detail is not None:
        text += f" ({event.detail})"
    if event.rows is not None:
        text += f", {event.rows:,} rows"
    return text
