"""The benchmark's own tools: the view-rows checker, the profile breakdown, the findings."""

from __future__ import annotations

import cProfile
import time
from decimal import Decimal
from pathlib import Path

import pyarrow as pa

from tests.benchmarks.common import median_sample, worst_check
from tests.benchmarks.findings import findings
from tests.benchmarks.profile import breakdown, categorize
from tests.benchmarks.soak import rss_since_s, table_files, thinned
from tests.benchmarks.soak_probes import lag_windows
from tests.benchmarks.targets import cli_medians, targets
from tests.benchmarks.verify import compare


def _view(values: list[object], keys: list[str | None]) -> pa.Table:
    return pa.table({"k": keys, "v": pa.array(values, pa.decimal128(12, 2)), "n": [1, 2, 3]})


def test_compare_equal_within_tolerance_and_null_keys() -> None:
    actual = _view([Decimal("1.50"), Decimal("2.00"), None], ["x", "y", None])
    expected = pa.table({"k": ["y", None, "x"], "v": [2.0000004, None, 1.5], "n": [2, 3, 1]})
    assert compare(actual, expected) == {"rows": 3, "expected_rows": 3, "mismatched": 0}


def test_compare_counts_rows_without_partner_on_both_sides() -> None:
    actual = _view([Decimal("1.50"), Decimal("2.00"), Decimal("3.00")], ["x", "y", "z"])
    expected = pa.table({"k": ["x", "y"], "v": [1.5, 2.01], "n": [1, 2]})
    # y differs (one row each side), z has no partner
    assert compare(actual, expected)["mismatched"] == 3


def test_compare_ignores_extra_columns_of_actual() -> None:
    actual = _view([Decimal("1"), Decimal("2"), Decimal("3")], ["a", "b", "c"]).append_column(
        "hidden", pa.array([9, 9, 9]))
    expected = _view([Decimal("1"), Decimal("2"), Decimal("3")], ["a", "b", "c"])
    assert compare(actual, expected)["mismatched"] == 0


def _code(source: str, filename: str, scope: dict[str, object]) -> None:
    exec(compile(source, filename, "exec"), scope)  # noqa: S102 - functions under fake paths


def test_breakdown_splits_the_refresh_into_calls_out_of_its_own_modules() -> None:
    scope: dict[str, object] = {"time": time}
    _code("def feed():\n    time.sleep(0.02)\n", "/x/lakehouse/sources/iceberg.py", scope)
    _code("def apply():\n    time.sleep(0.01)\n", "/x/sinks/iceberg.py", scope)
    _code("def refresh():\n    feed(); inner(); apply(); sum(x() or 0 for x in [feed])\n"
          "def inner():\n    feed()\n", "/x/lakehouse/refresh.py", scope)
    profiler = cProfile.Profile()
    profiler.runcall(scope["refresh"])  # type: ignore[arg-type]
    rows = {r["function"]: r for r in breakdown(profiler)}
    assert set(rows) >= {"lakehouse/sources/iceberg.py:1 feed", "sinks/iceberg.py:1 apply"}
    assert rows["lakehouse/sources/iceberg.py:1 feed"]["calls"] == 3  # once via sum()
    assert not any(name.startswith("lakehouse/refresh.py") or "sum" in name for name in rows)
    split = categorize(list(rows.values()), total_s=1.0)
    assert split["change feeds, snapshots"] >= 0.06
    assert split["Iceberg sink"] >= 0.01
    assert abs(sum(split.values()) - 1.0) < 0.01


def _refresh(s: float) -> dict[str, object]:
    return {"s": s, "load": 1.0, "rows_in": 1}


def test_findings_state_measured_ratios_and_mismatches() -> None:
    batch = {"fraction": 0.001, "kind": "insert",
             "change": {"rows": {"orders": 1, "lineitem": 4}}}
    for q in ("q1", "q3", "q5"):
        batch[q] = {"incremental": _refresh(1.0), "full": _refresh(25.0),
                    "duckdb": _refresh(0.5),
                    "check": {"full": {"mismatched": 2 if q == "q3" else 0}}}
    results = {"tpch": {"scale_factors": {"1": {"batches": [batch]}}}}
    text = "\n".join(findings(results))
    assert "3 of 6 targets met" in text  # full/incremental met; DuckDB/incremental (0.5×) missed
    assert "inserts Q1 25.0×, Q3/Q5 25.0×" in text
    assert "1 differ from the full view: SF 1 0.1% insert q3" in text


def test_median_sample_keeps_the_median_run_and_every_time() -> None:
    samples = [{"s": 0.64, "spark_jobs": 2}, {"s": 0.14, "spark_jobs": 0},
               {"s": 0.22, "spark_jobs": 1}]
    assert median_sample(samples) == {"s": 0.22, "spark_jobs": 1, "runs_s": [0.64, 0.14, 0.22]}
    assert median_sample(samples[:2])["s"] == 0.14  # the lower median: a measured run


def test_worst_check_reports_a_mismatch_of_any_repeat() -> None:
    good = {"full": {"mismatched": 0}, "duckdb": {"mismatched": 0}}
    bad = {"full": {"mismatched": 0}, "duckdb": {"mismatched": 3}}
    assert worst_check([good, bad, good]) is bad
    assert worst_check([good, good]) is good


def test_cli_targets_hold_only_local_refreshes_to_the_goals() -> None:
    def sample(view: str, wall_s: float, tick_s: float, engine: str) -> dict:
        return {"view": view, "wall_s": wall_s, "tick_s": tick_s, "mode": "incremental",
                "engine": engine}

    cli = {"floor_s": 0.1, "goals": {"wall_s": 3.0, "floor_ratio": 2.0}, "samples": {
        "served": [sample("v.a", 2.0, 0.15, "local"), sample("v.a", 9.0, 0.15, "local"),
                   sample("v.a", 2.5, 0.25, "local"), sample("v.b", 20.0, 5.0, "spark")],
        "embedded": [sample("v.a", 3.5, 0.3, "local")]}}
    medians = dict(((mode, r["view"]), r) for mode, r in cli_medians(cli))
    assert medians["served", "v.a"]["wall_s"] == 2.5 and medians["served", "v.a"]["wall_max_s"] == 9
    rows = {row[0]: row for row in targets({"cli": cli})}
    assert not any("v.b" in name for name in rows)  # a Spark refresh is not held to them
    assert rows["CLI refresh wall, v.a (served catalog)"][3] == "**met**"
    assert rows["CLI tick / floor, v.a (served catalog)"][2] == "1.50×"
    assert rows["CLI refresh wall, v.a (embedded catalog)"][3] == "**missed** (0.50 s over)"
    assert rows["CLI tick / floor, v.a (embedded catalog)"][3] == "**missed** (1.5× over)"


def test_lag_windows_pool_the_views_seconds_window_by_window() -> None:
    steady, growing = [0.5] * 70, [0.1] * 10 + [float(s) for s in range(60)]
    windows = lag_windows([steady, growing], since_s=10, window_s=20)
    assert [(w["from_s"], w["until_s"]) for w in windows] == [(10, 30), (30, 50), (50, 70)]
    assert [w["max_lag_s"] for w in windows] == [19.0, 39.0, 59.0]
    assert [w["p50_lag_s"] for w in windows] == [0.5, 20.0, 40.0]  # 20 of 0.5, 20 rising
    assert lag_windows([[1.0] * 35], since_s=0, window_s=20)[-1]["until_s"] == 35
    assert [(w["from_s"], w["until_s"]) for w in lag_windows([[1.0] * 25], 0, 20)] == [(0, 25)]


def test_rss_is_judged_from_the_sources_first_expiry_when_later_than_the_warm_up() -> None:
    assert rss_since_s(first_expiry_s=250.0, since_s=100.0, until_s=900.0) == 250.0
    assert rss_since_s(first_expiry_s=50.0, since_s=100.0, until_s=900.0) == 100.0
    assert rss_since_s(first_expiry_s=None, since_s=100.0, until_s=900.0) == 100.0
    assert rss_since_s(first_expiry_s=950.0, since_s=100.0, until_s=900.0) == 900.0


def test_snapshot_counts_are_thinned_to_one_per_step_since_built() -> None:
    counts = [(1000.0 + i * 0.5, 10 + i) for i in range(25)]
    assert thinned(counts, built=1002.0, step_s=5.0) == [
        {"t": -2.0, "snapshots": 10}, {"t": 3.0, "snapshots": 20}, {"t": 8.0, "snapshots": 30}]


def test_table_files_count_the_most_any_view_kept(tmp_path: Path) -> None:
    for name, metadata, log in (("f_q1", 3, 5), ("s_lines", 7, 2)):
        (tmp_path / "soak" / name / "metadata").mkdir(parents=True)
        (tmp_path / "delta" / "soak" / name / "_delta_log").mkdir(parents=True)
        for i in range(metadata):
            (tmp_path / "soak" / name / "metadata" / f"{i:05}-x.metadata.json").touch()
        (tmp_path / "soak" / name / "metadata" / "snap-1.avro").touch()  # not counted
        for i in range(log):
            (tmp_path / "delta" / "soak" / name / "_delta_log" / f"{i:020}.json").touch()
    assert table_files(tmp_path) == {"iceberg_metadata_files_max": 7, "delta_log_entries_max": 5}
