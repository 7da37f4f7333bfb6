"""Lag against a target: SLO compliance, degraded reasons, the scheduler's cadence."""

from __future__ import annotations

import pytest
import requests

from lakehouse.config import parse_config
from lakehouse.errors import ConfigError, RefreshError, SchemaChangedError, SourceError
from lakehouse.metrics import RefreshMetrics
from lakehouse.refresh import RefreshResult
from lakehouse.scheduler import ON_CHANGE_POLL_S, Scheduler, next_fire_s
from lakehouse.slo import FreshnessLog, _Refreshes, degraded_reason
from tests.unit.test_metrics import Clock, samples


def test_compliance_is_the_share_of_the_window_the_lag_was_within_target() -> None:
    """A sawtooth: fresh as of 0 (committed at 0), as of 8 (committed at 10); now 20."""
    clock = Clock()
    clock.now_s = 0.0
    log = FreshnessLog(window_s=100.0, clock=clock)
    assert log.compliance("v", 5.0) is None and log.lag_s("v") is None
    log.fresh("v", 0.0)
    clock.now_s = 10.0
    log.fresh("v", 8.0)
    clock.now_s = 20.0
    assert log.lag_s("v") == 12.0
    # over target from 5 to 10 (lag 5..10), then from 13 to 20 (lag 5..12): 12 s of 20
    assert log.compliance("v", 5.0) == pytest.approx(1 - 12 / 20)
    assert log.compliance("v", 20.0) == 1.0
    short = FreshnessLog(window_s=15.0, clock=clock)  # the window starts at 5
    clock.now_s = 0.0
    short.fresh("v", 0.0)
    clock.now_s = 10.0
    short.fresh("v", 8.0)
    clock.now_s = 20.0
    assert short.compliance("v", 5.0) == pytest.approx(1 - 12 / 15)


def test_a_refresh_slower_than_the_target_is_late_from_its_commit() -> None:
    clock = Clock()
    clock.now_s = 30.0
    log = FreshnessLog(window_s=100.0, clock=clock)
    log.fresh("v", 0.0)  # read the sources at 0, committed at 30: already 25 s over a 5 s target
    clock.now_s = 40.0
    assert log.compliance("v", 5.0) == 0.0


def test_degraded_reasons_come_from_suspension_failures_backfills_and_lag() -> None:
    clock = Clock()
    metrics = RefreshMetrics(clock, targets_s={"v.a": 5.0, "v.b": 5.0, "v.c": 5.0})
    for view in ("v.a", "v.b", "v.c"):
        metrics.record(RefreshResult(view, "incremental", {"s": 1}), clock.now_s)
    assert metrics.degraded() == {}
    clock.now_s += 6
    metrics.record(RefreshResult("v.c", "skipped", {"s": 1}), clock.now_s)  # fresh again
    metrics.record_failure("v.b", "schema changed")
    metrics.set_suspended(["v.c"])
    assert metrics.degraded() == {"v.a": "over target", "v.b": "schema changed",
                                  "v.c": "suspended"}
    found = samples(metrics)
    assert found[("lakehouse_view_degraded", (("reason", "over target"), ("view", "v.a")))] == 1
    assert found[("lakehouse_view_target_lag_seconds", (("view", "v.a"),))] == 5.0
    assert found[("lakehouse_view_slo_compliance", (("view", "v.a"),))] == pytest.approx(5 / 6)
    with metrics.backfilling("v.a"), metrics.backfilling("v.d"), \
            metrics.backfilling("v.b", False):  # an incremental tick: not a backfill
        assert metrics.degraded() == {"v.a": "backfilling", "v.b": "schema changed",
                                      "v.c": "suspended", "v.d": "backfilling"}
    assert metrics.degraded()["v.a"] == "over target" and "v.d" not in metrics.degraded()
    assert degraded_reason(SourceError("gone", source="s")) == "source unavailable"
    assert degraded_reason(SchemaChangedError("x", view="v.a", source="s", column="c",
                                              change="dropped")) == "schema changed"
    assert degraded_reason(RuntimeError("boom")) == "refresh failing"
    try:  # a refresh wraps what failed: the cause decides
        try:
            raise requests.ConnectionError("connection refused")
        except requests.ConnectionError as cause:
            raise RefreshError("refresh failed: connection refused", view="v.a") from cause
    except RefreshError as wrapped:
        assert degraded_reason(wrapped) == "catalog unavailable"


def test_a_target_lag_sets_the_cadence_unless_every_is_given() -> None:
    config = parse_config({"sources": {"up": {"view": "v.up"}}, "views": [
        {"name": "v.up", "sql": "select 1", "target_lag": "downstream"},
        {"name": "v.t", "sql": "select 1 from up", "target_lag": "10s"},
        {"name": "v.e", "sql": "select 1", "target_lag": "10s", "every": "1m"}]})
    up, target, every = config.views
    assert next_fire_s(target, 100.0, duration_s=2.0) == 100.0 + 10 / 2 - 2
    assert next_fire_s(target, 100.0, duration_s=9.0) == 100.0 + ON_CHANGE_POLL_S
    assert next_fire_s(every, 100.0, duration_s=2.0) == 160.0
    assert [v.name for v in Scheduler(config.views, clock=lambda: 0.0).due()] == ["v.t", "v.e"]


@pytest.mark.parametrize(("document", "message"), [
    ({"views": [{"name": "v.a", "sql": "s", "target_lag": "soon"}]}, "views.0.target_lag"),
    ({"views": [{"name": "v.a", "sql": "s", "target_lag": "0s"}]}, "positive duration"),
    ({"views": [{"name": "v.a", "sql": "s", "target_lag": "downstream"}]}, "no view reads it"),
    ({"sources": {"up": {"view": "v.a"}}, "views": [  # a source, but no view's SQL reads it
        {"name": "v.a", "sql": "select 1", "target_lag": "downstream"},
        {"name": "v.b", "sql": "select 1"}]}, "no view reads it"),
    ({"history_table": "lakehouse.history"}, "the Spark catalog's name"),
])
def test_bad_target_lags_are_refused(document: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(document)


def test_compliance_over_many_refreshes_matches_the_lag_sampled_over_the_window(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ten thousand refreshes (the log drops its oldest and shifts the rest down many times):
    the share of the window within target equals that of the lag sampled every 0.01 s."""
    monkeypatch.setattr(_Refreshes, "COMPACT_AT", 16)
    clock = Clock()
    log = FreshnessLog(window_s=300.0, clock=clock)
    refreshes = []  # (committed_s, as_of_s), a sawtooth with some refreshes late
    for n in range(10_000):
        clock.now_s = n * 0.5
        as_of_s = clock.now_s - (3.0 if n % 7 else 9.0)
        log.fresh("v", as_of_s)
        refreshes.append((clock.now_s, as_of_s))
    clock.now_s += 0.3
    start_s, now_s, steps = clock.now_s - 300.0, clock.now_s, 30_000
    within, latest = 0, 0
    for step in range(steps):
        t = start_s + (step + 0.5) * (now_s - start_s) / steps
        while latest + 1 < len(refreshes) and refreshes[latest + 1][0] <= t:
            latest += 1
        within += t - refreshes[latest][1] <= 5.0
    assert log.compliance("v", 5.0) == pytest.approx(within / steps, abs=1e-3)
    assert log.lag_s("v") == pytest.approx(now_s - refreshes[-1][1])
