"""The parallel scheduler: bounded workers, claims kept, the slow view off the others' path."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable

from lakehouse.config import Config, ViewConfig, parse_config
from lakehouse.dag import claims
from lakehouse.scheduler import Scheduler

TICK_S = 0.15


def _config(workers: int) -> Config:
    """``up`` read by ``a`` and ``b`` (a claim they share), ``c`` and ``d`` on their own."""
    return parse_config({
        "workers": workers,
        "sources": {"t": {"iceberg": "raw.t"}, "up": {"view": "v.up"}},
        "views": [
            {"name": "v.up", "sql": "SELECT k FROM t", "every": "on_change"},
            {"name": "v.a", "sql": "SELECT k FROM up", "every": "on_change"},
            {"name": "v.b", "sql": "SELECT k FROM up WHERE k > 1", "every": "on_change"},
            {"name": "v.c", "sql": "SELECT k FROM t WHERE k > 2", "every": "on_change"},
            {"name": "v.d", "sql": "SELECT k FROM t WHERE k > 3", "every": "on_change"},
        ]})


class _Recorder:
    """A refresh that takes ``duration_s`` and records when each tick ran, on which view."""

    def __init__(self, scheduler: Scheduler, ticks_each: int,
                 duration_s: Callable[[str], float] = lambda _: TICK_S):
        self.scheduler = scheduler
        self.ticks_each = ticks_each
        self.duration_s = duration_s
        self.intervals: list[tuple[str, float, float]] = []
        self.lock = threading.Lock()

    def __call__(self, view: ViewConfig) -> None:
        started = time.monotonic()
        time.sleep(self.duration_s(view.name))
        with self.lock:
            self.intervals.append((view.name, started, time.monotonic()))
            ran = Counter(name for name, _, _ in self.intervals)
            if all(ran[v.name] >= self.ticks_each for v in self.scheduler.views):
                self.scheduler.stop()

    def overlapping(self, first: str, second: str) -> bool:
        return any(a0 < b1 and b0 < a1
                   for n1, a0, a1 in self.intervals if n1 == first
                   for n2, b0, b1 in self.intervals if n2 == second)

    def most_at_once(self) -> int:
        edges = sorted([(s, 1) for _, s, _ in self.intervals]
                       + [(e, -1) for _, _, e in self.intervals])
        running = most = 0
        for _, step in edges:
            running += step
            most = max(most, running)
        return most


def test_ticks_holding_no_common_view_run_at_once_up_to_the_workers() -> None:
    scheduler = Scheduler.for_config(_config(workers=2))
    recorder = _Recorder(scheduler, ticks_each=3)
    scheduler.run(recorder)
    assert recorder.most_at_once() == 2
    assert recorder.overlapping("v.c", "v.d") or recorder.overlapping("v.a", "v.c")


def test_a_tick_never_runs_beside_one_holding_a_view_it_claims() -> None:
    scheduler = Scheduler.for_config(_config(workers=5))
    recorder = _Recorder(scheduler, ticks_each=4)
    scheduler.run(recorder)
    for first, second in [("v.a", "v.b"), ("v.a", "v.up"), ("v.b", "v.up")]:
        assert not recorder.overlapping(first, second), (first, second)
    assert recorder.overlapping("v.c", "v.d")  # independent views did run together


def test_with_one_worker_ticks_run_one_at_a_time_in_config_order() -> None:
    scheduler = Scheduler.for_config(_config(workers=1))
    recorder = _Recorder(scheduler, ticks_each=1)
    scheduler.run(recorder)
    assert recorder.most_at_once() == 1
    assert [name for name, _, _ in recorder.intervals][:5] == [v.name for v in scheduler.views]


def test_a_slow_view_does_not_hold_up_the_others() -> None:
    scheduler = Scheduler.for_config(_config(workers=2))
    slow_s = 1.5
    recorder = _Recorder(scheduler, ticks_each=1,
                         duration_s=lambda name: slow_s if name == "v.c" else 0.01)
    scheduler.run(recorder)
    (slow,) = [(s, e) for name, s, e in recorder.intervals if name == "v.c"]
    during = [name for name, s, e in recorder.intervals if name != "v.c" and slow[0] < s < slow[1]]
    assert Counter(during)["v.d"] >= 3  # on_change: due every 0.2 s while v.c ran


def test_stop_starts_no_tick_and_lets_those_in_flight_finish() -> None:
    scheduler = Scheduler.for_config(_config(workers=2))
    started, release = threading.Semaphore(0), threading.Event()
    finished: list[str] = []

    def refresh(view: ViewConfig) -> None:
        started.release()
        release.wait(10)
        finished.append(view.name)

    runner = threading.Thread(target=scheduler.run, args=(refresh,))
    runner.start()
    assert started.acquire(timeout=10) and started.acquire(timeout=10)  # both workers busy
    scheduler.stop()
    time.sleep(0.3)
    assert runner.is_alive() and finished == []  # waits for the ticks in flight
    release.set()
    runner.join(10)
    assert not runner.is_alive()
    assert len(finished) == 2  # the two in flight at the stop; none started after it


def test_maintenance_runs_on_its_cadence_never_beside_a_tick_of_its_view() -> None:
    config = _config(workers=3)
    scheduler = Scheduler(config.views, workers=3, claims=claims(config),
                          maintenance_every="1s")  # ticks of v.a and v.b hold v.up
    refreshes = _Recorder(scheduler, ticks_each=1_000)  # stopped by the maintenance below
    maintained: list[tuple[str, float, float]] = []

    def maintain(view: ViewConfig) -> None:
        started = time.monotonic()
        time.sleep(0.1)
        maintained.append((view.name, started, time.monotonic()))
        if all(sum(1 for name, _, _ in maintained if name == v.name) >= 2
               for v in config.views):
            scheduler.stop()

    scheduler.run(refreshes, maintain)
    held = claims(config)
    for name, start, end in maintained:
        assert not any(name in held[ran] and s < end and start < e
                       for ran, s, e in refreshes.intervals), name
    first = min(start for _, start, _ in maintained)
    assert first - min(s for _, s, _ in refreshes.intervals) >= 0.9  # one cadence after start


def test_a_view_reading_busy_views_is_not_starved_by_their_ticks() -> None:
    """``v.x`` reads ``v.a`` and ``v.b``, each ticking again as soon as it ends."""
    config = parse_config({
        "workers": 3, "sources": {"t": {"iceberg": "raw.t"}, "a": {"view": "v.a"},
                                  "b": {"view": "v.b"}},
        "views": [{"name": "v.a", "sql": "SELECT k FROM t"},
                  {"name": "v.b", "sql": "SELECT k FROM t WHERE k > 1"},
                  {"name": "v.x", "sql": "SELECT a.k FROM a JOIN b ON a.k = b.k"}]})
    scheduler = Scheduler.for_config(config)
    recorder = _Recorder(scheduler, ticks_each=3,  # a and b out of step: one always runs
                         duration_s=lambda name: {"v.a": 0.3, "v.b": 0.45}.get(name, 0.1))
    deadline = threading.Timer(10.0, scheduler.stop)  # a starved view would never stop it
    deadline.start()
    scheduler.run(recorder)
    deadline.cancel()
    assert sum(1 for name, _, _ in recorder.intervals if name == "v.x") >= 3


def test_maintenance_takes_one_worker_at_a_time() -> None:
    config = _config(workers=3)
    scheduler = Scheduler(config.views, workers=3, claims=claims(config),
                          maintenance_every="1s")
    refreshes = _Recorder(scheduler, ticks_each=1_000)
    maintained: list[tuple[str, float, float]] = []

    def maintain(view: ViewConfig) -> None:
        started = time.monotonic()
        time.sleep(0.2)
        maintained.append((view.name, started, time.monotonic()))
        if len(maintained) >= len(config.views):
            scheduler.stop()

    scheduler.run(refreshes, maintain)
    assert not any(a0 < b1 and b0 < a1 for i, (_, a0, a1) in enumerate(maintained)
                   for _, b0, b1 in maintained[i + 1:])
    assert refreshes.intervals  # the refreshes kept their workers meanwhile
