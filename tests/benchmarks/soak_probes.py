"""The soak benchmark's probes (issue 19): the committing writer, the lag poller, RSS.

- :class:`Writer` appends a slice of TPC-H ``lineitem`` to the ``events`` source every
  second (whole orders, so that an occasional delete of an earlier commit's orders removes
  that commit's data files), and now and then expires the source's old snapshots, as a
  producer's maintenance would. It records when each source snapshot became visible. It
  commits through the view sink's :func:`sinks.iceberg_snapshot.commit_snapshot`, not
  pyiceberg's ``Table.append``/``delete``: those deep-copy the whole metadata (a few hundred
  snapshots) about twenty times a commit, which made the writer use most of a core of
  the two the soak runs on, beside the pipeline it measures.
- :class:`LagPoller` reads each view's current snapshot through the REST catalog (plain
  HTTP, ``snapshots=refs``, ``If-None-Match``: a 304 costs the catalog one indexed lookup)
  every :data:`POLL_S`, maps its frontier to the ``events`` snapshot it reflects (through
  the upstream view's snapshot for a view read by a view), and samples the lag: now minus
  the time the oldest ``events`` snapshot the view does not reflect became visible (0 when
  it reflects the newest).
- :class:`RssSampler` samples the RSS of ``lakehouse run`` (Python) and of its ``java``
  children (the JVM) every :data:`RSS_EVERY_S`.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import psutil
import pyarrow as pa
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from sinks.frontier import FRONTIER_KEY, decode_frontier
from sinks.iceberg_snapshot import DataFileWriter, commit_snapshot

POLL_S = 0.15
"""Seconds between two lag samples of every view."""
SLOW_POLL_S = 1.0
"""Seconds between two catalog reads of a view named slow (its lag is sampled every
:data:`POLL_S` all the same, from the last read): a view whose target is a minute needs no
finer reading, and each read is load on the catalog the pipeline shares."""
RSS_EVERY_S = 5.0
"""Seconds between two RSS samples."""
COMMIT_EVERY_S = 1.0
KEEP_SNAPSHOTS_S = 180.0
"""The writer expires the source's snapshots older than this (the views' frontiers are
newer: the slowest view refreshes every few tens of seconds)."""
MIB = 2**20


class SourceLog:
    """The ``events`` snapshots in commit order, each with when it became visible."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ids: list[int] = []
        self.visible_s: list[float] = []
        self._index: dict[int, int] = {}

    def add(self, snapshot_id: int, visible_s: float) -> None:
        """Record a snapshot that became visible at ``visible_s`` (seconds since the epoch)."""
        with self._lock:
            self._index[snapshot_id] = len(self.ids)
            self.ids.append(snapshot_id)
            self.visible_s.append(visible_s)

    def index(self, snapshot_id: int) -> int | None:
        """The position of ``snapshot_id`` in commit order, None if not recorded."""
        with self._lock:
            return self._index.get(snapshot_id)

    def count_between(self, since_s: float, until_s: float) -> int:
        """How many snapshots became visible between ``since_s`` and ``until_s``."""
        with self._lock:
            return (bisect.bisect_right(self.visible_s, until_s)
                    - bisect.bisect_left(self.visible_s, since_s))

    def lag_s(self, snapshot_id: int, now_s: float) -> float:
        """The lag at ``now_s`` of a view that reflects ``snapshot_id``.

        A snapshot not yet recorded is the newest (the writer records it as its commit
        returns): lag 0.
        """
        with self._lock:
            index = self._index.get(snapshot_id)
            if index is None or index + 1 >= len(self.ids):
                return 0.0
            return max(0.0, now_s - self.visible_s[index + 1])


@dataclass
class Slices:
    """Consecutive slices of whole orders of a ``lineitem`` table, one per commit."""

    rows: pa.Table
    size: int
    offset: int = 0

    def next(self) -> pa.Table:
        """The next ``size`` rows or so, extended to the end of the last order."""
        keys = self.rows.column("l_orderkey")
        end = min(self.offset + self.size, self.rows.num_rows)
        if end < self.rows.num_rows:
            last = keys[end - 1].as_py()
            tail = keys.slice(end, 64).to_pylist()  # an order has at most 7 line items
            end += next((i for i, k in enumerate(tail) if k != last), len(tail))
        if end <= self.offset:
            raise RuntimeError("the writer ran out of lineitem rows")
        chunk, self.offset = self.rows.slice(self.offset, end - self.offset), end
        return chunk


@dataclass
class Writer:
    """Appends to the source every second; deletes an earlier commit's orders sometimes.

    Attributes:
        table: The source table (the only writer: its metadata stays current).
        slices: The rows to append, commit after commit.
        log: Where each snapshot is recorded.
        delete_every: Every this many commits, the data files of the append
            ``delete_every // 2`` appends before are removed (0: never): the orders it added.
        expire_every: Every this many commits, snapshots older than
            :data:`KEEP_SNAPSHOTS_S` are expired (0: never), but none a view still reflects.
        oldest_reflected: The oldest source snapshot some view reflects (None: keep all).
        snapshot_counts: After each commit, when (seconds since the epoch) and how many
            snapshots the source's metadata holds.
        first_expiry_s: When (seconds since the epoch) an expiry first removed snapshots:
            from then on the metadata's size stays between its bounds (None: not yet).
    """

    table: Table
    slices: Slices
    log: SourceLog
    delete_every: int = 30
    expire_every: int = 60
    oldest_reflected: Callable[[], int | None] = lambda: None
    commits: int = 0
    deletes: int = 0
    expired: int = 0
    errors: list[str] = field(default_factory=list)
    commit_s: list[float] = field(default_factory=list)
    snapshot_counts: list[tuple[float, int]] = field(default_factory=list)
    first_expiry_s: float | None = None
    _appended: list[list[DataFile]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        if self.delete_every == 1:
            raise ValueError("delete_every: 0 (never) or at least 2 (an earlier append's files)")

    def start(self) -> None:
        """Commit in a daemon thread until :meth:`stop`."""
        self._thread = threading.Thread(target=self._loop, daemon=True, name="soak-writer")
        self._thread.start()

    def stop(self) -> None:
        """Stop committing (after the commit in progress)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)

    def _loop(self) -> None:
        next_s = time.monotonic()
        while not self._stop.is_set():
            try:
                self._commit()
            except Exception as error:  # noqa: BLE001 - recorded, the soak goes on
                self.errors.append(f"{type(error).__name__}: {error}"[:300])
            next_s = max(next_s + COMMIT_EVERY_S, time.monotonic())
            self._stop.wait(next_s - time.monotonic())

    def _commit(self) -> None:
        started = time.perf_counter()
        n = self.commits + 1
        if self.delete_every and n % self.delete_every == 0 and len(self._appended) > n // 2:
            commit_snapshot(self.table, self._appended[-(self.delete_every // 2)], [], {})
            self.deletes += 1
        else:
            files = DataFileWriter(self.table).write(self.slices.next())
            commit_snapshot(self.table, [], files, {})
            self._appended.append(files)
        self._record()
        self.commits = n
        self.commit_s.append(time.perf_counter() - started)
        if self.expire_every and n % self.expire_every == 0:
            self._expire()

    def _record(self) -> None:
        now, snapshot = time.time(), self.table.current_snapshot()
        if snapshot is not None:
            self.log.add(snapshot.snapshot_id, now)
        self.snapshot_counts.append((now, len(self.table.metadata.snapshots)))

    def _expire(self) -> None:
        oldest = self.oldest_reflected()
        kept_from = self.log.index(oldest) if oldest is not None else None
        if kept_from is None:
            return
        cutoff_ms = (time.time() - KEEP_SNAPSHOTS_S) * 1000
        positions = {s.snapshot_id: self.log.index(s.snapshot_id) for s in self.table.snapshots()
                     if s.timestamp_ms < cutoff_ms}
        old = [i for i, at in positions.items() if at is not None and at < kept_from]
        if old:
            self.table.maintenance.expire_snapshots().by_ids(old).commit()
            self.expired += len(old)
            if self.first_expiry_s is None:
                self.first_expiry_s = time.time()


@dataclass
class ViewSeries:
    """One view's lag samples: times (seconds since the epoch) and lags (seconds)."""

    times_s: list[float] = field(default_factory=list)
    lags_s: list[float] = field(default_factory=list)


class LagPoller:
    """Samples every view's lag through the REST catalog, every :data:`POLL_S`.

    Args:
        uri: The catalog's base URI (``.../iceberg``).
        views: Each view's identifier ``namespace.table``.
        upstream: Source name -> the view identifier it reads (sources that are views).
        source: The name of the committing source in the frontiers (``events``).
        log: The source's snapshots.
        slow: Views read from the catalog every :data:`SLOW_POLL_S` only.
    """

    def __init__(self, uri: str, views: list[str], upstream: dict[str, str], source: str,
                 log: SourceLog, slow: frozenset[str] = frozenset()):
        self.uri, self.views, self.upstream = uri, views, upstream
        self.source, self.log, self.slow = source, log, slow
        self._read_s: dict[str, float] = {}
        self.series = {view: ViewSeries() for view in views}
        self.current: dict[str, dict[str, int] | None] = dict.fromkeys(views)
        self.reflected: dict[str, int | None] = dict.fromkeys(views)
        self._etags: dict[str, str] = {}
        self._frontiers: dict[str, dict[int, dict[str, int]]] = {v: {} for v in views}
        self._client = httpx.Client(timeout=10)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="soak-poller")
        self.errors: list[str] = []

    def start(self) -> None:
        """Sample in a daemon thread until :meth:`stop`."""
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling."""
        self._stop.set()
        self._thread.join(30)
        self._client.close()

    def built(self) -> bool:
        """Whether every view has committed a frontier."""
        return all(self.current.values())

    def oldest_reflected(self) -> int | None:
        """The oldest source snapshot some view reflects; None until every view has one."""
        reflected = list(self.reflected.values())
        if not reflected or None in reflected:
            return None
        return min(reflected, key=lambda s: self.log.index(s or 0) or 0)

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.poll()
            except (httpx.HTTPError, ValueError, KeyError) as error:
                self.errors.append(f"{type(error).__name__}: {error}"[:300])
            self._stop.wait(max(0.0, POLL_S - (time.monotonic() - started)))

    def poll(self) -> None:
        """Read every view's current frontier (when due), then sample each view's lag."""
        for view in self.views:
            if view not in self.slow or self._read_s.get(view, 0.0) + SLOW_POLL_S <= time.time():
                self._read_s[view] = time.time()
                self._refresh(view)
        now_s = time.time()
        for view in self.views:
            snapshot_id = self._source_snapshot(self.current[view])
            self.reflected[view] = snapshot_id
            if snapshot_id is not None:
                series = self.series[view]
                series.times_s.append(now_s)
                series.lags_s.append(self.log.lag_s(snapshot_id, now_s))

    def _refresh(self, view: str, snapshots: str = "refs") -> None:
        """Load ``view``'s table unless unchanged (304); remember its snapshots' frontiers."""
        namespace, table = view.split(".")
        headers = {"If-None-Match": self._etags[view]} if view in self._etags else {}
        if snapshots != "refs":
            headers = {}
        answer = self._client.get(f"{self.uri}/v1/namespaces/{namespace}/tables/{table}",
                                  params={"snapshots": snapshots}, headers=headers)
        if answer.status_code in (304, 404):
            return
        answer.raise_for_status()
        if snapshots == "refs":
            self._etags[view] = answer.headers.get("etag", "")
        metadata = answer.json()["metadata"]
        for snapshot in metadata.get("snapshots") or []:
            frontier = decode_frontier((snapshot.get("summary") or {}).get(FRONTIER_KEY))
            if frontier is not None:
                self._frontiers[view][snapshot["snapshot-id"]] = frontier
        self.current[view] = self._newest_frontier(view, metadata)

    def _newest_frontier(self, view: str, metadata: dict[str, Any]) -> dict[str, int] | None:
        """The frontier of the current snapshot, or of the newest before it that has one."""
        parents = {s["snapshot-id"]: s.get("parent-snapshot-id")
                   for s in metadata.get("snapshots") or []}
        snapshot_id = metadata.get("current-snapshot-id")
        while snapshot_id is not None and snapshot_id not in self._frontiers[view]:
            snapshot_id = parents.get(snapshot_id)
        return self._frontiers[view].get(snapshot_id) if snapshot_id else self.current[view]

    def _source_snapshot(self, frontier: dict[str, int] | None, depth: int = 0) -> int | None:
        """The ``events`` snapshot a frontier reflects, through upstream views' frontiers."""
        if frontier is None or depth > 4:
            return None
        if self.source in frontier:
            return frontier[self.source]
        for name, view in self.upstream.items():
            if name in frontier:
                snapshot_id = frontier[name]
                if snapshot_id not in self._frontiers[view]:
                    self._refresh(view, snapshots="all")  # a snapshot polling did not see
                return self._source_snapshot(self._frontiers[view].get(snapshot_id), depth + 1)
        return None


def lag_stats(series: ViewSeries, since_s: float, until_s: float,
              target_s: float | None) -> dict[str, Any]:
    """p50/p99/max/mean lag and SLO compliance (share of time within target) in a window.

    Each sample stands for the time until the next one (the last: :data:`POLL_S`).
    """
    start = bisect.bisect_left(series.times_s, since_s)
    end = bisect.bisect_right(series.times_s, until_s)
    times, lags = series.times_s[start:end], series.lags_s[start:end]
    if not lags:
        return {"samples": 0}
    spans = [b - a for a, b in zip(times, times[1:], strict=False)] + [POLL_S]
    ranked = sorted(lags)

    def quantile(q: float) -> float:
        return round(ranked[min(len(ranked) - 1, int(q * len(ranked)))], 3)

    within = sum(s for s, lag in zip(spans, lags, strict=True)
                 if target_s is not None and lag <= target_s)
    return {"samples": len(lags), "p50_lag_s": quantile(0.5), "p99_lag_s": quantile(0.99),
            "max_lag_s": round(ranked[-1], 3), "mean_lag_s": round(sum(lags) / len(lags), 3),
            "slo": round(within / sum(spans), 5) if target_s is not None else None}


def lag_per_second(series: ViewSeries, since_s: float, until_s: float) -> list[float]:
    """The largest lag of each second from ``since_s`` to ``until_s`` (for the plot)."""
    out: list[float] = []
    for t, lag in zip(series.times_s, series.lags_s, strict=True):
        second = int(t - since_s)
        if second < 0 or t > until_s:
            continue
        out.extend([0.0] * (second + 1 - len(out)))
        out[second] = max(out[second], round(lag, 2))
    return out


def lag_windows(lag_per_s: list[list[float]], since_s: int,
                window_s: int = 600) -> list[dict[str, Any]]:
    """Quantiles of the largest lag of each second, pooled over views, window by window.

    Shows whether lag holds steady over a long soak or grows with the source's commits.

    Args:
        lag_per_s: Each view's largest lag of each second (:func:`lag_per_second`).
        since_s: The first second measured (the end of the warm-up).
        window_s: Seconds per window; the last one may be shorter (at least half of it,
            else it joins the one before).

    Returns:
        One dict a window: ``from_s``, ``until_s`` (seconds since the views were built),
        ``p50_lag_s``, ``p99_lag_s``, ``max_lag_s``.
    """
    end = max((len(lags) for lags in lag_per_s), default=0)
    bounds = list(range(since_s, end, window_s)) + [end]
    if len(bounds) > 2 and bounds[-1] - bounds[-2] < window_s / 2:
        del bounds[-2]
    windows = []
    for start, stop in zip(bounds, bounds[1:], strict=False):
        ranked = sorted(lag for lags in lag_per_s for lag in lags[start:stop])
        if ranked:
            windows.append({"from_s": start, "until_s": stop,
                            "p50_lag_s": ranked[int(0.5 * len(ranked))],
                            "p99_lag_s": ranked[min(len(ranked) - 1, int(0.99 * len(ranked)))],
                            "max_lag_s": ranked[-1]})
    return windows


class RssSampler:
    """RSS of a process (Python) and of its ``java`` descendants (the JVM), over time; with
    ``metrics_port``, the parts of the process's memory it reports (:func:`memory_parts`)."""

    def __init__(self, pid: int, others: dict[str, int] | None = None,
                 metrics_port: int | None = None):
        self.process = psutil.Process(pid)
        self.others = {name: psutil.Process(p) for name, p in (others or {}).items()}
        self.metrics_port = metrics_port
        self.samples: list[dict[str, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="soak-rss")

    def start(self) -> None:
        """Sample in a daemon thread until :meth:`stop`."""
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling."""
        self._stop.set()
        self._thread.join(30)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append(self.sample())
            except psutil.Error:
                pass
            self._stop.wait(RSS_EVERY_S)

    def sample(self) -> dict[str, float]:
        """One sample: ``t`` (epoch s), ``python_mib``, ``jvm_mib`` and each other's MiB."""
        jvm = 0
        for child in self.process.children(recursive=True):
            try:
                jvm += child.memory_info().rss if child.name() == "java" else 0
            except psutil.Error:
                continue
        out = {"t": round(time.time(), 1),
               "python_mib": round(self.process.memory_info().rss / MIB, 1),
               "jvm_mib": round(jvm / MIB, 1)}
        for name, process in self.others.items():
            out[f"{name}_mib"] = round(process.memory_info().rss / MIB, 1)
        if self.metrics_port is not None:
            try:
                out.update(memory_parts(self.metrics_port))
            except (httpx.HTTPError, ValueError):
                pass  # not serving yet, or cut short
        return out


def growth(samples: list[dict[str, float]], key: str, since_s: float) -> dict[str, Any]:
    """RSS growth of ``key`` after ``since_s``: least-squares slope (MiB/min) over all of it
    and over its second half, and the mean of the last minute less that of the first (each
    a minute, or a third of a shorter span).

    A leak keeps its slope; caches filling up to their bounds slow down: their second half
    is flat.
    """
    points = [(s["t"], s[key]) for s in samples if s["t"] >= since_s]
    if len(points) < 6:
        return {"samples": len(points)}
    span_s = points[-1][0] - points[0][0]
    edge_s = min(60.0, span_s / 3)
    first = [v for t, v in points if t <= points[0][0] + edge_s]
    last = [v for t, v in points if t >= points[-1][0] - edge_s]
    first_mib, last_mib = sum(first) / len(first), sum(last) / len(last)
    return {"samples": len(points), "span_s": round(span_s), "edge_s": round(edge_s),
            "first_mib": round(first_mib, 1), "last_mib": round(last_mib, 1),
            "growth_mib": round(last_mib - first_mib, 1),
            "slope_mib_per_min": round(_slope(points) * 60, 2),
            "late_slope_mib_per_min": round(_slope(points[len(points) // 2:]) * 60, 2),
            "max_mib": max(v for _, v in points)}


def _slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of ``points`` (value per second)."""
    mean_t = sum(t for t, _ in points) / len(points)
    mean_v = sum(v for _, v in points) / len(points)
    var = sum((t - mean_t) ** 2 for t, _ in points)
    return sum((t - mean_t) * (v - mean_v) for t, v in points) / var if var else 0.0


def memory_parts(port: int) -> dict[str, float]:
    """From ``lakehouse run``'s ``/metrics``: ``<part>_mib`` of each part of its memory
    (``lakehouse_memory_bytes``: Arrow's pool, the column cache, the view states)."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return {f"{sample.labels['part']}_mib": round(sample.value / MIB, 1)
            for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name == "lakehouse_memory_bytes"}


def metrics(port: int) -> dict[str, dict[str, float]]:
    """From ``lakehouse run``'s ``/metrics``: per view, its SLO compliance (the last hour),
    lag, failures, and refresh count and seconds (all modes)."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    names = {"lakehouse_view_slo_compliance": "slo", "lakehouse_view_lag_seconds": "lag_s",
             "lakehouse_refresh_failures_total": "failures",
             "lakehouse_refresh_duration_seconds_count": "refreshes",
             "lakehouse_refresh_duration_seconds_sum": "refresh_s"}
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = names.get(sample.name)
            if key and "view" in sample.labels:
                view = out.setdefault(sample.labels["view"], {})
                view[key] = round(view.get(key, 0.0) + sample.value, 4)
    return out
