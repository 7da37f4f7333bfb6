"""A Spark session started on first use, so that a tick the local engine runs starts no JVM.

The pipeline hands one session to every source reader and sink when it starts. Most ticks of
small changes never touch it (the local engine computes the view's delta, pyiceberg and
delta-rs commit it), and starting Spark costs seconds and a JVM. :class:`LazySession`
stands in for the session: the first attribute read starts it, through the factory given,
and every later one goes to it.
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

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session(), name)
