"""A Spark session started on first use, so that a tick the local engine runs starts no JVM.

The pipeline hands one session to every source reader and sink when it starts. Most ticks of
small changes never touch it (the local engine computes the view's delta, pyiceberg and
delta-rs commit it), and starting Spark costs seconds and a JVM. :class:`LazySession`
stands in for the session: the first attribute read starts it, through the factory given,
and every later one goes to it.

Per-thread settings of the session (a tick's scheduler pool and job group) wait for the
thread's first use of it (:meth:`LazySession.before_use`): each is a call into the JVM,
which a tick on the local engine would otherwise make for nothing, and wait for whenever
the JVM is busy or paused in a collection beside a full refresh.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["LazySession"]


class LazySession:
    """A stand-in for a :class:`~pyspark.sql.SparkSession` that starts it when first used.

    Args:
        start: Builds the session (e.g. :func:`lakehouse.spark.session.build_spark_session`
            with the pipeline's settings); called at most once, under a lock.
    """

    def __init__(self, start: Callable[[], SparkSession]):
        self._start = start
        self._session: SparkSession | None = None
        self._lock = threading.Lock()
        self._pending = threading.local()  # per thread: what to run before its next use

    @property
    def started(self) -> bool:
        """Whether the session was started (something used it)."""
        return self._session is not None

    def session(self) -> SparkSession:
        """The session, started now if it was not."""
        with self._lock:
            if self._session is None:
                self._session = self._start()
            return self._session

    def stop(self) -> None:
        """Stop the session if it was started (never starts it)."""
        with self._lock:
            if self._session is not None:
                self._session.stop()
                self._session = None

    def before_use(self, prepare: Callable[[SparkSession], object]) -> None:
        """Run ``prepare`` on the session before this thread's next use of it, not now.

        Replaces what an earlier call of this thread left pending; a thread that never uses
        the session never runs it (nor starts the session).
        """
        self._pending.prepare = prepare

    def __getattr__(self, name: str) -> Any:
        session = self.session()
        prepare = getattr(self._pending, "prepare", None)
        if prepare is not None:
            self._pending.prepare = None
            prepare(session)
        return getattr(session, name)
