"""Prometheus metrics of the refreshes: lag against target, SLO, tick duration, rows.

Exposed by ``lakehouse run --metrics-listen HOST:PORT`` at ``/metrics``.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from lakehouse.errors import ListenError
from lakehouse.refresh import RefreshResult
from lakehouse.slo import FreshnessLog

__all__ = ["LISTEN_KEY", "RefreshMetrics", "check_listen"]

LISTEN_KEY = "--metrics-listen"
"""The setting that gives the metrics address, named by a :class:`ListenError`."""

DURATION_BUCKETS_S = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class _LagCollector(Collector):
    """``lakehouse_view_lag_seconds``: seconds since each view last equalled its sources."""

    def __init__(self, fresh_at_s: dict[str, float], clock: Callable[[], float]):
        self.fresh_at_s = fresh_at_s
        self.clock = clock

    def collect(self) -> Iterator[Metric]:
        gauge = GaugeMetricFamily(
            "lakehouse_view_lag_seconds",
            "Seconds since the view last reflected its sources' newest versions.",
            labels=["view"],
        )
        now_s = self.clock()
        for view, fresh_s in sorted(self.fresh_at_s.items()):
            gauge.add_metric([view], max(0.0, now_s - fresh_s))
        yield gauge


class _TargetCollector(Collector):
    """Each view's target lag, SLO compliance and degraded reason (:mod:`lakehouse.slo`)."""

    def __init__(self, metrics: RefreshMetrics):
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        targets = GaugeMetricFamily("lakehouse_view_target_lag_seconds",
                                    "The view's target lag.", labels=["view"])
        compliance = GaugeMetricFamily(
            "lakehouse_view_slo_compliance",
            "Fraction of the last hour the view's lag was within its target.", labels=["view"])
        degraded = GaugeMetricFamily(
            "lakehouse_view_degraded", "1 while the view is late or cannot refresh, labelled "
            "with why.", labels=["view", "reason"])
        for view, target_s in sorted(self.metrics.targets_s.items()):
            targets.add_metric([view], target_s)
            share = self.metrics.freshness.compliance(view, target_s)
            if share is not None:
                compliance.add_metric([view], share)
        for view, reason in sorted(self.metrics.degraded().items()):
            degraded.add_metric([view, reason], 1.0)
        yield from (targets, compliance, degraded)


class _MemoryCollector(Collector):
    """``lakehouse_memory_bytes{part}``: what the process holds, part by part."""

    def __init__(self, parts: Mapping[str, Callable[[], int]]):
        self.parts = dict(parts)

    def collect(self) -> Iterator[Metric]:
        gauge = GaugeMetricFamily(
            "lakehouse_memory_bytes", "Bytes the process holds, by part.", labels=["part"])
        for part, size_bytes in sorted(self.parts.items()):
            gauge.add_metric([part], float(size_bytes()))
        yield gauge


class RefreshMetrics:
    """The refresh metrics of one process, in their own registry.

    Args:
        clock: Seconds since the epoch (injectable for tests).
        targets_s: Each view's target lag in seconds (views with a duration ``target_lag``).

    Metrics (label ``view``; ``mode`` is ``incremental``, ``full`` or ``skipped``; ``engine``
    is ``local``, ``spark`` or ``none``, :attr:`RefreshResult.engine`):
        ``lakehouse_refreshes_total{view,mode,engine}``,
        ``lakehouse_refresh_failures_total{view}``,
        ``lakehouse_refresh_duration_seconds{view,mode,engine}`` (histogram),
        ``lakehouse_change_rows_total{view}`` (change feed rows read),
        ``lakehouse_view_delta_rows_total{view}`` (rows committed, + and -),
        ``lakehouse_view_lag_seconds{view}``,
        ``lakehouse_view_target_lag_seconds{view}``,
        ``lakehouse_view_slo_compliance{view}`` (over the last hour),
        ``lakehouse_view_degraded{view,reason}`` (1 for the current reason, if any:
        :data:`lakehouse.slo.DEGRADED_REASONS`),
        ``lakehouse_snapshots_expired_total{view}`` and
        ``lakehouse_files_compacted_total{view}`` (data files compaction rewrote, Iceberg
        and Delta: :mod:`lakehouse.maintenance`),
        ``lakehouse_memory_bytes{part}`` (the parts :meth:`watch_memory` was given), and
        the ``process_*`` metrics of :class:`prometheus_client.ProcessCollector`
        (``process_resident_memory_bytes``, CPU seconds, open files).
    """

    def __init__(self, clock: Callable[[], float] = time.time,
                 targets_s: Mapping[str, float] | None = None):
        self.registry = CollectorRegistry()
        self.clock = clock
        self.targets_s = dict(targets_s or {})
        self.freshness = FreshnessLog(clock=clock)
        self._fresh_at_s: dict[str, float] = {}
        self._failing: dict[str, str] = {}
        self._suspended: frozenset[str] = frozenset()
        self._backfilling: set[str] = set()
        self.refreshes = Counter("lakehouse_refreshes", "Refreshes run, by mode and engine.",
                                 ["view", "mode", "engine"], registry=self.registry)
        self.failures = Counter("lakehouse_refresh_failures", "Refreshes that failed.",
                                ["view"], registry=self.registry)
        self.duration = Histogram("lakehouse_refresh_duration_seconds", "Wall time of a refresh.",
                                  ["view", "mode", "engine"], buckets=DURATION_BUCKETS_S,
                                  registry=self.registry)
        self.rows_in = Counter("lakehouse_change_rows", "Change feed rows read.", ["view"],
                               registry=self.registry)
        self.rows_out = Counter("lakehouse_view_delta_rows", "View rows committed (+ and -).",
                                ["view"], registry=self.registry)
        self.expired = Counter("lakehouse_snapshots_expired", "View table snapshots expired.",
                               ["view"], registry=self.registry)
        self.compacted = Counter("lakehouse_files_compacted",
                                 "View table data files rewritten by compaction.", ["view"],
                                 registry=self.registry)
        self.registry.register(_LagCollector(self._fresh_at_s, clock))
        self.registry.register(_TargetCollector(self))
        ProcessCollector(registry=self.registry)

    def watch_memory(self, parts: Mapping[str, Callable[[], int]]) -> None:
        """Expose ``lakehouse_memory_bytes{part}``: each part's bytes, read at each scrape.

        Args:
            parts: Each part's name (``arrow_pool``, ``column_cache``...) and a callable
                giving its bytes now; called from the metrics server's thread.
        """
        self.registry.register(_MemoryCollector(parts))

    def record(self, result: RefreshResult, started_s: float) -> None:
        """Count a refresh that succeeded; the view reflects its sources as of ``started_s``."""
        self.refreshes.labels(result.view, result.mode, result.engine).inc()
        self.duration.labels(result.view, result.mode, result.engine).observe(result.duration_s)
        self.rows_in.labels(result.view).inc(result.rows_in)
        self.rows_out.labels(result.view).inc(result.rows_out)
        self._fresh_at_s[result.view] = started_s
        self.freshness.fresh(result.view, started_s)
        self._failing.pop(result.view, None)

    def record_maintenance(self, view: str, snapshots_expired: int, files_compacted: int) -> None:
        """Count what one maintenance run of ``view`` expired and compacted."""
        self.expired.labels(view).inc(snapshots_expired)
        self.compacted.labels(view).inc(files_compacted)

    def record_failure(self, view: str, reason: str = "refresh failing") -> None:
        """Count a refresh that failed (the lag keeps growing), for ``reason``."""
        self.failures.labels(view).inc()
        self._fresh_at_s.setdefault(view, self.clock())
        self._failing[view] = reason

    @contextmanager
    def backfilling(self, view: str, backfill: bool = True) -> Iterator[None]:
        """Within, ``view`` is backfilling (an initial load or a full refresh) if ``backfill``."""
        if not backfill:
            yield
            return
        self._backfilling.add(view)
        try:
            yield
        finally:
            self._backfilling.discard(view)

    def set_suspended(self, views: Iterable[str]) -> None:
        """The views suspended now."""
        self._suspended = frozenset(views)

    def degraded(self) -> dict[str, str]:
        """Each late or failing view's degraded reason.

        One of :data:`lakehouse.slo.DEGRADED_REASONS`: ``suspended``, else the last failure's,
        else ``backfilling`` (an initial load or a full refresh of it runs), else ``over
        target`` (its lag is above its target).
        """
        reasons = {view: "suspended" for view in self._suspended}
        for view, reason in dict(self._failing).items():  # a copy: the scheduler writes
            reasons.setdefault(view, reason)
        for view in list(self._backfilling):
            reasons.setdefault(view, "backfilling")
        for view, target_s in self.targets_s.items():
            lag_s = self.freshness.lag_s(view)
            if lag_s is not None and lag_s > target_s:
                reasons.setdefault(view, "over target")
        return reasons

    def serve(self, host: str, port: int) -> None:
        """Serve ``/metrics`` over HTTP from a daemon thread.

        Args:
            host: Address to listen on.
            port: Port to listen on.

        Raises:
            lakehouse.errors.ListenError: The address cannot be bound (it is taken, for one).
        """
        try:
            start_http_server(port, addr=host, registry=self.registry)
        except OSError as error:
            raise ListenError.from_os_error(f"{host}:{port}", error, key=LISTEN_KEY) from None


def check_listen(host: str, port: int) -> None:
    """Check that ``/metrics`` can be served on ``host:port`` now.

    Binds a socket as the metrics server will (``SO_REUSEADDR``) and closes it, so that
    ``lakehouse run`` reports a taken port before it starts Spark.

    Args:
        host: Address to listen on.
        port: Port to listen on.

    Raises:
        lakehouse.errors.ListenError: The address cannot be bound (it is taken, for one).
    """
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
    except OSError as error:
        raise ListenError.from_os_error(f"{host}:{port}", error, key=LISTEN_KEY) from None
