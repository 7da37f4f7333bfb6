"""View-table maintenance: snapshot expiry and small-file compaction of a view's sinks.

Every refresh commits one snapshot to the view's Iceberg table and one version to its Delta
copy, most with one small data file. :func:`maintain` keeps both tables small, on the
schedule of the config's ``maintenance`` section (:class:`lakehouse.config.MaintenanceConfig`;
:class:`lakehouse.scheduler.Scheduler` runs it, holding the view) or when asked
(``lakehouse maintain``):

1. **Compaction** of the Iceberg table, only once it has ``compact_min_files`` small data
   files (smaller than 3/4 of ``target_file_size_bytes``, Iceberg's ``min-file-size-bytes``
   default), so that a quiet view gets no commit: Spark's ``rewrite_data_files`` procedure
   (Iceberg docs, "Spark Procedures"), one ``replace`` snapshot that changes no row and
   carries no frontier. The view's readers pass over it: its sinks read the frontier under
   it (:func:`sinks.iceberg.frontier_snapshot`), change feeds skip it
   (:mod:`lakehouse.sources.iceberg_files`), subscribers are not sent it.
2. **Snapshot expiry** of the Iceberg table (Iceberg table spec, "Snapshot Retention
   Policy"; Iceberg docs, "Maintenance": expire snapshots), through Iceberg's
   ``ExpireSnapshots`` on the driver's JVM by snapshot id (:func:`expire_iceberg`), which
   also deletes the data files, manifests and manifest lists that only expired snapshots
   reached. Kept
   (:func:`expirable_snapshots`): every branch and tag head (the current snapshot among
   them), the newest ``keep_snapshots`` snapshots of ``main``, every snapshot younger than
   ``retain_for``, and every snapshot *held* (:func:`snapshot_holders`): the one the view's
   own frontier is read from (under compactions), each snapshot a downstream view's
   committed frontier names (its Iceberg and its Delta sink's: the next incremental
   refresh of that view reads the change from it), each named subscriber's acknowledged
   position and each live subscription's position in this process
   (:mod:`lakehouse.subscriptions`). A change feed walks the parents from the current
   snapshot back to the one it starts after (:mod:`lakehouse.sources.iceberg_lineage`),
   so every snapshot of ``main`` from the oldest one held up to the current one is kept:
   only snapshots strictly older than it (or off ``main``, unheld and old) are expired.
3. **The Delta copy**: delta-rs ``optimize.compact`` under the same threshold (Delta
   protocol, "Add File and Remove File": the commit's files are ``dataChange: false``;
   ``OPTIMIZE`` commits carry no frontier and :meth:`sinks.delta.DeltaSink.frontier` walks
   back over them); then ``cleanup_metadata``: log entries older than the table's
   ``delta.logRetentionDuration`` are deleted, up to the latest checkpoint from which every
   later version can be read. That property is set to ``retain_for`` (one ``SET
   TBLPROPERTIES`` commit, when it differs), so the log is kept as long as the Iceberg
   table's snapshots, and the writers' own cleanup at each checkpoint
   (``delta.enableExpiredLogCleanup``, on by default) keeps it there between runs. With
   Delta's 30-day default a view refreshed every second kept every commit's log entry, and
   each of its commits listed them all: measured with delta-rs 1.6, a commit took 7 ms
   longer for every thousand entries (16 ms, then 41 ms after 3,500 commits), and stayed
   at about 20 ms with the log kept to 20 s. Maintenance's commits write no checkpoint, so
   the newest refresh commit (it holds the frontier) is never cleaned away. Then, with
   ``delta_vacuum``, ``VACUUM`` of the files that no version younger than ``retain_for``
   (rounded up to whole hours) nor the newest ``keep_snapshots`` versions still in the log
   reads (only when one of them is still there: a vacuum commits twice). Delta readers can
   time travel within ``retain_for`` and to every version since the latest checkpoint. The
   Delta copy's application transactions (``txnAppId``/``txnVersion``,
   :mod:`sinks.delta_commit`) are untouched: the next refresh's version is still above the
   last one's.

Each step is its own commit; a failure leaves what committed before it and removes
nothing a reader needs (:class:`lakehouse.errors.MaintenanceError`). Maintenance must not
run at the same time as a refresh of the same view in this process (the scheduler runs
them under the view's claim); against another process it is safe but one of the two
commits loses its race and is retried on the next run or tick.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.fs as pafs
from deltalake import DeltaTable, PostCommitHookProperties
from deltalake.exceptions import DeltaError, TableNotFoundError
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot
from pyspark.sql import SparkSession

from ivm import IvmError
from lakehouse.config import Config, MaintenanceConfig, ViewConfig, ViewSource
from lakehouse.dag import upstream_views
from lakehouse.errors import MaintenanceError
from lakehouse.history import first_line
from lakehouse.refresh import ViewSinks
from lakehouse.storage import Folder, delta_options, warehouse_folder
from lakehouse.subscriptions import LIVE
from sinks.delta import DeltaSink
from sinks.iceberg import IcebergSink, frontier_snapshot
from sinks.spark_errors import spark_error_summary

if TYPE_CHECKING:
    from lakehouse.runtime import Runtime

__all__ = ["DeltaOutcome", "IcebergOutcome", "MaintenanceResult", "RetentionPolicy",
           "compact_iceberg", "expirable_snapshots", "expire_iceberg", "main_lineage",
           "log_retention", "maintain", "maintain_delta", "small_files",
           "snapshot_holders"]

log = logging.getLogger(__name__)

SMALL_FILE_RATIO = 0.75
"""A data file is small below this share of the target size (Iceberg's
``min-file-size-bytes`` default for ``rewrite_data_files``)."""


HOURS_S = 3600.0

NO_CHECKPOINT = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
"""Post-commit hooks of maintenance's Delta commits: none (see :func:`maintain_delta`)."""

LOG_RETENTION = "delta.logRetentionDuration"
"""The Delta table property bounding how long log entries are kept (Delta protocol,
"Table Properties"; ``interval <n> <unit>``)."""


@dataclass(frozen=True)
class MaintenanceResult:
    """What one maintenance run of a view did.

    Attributes:
        view: The view's name.
        snapshots_expired: How many Iceberg snapshots were expired.
        expired_snapshot_ids: Those snapshots, oldest first.
        held: Snapshot id -> who holds it (``the view's frontier``, ``view V (iceberg
            frontier)``, ``subscriber NAME``, ``a live subscription``): kept, with every
            snapshot of ``main`` after it.
        files_deleted: Iceberg files the expiry deleted (data files, manifests, manifest
            lists).
        data_files_before: Live data files of the Iceberg table before compaction.
        data_files_after: ... and after it (the same when it was not compacted).
        delta_files_before: Live data files of the Delta copy before ``OPTIMIZE``.
        delta_files_after: ... and after it.
        delta_files_removed: Files ``VACUUM`` deleted from the Delta copy's folder.
        files_compacted: Data files rewritten by compaction (Iceberg and Delta).
        duration_s: Wall time, in seconds.
    """

    view: str
    snapshots_expired: int = 0
    expired_snapshot_ids: tuple[int, ...] = ()
    held: dict[int, tuple[str, ...]] = field(default_factory=dict)
    files_deleted: int = 0
    data_files_before: int = 0
    data_files_after: int = 0
    delta_files_before: int = 0
    delta_files_after: int = 0
    delta_files_removed: int = 0
    files_compacted: int = 0
    duration_s: float = 0.0


@dataclass(frozen=True)
class IcebergOutcome:
    """What maintenance did to a view's Iceberg table (:func:`maintain`).

    Attributes:
        expired: The snapshots expired, oldest first.
        held: Snapshot id -> who holds it (:func:`snapshot_holders`).
        files_deleted: Files the expiry deleted.
        files_before: Live data files before compaction.
        files_after: ... and after.
        rewritten: Data files compaction rewrote (0: not compacted).
    """

    expired: tuple[int, ...] = ()
    held: dict[int, tuple[str, ...]] = field(default_factory=dict)
    files_deleted: int = 0
    files_before: int = 0
    files_after: int = 0
    rewritten: int = 0


@dataclass(frozen=True)
class RetentionPolicy:
    """Which snapshots are kept for their age or rank alone.

    Attributes:
        retain_for_s: Snapshots younger than this (seconds) are kept.
        keep_snapshots: The newest snapshots of ``main`` kept whatever their age (>= 1).
    """

    retain_for_s: float
    keep_snapshots: int

    @classmethod
    def of(cls, settings: MaintenanceConfig) -> RetentionPolicy:
        """The policy of the config's ``maintenance`` section."""
        return cls(settings.retain_for_s, settings.keep_snapshots)


def main_lineage(metadata: TableMetadata) -> list[Snapshot]:
    """The current snapshot and its ancestors still in ``metadata``, newest first."""
    by_id = {snapshot.snapshot_id: snapshot for snapshot in metadata.snapshots}
    lineage: list[Snapshot] = []
    head = metadata.current_snapshot_id
    current = by_id.get(head) if head is not None else None
    while current is not None:
        lineage.append(current)
        parent = current.parent_snapshot_id
        current = by_id.get(parent) if parent is not None else None
    return lineage


def expirable_snapshots(metadata: TableMetadata, held: Collection[int],
                        policy: RetentionPolicy, now_ms: int) -> list[int]:
    """The snapshots expiry may remove, oldest first.

    Kept: branch and tag heads; on ``main``, every snapshot from the current one back to
    the oldest that is held, younger than ``retain_for_s``, or among the newest
    ``keep_snapshots`` (a change feed from a held snapshot walks every snapshot after it);
    off ``main``, the held ones and those younger than ``retain_for_s``.

    Args:
        metadata: The table's metadata.
        held: Snapshot ids something still reads (ids not in the table are ignored).
        policy: What age and rank alone keep.
        now_ms: Now, in ms since the epoch.

    Returns:
        Snapshot ids, by commit time.
    """
    cutoff_ms = now_ms - policy.retain_for_s * 1000
    lineage = main_lineage(metadata)
    kept_count = policy.keep_snapshots
    for index, snapshot in enumerate(lineage):
        if snapshot.snapshot_id in held or snapshot.timestamp_ms >= cutoff_ms:
            kept_count = max(kept_count, index + 1)
    kept = {snapshot.snapshot_id for snapshot in lineage[:kept_count]}
    kept |= {ref.snapshot_id for ref in metadata.refs.values()} | set(held)
    snapshots = sorted(metadata.snapshots, key=lambda s: s.timestamp_ms)
    return [s.snapshot_id for s in snapshots
            if s.snapshot_id not in kept and s.timestamp_ms < cutoff_ms]


def small_files(sizes: Iterable[int], target_file_size_bytes: int) -> int:
    """How many of the data files of ``sizes`` (bytes) are small enough to compact."""
    return sum(1 for size in sizes if size < target_file_size_bytes * SMALL_FILE_RATIO)


def maintain(runtime: Runtime, view: ViewConfig) -> MaintenanceResult:
    """Compact and expire the snapshots of ``view``'s tables, keeping what is held.

    The Iceberg table first (compaction, then expiry), then the Delta copy; a sink the view
    does not have, or whose table does not exist yet, is left alone. Counted in the
    runtime's metrics (``lakehouse_snapshots_expired_total``,
    ``lakehouse_files_compacted_total``).

    Args:
        runtime: The pipeline's runtime (its catalog, Spark session, sinks, history).
        view: The view.

    Returns:
        What was done.

    Raises:
        MaintenanceError: A step failed (what committed before it stands), or what holds
            a snapshot could not be read (then nothing was expired).
    """
    started_s = time.monotonic()
    try:  # the storage's own errors (a file system, an object store) too, named
        iceberg, delta = _maintain_sinks(runtime, view)
    except OSError as error:
        raise MaintenanceError(f"{type(error).__name__}: {first_line(error)}",
                               view=view.name, step="read") from error
    result = MaintenanceResult(
        view.name, len(iceberg.expired), iceberg.expired, iceberg.held, iceberg.files_deleted,
        iceberg.files_before, iceberg.files_after, delta.files_before, delta.files_after,
        delta.removed, iceberg.rewritten + delta.rewritten, time.monotonic() - started_s)
    runtime.metrics.record_maintenance(view.name, result.snapshots_expired,
                                       result.files_compacted)
    return result


def _maintain_sinks(runtime: Runtime, view: ViewConfig) -> tuple[IcebergOutcome, DeltaOutcome]:
    """Maintain the view's Iceberg table, then its Delta copy (those it has)."""
    settings = runtime.config.maintenance
    iceberg = (_maintain_iceberg(runtime, view, settings) if "iceberg" in view.sinks
               else IcebergOutcome())
    delta = DeltaOutcome()
    if "delta" in view.sinks:
        uri = runtime.delta_uri(view)
        folder = warehouse_folder(runtime.config, "delta", *view.name.rsplit(".", 1))
        delta = maintain_delta(uri, delta_options(runtime.config, uri), settings, view.name,
                               folder)
    return iceberg, delta


def _maintain_iceberg(runtime: Runtime, view: ViewConfig,
                      settings: MaintenanceConfig) -> IcebergOutcome:
    """Compaction, then expiry, of the view's Iceberg table (:func:`maintain`)."""
    table = _load(runtime.catalog, view.name)
    if table is None:
        return IcebergOutcome()
    held = snapshot_holders(runtime, view, table.metadata)  # before any commit
    catalog_name = runtime.config.spark.catalog_name
    before = _data_file_sizes(table)
    rewritten = 0
    if small_files(before, settings.target_file_size_bytes) >= settings.compact_min_files:
        rewritten = compact_iceberg(runtime.spark, catalog_name, view.name, settings)
        table = _load(runtime.catalog, view.name) or table
    after = _data_file_sizes(table) if rewritten else before
    expired = expirable_snapshots(table.metadata, held, RetentionPolicy.of(settings),
                                  int(time.time() * 1000))
    deleted = expire_iceberg(runtime.spark, catalog_name, view.name, expired)
    return IcebergOutcome(tuple(expired), held, deleted, len(before), len(after), rewritten)


def snapshot_holders(runtime: Runtime, view: ViewConfig,
                     metadata: TableMetadata) -> dict[int, tuple[str, ...]]:
    """The snapshots of ``view``'s Iceberg table that something still reads, and what.

    The snapshot the view's own frontier is read from (under compactions); each one a
    downstream view's sinks' committed frontiers name; each named subscriber's
    acknowledged position; each live subscription's position in this process.

    Raises:
        MaintenanceError: A downstream view's sinks or the subscribers' positions cannot
            be read (step ``read``).
    """
    held: dict[int, list[str]] = {}
    own = frontier_snapshot(metadata, metadata.current_snapshot_id)
    if own is not None:
        held.setdefault(own.snapshot_id, []).append("the view's frontier")
    try:
        for name, kind, snapshot_id in _downstream_frontiers(runtime, view):
            held.setdefault(snapshot_id, []).append(f"view {name} ({kind} frontier)")
        named = runtime.history.subscribers(view.name) if runtime.history is not None else {}
    except Exception as error:  # catalog, storage, a malformed frontier: keep everything
        raise MaintenanceError(f"what holds its snapshots cannot be read, nothing was "
                               f"expired: {error}", view=view.name, step="read") from error
    for name, snapshot_id in sorted(named.items()):
        held.setdefault(snapshot_id, []).append(f"subscriber {name}")
    for snapshot_id in sorted(LIVE.positions(view.name)):
        held.setdefault(snapshot_id, []).append("a live subscription")
    return {snapshot_id: tuple(who) for snapshot_id, who in held.items()}


def _downstream_frontiers(runtime: Runtime, view: ViewConfig
                          ) -> Iterator[tuple[str, str, int]]:
    """``(downstream view, sink kind, snapshot id)`` of each frontier naming ``view``'s table.

    A view whose SQL does not parse is read too: its committed frontier may still name a
    snapshot its next refresh needs once the SQL is fixed.
    """
    config = runtime.config
    names = _view_sources(config, view.name)
    for other in config.views:
        if other.name == view.name or not names or not _may_read(config, other, view.name):
            continue
        for kind, frontier in _committed_frontiers(runtime, other).items():
            for name in sorted(names & set(frontier or {})):
                yield other.name, kind, (frontier or {})[name]


def _committed_frontiers(runtime: Runtime, view: ViewConfig
                         ) -> dict[str, dict[str, int] | None]:
    """The frontier each sink of ``view`` committed, by sink kind (a catalog load each).

    Sinks made for reading their frontier only (no refresh state: the view's SQL need not
    parse).
    """
    config = runtime.config
    uri = runtime.delta_uri(view)
    iceberg = (IcebergSink(runtime.spark, runtime.catalog, config.spark.catalog_name,
                           view.name) if "iceberg" in view.sinks else None)
    delta = (DeltaSink(uri, app_id=f"lakehouse:{view.name}",
                       storage_options=delta_options(config, uri))
             if "delta" in view.sinks else None)
    return ViewSinks(iceberg, delta).frontiers()


def _view_sources(config: Config, view: str) -> set[str]:
    """The source names that read ``view``'s table."""
    return {name for name, source in config.sources.items()
            if isinstance(source, ViewSource) and source.view == view}


def _may_read(config: Config, other: ViewConfig, view: str) -> bool:
    try:
        return view in upstream_views(config, other)
    except IvmError:
        return True


def compact_iceberg(spark: SparkSession, catalog_name: str, identifier: str,
                    settings: MaintenanceConfig) -> int:
    """Rewrite the small data files of an Iceberg table into larger ones (one ``replace``).

    Spark's ``CALL <catalog>.system.rewrite_data_files`` (Iceberg docs, "Spark Procedures")
    with ``min-input-files`` = ``compact_min_files`` and ``target-file-size-bytes``.

    Args:
        spark: A session whose catalog ``catalog_name`` is the pipeline's.
        catalog_name: The Spark catalog name.
        identifier: ``namespace.table`` (validated by the config: no quoting needed).
        settings: The config's ``maintenance`` section.

    Returns:
        The data files rewritten (0: the procedure found no group worth rewriting).

    Raises:
        MaintenanceError: The procedure failed (step ``compact``); the table is unchanged.
    """
    options = (f"map('min-input-files', '{settings.compact_min_files}', "
               f"'target-file-size-bytes', '{settings.target_file_size_bytes}')")
    try:
        (row,) = spark.sql(f"CALL {catalog_name}.system.rewrite_data_files(table => "
                           f"'{identifier}', options => {options})").collect()
    except Exception as error:  # py4j and analysis errors: nothing committed
        raise MaintenanceError(spark_error_summary(error), view=identifier,
                               step="compact") from error
    return int(row["rewritten_data_files_count"])


def expire_iceberg(spark: SparkSession, catalog_name: str, identifier: str,
                   snapshot_ids: Sequence[int]) -> int:
    """Expire ``snapshot_ids`` of an Iceberg table, deleting the files only they reached.

    Iceberg's ``ExpireSnapshots`` (``Table.expireSnapshots()``, the Java core API; Iceberg
    docs, "Maintenance") on the driver's JVM, by snapshot id, ``expireOlderThan`` before
    every snapshot (no other snapshot expires by age), in one commit. Its file cleanup reads
    the table's manifests on the driver and runs no Spark job: Spark's
    ``expire_snapshots`` procedure runs a few jobs, which wait for executor slots behind
    the tasks of the refreshes in flight (8-25 s a view on the soak benchmark, beside two
    full refreshes, with the view held all along), where a view table has a few manifests
    per snapshot. The files the cleanup names are then deleted through the table's
    ``FileIO``, and counted; a file that cannot be deleted is left as an orphan (a
    warning says how many), as Iceberg's own cleanup leaves it. A ref with its own
    ``max-snapshot-age-ms`` or ``max-ref-age-ms`` still expires by age, as with the
    procedure (the pipeline sets none).

    Returns:
        The files deleted (data files, manifests, manifest lists, statistics).

    Raises:
        MaintenanceError: The expiry failed (step ``expire``): nothing expired, unless the
            cleanup failed after the commit (the snapshots are then expired and their
            files left).
    """
    if not snapshot_ids:
        return 0
    jvm = spark._jvm  # noqa: SLF001 - pyspark's gateway to the driver's JVM
    assert jvm is not None
    guava = jvm.org.apache.iceberg.relocated.com.google.common  # shaded in Iceberg's jar
    try:
        table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
            spark._jsparkSession, f"{catalog_name}.{identifier}")  # noqa: SLF001
        cleaned = jvm.java.util.stream.Stream.builder()  # a Consumer<String>: the paths
        on_this_thread = guava.util.concurrent.MoreExecutors.newDirectExecutorService()
        expiry = (table.expireSnapshots().expireOlderThan(0).cleanExpiredFiles(True)
                  .executeDeleteWith(on_this_thread))  # the builder is not thread-safe
        for snapshot_id in snapshot_ids:
            expiry = expiry.expireSnapshotId(snapshot_id)
        expiry.deleteWith(cleaned).commit()
    except Exception as error:  # py4j: the table, a commit refused
        raise MaintenanceError(spark_error_summary(error), view=identifier,
                               step="expire") from error
    return _delete_files(table.io(), list(cleaned.build().toArray()), identifier)


def _delete_files(io: Any, paths: Sequence[str], identifier: str) -> int:
    """Delete ``paths`` through the table's Java ``FileIO``; the number deleted.

    Each is tried: one the storage refuses is left (an orphan) and counted in a warning.
    """
    deleted = 0
    for path in paths:
        try:
            io.deleteFile(path)
            deleted += 1
        except Exception:  # noqa: BLE001 - py4j: the storage refused; tell, go on
            continue
    if deleted < len(paths):
        log.warning("%s: %d of the %d files its expired snapshots alone reached could not be "
                    "deleted (left as orphans)", identifier, len(paths) - deleted, len(paths))
    return deleted


@dataclass(frozen=True)
class DeltaOutcome:
    """What :func:`maintain_delta` did to a Delta table.

    Attributes:
        files_before: Live data files before ``OPTIMIZE``.
        files_after: ... and after.
        rewritten: Files ``OPTIMIZE`` rewrote (0: not compacted).
        removed: Files ``VACUUM`` deleted.
    """

    files_before: int = 0
    files_after: int = 0
    rewritten: int = 0
    removed: int = 0


def maintain_delta(uri: str, storage_options: dict[str, str] | None,
                   settings: MaintenanceConfig, view: str,
                   folder: Folder | None = None) -> DeltaOutcome:
    """Compact, clean the log of, and vacuum a view's Delta copy (delta-rs).

    The log is kept for ``retain_for``: the table's ``delta.logRetentionDuration`` is set
    to it when it differs (an operator's own value is replaced). These commits change no
    row and write no checkpoint (nor clean the log after one), so the latest checkpoint,
    up to which the log may be cleaned, is always a refresh's commit, and the newest
    refresh commit, which holds the frontier, is never cleaned away.

    Args:
        uri: The table's path or URI (nothing is done when it does not exist).
        storage_options: delta-rs storage options.
        settings: The config's ``maintenance`` section.
        view: The view's name, for errors.
        folder: The table's folder, listed to tell which files a ``VACUUM`` would still
            delete (:func:`_vacuum`); None: vacuum whenever delta-rs lists a file.

    Raises:
        MaintenanceError: delta-rs failed (step ``delta``); what committed stands.
    """
    try:
        table = DeltaTable(uri, storage_options=storage_options)
    except TableNotFoundError:
        return DeltaOutcome()
    try:
        before = _delta_file_sizes(table)
        rewritten = 0
        if small_files(before, settings.target_file_size_bytes) >= settings.compact_min_files:
            metrics = table.optimize.compact(target_size=settings.target_file_size_bytes,
                                             post_commithook_properties=NO_CHECKPOINT)
            rewritten = int(metrics.get("numFilesRemoved", 0))
            table = DeltaTable(uri, storage_options=storage_options)
        _retain_log(table, settings)
        table.cleanup_metadata()
        removed = _vacuum(table, settings, folder) if settings.delta_vacuum else 0
        after = _delta_file_sizes(table) if rewritten else before
    except DeltaError as error:
        raise MaintenanceError(str(error), view=view, step="delta") from error
    return DeltaOutcome(len(before), len(after), rewritten, removed)


def log_retention(settings: MaintenanceConfig) -> str:
    """``retain_for`` as a Delta ``delta.logRetentionDuration`` (whole seconds, rounded up)."""
    return f"interval {math.ceil(settings.retain_for_s)} seconds"


def _retain_log(table: DeltaTable, settings: MaintenanceConfig) -> None:
    """Set ``table``'s log retention to ``retain_for`` when it is not already (one commit)."""
    wanted = log_retention(settings)
    if table.metadata().configuration.get(LOG_RETENTION) != wanted:
        table.alter.set_table_properties({LOG_RETENTION: wanted},
                                         post_commithook_properties=NO_CHECKPOINT)


def _vacuum(table: DeltaTable, settings: MaintenanceConfig, folder: Folder | None) -> int:
    """``VACUUM`` ``table`` when a file it would delete is still there; how many it deleted.

    delta-rs lists every removed file older than the retention, whether an earlier vacuum
    deleted it or not (until its tombstone leaves the log, 7 days by default): the dry run
    is checked against the folder's files, so that a vacuum (two commits) runs only when it
    deletes something.

    The versions kept are the newest ``keep_snapshots`` whose commits are still in the
    log (``history``): a version whose log entry was cleaned cannot be read by anyone, and
    naming it makes delta-rs's vacuum fail. Run just after ``cleanup_metadata``, which
    deletes the log only up to a checkpoint from which every later version can be read.
    """
    readable = [int(commit["version"]) for commit in table.history(settings.keep_snapshots)]
    vacuum = partial(
        table.vacuum, retention_hours=math.ceil(settings.retain_for_s / HOURS_S),
        enforce_retention_duration=False,  # retain_for may be below the table's 7 days
        keep_versions=readable, post_commithook_properties=NO_CHECKPOINT)
    candidates = vacuum(dry_run=True)
    present = _present(candidates, folder) if candidates else 0
    if present == 0:
        return 0
    deleted = vacuum(dry_run=False)
    return present if present is not None else len(deleted)


def _present(paths: Sequence[str], folder: Folder | None) -> int | None:
    """How many of ``paths`` (files of a Delta table) are in ``folder``; None: unknown."""
    if folder is None:
        return None
    try:
        infos = folder.filesystem.get_file_info(pafs.FileSelector(folder.path,
                                                                  allow_not_found=True))
    except OSError:
        return None
    names = {info.base_name for info in infos if info.type == pafs.FileType.File}
    return sum(1 for path in paths if path.rsplit("/", 1)[-1] in names)


def _load(catalog: Catalog, identifier: str) -> Table | None:
    try:
        return catalog.load_table(identifier)
    except NoSuchTableError:
        return None
    except Exception as error:  # catalog clients raise many types
        raise MaintenanceError(f"cannot load the table: {error}", view=identifier,
                               step="read") from error


def _data_file_sizes(table: Table) -> list[int]:
    """The sizes (bytes) of the live data files of ``table``'s current snapshot."""
    if table.current_snapshot() is None:
        return []
    return [task.file.file_size_in_bytes for task in table.scan().plan_files()]


def _delta_file_sizes(table: DeltaTable) -> list[int]:
    """The sizes (bytes) of the live data files of ``table``'s current version."""
    return [int(size) for size in
            pa.table(table.get_add_actions(flatten=True)).column("size_bytes").to_pylist()]

