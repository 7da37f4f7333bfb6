"""Attach snapshot summary properties to Iceberg commits made by Spark SQL statements.

``DataFrameWriterV2`` takes ``snapshot-property.<key>`` options, but ``MERGE INTO``, ``DELETE``
and ``UPDATE`` statements have no options. Iceberg's Spark module reads extra summary
properties from a thread-local set by ``org.apache.iceberg.spark.CommitMetadata
.withCommitProperties(properties, callable, exceptionClass)``. This module calls it through
py4j with a Python-implemented ``java.util.concurrent.Callable``: in PySpark's pinned-thread
mode (the default since 3.2) the Java call-back runs the Python function on the calling Python
thread, whose JVM calls come back to the very JVM thread that holds the thread-local, so the
statement's commit carries the properties. Iceberg resets the thread-local afterwards, even on
failure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from pyspark.sql import SparkSession

__all__ = ["run_with_commit_properties"]

T = TypeVar("T")


class _PythonCallable(Generic[T]):
    """A ``java.util.concurrent.Callable`` that runs ``fn`` and keeps its outcome in Python."""

    def __init__(self, fn: Callable[[], T]):
        self._fn = fn
        self.result: T | None = None
        self.error: BaseException | None = None

    def call(self) -> None:
        """Run the function (called from Java); the result stays on the Python side."""
        try:
            self.result = self._fn()
        except BaseException as error:
            self.error = error
            raise

    class Java:
        """py4j: the Java interfaces this object implements."""

        implements = ["java.util.concurrent.Callable"]


def _require_pinned_threads(spark: SparkSession) -> Any:
    """Return the session's py4j JVM view, checking that Python threads are pinned to JVM ones.

    Raises:
        RuntimeError: On Spark Connect sessions or with ``PYSPARK_PIN_THREAD=false``: the
            statement would then run on another JVM thread and silently lose the properties.
    """
    from py4j.clientserver import ClientServer

    context = getattr(spark, "_sc", None)
    gateway = getattr(context, "_gateway", None)
    if gateway is None:
        raise RuntimeError("commit properties need a classic (py4j) Spark session, not Connect")
    if not isinstance(gateway, ClientServer):
        raise RuntimeError(
            "commit properties need PySpark's pinned-thread mode; unset PYSPARK_PIN_THREAD=false"
        )
    return spark._jvm


def run_with_commit_properties(
    spark: SparkSession, properties: Mapping[str, str], fn: Callable[[], T]
) -> T:
    """Run ``fn`` so that the Iceberg commits it makes carry ``properties`` in their summary.

    Use it around one Spark SQL statement that commits once, e.g.
    ``run_with_commit_properties(spark, {"k": "v"}, lambda: spark.sql("MERGE INTO ..."))``.
    Every commit ``fn`` makes on this thread gets the properties (keys may also be given as
    ``snapshot-property.<key>``; the prefix is dropped). Read them back with
    ``SELECT summary FROM <table>.snapshots``.

    Args:
        spark: A classic PySpark session with the Iceberg runtime on its classpath.
        properties: Summary properties to add.
        fn: The work to run; it is called once, on the calling thread.

    Returns:
        What ``fn`` returned.

    Raises:
        RuntimeError: If the session cannot pin the statement to the properties' JVM thread.
        Exception: Whatever ``fn`` raised, unchanged.
    """
    jvm = _require_pinned_threads(spark)
    java_properties = jvm.java.util.HashMap()
    for key, value in properties.items():
        java_properties.put(str(key), str(value))
    callable_ = _PythonCallable(fn)
    runtime_exception = jvm.java.lang.Class.forName("java.lang.RuntimeException")
    commit_metadata = jvm.org.apache.iceberg.spark.CommitMetadata
    try:
        commit_metadata.withCommitProperties(java_properties, callable_, runtime_exception)
    except Exception:
        if callable_.error is not None:
            raise callable_.error from None
        raise
    return callable_.result  # type: ignore[return-value]
