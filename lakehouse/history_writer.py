"""Appends the refresh history from a thread of its own, off the refresh's path."""

from __future__ import annotations

import logging
import queue
import threading
import time

from lakehouse.history import HistoryRow, RefreshHistory, first_line

__all__ = ["APPEND_EVERY_S", "CLOSE_TIMEOUT_S", "HistoryWriter"]

log = logging.getLogger(__name__)

CLOSE_TIMEOUT_S = 10.0
"""How long closing waits for queued rows to be appended."""

APPEND_EVERY_S = 5.0
"""Least time from one append's start to the next one's, unless a flush asks for the rows.

An append is a commit whose Python cost grows with the table's metadata (pyiceberg copies
it whole for each update it applies: 40-250 ms a commit on two busy cores). With one
commit per refresh, the soak's eight views refreshing every second or two spent a fifth of
the process's samples appending the history, on the interpreter lock the refreshes need;
with one every 2 s, still a seventh. A row reaches the table at most this late (plus an
append's time).
"""

_STOP = threading.Event()
"""Queued by :meth:`HistoryWriter.close`: the writer's thread returns once it takes it."""


class HistoryWriter:
    """Appends history rows from a thread of its own, in order, off the refresh's path.

    A tick returns once its view's commits landed; its row is queued, and the thread
    appends what is queued in one commit while the next tick runs, at most one commit every
    ``append_every_s`` (:meth:`flush` and :meth:`close` append at once). A batch
    that cannot be appended is logged as a warning: the refresh's commits stand. The thread
    is a daemon: rows still queued when the process dies, or when :meth:`close` gives up
    waiting, are lost.

    Args:
        history: The history table.
        append_every_s: Least seconds between the starts of two appends.
    """

    def __init__(self, history: RefreshHistory, append_every_s: float = APPEND_EVERY_S):
        self.history = history
        self.append_every_s = append_every_s
        self._queue: queue.Queue[HistoryRow | threading.Event] = queue.Queue()
        self._hurry = threading.Event()  # a flush or close waits: append without pausing
        self._thread = threading.Thread(target=self._run, name="history", daemon=True)
        self._thread.start()

    def record(self, row: HistoryRow) -> None:
        """Queue ``row`` for appending."""
        self._queue.put(row)

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait until every row queued before is appended (or logged as lost).

        Returns:
            False if ``timeout_s`` passed first.
        """
        done = threading.Event()
        self._queue.put(done)
        self._hurry.set()
        return done.wait(timeout_s)

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Append what is queued, waiting at most ``timeout_s``, then stop the thread.

        What is left behind (the catalog does not answer) is logged as lost.
        """
        if not self.flush(timeout_s):
            log.warning("history table %r: gave up appending after %.0f s (the catalog "
                        "does not answer); the last refreshes are not recorded",
                        self.history.identifier, timeout_s)
        self._queue.put(_STOP)
        self._hurry.set()
        self._thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            batch, markers = self._take()
            started = time.monotonic()
            if batch:
                self._append(batch)
            for marker in markers:
                marker.set()
            if _STOP in markers:
                return
            if batch:
                self._pause(started)
            else:  # a flush with nothing to append: its hurry is spent
                self._hurry.clear()

    def _pause(self, started: float) -> None:
        """Wait until ``append_every_s`` after ``started``, or until a flush or close."""
        remaining = self.append_every_s - (time.monotonic() - started)
        if remaining > 0:
            self._hurry.wait(remaining)
        self._hurry.clear()

    def _take(self) -> tuple[list[HistoryRow], list[threading.Event]]:
        """Everything queued now (waiting for at least one item): rows and flush markers."""
        items = [self._queue.get()]
        while True:
            try:
                items.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return ([i for i in items if isinstance(i, HistoryRow)],
                [i for i in items if isinstance(i, threading.Event)])

    def _append(self, rows: list[HistoryRow]) -> None:
        try:
            self.history.append(rows)
        except Exception as error:  # whatever the cause, the refreshes themselves stand
            log.warning("history table %r: %s (%d refreshes from %s not recorded)",
                        self.history.identifier, first_line(error), len(rows),
                        rows[0].started_at.isoformat())
