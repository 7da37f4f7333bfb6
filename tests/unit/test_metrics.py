"""Refresh metrics as Prometheus exposes them."""

from __future__ import annotations

import json
import re
import socket
import sys
import urllib.request
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from lakehouse.metrics import RefreshMetrics
from lakehouse.refresh import RefreshResult


class Clock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


def samples(metrics: RefreshMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(metrics.registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_refreshes_are_counted_by_view_and_mode() -> None:
    metrics = RefreshMetrics(Clock())
    metrics.record(RefreshResult("v.a", "full", {"s": 1}, rows_out=10, duration_s=2.0,
                                 engine="spark"), 1000.0)
    metrics.record(RefreshResult("v.a", "incremental", {"s": 2}, rows_in=3, rows_out=4,
                                 duration_s=0.2, engine="local"), 1000.0)
    metrics.record(RefreshResult("v.a", "skipped", {"s": 2}), 1000.0)
    found = samples(metrics)
    assert found[("lakehouse_refreshes_total",
                  (("engine", "spark"), ("mode", "full"), ("view", "v.a")))] == 1
    assert found[("lakehouse_refreshes_total",
                  (("engine", "local"), ("mode", "incremental"), ("view", "v.a")))] == 1
    assert found[("lakehouse_refreshes_total",
                  (("engine", "none"), ("mode", "skipped"), ("view", "v.a")))] == 1
    assert found[("lakehouse_change_rows_total", (("view", "v.a"),))] == 3
    assert found[("lakehouse_view_delta_rows_total", (("view", "v.a"),))] == 14
    assert found[("lakehouse_refresh_duration_seconds_sum",
                  (("engine", "local"), ("mode", "incremental"), ("view", "v.a")))] == 0.2


def test_lag_grows_until_the_next_refresh() -> None:
    clock = Clock()
    metrics = RefreshMetrics(clock)
    metrics.record(RefreshResult("v.a", "incremental", {"s": 1}), started_s=990.0)
    assert samples(metrics)[("lakehouse_view_lag_seconds", (("view", "v.a"),))] == 10.0
    clock.now_s = 1030.0
    metrics.record_failure("v.a")
    found = samples(metrics)
    assert found[("lakehouse_view_lag_seconds", (("view", "v.a"),))] == 40.0
    assert found[("lakehouse_refresh_failures_total", (("view", "v.a"),))] == 1
    metrics.record(RefreshResult("v.a", "skipped", {"s": 1}), started_s=1030.0)
    assert samples(metrics)[("lakehouse_view_lag_seconds", (("view", "v.a"),))] == 0.0


def test_metrics_are_served_over_http() -> None:
    metrics = RefreshMetrics()
    metrics.record(RefreshResult("v.b", "full", {}), 0.0)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    metrics.serve("127.0.0.1", port)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        body = response.read().decode()
    assert 'lakehouse_refreshes_total{engine="none",mode="full",view="v.b"} 1.0' in body


def test_the_grafana_dashboard_queries_only_exported_metrics() -> None:
    """docker/grafana's dashboard names each metric (and label) the pipeline exports."""
    clock = Clock()
    metrics = RefreshMetrics(clock, targets_s={"v.a": 5.0})
    metrics.record(RefreshResult("v.a", "incremental", {"s": 1}, duration_s=0.2,
                                 engine="local"), clock.now_s)
    metrics.record_failure("v.a", "refresh failing")
    exported = {name for name, _ in samples(metrics)}
    labels = {label for _, pairs in samples(metrics) for label, _ in pairs}
    path = Path(__file__).parents[2] / "docker" / "grafana" / "lakehouse-dashboard.json"
    dashboard = json.loads(path.read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    queried = {name for expr in exprs for name in re.findall(r"\blakehouse_[a-z_]+", expr)}
    assert queried and queried <= exported, queried - exported
    used = {label for expr in exprs for label in re.findall(r"\b(\w+)\s*(?:=~|!=|=)\s*\"", expr)}
    used |= {label for expr in exprs for group in re.findall(r"by \(([^)]*)\)", expr)
             for label in re.split(r",\s*", group)}
    assert used <= labels | {"le"}, used - labels
    assert {"lakehouse_view_lag_seconds", "lakehouse_view_target_lag_seconds",
            "lakehouse_view_slo_compliance", "lakehouse_view_degraded"} <= queried


def test_memory_parts_are_read_at_each_scrape() -> None:
    metrics = RefreshMetrics(Clock())
    held = {"column_cache": 100}
    metrics.watch_memory({"column_cache": lambda: held["column_cache"],
                          "view_states": lambda: 7})
    found = samples(metrics)
    assert found[("lakehouse_memory_bytes", (("part", "column_cache"),))] == 100
    assert found[("lakehouse_memory_bytes", (("part", "view_states"),))] == 7
    held["column_cache"] = 250
    assert samples(metrics)[("lakehouse_memory_bytes", (("part", "column_cache"),))] == 250
    if sys.platform == "linux":  # the process metrics read /proc
        assert samples(metrics)[("process_resident_memory_bytes", ())] > 0
