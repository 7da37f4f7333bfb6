"""The crossover share of the ``crossover`` part, from its results alone (no Spark).

Used by the report and the findings, so that both are derived from results.json, and by
``lakehouse.config.DEFAULT_FULL_REFRESH_RATIO``'s justification (docs/benchmarks.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

KINDS = ("insert", "delete")
RATIO_STEP = 0.05
"""The default ratio is a measured crossover rounded down to a multiple of this."""


@dataclass(frozen=True)
class Crossover:
    """Where, by change share, Spark's full refresh of a view becomes faster.

    Attributes:
        share: The interpolated crossover (``bound == "at"``), or the measured share it
            lies beyond: above the largest (``"above"``: incremental was faster
            throughout) or below the smallest (``"below"``: full was faster throughout).
        bound: ``at``, ``above`` or ``below``.
    """

    share: float
    bound: Literal["at", "above", "below"]

    def text(self) -> str:
        """``23.4%``, ``above 60.0%`` or ``below 5.0%``."""
        value = f"{self.share:.1%}"
        return value if self.bound == "at" else f"{self.bound} {value}"


def points(batches: list[dict[str, Any]], query: str, kind: str,
           metric: str = "s") -> list[tuple[float, float, float]]:
    """``(share, incremental, full)`` of one view after each batch of ``kind``, by share.

    ``metric`` is ``s`` (wall time) or ``cpu_s`` (CPU time of the driver and the JVM).
    """
    return sorted((b[query]["share"], b[query]["incremental"][metric], b[query]["full"][metric])
                  for b in batches if b["kind"] == kind)


def crossover(measured: list[tuple[float, float, float]]) -> Crossover | None:
    """The crossover share of ``(share, incremental_s, full_s)`` points sorted by share.

    Linear interpolation of ``incremental_s - full_s`` between the last point where the
    incremental refresh is faster and the next one (where, by then, full is faster). Noise
    is one point out of line: a single slower point does not end the incremental range,
    and a single faster point after two slower ones does not restart it (the range ends
    at the first two slower points in a row). None without points.
    """
    if not measured:
        return None
    slower = [inc >= full for _, inc, full in measured]
    end = next((i for i in range(len(measured))
                if slower[i] and (i + 1 == len(measured) or slower[i + 1])), len(measured))
    faster = [i for i in range(end) if not slower[i]]
    if not faster:
        return Crossover(measured[0][0], "below")
    last = faster[-1]
    if last == len(measured) - 1:
        return Crossover(measured[-1][0], "above")
    (s0, inc0, full0), (s1, inc1, full1) = measured[last], measured[last + 1]
    d0, d1 = inc0 - full0, inc1 - full1  # d0 < 0 <= d1
    return Crossover(s0 + (s1 - s0) * (-d0) / (d1 - d0), "at")


def crossovers(part: dict[str, Any], metric: str = "s") -> dict[tuple[str, str], Crossover]:
    """The crossover of every view and change kind of the part's batches, by ``metric``."""
    batches = part.get("batches") or []
    found = {}
    for query in part.get("queries", []):
        for kind in KINDS:
            value = crossover(points(batches, query, kind, metric))
            if value is not None:
                found[(query, kind)] = value
    return found


def ratio_from(found: dict[tuple[str, str], Crossover]) -> float | None:
    """The ``full_refresh_ratio`` the crossovers give: the lowest, rounded down to a multiple
    of :data:`RATIO_STEP` (at least one step).

    An ``above`` bound counts as the share it lies above. ``below`` bounds (full faster at
    every share measured, even the smallest) are left out: there the incremental plan's
    fixed cost exceeds a full refresh at this scale whatever the change's size, so no
    threshold on the size separates the two, and one below the smallest share measured
    would recompute in full almost every change of the other views too. None when every
    crossover is ``below``.
    """
    shares = [c.share for c in found.values() if c.bound != "below"]
    if not shares:
        return None
    return max(RATIO_STEP, math.floor(min(shares) / RATIO_STEP + 1e-9) * RATIO_STEP)
