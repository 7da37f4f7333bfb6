"""The crossover share of the ``crossover`` benchmark part, and its finding."""

from __future__ import annotations

from typing import Any

import pytest

from lakehouse.config import DEFAULT_FULL_REFRESH_RATIO
from tests.benchmarks.crossings import Crossover, crossover, crossovers, ratio_from
from tests.benchmarks.findings import findings


def test_crossover_interpolates_between_the_last_faster_point_and_the_next() -> None:
    # inc - full: -1.0 at 10%, +1.0 at 30% -> halfway
    found = crossover([(0.05, 1.0, 3.0), (0.1, 2.0, 3.0), (0.3, 4.0, 3.0), (0.6, 6.0, 3.0)])
    assert found == Crossover(pytest.approx(0.2), "at")
    assert found.text() == "20.0%"


def test_crossover_ignores_an_earlier_slower_point_and_bounds_the_range() -> None:
    noisy = [(0.05, 3.5, 3.0), (0.1, 2.0, 3.0), (0.2, 3.0, 3.0), (0.4, 5.0, 3.0)]
    assert crossover(noisy) == Crossover(pytest.approx(0.2), "at")  # equal at 20%: not faster
    assert crossover([(0.05, 1.0, 3.0), (0.6, 2.0, 3.0)]) == Crossover(0.6, "above")
    assert crossover([(0.05, 4.0, 3.0), (0.6, 9.0, 3.0)]) == Crossover(0.05, "below")
    assert Crossover(0.6, "above").text() == "above 60.0%"
    assert crossover([]) is None


def test_one_faster_point_after_two_slower_ones_is_noise() -> None:
    # measured: Q5 deletes, CPU full / inc 0.58, 0.55, 1.03, 0.56, 0.53, 0.55
    shares = [0.049, 0.098, 0.196, 0.293, 0.44, 0.588]
    noisy = [(s, 1.0, f) for s, f in zip(shares, [0.58, 0.55, 1.03, 0.56, 0.53, 0.55],
                                         strict=True)]
    assert crossover(noisy) == Crossover(0.049, "below")
    # one slower point inside an incremental range still does not end it
    dip = [(0.05, 1.0, 2.0), (0.1, 2.5, 2.0), (0.2, 1.0, 2.0), (0.4, 3.0, 2.0), (0.6, 4.0, 2.0)]
    assert crossover(dip) == Crossover(pytest.approx(0.3), "at")


def _batch(fraction: float, kind: str, inc: dict[str, float], mismatched: int = 0) -> dict:
    row: dict[str, Any] = {"fraction": fraction, "kind": kind}
    for q, seconds in inc.items():
        row[q] = {"share": fraction, "incremental": {"s": seconds, "cpu_s": seconds, "load": 1.0},
                  "full": {"s": 2.0, "cpu_s": 2.0, "load": 3.0},
                  "check": {"full": {"mismatched": mismatched}}}
    return row


def test_ratio_is_the_lowest_crossover_rounded_down_and_the_finding_says_so() -> None:
    part = {"scale_factor": 0.1, "queries": ["q1", "q3", "q5"], "batches": [
        _batch(0.1, "insert", {"q1": 1.0, "q3": 1.0, "q5": 1.0}),
        _batch(0.4, "insert", {"q1": 3.0, "q3": 1.5, "q5": 1.0}),
        _batch(0.1, "delete", {"q1": 1.0, "q3": 1.0, "q5": 3.0}, mismatched=1),
        _batch(0.4, "delete", {"q1": 1.5, "q3": 1.5, "q5": 3.0}),
    ]}
    found = crossovers(part, "cpu_s")
    assert found[("q1", "insert")].share == pytest.approx(0.25)
    assert found[("q3", "delete")] == Crossover(0.4, "above")
    assert found[("q5", "delete")] == Crossover(0.1, "below")
    assert ratio_from(found) == pytest.approx(0.25)
    text = "\n".join(findings({"crossover": part}))
    assert "Q1 inserts 25.0%, deletes above 40.0%" in text
    assert "differed from the full one 3 times" in text
    assert "For Q5 deletes the full refresh was cheaper at every share measured" in text
    assert ("which is the default" in text) is (DEFAULT_FULL_REFRESH_RATIO == 0.25)
    below = {("q3", "delete"): Crossover(0.05, "below")}
    assert ratio_from(below) is None
    assert ratio_from({**below, ("q1", "insert"): Crossover(0.37, "at")}) == pytest.approx(0.35)
    assert ratio_from({("q1", "insert"): Crossover(0.03, "at")}) == pytest.approx(0.05)
