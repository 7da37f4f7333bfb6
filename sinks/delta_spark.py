"""The Spark Delta writer: a view delta held in Spark, committed with delta-spark.

Used when the tick computed the delta on Spark (:meth:`sinks.delta.DeltaSink.apply`): the
executors write the data files, the driver only commits. A delta is appended (inserts only)
or applied in one ``MERGE`` (:mod:`sinks.merge_source`). Every commit carries the freshness
properties in ``userMetadata`` and the application transaction (``txnAppId``,
``txnVersion``), so Delta itself skips a replayed write (:mod:`sinks.delta_commit`).

Writes take the transaction as ``DataFrameWriter`` options; ``MERGE`` takes it from the
session's SQL configuration (``spark.databricks.delta.write.txnAppId`` and ``.txnVersion``,
``spark.databricks.delta.commitInfo.userMetadata``, and ``merge.materializeSource``), which
each thread sets on a session of its own (:func:`_commit_session`), so that ``MERGE`` commits
of several views run at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Literal

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ivm import WEIGHT, expand
from sinks.delta_commit import CREATE_CONFIGURATION, DeltaCommit
from sinks.errors import SinkError
from sinks.merge_source import OP, keyed_merge_source, multiset_merge_source
from sinks.spark_errors import spark_error_summary

_TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
_TXN_VERSION = "spark.databricks.delta.write.txnVersion"
_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
_MATERIALIZE_SOURCE = "spark.databricks.delta.merge.materializeSource"
"""Set to ``none``: a MERGE's source is the refresh's checkpointed delta (or a time travel
read), which reads the same rows twice, so Delta's own copy of it is one job for nothing."""


def write(uri: str, rows: DataFrame, mode: Literal["append", "overwrite"],
          commit: DeltaCommit) -> None:
    """Append or overwrite ``rows`` (the view's columns) in one commit, from the executors.

    Args:
        uri: The table's path or URI.
        rows: The rows to write (in their session).
        mode: ``append`` or ``overwrite``; an append that creates the table fails if a
            concurrent refresh created it first.
        commit: What the commit carries.

    Raises:
        SinkError: The commit failed; the table is unchanged.
    """
    writer = (rows.write.format("delta").mode("errorifexists" if commit.create and
                                                mode == "append" else mode)
              .option("txnAppId", commit.app_id).option("txnVersion", str(commit.version))
              .option("userMetadata", commit.user_metadata))
    if commit.create:
        for name, value in CREATE_CONFIGURATION.items():
            writer = writer.option(name, value)
    try:
        writer.save(uri)
    except Exception as error:  # py4j and analysis errors: the commit did not land
        raise SinkError(f"write failed: {spark_error_summary(error)}", table=uri) from error


def apply(spark: SparkSession, uri: str, base_version: int | None, delta: DataFrame,
          key: Sequence[str] | None, commit: DeltaCommit,
          latest_version: Callable[[], int | None]) -> None:
    """Apply a consolidated Z-set (the view's columns plus ``_weight``) in one commit.

    Args:
        spark: The session.
        uri: The table's path or URI.
        base_version: The table version the refresh read (None: the table does not exist).
        delta: The view delta, deterministic (checkpointed): the ``MERGE`` reads its
            source twice without materializing it (``merge.materializeSource`` none).
        key: The view's unique key, or None when rows have multiplicities.
        commit: What the commit carries.
        latest_version: Reads the table's latest version from its log (on the driver,
            metadata only); a ``MERGE`` requires it to be ``base_version``.

    Raises:
        SinkError: The commit failed, or the table moved past ``base_version``; the table
            is unchanged.
    """
    inserts_only = key is None and delta.where(F.col(WEIGHT) < 0).isEmpty()
    if base_version is None or inserts_only or delta.isEmpty():
        write(uri, expand(delta), "append", commit)
        return
    current = spark.read.format("delta").option("versionAsOf", base_version).load(uri)
    source = (keyed_merge_source(delta, key) if key is not None
              else multiset_merge_source(delta, current))
    _merge(spark, uri, source, key, commit,
           partial(_require_version, latest_version, uri, base_version))


def _merge(spark: SparkSession, uri: str, source: DataFrame, key: Sequence[str] | None,
           commit: DeltaCommit, require_version: Callable[[], None]) -> None:
    columns = [c for c in source.columns if c != OP]
    matched = key if key is not None else columns
    condition = " AND ".join([f"s.{OP} = 'delete'",
                              *(f"t.{_quoted(c)} <=> s.{_quoted(c)}" for c in matched)])
    conf = {_TXN_APP_ID: commit.app_id, _TXN_VERSION: str(commit.version),
            _USER_METADATA: commit.user_metadata, _MATERIALIZE_SOURCE: "none"}
    try:
        target = DeltaTable.forPath(_commit_session(spark, conf), uri)
        require_version()
        (target.alias("t").merge(source.alias("s"), condition)
         .whenMatchedDelete()
         .whenNotMatchedInsert(condition=f"s.{OP} = 'insert'",
                               values={_quoted(c): f"s.{_quoted(c)}" for c in columns})
         .execute())
    except SinkError:
        raise
    except Exception as error:
        raise SinkError(f"merge failed: {spark_error_summary(error)}", table=uri) from error


def _require_version(latest_version: Callable[[], int | None], uri: str,
                     base_version: int) -> None:
    """Refuse to merge on a table another writer moved since the refresh read it.

    A concurrent refresh of the same view that commits in between carries the same
    transaction version, so Delta skips this one's commit then too.
    """
    latest = latest_version()
    if latest != base_version:
        raise SinkError(f"another commit landed first (version {latest}, "
                        f"this refresh read {base_version})", table=uri)


_THREAD_SESSIONS = threading.local()


def _commit_session(spark: SparkSession, conf: Mapping[str, str]) -> SparkSession:
    """This thread's session of ``spark``'s context, its SQL configuration set to ``conf``.

    Delta reads a commit's transaction (``txnAppId``, ``txnVersion``) and user metadata
    from the SQL configuration of the session that commits. A session per thread (sharing
    the context, its executors and cached data; made once, as each session registers
    listeners for its life) keeps those of ticks of other views, committing at once on
    other threads, out of this commit.
    """
    sessions = _THREAD_SESSIONS.__dict__.setdefault("by_context", {})
    key = id(spark.sparkContext)
    if key not in sessions:
        sessions[key] = spark.newSession()
    session: SparkSession = sessions[key]
    for name, value in conf.items():
        session.conf.set(name, value)
    return session


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
