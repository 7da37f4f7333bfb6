"""The Python API: a pipeline from its config, and each CLI command as a call.

Example::

    from lakehouse import Pipeline

    with Pipeline.from_config("lakehouse.yaml") as pipeline:
        summary = pipeline.refresh("views.by_carrier")   # RefreshSummary
        rows = pipeline.snapshot("views.by_carrier")     # pyarrow.Table
        for change in pipeline.subscribe("views.by_carrier", since=last_seen):
            apply(change.rows)                           # the view's columns + _weight
            last_seen = change.snapshot_id

Calls that only read the catalog (``snapshot``, ``status``, ``history``, ``suspend``,
``resume``, ``subscribe``, ``unsubscribe``, ``wait``) start neither Spark nor the refresh
machinery; the first ``refresh``, ``explain`` or ``maintain`` starts a
:class:`lakehouse.runtime.Runtime` (Spark still only when a tick or maintenance needs
it). Documented in ``docs/python-api.md``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError

from lakehouse.catalog_client import open_catalog, read_catalog
from lakehouse.config import Config, load_config
from lakehouse.errors import ConfigError, HistoryError
from lakehouse.history import RefreshHistory
from lakehouse.status import ViewStatus, view_statuses
from lakehouse.subscriptions import ViewChange, check_subscriber_name, subscribe
from lakehouse.wait import WaitRequest, wait_for

if TYPE_CHECKING:
    from lakehouse.maintenance import MaintenanceResult
    from lakehouse.runtime import Runtime

__all__ = ["Pipeline", "RefreshSummary"]


@dataclass(frozen=True)
class RefreshSummary:
    """What one refresh did (:class:`lakehouse.refresh.RefreshResult`, for callers).

    Attributes:
        view: The view's name.
        mode: ``incremental``, ``full`` or ``skipped``.
        reason: Why in full (or why skipped: suspended), if so.
        engine: ``local``, ``spark`` or ``none`` (skipped).
        engine_reason: Why that engine.
        rows_in: Change feed rows read.
        rows_out: View delta rows committed (+ and -), or rows written in full.
        duration_s: Wall time, in seconds.
        frontier: The source versions the view reflects afterwards.
        sinks: The sink kinds committed to.
        suspended_since: When the view was suspended (ISO 8601, UTC), if it is.
    """

    view: str
    mode: str
    reason: str | None
    engine: str
    engine_reason: str
    rows_in: int
    rows_out: int
    duration_s: float
    frontier: dict[str, int]
    sinks: list[str]
    suspended_since: str | None = None


class Pipeline(AbstractContextManager["Pipeline"]):
    """One pipeline (its ``lakehouse.yaml``), driven from Python.

    Args:
        config: The validated configuration.
        catalog: The catalog client to read with, instead of one with the pipeline's own
            credential (the service passes one acting as its caller).
        read_only: The pipeline only reads (``lakehouse explain``, the status page): an
            embedded catalog nothing serves is read from its database, opened read-only
            (:func:`lakehouse.catalog_client.read_catalog`). Otherwise such a catalog runs
            in this process (:func:`lakehouse.catalog_client.in_process_catalog`).
    """

    def __init__(self, config: Config, catalog: Catalog | None = None, *,
                 read_only: bool = False):
        self.config = config
        self.read_only = read_only
        self._stack = ExitStack()
        self._runtime: Runtime | None = None
        self._given = self._catalog = catalog

    @classmethod
    def from_config(cls, path: str | Path) -> Pipeline:
        """The pipeline of the config file at ``path``.

        Raises:
            lakehouse.errors.ConfigError: The file is missing or invalid (the error names
                the key at fault).
        """
        return cls(load_config(Path(path)))

    @property
    def runtime(self) -> Runtime:
        """The refresh machinery, started on first use (no Spark until a tick needs it)."""
        if self._runtime is None:
            from lakehouse.runtime import Runtime

            catalog = self._catalog if self._given is None else None  # one this pipeline opened
            if catalog is None and self.read_only:
                catalog = read_catalog(self.config)
            self._runtime = self._stack.enter_context(Runtime(self.config, catalog=catalog))
        return self._runtime

    @property
    def catalog(self) -> Catalog:
        """A client of the pipeline's catalog (the one given, else the runtime's once it runs)."""
        if self._given is not None:
            return self._given
        if self._runtime is not None:
            return self._runtime.catalog
        if self._catalog is None:
            self._catalog = self._stack.enter_context(open_catalog(self.config))
        return self._catalog

    def refresh(self, view: str, *, full: bool = False) -> RefreshSummary:
        """Refresh ``view`` now, after the views it reads; even a suspended one.

        Args:
            view: The view's name.
            full: Recompute it and swap each sink's content in one commit.

        Raises:
            lakehouse.errors.ConfigError: No view has that name.
            lakehouse.errors.RefreshError: A source or sink failed.
            ivm.IvmError: The view's SQL does not compile.
        """
        result = self.runtime.refresh(self.config.view(view), full=full, manual=True)
        return RefreshSummary(
            result.view, result.mode, result.reason, result.engine, result.engine_reason,
            result.rows_in, result.rows_out, result.duration_s, result.frontier,
            result.sinks, self.runtime.suspended().get(result.view))

    def snapshot(self, view: str, snapshot_id: int | None = None) -> pa.Table:
        """The view's rows at its current snapshot (or ``snapshot_id``), from its Iceberg table.

        Raises:
            lakehouse.errors.ConfigError: No view has that name.
            lakehouse.errors.SubscriptionError: The view has no table yet.
        """
        from lakehouse.errors import SubscriptionError

        name = self.config.view(view).name
        try:
            table = self.catalog.load_table(name)
        except NoSuchTableError:
            raise SubscriptionError("the view has no table yet (it is built by its first "
                                    "refresh)", view=name) from None
        return table.scan(snapshot_id=snapshot_id).to_arrow()

    def explain(self, view: str) -> str:
        """How each part of ``view`` is maintained (laws, keys, state read, engine)."""
        from ivm import explain

        return explain(self.runtime.plan(self.config.view(view)))

    def explain_tree(self, view: str) -> dict[str, Any]:
        """:meth:`explain` as JSON-ready data (:func:`ivm.explain.explain_tree`)."""
        from ivm.explain import explain_tree

        return explain_tree(self.runtime.plan(self.config.view(view)))

    def status(self) -> list[ViewStatus]:
        """Each view's frontier, lag, rows, state (ok, suspended, stopped and why)."""
        return view_statuses(self.config, self.catalog)

    def history(self, view: str | None = None, limit: int | None = 20,
                since: datetime | None = None) -> pa.Table:
        """The recorded refreshes, newest first (:data:`lakehouse.history.HISTORY_SCHEMA`).

        ``since``: only those started at or after it.

        Raises:
            lakehouse.errors.ConfigError: No view has that name, or no history is kept.
            lakehouse.errors.HistoryError: The history table cannot be read.
        """
        name = self.config.view(view).name if view is not None else None
        return self._history("no history is kept").read(name, limit, since)

    def suspend(self, view: str) -> None:
        """Stop refreshing ``view`` on its schedule (persisted in the catalog)."""
        self._history("views are suspended in the history table's namespace properties").suspend(
            self.config.view(view).name)

    def resume(self, view: str) -> None:
        """Refresh ``view`` on its schedule again."""
        self._history("views are suspended in the history table's namespace properties").resume(
            self.config.view(view).name)

    def subscribe(self, view: str, since: int | None = None, name: str | None = None, *,
                  follow: bool = True, stop: threading.Event | None = None
                  ) -> Iterator[ViewChange]:
        """Each later snapshot of ``view`` as a Z-set (:func:`lakehouse.subscriptions.subscribe`).

        Args:
            view: The view's name.
            since: The last snapshot already processed; None: first the current content,
                or, for a named subscriber, the changes after its acknowledged position.
            name: A durable subscriber name (1 to 64 letters, digits, ``_``, ``-``): each
                change the iterator moves past is acknowledged in the history table's
                namespace, and maintenance keeps the snapshots from there on; None: an
                anonymous subscriber, which saves its own ``snapshot_id``.
            follow: Wait for new snapshots until ``stop`` is set; False: stop once caught up.
            stop: Ends a following subscription.

        Raises:
            lakehouse.errors.ConfigError: No view has that name, or ``name`` is given and
                no history is kept (``history_table: null``).
            lakehouse.errors.SubscriptionError: ``since`` was expired, ``name`` is not a
                valid name, or (not following) the view has no table yet.
            lakehouse.errors.HistoryError: A named subscriber's position cannot be read
                or written.
        """
        identifier = self.config.view(view).name
        positions = None
        if name is not None:
            check_subscriber_name(identifier, name)
            positions = self._history("named subscribers' positions are kept in the history "
                                      "table's namespace properties")
        return subscribe(self.catalog, identifier, since, name=name, positions=positions,
                         follow=follow, stop=stop)

    def unsubscribe(self, view: str, name: str) -> None:
        """Forget the named subscriber ``name`` of ``view``: its snapshots may be expired.

        Raises:
            lakehouse.errors.ConfigError: No such view, or no history is kept.
            lakehouse.errors.HistoryError: The namespace's properties cannot be set.
        """
        self._history("named subscribers' positions are kept in the history table's "
                      "namespace properties").unsubscribe(self.config.view(view).name, name)

    def maintain(self, view: str) -> MaintenanceResult:
        """Compact ``view``'s tables and expire the snapshots nothing holds.

        :func:`lakehouse.maintenance.maintain`: the config's ``maintenance`` section says
        what is kept; a downstream view's frontier and a subscriber's position always are.
        Starts the runtime (and Spark: the Iceberg procedures run on it).

        Raises:
            lakehouse.errors.ConfigError: No view has that name.
            lakehouse.errors.MaintenanceError: A step failed (what committed before it
                stands).
        """
        return self.runtime.maintain(self.config.view(view))

    def wait(self, view: str, source: str, version: int, timeout_s: float = 60.0) -> int:
        """The first snapshot of ``view`` that reflects ``source`` at ``version``.

        Args:
            view: The view's name.
            source: A source the view reads (its name in the config).
            version: The source's snapshot id (Iceberg) or version (Delta).
            timeout_s: Seconds to wait at most.

        Raises:
            lakehouse.errors.ConfigError: No such view, or the view does not read the source.
            lakehouse.errors.SourceError: The source has no such snapshot or version.
            lakehouse.errors.WaitTimeoutError: No snapshot reflected it in time; its
                ``reason`` says why the view is late.
        """
        request = self.wait_request(view, source, version)
        return wait_for(self.config, self.catalog, request, timeout_s,
                        lambda: self.late_reason_or_unknown(request.view))

    def late_reason_or_unknown(self, view: str) -> str:
        """:meth:`late_reason`; a failure to read it does not hide the timeout."""
        try:
            return self.late_reason(view)
        except Exception as error:  # the reason is a courtesy: the timeout stands without it
            return f"unknown ({type(error).__name__} while reading the view's status)"

    def wait_request(self, view: str, source: str, version: int) -> WaitRequest:
        """What :meth:`wait` waits for, checked: the view reads the source.

        Raises:
            lakehouse.errors.ConfigError: No such view, or the view does not read the source.
        """
        from ivm import IvmError, referenced_sources

        config = self.config.view(view)
        try:
            reads = referenced_sources(config.sql) & set(self.config.sources)
        except IvmError as error:
            raise ConfigError(str(error), key=f"views.{config.name}.sql") from None
        if source not in reads:
            raise ConfigError(f"view {config.name!r} does not read source {source!r} (it "
                              f"reads {sorted(reads)})", key="--source")
        return WaitRequest(config.name, source, version)

    def late_reason(self, view: str) -> str:
        """Why ``view`` is behind its sources: its degraded reason, with the details.

        The status's (:attr:`lakehouse.status.ViewStatus.degraded`: ``suspended``,
        ``source unavailable``, ``schema changed``, ``refresh failing``, ``over target``),
        else ``refresh failing`` when its last recorded refresh failed, else
        ``refreshing`` (no refresh has reached the sources' versions yet).
        """
        (state,) = view_statuses(self.config, self.catalog, [self.config.view(view)])
        if state.suspended_since:
            return f"suspended since {state.suspended_since}"
        if state.stopped:
            return f"{state.degraded}: {state.stopped}"
        try:
            last = self.history(view, 1).to_pylist()
        except (ConfigError, HistoryError):
            last = []
        if last and last[0]["mode"] == "failed":
            return f"refresh failing: {last[0]['error']}"
        detail = f"its frontier is {state.frontier}, the sources are at {state.current}"
        if state.degraded:  # over target
            return f"{state.degraded} ({state.target_lag}): {detail}"
        return f"refreshing: {detail}"

    def _history(self, without: str) -> RefreshHistory:
        if self.config.history_table is None:
            raise ConfigError(f"null: {without}", key="history_table")
        return RefreshHistory(self.catalog, self.config.history_table)

    def close(self) -> None:
        """Stop what the pipeline started (its runtime, a catalog it served)."""
        self._stack.close()
        self._runtime, self._catalog = None, self._given

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

