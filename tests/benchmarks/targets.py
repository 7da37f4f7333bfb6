"""The issue's targets (#6) checked against docs/benchmarks/results.json."""

from __future__ import annotations

import statistics
from typing import Any

QUERIES = ("q1", "q3", "q5")
JOIN_VIEWS = ("q3", "q5")
TARGETS = {"aggregate": 20.0, "join": 10.0, "scaling": 1.5, "floor": 3.0, "catalog": 0.5,
           "freshness_s": 5.0}
SMALL_BATCH = 0.001
"""The batch size the speed-up targets are about (0.1% of the orders)."""
FIXED_KINDS = ("insert", "delete")


def times(value: float | None) -> str:
    """``2.50×``, or a dash for no value."""
    return "–" if value is None else f"{value:.2f}×"


def fixed(entry: dict[str, Any], kind: str, query: str) -> float | None:
    """Seconds: the median incremental refresh of ``query`` after the fixed change ``kind``
    (``insert``, ``delete`` or ``delete_cow``) of one scale factor's entry, or None."""
    runs = entry.get("scaling", {}).get(kind) or []
    values = [r["refresh"][query]["s"] for r in runs]
    return statistics.median(values) if values else None


def share(run: dict[str, Any], trivial: dict[str, Any]) -> float:
    """Rate relative to the trivial endpoint: the median of same-round ratios when recorded."""
    value: float = run.get("share_of_trivial", run["rps"] / trivial["rps"])
    return value


def speedup_goal(query: str) -> float:
    """The full / incremental goal of a view: 10× for join views, 20× for aggregates."""
    return TARGETS["join" if query in JOIN_VIEWS else "aggregate"]


def _verdict(met: bool, miss: str) -> str:
    return "**met**" if met else f"**missed** ({miss})"


def compared(sfs: dict[str, Any]) -> tuple[str, str]:
    """The scale factors the targets compare: the smallest, and the largest that ran the
    batches (the issue's SF 0.1 and SF 1); larger ones only extend the scaling curve."""
    batched = [sf for sf, entry in sfs.items() if entry.get("batches")]
    return min(sfs, key=float), max(batched or sfs, key=float)


def _speedups(sfs: dict[str, Any]) -> list[list[str]]:
    big = compared(sfs)[1]
    out = []
    for b in sfs[big].get("batches") or []:
        if b["fraction"] != SMALL_BATCH:
            continue
        for q in QUERIES:
            goal = speedup_goal(q)
            ratio = b[q]["full"]["s"] / b[q]["incremental"]["s"]
            out.append([f"SF {big} 0.1% {b['kind']}, {q}: full / incremental", f"≥ {goal:g}×",
                        times(ratio), _verdict(ratio >= goal, f"{goal / ratio:.1f}× short")])
    return out


def _scaling(sfs: dict[str, Any]) -> list[list[str]]:
    small, big = compared(sfs)
    out = []
    if small == big:
        return out
    goal = TARGETS["scaling"]
    for q in QUERIES:
        for kind in FIXED_KINDS:
            a, b = fixed(sfs[small], kind, q), fixed(sfs[big], kind, q)
            if a and b:
                out.append([f"fixed {kind}, {q}: SF {big} / SF {small}", f"≤ {goal:g}×",
                            times(b / a), _verdict(b / a <= goal, f"{b / a / goal:.1f}× over")])
    return out


def _floor(sfs: dict[str, Any]) -> list[list[str]]:
    goal = TARGETS["floor"]
    out = []
    for sf, entry in sfs.items():
        floor = entry.get("floor", {}).get("s")
        for q in QUERIES:
            for kind in FIXED_KINDS:
                value = fixed(entry, kind, q)
                if floor and value:
                    ratio = value / floor
                    out.append([f"SF {sf} fixed {kind}, {q}: refresh / floor", f"≤ {goal:g}×",
                                times(ratio), _verdict(ratio <= goal, f"{ratio / goal:.1f}× over")])
    return out


def targets(results: dict[str, Any]) -> list[list[str]]:
    """Each target: what, goal, measured, verdict (met, or missed and by how much)."""
    sfs = results.get("tpch", {}).get("scale_factors", {})
    out = (_speedups(sfs) + _scaling(sfs) + _floor(sfs)) if sfs else []
    cat = results.get("catalog")
    if cat:
        for r, t in zip(cat["load_table"], cat["trivial"], strict=True):
            value = share(r, t)
            out.append([f"loadTable / trivial, {r['connections']} connections", "≥ 50%",
                        f"{value:.0%}", _verdict(value >= TARGETS["catalog"],
                                                 f"{TARGETS['catalog'] / value:.1f}× short")])
        for r, a in zip(cat["load_table"], cat.get("load_table_auth", []), strict=False):
            value = a["rps"] / r["rps"]
            out.append([f"loadTable with auth / without, {r['connections']} connections",
                        "≥ 50%", f"{value:.0%}",
                        _verdict(value >= 0.5, f"{0.5 / value:.1f}× short")])
    fresh = results.get("freshness")
    if fresh:
        p50, goal = fresh["p50_s"], TARGETS["freshness_s"]
        out.append(["freshness p50", f"≤ {goal:g} s", f"{p50:.2f} s",
                    _verdict(p50 <= goal, f"{p50 / goal:.1f}× over")])
    return out
