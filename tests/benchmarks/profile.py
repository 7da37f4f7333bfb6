"""Where a refresh's time goes, from a driver-side cProfile of it.

Time in py4j calls is Spark work on the JVM, so the driver's profile covers the whole
refresh: a Spark action shows as the Python call that triggered it. cProfile sees only the
refresh's thread: of the two sink commits, run at once (:mod:`lakehouse.sink_commits`), it
sees the Delta commit, run on that thread, and then the wait for the Iceberg commit, run on
a helper thread: the time that commit took beyond the Delta one.
"""

from __future__ import annotations

import cProfile
import pstats
import re
from typing import Any

PROJECT = re.compile(
    r"/(lakehouse|ivm|sinks|pyiceberg|deltalake|pyspark/sql|concurrent/futures)/(.*)\.py$")
ORCHESTRATION = re.compile(r"/lakehouse/(?!sources/|spark/)[^/]+\.py$")
"""The refresh's own modules (runtime, refresh): their calls into everything else are the
breakdown's entries (sources, ivm, sinks, Spark actions, Arrow collection)."""


def _name(filename: str, line: int, function: str) -> str | None:
    match = PROJECT.search(filename)
    return f"{match.group(1)}/{match.group(2)}.py:{line} {function}" if match else None


def top_functions(profiler: cProfile.Profile, count: int = 14) -> list[dict[str, Any]]:
    """The project's functions by cumulative time (a refresh's Python-side call tree).

    Returns:
        Up to ``count`` rows ``{"function", "cumulative_s", "calls"}``, slowest first.
    """
    stats = pstats.Stats(profiler)
    rows = []
    for (filename, line, function), entry in stats.stats.items():  # type: ignore[attr-defined]
        name = _name(filename, line, function)
        if name and entry[3] > 0.01:
            rows.append({"function": name, "cumulative_s": round(entry[3], 3),
                         "calls": entry[1]})
    return sorted(rows, key=lambda r: -r["cumulative_s"])[:count]


def breakdown(profiler: cProfile.Profile, count: int = 30) -> list[dict[str, Any]]:
    """The refresh split into the calls its own modules make into everything else.

    Each row is a function outside ``lakehouse``'s orchestration modules (a change feed, a
    snapshot lookup, the view delta's construction, a Spark action such as ``count``, a
    sink's apply, an Arrow collection) with the cumulative time of its calls *from* those
    modules, so rows do not nest and add up to about the refresh's wall time.

    Returns:
        Up to ``count`` rows ``{"function", "s", "calls"}``, slowest first.
    """
    stats = pstats.Stats(profiler)
    rows = []
    for (filename, line, function), entry in stats.stats.items():  # type: ignore[attr-defined]
        if ORCHESTRATION.search(filename) or filename == "~":
            continue  # builtins such as sum() may call back into the refresh: counted there
        callers = entry[4]
        inner = [v for (f, _, _), v in callers.items() if ORCHESTRATION.search(f)]
        seconds = sum(v[3] for v in inner)
        if seconds > 0.005:
            name = _name(filename, line, function) or f"{filename}:{line} {function}"
            rows.append({"function": name, "s": round(seconds, 3),
                         "calls": sum(v[1] for v in inner)})
    return sorted(rows, key=lambda r: -r["s"])[:count]


CATEGORIES = (
    ("change feeds, snapshots", "lakehouse/sources/"),
    ("view delta (ivm)", "ivm/"),
    ("Spark actions", "pyspark/"),  # count, persist, collect: the view delta's jobs
    ("Arrow collect", "lakehouse/spark/"),
    ("Iceberg sink", "sinks/iceberg"),
    ("Delta sink", "sinks/delta"),
    ("other sink work", "sinks/"),
    ("Iceberg sink, beyond Delta's", "concurrent/futures/"),  # the wait for the helper thread
)
"""Breakdown rows by the module their function is in: label, path prefix (first match)."""


def categorize(rows: list[dict[str, Any]], total_s: float) -> dict[str, float]:
    """Seconds per :data:`CATEGORIES` label of a :func:`breakdown`, plus ``other``: the rest
    of ``total_s`` (the refresh's own code, pyiceberg and py4j calls not in a category)."""
    out = {label: 0.0 for label, _ in CATEGORIES}
    for row in rows:
        for label, prefix in CATEGORIES:
            if row["function"].startswith(prefix):
                out[label] += row["s"]
                break
    out["other"] = max(0.0, total_s - sum(out.values()))
    return {k: round(v, 3) for k, v in out.items()}
